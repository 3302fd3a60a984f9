"""Node-list trees and best-first growth (CART-16): scikit-learn's max_leaf_nodes trees as the
outside oracle, level-wise growth as the inside one, and the heap layout for the node list's
predictions and exact errors."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier as SkTree

import jaxtrees as jt
from jaxtrees import targets
from jaxtrees.core import distributions, sampling
from jaxtrees.hypotheses import node_tree, tree
from jaxtrees.learners.best_first import CART16, BestFirstTree

KEY = jax.random.key(0)


def cube(n):
    return np.array(list(itertools.product((0, 1), repeat=n)), np.int32)


def weighted_data(seed, m=300, n=8):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, (m, n))
    y = ((X[:, 0] & X[:, 1]) | (X[:, 2] ^ X[:, 3])) ^ (rng.random(m) < 0.2)
    weight = rng.uniform(0.05, 1.0, m)  # continuous weights: gains untied
    return X, y.astype(int), weight


@pytest.mark.parametrize("leaves", [2, 5, 16])
def test_equals_scikit_learn_max_leaf_nodes(leaves):
    """Same predictions on every input of {0,1}^8 and the same number of leaves as
    DecisionTreeClassifier(criterion="gini", max_leaf_nodes=L) with the same sample weights."""
    learner = BestFirstTree(jt.GrowthRule(max_depth=15, impurity="gini"), max_leaves=leaves)
    fit = jax.jit(learner.fit)
    for seed in range(12):
        X, y, weight = weighted_data(seed)
        t = fit(KEY, sampling.with_weights(sampling.from_arrays(X, y), weight))
        clf = SkTree(criterion="gini", max_leaf_nodes=leaves, random_state=0).fit(X, y, sample_weight=weight)
        assert int(node_tree.n_leaves(t)) == clf.get_n_leaves(), f"seed {seed}"
        np.testing.assert_array_equal(np.asarray(t.predict(cube(8))), clf.predict(cube(8)), err_msg=f"seed {seed}")
        assert int(node_tree.depth(t)) == clf.get_depth()


def test_a_full_budget_is_level_wise_growth():
    """With max_leaves = 2^D and max_depth = D, best-first makes every split level-wise growth
    makes (each node's decision depends on its own examples only), just in another order."""
    rule = jt.GrowthRule(max_depth=4, impurity="entropy")
    p = distributions.smoothed(c=0.2).marginals(KEY, 10)
    for i in range(6):
        key = jax.random.fold_in(KEY, i)
        data = sampling.draw(key, p, targets.random_tree(key, n=10, d=3), m=200, noise=0.1)
        level = jt.grow(data, rule)
        best = BestFirstTree(rule, max_leaves=16).fit(key, data)
        assert int(node_tree.n_leaves(best)) == int(tree.n_leaves(level))
        np.testing.assert_array_equal(best.predict(cube(10)), level.predict(cube(10)))
        np.testing.assert_array_equal(best.predict_bits(data.X), level.predict_bits(data.X))


def test_node_list_from_heap_predicts_and_scores_as_the_heap():
    p = distributions.smoothed(c=0.1).marginals(KEY, 9)
    f = targets.random_junta(KEY, n=9, k=3)
    data = sampling.draw(KEY, p, f, m=300, noise=0.1)
    heap_tree = jt.grow(data, jt.GrowthRule(max_depth=4, impurity="gini"))
    t = node_tree.from_heap(heap_tree)
    assert int(t.size) == int(jnp.sum(tree.reached(heap_tree)))
    np.testing.assert_array_equal(t.predict(cube(9)), heap_tree.predict(cube(9)))
    np.testing.assert_array_equal(t.predict_bits(data.X), heap_tree.predict_bits(data.X))
    np.testing.assert_allclose(float(t.exact_error(p, f)), float(heap_tree.exact_error(p, f)), rtol=0, atol=1e-6)
    assert int(node_tree.depth(t)) == int(tree.depth(heap_tree))
    assert int(node_tree.n_leaves(t)) == int(tree.n_leaves(heap_tree))


def test_exact_error_equals_enumeration_on_a_deep_chain():
    """A decision list of depth 7 in 15 slots: the exact error is the sum over {0,1}^8 of p(x) [t(x) != f(x)]."""
    X = np.triu(np.ones((8, 8), np.int32))[:, ::-1].copy()  # inputs that walk ever deeper down a chain
    X = np.concatenate([X, 1 - X])
    y = (X.sum(1) % 2).astype(int)
    t = BestFirstTree(jt.GrowthRule(max_depth=15, impurity="entropy"), max_leaves=8).fit(KEY, sampling.from_arrays(X, y))
    p = jnp.linspace(0.2, 0.8, 8)
    f = targets.parity([0, 3], n=8)
    x = cube(8)
    prob = np.prod(np.where(x == 1, np.asarray(p), 1 - np.asarray(p)), axis=1)
    expected = np.sum(prob * (np.asarray(t.predict(x)) != np.asarray(f(x))))
    np.testing.assert_allclose(float(t.exact_error(p, f)), expected, rtol=1e-5, atol=1e-6)
    assert int(node_tree.depth(t)) >= 3


def test_vmap_equals_loop_and_cart16_boosts():
    X, y, weight = weighted_data(3, m=200)
    datas = [sampling.with_weights(sampling.from_arrays(X, y), np.roll(weight, s)) for s in range(4)]
    batched = jax.vmap(CART16.fit)(jax.random.split(KEY, 4), jax.tree.map(lambda *a: jnp.stack(a), *datas))
    for i, d in enumerate(datas):
        single = CART16.fit(KEY, d)
        for a, b in zip(jax.tree.leaves(single), jax.tree.leaves(batched)):
            np.testing.assert_array_equal(a, b[i])
    H = jt.AdaBoost(CART16, rounds=10).fit(KEY, sampling.from_arrays(X, y))
    assert np.all(np.asarray(H.rounds.train_error) <= np.asarray(H.rounds.bound) + 1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="max_leaves must be"):
        BestFirstTree(jt.GrowthRule(max_depth=3), max_leaves=0)
    with pytest.raises(ValueError, match="p must have one marginal per feature"):
        node_tree.from_heap(tree.stump(5)).exact_error(jnp.full(3, 0.5), targets.parity([0], n=3))

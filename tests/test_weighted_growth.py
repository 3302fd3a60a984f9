"""Weighted growth (data.weight): integer weights equal duplicated examples, unit weights equal the
unweighted engine, and untied weighted trees equal scikit-learn's with ``sample_weight``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier as SkTree

import jaxtrees as jt

grow = jax.jit(jt.grow)


def random_data(seed, m, n):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, (m, n))
    y = (X[:, 0] ^ (X[:, 1] & X[:, 2])) ^ (rng.random(m) < 0.15)
    return X, y.astype(int), rng


@pytest.mark.parametrize("impurity", ["entropy", "gini", "kearns_mansour", "error"])
def test_integer_weights_equal_duplicated_examples(impurity):
    rule = jt.GrowthRule(max_depth=4, impurity=impurity)
    for seed in range(6):
        X, y, rng = random_data(seed, 150, 7)
        counts = rng.poisson(1.0, len(y))
        counts[0] = max(counts[0], 1)
        weighted = grow(jt.with_weights(jt.from_arrays(X, y), counts), rule)
        duplicated = grow(jt.from_arrays(np.repeat(X, counts, 0), np.repeat(y, counts)), rule)
        np.testing.assert_array_equal(weighted.feature, duplicated.feature, err_msg=f"seed {seed}")
        np.testing.assert_array_equal(weighted.label, duplicated.label)
        np.testing.assert_array_equal(weighted.weight, duplicated.weight)
        np.testing.assert_allclose(weighted.gain, duplicated.gain, rtol=0, atol=2e-6)


def test_unit_weights_equal_unweighted():
    rule = jt.GrowthRule(max_depth=5, impurity="entropy")
    X, y, _ = random_data(11, 300, 9)
    data = jt.from_arrays(X, y)
    for ones in (np.ones(300, np.float32), np.ones(300, np.int32)):
        a, b = grow(jt.with_weights(data, ones), rule), grow(data, rule)
        np.testing.assert_array_equal(a.feature, b.feature)
        np.testing.assert_array_equal(a.label, b.label)
        np.testing.assert_array_equal(a.weight, b.weight)


def test_zero_weight_examples_are_ignored():
    """Examples of weight 0 count for nothing, not even for min_samples_leaf."""
    rule = jt.GrowthRule(max_depth=3, impurity="gini", min_samples_leaf=3)
    X, y, rng = random_data(5, 200, 6)
    keep = rng.random(200) < 0.6
    a = grow(jt.with_weights(jt.from_arrays(X, y), keep.astype(np.float32)), rule)
    b = grow(jt.from_arrays(X[keep], y[keep]), rule)
    np.testing.assert_array_equal(a.feature, b.feature)
    np.testing.assert_array_equal(a.weight, b.weight)


def weighted_gains(X, y, u, used):
    """Gini gains of every admissible feature at a node with rows (X, y) and weights u (float64)."""
    G = lambda q: 4 * q * (1 - q)  # noqa: E731
    W, mu = u.sum(), (u * y).sum() / u.sum()
    out = np.full(X.shape[1], -np.inf)
    for i in range(X.shape[1]):
        one = X[:, i] == 1
        if used[i] or one.all() or not one.any():
            continue
        w1 = u[one].sum()
        out[i] = G(mu) - w1 / W * G((u[one] * y[one]).sum() / w1) - (W - w1) / W * G((u[~one] * y[~one]).sum() / (W - w1))
    return out


def untied(X, y, u, depth, used=None):
    """Every split down to ``depth`` has a best gain ahead of the second by > 1e-4."""
    used = np.zeros(X.shape[1], bool) if used is None else used
    mu = (u * y).sum() / u.sum()
    if depth == 0 or mu in (0.0, 1.0):
        return True
    g = np.sort(weighted_gains(X, y, u, used))[::-1]
    if not np.isfinite(g[0]):
        return True
    if np.isfinite(g[1]) and g[0] - g[1] <= 1e-4:
        return False
    f = int(np.argmax(weighted_gains(X, y, u, used)))
    child_used = used.copy()
    child_used[f] = True
    return all(untied(X[X[:, f] == b], y[X[:, f] == b], u[X[:, f] == b], depth - 1, child_used) for b in (0, 1))


def test_untied_weighted_trees_equal_sklearn():
    """scikit-learn (criterion="gini", sample_weight=u) grows the same tree on untied data sets:
    same features, same leaf labels, node weights equal to its weighted_n_node_samples."""
    depth, compared = 3, 0
    rule = jt.GrowthRule(max_depth=depth, impurity="gini")
    for seed in range(40):
        X, y, rng = random_data(100 + seed, 120, 6)
        u = rng.uniform(0.1, 2.0, len(y))
        if not untied(X, y, u, depth):
            continue
        compared += 1
        t = jax.device_get(grow(jt.with_weights(jt.from_arrays(X, y), u.astype(np.float32)), rule))
        clf = SkTree(criterion="gini", max_depth=depth, random_state=0).fit(X, y, sample_weight=u)
        sk, stack = clf.tree_, [(0, 0)]
        while stack:
            i, s = stack.pop()
            np.testing.assert_allclose(t.weight[i], sk.weighted_n_node_samples[s], rtol=2e-5)  # float32 sums and differences
            if min(t.mean[i], 1.0 - t.mean[i]) <= 1e-6 and t.feature[i] == -1:
                # A pure node is our leaf; sklearn's float64 weighted impurity of a pure node can
                # round to a few ulps above its EPSILON, and then it splits it (into pure children).
                # Our mean is wy / w of float32 sums: a few ulps from 1 where they round apart (seen on an H100).
                assert t.label[i] == round(float(t.mean[i])), f"seed {seed}: label {i}"
                continue
            if sk.children_left[s] == -1:
                assert t.feature[i] == -1, f"seed {seed}: node {i} splits, sklearn's is a leaf"
                assert t.label[i] == clf.classes_[np.argmax(sk.value[s][0])], f"seed {seed}: label {i}"
            else:
                assert t.feature[i] == sk.feature[s], f"seed {seed}: feature at node {i}"
                stack += [(2 * i + 1, sk.children_left[s]), (2 * i + 2, sk.children_right[s])]
    assert compared >= 15, compared


def test_weights_batched_equal_single():
    rule = jt.GrowthRule(max_depth=3, impurity="entropy")
    keys = jax.random.split(jax.random.key(3), 6)
    f = jt.random_junta(jax.random.key(1), 8, 3)
    p = jnp.full((8,), 0.5)

    def one(key):
        data = jt.draw(key, p, f, 100)
        return jt.with_weights(data, jax.random.uniform(jax.random.fold_in(key, 1), (100,)))

    data = jax.vmap(one)(keys)
    batched = jax.jit(jax.vmap(jt.grow, in_axes=(0, None)))(data, rule)
    for b in range(6):
        single = grow(jax.tree.map(lambda a: a[b], data), rule)
        np.testing.assert_array_equal(batched.feature[b], single.feature)
        np.testing.assert_allclose(batched.weight[b], single.weight, rtol=1e-6)


def test_bad_weights_raise():
    data = jt.from_arrays([[0, 1], [1, 0]], [0, 1])
    for bad, match in (([1.0, -1.0], "weight"), ([1.0, np.nan], "weight"), (np.ones(40), "weight"), ([], "weight")):
        with pytest.raises(ValueError, match=match):
            jt.with_weights(data, np.asarray(bad, np.float32))


@pytest.mark.parametrize("rows", [1, 2, 4, 32])
def test_weighted_counts_equal_numpy(rows):
    """``weighted_counts`` (matrix-vector products at one node, a product with the transpose kept out
    otherwise) equals U @ X^T in float64 within float32 rounding, alone and vmapped."""
    from jaxtrees.learners.greedy import weighted_counts
    rng = np.random.default_rng(rows)
    X = rng.integers(0, 2, (3, 13, 96)).astype(np.float32)
    U = rng.uniform(0, 2, (3, rows, 96)).astype(np.float32)
    want = np.einsum("brs,bns->brn", U.astype(np.float64), X.astype(np.float64))
    np.testing.assert_allclose(np.asarray(jax.vmap(weighted_counts)(X, U)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(weighted_counts(X[0], U[0])), want[0], rtol=1e-6)


def test_unpack_float_equals_unpack():
    from jaxtrees.core import bits
    words = jnp.asarray(np.random.default_rng(0).integers(0, 2**32, (5, 3), dtype=np.uint64).astype(np.uint32))
    for m in (1, 40, 96):
        np.testing.assert_array_equal(np.asarray(bits.unpack_float(words, m)),
                                      np.asarray(bits.unpack(words, m)).astype(np.float32))


def test_weighted_pure_nodes_are_leaves():
    """A node whose examples all have one label is a leaf, with float weights too: every split node
    of these trees holds examples of both labels (a node's label weight taken as its parent's minus
    its sibling's is off by rounding, and such a node looked impure and split: seen at seed 2)."""
    rule = jt.GrowthRule(max_depth=4, impurity="gini")
    for seed in range(12):
        X, y, rng = random_data(100 + seed, 120, 6)
        u = rng.uniform(0.1, 2.0, len(y)).astype(np.float32)
        t = jax.device_get(grow(jt.with_weights(jt.from_arrays(X, y), u), rule))
        reach = {0: np.ones(len(y), bool)}
        for i in range(len(t.feature)):
            if i not in reach or t.feature[i] < 0:
                continue
            node = reach[i]
            assert 0 < y[node].sum() < node.sum(), f"seed {seed}: node {i} is pure but split"
            reach[2 * i + 1] = node & (X[:, t.feature[i]] == 0)
            reach[2 * i + 2] = node & (X[:, t.feature[i]] == 1)


@pytest.mark.parametrize("name", ["stump", "greedy", "cart16", "parities"])
def test_reweighted_fits_equal_fits(name):
    """``learners.base.reweighted(learner, data)(key, w)`` (what AdaBoost's rounds call, sharing the
    unpacked features) equals ``learner.fit(key, data with weights w)``."""
    from jaxtrees.learners import CART16, GreedyTree, Parities, Stump
    from jaxtrees.learners.base import reweighted
    learner = {"stump": Stump(impurity="gini"), "greedy": GreedyTree(jt.GrowthRule(max_depth=3, impurity="entropy")),
               "cart16": CART16, "parities": Parities(degree=2)}[name]
    X, y, rng = random_data(7, 150, 7)
    data = jt.from_arrays(X, y)
    fit = reweighted(learner, data)
    for _ in range(3):
        w = np.zeros(data.valid.shape[-1] * 32, np.float32)
        w[: len(y)] = rng.uniform(0.1, 2.0, len(y))
        key = jax.random.key(int(rng.integers(1000)))
        want = learner.fit(key, jt.with_weights(data, w[: len(y)]))
        got = jax.jit(fit)(key, jnp.asarray(w))
        for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

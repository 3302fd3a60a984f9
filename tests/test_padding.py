"""Traced values in place of static ones (one compiled program for many grid values) compute what
the static programs compute: padded juntas are the same functions, trees grown to a traced depth
or with a traced impurity are the same trees, a study's trial gives the same rows at any bound."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import targets
from jaxtrees.core import impurity as impurity_lib
from jaxtrees.core import sampling
from jaxtrees.experiments.studies import learning
from jaxtrees.hypotheses import node_tree, tree
from jaxtrees.learners import feature_subsets, greedy, population

KEYS = jax.random.split(jax.random.key(11), 64)


@pytest.mark.parametrize("n, k, k_max", [(16, 3, 6), (16, 4, 6), (8, 1, 4), (32, 6, 6), (6, 2, 5)])
def test_padded_junta_is_the_unpadded_one(n, k, k_max):
    plain = jax.jit(jax.vmap(lambda key: targets.random_junta(key, n, k)))(KEYS)
    padded = jax.jit(jax.vmap(lambda key, k: targets.random_junta(key, n, k, k_max=k_max), in_axes=(0, None)))(KEYS, k)
    np.testing.assert_array_equal(padded.support[:, :k], plain.support)
    assert padded.support.shape == (len(KEYS), k_max)
    x = jax.random.bernoulli(jax.random.key(1), 0.5, (len(KEYS), 256, n))
    np.testing.assert_array_equal(jax.vmap(lambda f, x: f(x))(padded, x), jax.vmap(lambda f, x: f(x))(plain, x))
    np.testing.assert_array_equal(jax.vmap(lambda f: f.support_mask(n))(padded),
                                  jax.vmap(lambda f: f.support_mask(n))(plain))
    assert bool(jnp.all(jax.vmap(lambda f: f.relevant()[:k])(padded)))
    assert not bool(jnp.any(jax.vmap(lambda f: f.relevant()[k:])(padded)))
    p = jax.random.uniform(jax.random.key(2), (len(KEYS), n))
    fixed = jax.random.bernoulli(jax.random.key(3), 0.3, (len(KEYS), n))
    values = jax.random.bernoulli(jax.random.key(4), 0.5, (len(KEYS), n))
    means = lambda f, p, a, b: f.means(p, a, b)  # noqa: E731
    mu_plain, mu1_plain = jax.vmap(means)(plain, p, fixed, values)
    mu_padded, mu1_padded = jax.vmap(means)(padded, p, fixed, values)
    np.testing.assert_allclose(mu_padded, mu_plain, rtol=1e-6, atol=1e-7)  # float32: the sums' order may differ
    np.testing.assert_allclose(mu1_padded, mu1_plain, rtol=1e-6, atol=1e-7)
    # fully fixed on the support: the mean is the table's bit, exactly (padding is pinned exactly)
    all_fixed = jnp.ones((len(KEYS), n), bool)
    mu_exact, _ = jax.vmap(means)(padded, p, all_fixed, values)
    np.testing.assert_array_equal(mu_exact, jax.vmap(lambda f, x: f(x))(plain, values).astype(np.float32))


def test_padded_junta_checks_k():
    with pytest.raises(ValueError, match="k must be"):
        targets.random_junta(jax.random.key(0), 16, 7, k_max=6)
    with pytest.raises(ValueError, match="k_max"):
        targets.random_junta(jax.random.key(0), 4, 2, k_max=5)


@pytest.mark.parametrize("k_max", [1, 2, 3, 4])
def test_padded_parity_and_rank_tree_are_the_unpadded_ones(k_max):
    """random_parity(k_max=) is as_junta(random_parity) and random_rank_tree(r_max=) the rank-r tree node
    for node (padded with unused slots) for every k = r <= k_max, one program each (the rank study's targets)."""
    n, x = 10, jax.random.bernoulli(jax.random.key(1), 0.5, (256, 10))
    parity = jax.jit(jax.vmap(lambda key, k: targets.random_parity(key, n, k, k_max=k_max), in_axes=(0, None)))
    tree = jax.jit(jax.vmap(lambda key, r: targets.random_rank_tree(key, n, r, 2, r_max=k_max), in_axes=(0, None)))
    for k in range(1, k_max + 1):
        plain = jax.vmap(lambda key: targets.as_junta(targets.random_parity(key, n, k)))(KEYS)
        padded = parity(KEYS, k)
        np.testing.assert_array_equal(padded.support[:, :k], plain.support)
        np.testing.assert_array_equal(jax.vmap(lambda f: f(x))(padded), jax.vmap(lambda f: f(x))(plain))
        plain_tree = jax.vmap(lambda key: targets.random_rank_tree(key, n, k, 2))(KEYS).tree
        padded_tree = tree(KEYS, k).tree
        C = plain_tree.feature.shape[-1]
        for name, a, b in zip(node_tree.NodeTree._fields, plain_tree, padded_tree):
            np.testing.assert_array_equal(a, b if name == "size" else b[:, :C], err_msg=name)
            if name in ("feature", "left", "right"):
                assert np.all(np.asarray(b)[:, C:] == -1)
        np.testing.assert_array_equal(jax.vmap(node_tree.rank)(padded_tree), k)
        np.testing.assert_array_equal(jax.vmap(lambda t, x: targets.NodeTreeTarget(t)(x), in_axes=(0, None))(
            padded_tree, x), jax.vmap(lambda t, x: targets.NodeTreeTarget(t)(x), in_axes=(0, None))(plain_tree, x))
    with pytest.raises(ValueError, match="k must be"):
        targets.random_parity(jax.random.key(0), n, k_max + 1, k_max=k_max)
    with pytest.raises(ValueError, match="r must be"):
        targets.random_rank_tree(jax.random.key(0), n, k_max + 1, 2, r_max=k_max)


def _sample(key, n, k, m):
    kp, kf, ks = jax.random.split(key, 3)
    p = sampling.quantize(jt.smoothed(c=0.2).marginals(kp, n), 16)
    f = targets.random_junta(kf, n, k)
    return p, f, sampling.draw(ks, p, f, m, precision_bits=16)


@pytest.mark.parametrize("impurity", ["entropy", "kearns_mansour"])
def test_traced_depth_and_impurity_grow_the_static_trees(impurity):
    n, m, max_depth = 12, 300, 5

    @jax.jit
    def both(key, depth, index):
        p, f, s = _sample(key, n, 3, m)
        traced = greedy.grow(s, jt.GrowthRule(max_depth=max_depth), depth=depth, impurity=index)
        return traced, traced.exact_error(p, f), p, f, s

    index = impurity_lib.NAMES.index(impurity)
    for depth in (0, 2, 5):
        static = jax.jit(jax.vmap(lambda s: greedy.grow(s, jt.GrowthRule(max_depth=depth, impurity=impurity))))
        traced, err_traced, p, f, s = jax.vmap(both, in_axes=(0, None, None))(KEYS[:16], depth, index)
        grown = static(s)
        size = 2 ** (depth + 1) - 1
        for field in ("feature", "label", "weight"):
            np.testing.assert_array_equal(getattr(traced, field)[:, :size], getattr(grown, field), err_msg=field)
        for field in ("mean", "gain"):  # float32 quotients: the two programs may fuse them differently
            np.testing.assert_allclose(getattr(traced, field)[:, :size], getattr(grown, field), rtol=1e-6,
                                       atol=1e-7, err_msg=field)
        assert bool(jnp.all(traced.feature[:, size:] == -1)) and bool(jnp.all(traced.weight[:, size:] == 0))
        err_static = jax.vmap(tree.exact_error)(grown, p, f)
        np.testing.assert_allclose(err_traced, err_static, rtol=1e-6, atol=1e-7)


def test_traced_values_are_checked():
    _, _, s = _sample(jax.random.key(0), 8, 2, 64)
    with pytest.raises(ValueError, match="depth"):
        greedy.grow(s, jt.GrowthRule(max_depth=3), depth=4)
    with pytest.raises(ValueError, match="impurity"):
        greedy.grow(s, jt.GrowthRule(max_depth=3), impurity="gain")


def test_juntas_trial_does_not_depend_on_the_bound():
    """The juntas study's trial at k_max = k (one program per k, as before the bound) and at a larger
    k_max (one program for every k): the same successes, support recovery and (to float32 rounding)
    errors, for each impurity."""
    base = {"n": 10, "c": jnp.float32(0.1), "m_min": 16, "m_max": 512, "impurity_choices": ("entropy", "gini")}

    @functools.cache
    def program(k_max):
        def trial(key, k, index):
            return learning.JUNTAS.trial(key, {**base, "k": k, "k_max": k_max, "impurity": index})
        return jax.jit(jax.vmap(trial, in_axes=(0, None, None)))

    for k in (2, 3):
        for index in (0, 1):
            exact = program(k)(KEYS[:32], jnp.int32(k), jnp.int32(index))
            padded = program(5)(KEYS[:32], jnp.int32(k), jnp.int32(index))
            np.testing.assert_array_equal(padded["success"], exact["success"])
            np.testing.assert_array_equal(padded["support_recovered"], exact["support_recovered"])
            np.testing.assert_allclose(padded["exact_error"], exact["exact_error"], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("impurity", ["gini", "entropy"])
def test_traced_impurity_follows_the_static_path(impurity):
    f = jt.addressing(c=1, k=3)
    rule = jt.GrowthRule(max_depth=9, impurity=impurity, tie_tol=0.0)
    traced_rule = jt.GrowthRule(max_depth=9, tie_tol=0.0)

    def both(key):
        kp, kx = jax.random.split(key)
        p = jt.smoothed(c=0.25).marginals(kp, f.n)
        x = jax.random.bernoulli(kx, p)
        return (population.follow_path(p, f, rule, x),
                population.follow_path(p, f, traced_rule, x, impurity=jnp.int32(impurity_lib.NAMES.index(impurity))))

    static, traced = jax.jit(jax.vmap(both))(KEYS[:16])
    np.testing.assert_array_equal(traced.feature, static.feature)
    np.testing.assert_allclose(traced.error, static.error, rtol=1e-6, atol=1e-7)


def _split(key, n: int, m: int):
    """A random data set of m examples over n features (a 3-junta with 10% label noise) and a test set."""
    kx, ky, kn = jax.random.split(key, 3)
    X = jax.random.bernoulli(kx, 0.4, (2 * m, n))
    y = (X[:, 0] & X[:, 2]) | X[:, 5] ^ jax.random.bernoulli(kn, 0.1, (2 * m,))
    return sampling.from_arrays(X[:m], y[:m]), sampling.from_arrays(X[m:], y[m:])


@pytest.mark.parametrize("chunk, max_features", [(None, "sqrt"), (None, "log2"), (None, 4), (None, 30), (4, "sqrt"),
                                                  (4, 4)])
def test_padded_forest_grows_the_unpadded_trees(chunk, max_features):
    """Bagging.fit(features=n) on data padded with zero features and empty slots (one program for data
    sets of several shapes, the boosting study's forest) grows the trees of the unpadded data: the same
    bootstraps, per-node feature subsets (k counted among the data's n features) and splits; the same
    staged test errors and out-of-bag error; unrolled levels and the level loop."""
    n, m = 23, 150
    train, test = _split(jax.random.key(3), n, m)
    depth = 6 if chunk else 4  # the level loop grows rules of depth >= 6 (growth.LOOP_MIN_DEPTH)
    forest = jt.learners.Bagging(greedy.GreedyTree(jt.GrowthRule(max_depth=depth, impurity="gini",
                                                                  max_features=max_features)), members=12)
    def fitted(key, data, test, **features):  # the forest and its staged test errors, one program
        h = forest.fit(key, data, **features)
        return h, h.staged_errors(test)

    with jt.learners.growth.level_loop(chunk):
        plain, errors = jax.jit(fitted)(jax.random.key(8), train, test)
        trees, padded = jax.jit(fitted)(jax.random.key(8), sampling.pad(train, 50, 9), sampling.pad(test, 50, 7),
                                        features=jnp.int32(n))
    for field in ("feature", "label", "weight", "mean", "gain"):
        np.testing.assert_array_equal(getattr(trees.members, field), getattr(plain.members, field), err_msg=field)
    assert int(jnp.max(trees.members.feature)) < n
    np.testing.assert_array_equal(trees.oob.error, plain.oob.error)
    np.testing.assert_array_equal(padded, errors)  # impurity.quotient: however it is batched


def test_padded_features_per_member_and_the_subset_size():
    """features_per_member draws among the data's features only; the traced subset size is
    GrowthRule.features_per_node's for every n (all n where it gives None); features is checked."""
    train, _ = _split(jax.random.key(4), 23, 100)
    forest = jt.learners.Bagging(greedy.GreedyTree(jt.GrowthRule(max_depth=3, max_features="sqrt")), members=8,
                                 features_per_member=9)
    plain = forest.fit(jax.random.key(1), train)
    padded = jax.jit(lambda key, data, n: forest.fit(key, data, features=n))(jax.random.key(1),
                                                                             sampling.pad(train, 40, 4),
                                                                             jnp.int32(23))
    np.testing.assert_array_equal(padded.members.feature, plain.members.feature)
    for rule in ("sqrt", "log2", 1, 7):
        growth_rule = jt.GrowthRule(max_depth=2, max_features=rule)
        sizes = jax.vmap(lambda n: feature_subsets.subset_size(growth_rule, n))(jnp.arange(1, 2000))
        expected = [growth_rule.features_per_node(n) or n for n in range(1, 2000)]
        np.testing.assert_array_equal(sizes, expected)
    unpadded = jax.jit(lambda key, data, n: forest.fit(key, data, features=n))(jax.random.key(1), train, jnp.int32(23))
    np.testing.assert_array_equal(unpadded.members.feature, plain.members.feature)  # features = n: no padding
    for bad in (41, 0, 23.0, True, "23", jnp.ones(2, jnp.int32)):
        with pytest.raises(ValueError, match=r"features must be"):
            forest.fit(jax.random.key(1), sampling.pad(train, 40, 4), features=bad)
        with pytest.raises(ValueError, match=r"features must be"):
            greedy.grow(sampling.pad(train, 40, 4), jt.GrowthRule(max_depth=2), features=bad)
    with pytest.raises(ValueError, match="features_per_member must be in"):
        forest.fit(jax.random.key(1), sampling.pad(train, 40, 4), features=8)
    with pytest.raises(ValueError, match="features needs a base learner"):
        jt.learners.Bagging(jt.learners.Stump(), members=2).fit(jax.random.key(1), train, features=10)

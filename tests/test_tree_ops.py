"""Tree queries on hand-built and grown trees: predict, predict_bits, sample_error, depth,
n_leaves, features_used, truncate, stump."""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import helpers
import jaxtrees as jt
from jaxtrees.hypotheses import tree as tree_lib
from test_grow_reference import group_results

# Jitted queries: one small compile each per shape, much cheaper than eager op-by-op dispatch.
predict = jax.jit(jt.predict)
predict_bits = jax.jit(jt.predict_bits)
depth = jax.jit(jt.depth)
n_leaves = jax.jit(jt.n_leaves)
features_used = jax.jit(jt.features_used, static_argnums=1)
truncate = jax.jit(jt.truncate, static_argnums=1)

CUBE3 = np.array(list(itertools.product([0, 1], repeat=3)), np.int32)


def hand_tree(max_depth=2):
    """x2 ? 1 : (x0 ? 1 : 0), i.e. f = x0 | x2, in arrays of the given max_depth (>= 2).

    Built as if from the 8 points of {0,1}^3 with y = x0 | x2 (6 ones)."""
    size = tree_lib.heap_size(max_depth)
    feature = np.full(size, -1, np.int32)
    label = np.zeros(size, np.int32)
    weight = np.zeros(size, np.float32)
    mean = np.zeros(size, np.float32)
    gain = np.zeros(size, np.float32)
    feature[[0, 1]] = [2, 0]
    label[:5] = [1, 0, 1, 0, 1]
    weight[:5] = [8, 4, 4, 2, 2]
    mean[:5] = [0.75, 0.5, 1.0, 0.0, 1.0]
    gain[[0, 1]] = [0.3, 1.0]
    return jt.Tree(*(jnp.asarray(a) for a in (feature, label, weight, mean, gain)))


@pytest.mark.parametrize("max_depth", [2, 4])
def test_hand_tree_queries(max_depth):
    t = hand_tree(max_depth)
    assert t.max_depth == max_depth
    expected = CUBE3[:, 0] | CUBE3[:, 2]
    np.testing.assert_array_equal(np.asarray(predict(t, CUBE3)), expected)
    np.testing.assert_array_equal(helpers.traverse(t, CUBE3), expected)
    packed = helpers.np_unpack(np.asarray(predict_bits(t, jnp.asarray(helpers.np_pack(CUBE3.T)))), 8)
    np.testing.assert_array_equal(packed.astype(np.int32), expected)
    assert int(depth(t)) == 2
    assert int(n_leaves(t)) == 3
    np.testing.assert_array_equal(np.asarray(features_used(t, 4)), [True, False, True, False])
    # predict broadcasts over leading axes.
    assert np.asarray(predict(t, CUBE3.reshape(2, 4, 3))).shape == (2, 4)


def test_hand_tree_sample_error():
    t = hand_tree()
    y = (CUBE3[:, 0] | CUBE3[:, 2]).copy()
    y[[1, 6]] ^= 1  # two of eight labels wrong
    error = jax.jit(jt.sample_error)
    assert float(error(t, helpers.np_sample(CUBE3, y))) == 0.25
    assert float(error(t, helpers.np_sample(CUBE3, CUBE3[:, 0] | CUBE3[:, 2]))) == 0.0


def test_hand_tree_truncate():
    t = hand_tree(3)
    t1 = truncate(t, 1)
    np.testing.assert_array_equal(np.asarray(t1.feature[:3]), [2, -1, -1])
    assert np.all(np.asarray(t1.feature)[1:] == -1)
    np.testing.assert_array_equal(np.asarray(t1.weight), np.r_[8, 4, 4, np.zeros(12)])
    np.testing.assert_array_equal(np.asarray(t1.gain), np.r_[0.3, np.zeros(14)].astype(np.float32))
    # node 1 (x2 = 0) has mean 1/2: label 0 (ties go to 0); node 2 predicts 1.
    np.testing.assert_array_equal(np.asarray(predict(t1, CUBE3)), CUBE3[:, 2])
    assert int(depth(t1)) == 1 and int(n_leaves(t1)) == 2
    t0 = truncate(t, 0)
    np.testing.assert_array_equal(np.asarray(predict(t0, CUBE3)), np.ones(8))
    assert int(depth(t0)) == 0 and int(n_leaves(t0)) == 1
    assert not np.any(np.asarray(features_used(t0, 3)))
    for limit in (2, 3, 7):
        for a, b in zip(truncate(t, limit), t):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_stump():
    t = tree_lib.stump(feature=1, labels=(1, 0), max_depth=3)
    assert t.max_depth == 3 and t.feature.shape == (15,)
    x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    np.testing.assert_array_equal(np.asarray(predict(t, x)), [1, 0, 1, 0])
    assert int(depth(t)) == 1 and int(n_leaves(t)) == 2
    np.testing.assert_array_equal(np.asarray(features_used(t, 3)), [False, True, False])
    bits_pred = helpers.np_unpack(np.asarray(predict_bits(t, jnp.asarray(helpers.np_pack(x.T)))), 4)
    np.testing.assert_array_equal(bits_pred.astype(int), [1, 0, 1, 0])
    s = tree_lib.stump(feature=0)
    assert s.max_depth == 1
    np.testing.assert_array_equal(np.asarray(predict(s, x)), [0, 0, 1, 1])


@pytest.mark.parametrize("labels", [(0, 1), (1, 0), (0, 0)])
def test_stump_internal_label_is_majority(labels):
    t = tree_lib.stump(feature=0, labels=labels)
    exists = np.asarray(t.weight) > 0
    np.testing.assert_array_equal(np.asarray(t.label)[exists], (np.asarray(t.mean)[exists] > 0.5).astype(int))


def test_stump_internal_label_is_majority_for_constant_labels():
    t = tree_lib.stump(feature=0, labels=(1, 1))
    assert int(t.label[0]) == 1
    np.testing.assert_array_equal(np.asarray(predict(truncate(t, 0), np.eye(2, dtype=int))), [1, 1])


def test_heap_helpers():
    assert [tree_lib.heap_size(d) for d in range(4)] == [1, 3, 7, 15]
    assert [tree_lib.heap_depth(s) for s in (1, 3, 7, 15)] == [0, 1, 2, 3]
    np.testing.assert_array_equal(tree_lib.node_levels(2), [0, 1, 1, 2, 2, 2, 2])
    with pytest.raises(ValueError, match="slots"):
        tree_lib.heap_depth(6)


# ----------------------------------------------------------------------------- grown trees
# Data and depth-3 gini trees of the "d3-gini" group of test_grow_reference (n = 8, W = 4,
# m in 97..128), regrown at depths 0 and 1 with the same compiled programs as that file.

N_FEATURES = 8
X_TEST = np.random.default_rng(17).integers(0, 2, (100, N_FEATURES)).astype(np.int32)
Y_TEST = np.random.default_rng(18).integers(0, 2, 100).astype(np.int32)

predict_many = jax.jit(jax.vmap(jt.predict, in_axes=(0, None)))
predict_bits_many = jax.jit(jax.vmap(jt.predict_bits, in_axes=(0, None)))
sample_error_many = jax.jit(jax.vmap(jt.sample_error))
truncate_many = jax.jit(jax.vmap(jt.truncate, in_axes=(0, None)), static_argnums=1)


@jax.jit
@jax.vmap
def summaries(t):
    return jt.depth(t), jt.n_leaves(t), jt.features_used(t, N_FEATURES)


@functools.lru_cache(maxsize=None)
def grown():
    data, trees, _ = group_results("d3-gini")
    by_depth = {3: trees}
    for d in (0, 1):
        by_depth[d] = helpers.grow_many(data, jt.GrowthRule(max_depth=d, impurity="gini"))
    return data, {d: helpers.stack(ts) for d, ts in by_depth.items()}


def test_grown_predict_agrees_with_predict_bits_and_traversal():
    data, trees = grown()
    t3 = trees[3]
    plain = np.asarray(predict_many(t3, X_TEST))
    packed = np.asarray(predict_bits_many(t3, jnp.asarray(helpers.np_pack(X_TEST.T))))
    for b in range(len(data)):
        tb = jax.tree.map(lambda a: np.asarray(a[b]), t3)
        manual = helpers.traverse(tb, X_TEST)
        np.testing.assert_array_equal(plain[b], manual)
        np.testing.assert_array_equal(helpers.np_unpack(packed[b], 100).astype(int), manual)


def test_grown_sample_error_is_mean_mismatch():
    data, trees = grown()
    samples = helpers.stack([jt.from_arrays(X, y) for X, y in data])
    errors = np.asarray(sample_error_many(trees[3], samples))
    test_errors = np.asarray(jax.jit(jax.vmap(jt.sample_error, in_axes=(0, None)))(
        trees[3], jt.from_arrays(X_TEST, Y_TEST)))
    # float32 fraction of mismatches: equal to 1e-7 (XLA may divide by multiplying with the
    # reciprocal, 1 ulp off), and exactly the count once scaled back by m.
    for b, (X, y) in enumerate(data):
        tb = jax.tree.map(lambda a: np.asarray(a[b]), trees[3])
        for err, Xs, ys in ((errors[b], X, y), (test_errors[b], X_TEST, Y_TEST)):
            wrong = int(np.sum(helpers.traverse(tb, Xs) != ys))
            assert abs(float(err) - wrong / len(ys)) <= 1e-7
            assert round(float(err) * len(ys)) == wrong
    assert errors.max() > 0 and errors.min() < errors.max()  # not all trivially 0


def test_grown_depth_leaves_features_used():
    data, trees = grown()
    depth, leaves, used = jax.device_get(summaries(trees[3]))
    levels = tree_lib.node_levels(3)
    for b in range(len(data)):
        f = np.asarray(trees[3].feature[b])
        w = np.asarray(trees[3].weight[b])
        assert depth[b] == levels[w > 0].max()
        assert leaves[b] == np.sum((w > 0) & (f < 0))
        np.testing.assert_array_equal(used[b], np.isin(np.arange(N_FEATURES), f[f >= 0]))
    assert set(depth.tolist()) > {3}  # some trees stop early, most do not


@pytest.mark.parametrize("limit", [0, 1])
def test_truncate_of_grown_equals_growing_shallower(limit):
    """Growth is level-wise greedy, so the depth-3 tree cut at depth d is the depth-d tree."""
    _, trees = grown()
    cut = jax.device_get(truncate_many(trees[3], limit))
    direct = jax.device_get(trees[limit])
    size = tree_lib.heap_size(limit)
    for field, a, b in zip(jt.Tree._fields, cut, direct):
        np.testing.assert_array_equal(a[:, :size], b, err_msg=field)
        below = a[:, size:]  # cut away: absent nodes
        assert np.all(below == (-1 if field == "feature" else 0)), field

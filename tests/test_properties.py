"""Invariants of grown trees on small random data sets (hypothesis), and bit packing round trips.

Shapes come from a small set so that jit compiles few programs: m in {1, 31, 32, 33, 100} and n
in {1, 3, 8}, paired so that only six packed shapes (n, W) occur, each with one impurity. Trees
are grown to depth n, the full depth (features are not reused), with the default rule.

Every shape is a compiled program that stays mapped for the rest of the process (``grow_jit`` is
module-level; issue 39), so the word counts of the blocked popcount are drawn from a menu too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import helpers
import jaxtrees as jt
from jaxtrees.core import bits
from reference import IMPURITIES, node_gains

SETTINGS = settings(deadline=None, max_examples=50, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# (m, n) pairs; the impurity is fixed per packed shape (n, W). Depth-8 programs are the costly
# compiles, so n = 8 only pairs with W = 1.
SHAPES = [(1, 1), (31, 3), (32, 8), (1, 8), (31, 8), (32, 1), (33, 3), (100, 3), (100, 1)]
IMPURITY = {(1, 1): "entropy", (3, 1): "gini", (8, 1): "kearns_mansour",
            (3, 2): "entropy", (3, 4): "kearns_mansour", (1, 4): "gini"}

grow_jit = jax.jit(jt.grow)


def rule_for(m, n):
    return jt.GrowthRule(max_depth=n, impurity=IMPURITY[(n, helpers.n_words(m))])


@st.composite
def data_sets(draw, consistent=None):
    m, n = draw(st.sampled_from(SHAPES))
    X = draw(arrays(np.int8, (m, n), elements=st.integers(0, 1), fill=st.nothing()))
    if consistent is None:
        consistent = draw(st.booleans())
    if consistent:  # y = f(x) for a random f: {0,1}^n -> {0,1}
        table = draw(arrays(np.int8, (2**n,), elements=st.integers(0, 1), fill=st.nothing()))
        y = table[(X.astype(np.int64) << np.arange(n)).sum(axis=1)]
    else:
        y = draw(arrays(np.int8, (m,), elements=st.integers(0, 1), fill=st.nothing()))
    return X, y.astype(np.int8)


def grown(X, y):
    m, n = X.shape
    return jax.device_get(grow_jit(helpers.np_sample(X, y), rule_for(m, n)))


@SETTINGS
@given(data_sets())
def test_tree_invariants(data):
    X, y = data
    m, n = X.shape
    rule = rule_for(m, n)
    t = grown(X, y)
    D = n
    size = 2 ** (D + 1) - 1
    assert t.feature.shape == (size,)
    rows = helpers.node_rows(t, X)
    exists = t.weight > 0
    event(f"m={m} n={n} splits={int(np.sum(t.feature >= 0))}")
    assert set(np.flatnonzero(exists)) == {i for i, r in rows.items() if len(r)}
    G = IMPURITIES[rule.impurity.name]
    path_features = {0: []}
    for i in range(size):
        level = int(np.log2(i + 1))
        if not exists[i]:  # absent nodes are all zeros with feature -1
            assert (t.feature[i], t.label[i], t.weight[i], t.mean[i], t.gain[i]) == (-1, 0, 0, 0, 0)
            continue
        r = rows[i]
        ones = int(y[r].sum())
        assert t.weight[i] == len(r)
        assert abs(t.mean[i] - ones / len(r)) <= 1e-6
        assert t.label[i] == int(2 * ones > len(r))  # majority, ties to 0
        f = t.feature[i]
        used = np.zeros(n, bool)
        used[path_features[i]] = True
        admissible = [j for j in range(n) if not used[j] and 0 < X[r, j].sum() < len(r)]
        if f < 0:  # a leaf: at max depth, pure, or no admissible feature (min_gain = 0)
            assert level == D or ones in (0, len(r)) or not admissible
            assert t.gain[i] == 0
            if 2 * i + 2 < size:
                assert t.weight[2 * i + 1] == t.weight[2 * i + 2] == 0
            continue
        assert level < D and 0 < ones < len(r)
        assert f not in path_features[i], "feature reused on a path"
        assert f in admissible
        left, right = t.weight[2 * i + 1], t.weight[2 * i + 2]
        assert left > 0 and right > 0 and left + right == t.weight[i]
        path_features[2 * i + 1] = path_features[2 * i + 2] = path_features[i] + [int(f)]
        # The split is greedy: its gain is the float64 gain of f and the best one, to 1e-5.
        g = node_gains(X[r], y[r], G, used)
        assert t.gain[i] >= -1e-6
        assert abs(t.gain[i] - g[f]) <= 1e-5
        assert g[f] >= g.max() - 1e-5
    # Weights at each level plus the leaves above it account for every example once.
    levels = tree_levels(D)
    for level in range(D + 1):
        at_level = t.weight[levels == level].sum()
        leaves_above = t.weight[(levels < level) & exists & (t.feature < 0)].sum()
        assert at_level + leaves_above == m


def tree_levels(D):
    return np.concatenate([np.full(2**l, l) for l in range(D + 1)])


@SETTINGS
@given(data_sets(consistent=True))
def test_full_depth_tree_fits_consistent_data(data):
    """y = f(x): a depth-n tree (every feature usable once per path) has training error 0."""
    X, y = data
    t = grown(X, y)
    np.testing.assert_array_equal(helpers.traverse(t, X), y)


@SETTINGS
@given(data_sets(), st.randoms(use_true_random=False))
def test_tree_does_not_depend_on_example_order(data, random):
    X, y = data
    perm = np.arange(len(y))
    random.shuffle(perm)
    a, b = grown(X, y), grown(X[perm], y[perm])
    for field, u, v in zip(jt.Tree._fields, a, b):
        np.testing.assert_array_equal(u, v, err_msg=field)


pack = jax.jit(bits.pack)
unpack = jax.jit(bits.unpack, static_argnums=1)
count = jax.jit(bits.count)


@SETTINGS
@given(st.sampled_from([1, 31, 32, 33, 100]).flatmap(
    lambda m: arrays(np.bool_, st.sampled_from([(m,), (2, m), (3, 1, m)]))))
def test_pack_unpack_roundtrip(x):
    m = x.shape[-1]
    packed = pack(x)
    assert packed.dtype == jnp.uint32 and packed.shape == x.shape[:-1] + (helpers.n_words(m),)
    np.testing.assert_array_equal(np.asarray(packed), helpers.np_pack(x))  # documented layout
    np.testing.assert_array_equal(np.asarray(unpack(packed, m)), x)
    np.testing.assert_array_equal(np.asarray(count(packed)), x.sum(axis=-1))
    assert not helpers.np_unpack(np.asarray(packed), 32 * packed.shape[-1])[..., m:].any()  # padding


# Word counts at the edges of count_and's cases (one reduction up to REDUCE_SPAN; blocks of one
# step up to REDUCE_SPAN * BLOCKS_PER_STEP; a loop of steps beyond, with and without padding).
_SPAN, _STEP = bits.REDUCE_SPAN, bits.REDUCE_SPAN * bits.BLOCKS_PER_STEP
WORDS = [1, 2, _SPAN - 1, _SPAN, _SPAN + 1, 3 * _SPAN - 5, _STEP, _STEP + 1, 2 * _STEP + 37, 700, bits.PREFIX_MIN_WORDS + 45]


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(words=st.sampled_from(WORDS), rows=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
def test_count_and_equals_numpy_popcount(words, rows, seed):
    """Blocked counting (axes over REDUCE_SPAN words, looped beyond BLOCKS_PER_STEP blocks) equals
    numpy's popcount of a & b, with broadcasting on either side."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**32, (rows, 1, words), dtype=np.uint32)
    b = rng.integers(0, 2**32, (1, 5, words), dtype=np.uint32)
    expected = np.bitwise_count(a & b).sum(axis=-1, dtype=np.int64)
    np.testing.assert_array_equal(bits.count_and(a, b), expected)
    np.testing.assert_array_equal(bits.count_and(b[0], a[:, 0:1, :]), np.bitwise_count(b[0] & a[:, 0:1, :]).sum(-1))


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(words=st.sampled_from(WORDS), used=st.integers(0, 800), seed=st.integers(0, 2**31 - 1))
def test_count_and_of_a_prefix(words, used, seed):
    """``count_and(a, b, words=k)`` of arrays zero past k words equals the full count, for k traced and
    batched under vmap (each row its own k), k = 0 and k past the axis included."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**32, (3, words), dtype=np.uint32)
    b = rng.integers(0, 2**32, (3, words), dtype=np.uint32)
    ks = np.array([used, used // 3, min(used, words)], np.int32)
    a = np.where(np.arange(words)[None, :] < ks[:, None], a, 0).astype(np.uint32)  # zero past each row's k
    expected = np.bitwise_count(a & b).sum(axis=-1, dtype=np.int64)
    np.testing.assert_array_equal(jax.jit(jax.vmap(bits.count_and))(a, b, ks), expected)
    np.testing.assert_array_equal(bits.count_and(a, b, int(ks.max())), expected)


def test_count_and_broadcasts_a_single_word_and_rejects_mismatched_lengths():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**32, (3, 1, 1), dtype=np.uint32)  # one word against 300
    b = rng.integers(0, 2**32, (1, 4, 300), dtype=np.uint32)
    np.testing.assert_array_equal(bits.count_and(a, b), np.bitwise_count(a & b).sum(axis=-1))
    np.testing.assert_array_equal(bits.count_and(b, a), np.bitwise_count(a & b).sum(axis=-1))
    with pytest.raises(ValueError):
        bits.count_and(np.zeros((2, 40), np.uint32), np.zeros((2, 50), np.uint32))

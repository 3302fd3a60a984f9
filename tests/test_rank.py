"""FIND / FINDMIN (seed 003), tree rank, reduced trees and rank-r targets.

The batched stack machine (jaxtrees.learners.rank) must return the plain recursive reference's
tree (jaxtrees.learners.rank_reference) node for node, with the same rank and the same number of
FIND invocations, on random, structured, noisy, duplicated and conflicting samples.
"""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxtrees as jt
from jaxtrees.core import sampling
from jaxtrees.hypotheses import node_tree, tree
from jaxtrees.learners import rank as rank_lib
from jaxtrees.learners import rank_reference as reference


def nested(t, slot=0):
    """A NodeTree (one, host-side) as the reference's nested tuples."""
    f = int(t.feature[slot])
    if f < 0:
        return int(t.label[slot])
    return (f, nested(t, int(t.left[slot])), nested(t, int(t.right[slot])))


def packed(Xs, ys):
    return jax.tree.map(lambda *a: jnp.stack(a), *[jt.from_arrays(X, y) for X, y in zip(Xs, ys)])


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def target_labels(keys, n, r, length, X):
    """Labels of the rows X[b] under random rank-r trees, one per key."""
    return jax.vmap(lambda k, x: jt.random_rank_tree(k, n, r, length)(x))(keys, X)


def labelled_samples(seed: int, n: int, m: int, count: int):
    """``count`` samples of every kind: random labels, rank-1 / rank-2 targets with 5% of labels
    flipped, rank-2 targets with duplicated rows (some relabelled: conflicting examples), and
    3-parities (rank 3 and hard for FIND at smaller ranks)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, (count, m, n))
    kind = np.arange(count) % 5
    keys = jax.random.split(jax.random.key(seed), count)
    rank1 = np.asarray(target_labels(keys, n, 1, min(n, 3), jnp.asarray(X)))
    rank2 = np.asarray(target_labels(keys, n, 2, min(n // 2, 2), jnp.asarray(X)))
    parity = X[:, :, 0] ^ X[:, :, n // 2] ^ X[:, :, n - 1]
    y = np.select([k[:, None] for k in (kind == 0, kind == 1, kind == 2, kind == 3)],
                  [rng.integers(0, 2, (count, m)), rank1, rank2, rank2], parity)
    flip = (kind == 1)[:, None] | (kind == 2)[:, None]
    y = y ^ (flip & (rng.random((count, m)) < 0.05))
    dup = kind == 3  # the second half repeats the first, 1 in 8 repeats relabelled
    X[dup, m // 2:] = X[dup, : m - m // 2]
    y[dup, m // 2:] = y[dup, : m - m // 2] ^ (rng.random((dup.sum(), m - m // 2)) < 0.125)
    return X, y


#: (n, m, samples, min_rank, max_rank): 2,150 samples in all, 2,000 without the slow marker's m = 128 group.
GROUPS = [(4, 8, 800, 0, 4), (6, 24, 500, 0, 3), (8, 32, 400, 0, 3), (12, 64, 300, 2, 2), (12, 128, 150, 0, 3)]


@functools.lru_cache(maxsize=None)
def batched(group):
    n, m, count, r0, r1 = group
    X, y = labelled_samples(sum(group), n, m, count)
    out = jax.jit(jax.vmap(lambda d: rank_lib.FindMin(r1, r0).search(d)))(packed(X, y))
    return X, y, jax.device_get(out)


@pytest.mark.parametrize("group", [pytest.param(g, marks=pytest.mark.slow) if g[1] > 64 else g for g in GROUPS],
                         ids=[f"n{g[0]}-m{g[1]}-r{g[3]}..{g[4]}" for g in GROUPS])
def test_batched_find_equals_the_reference_node_for_node(group):
    n, m, count, r0, r1 = group
    X, y, out = batched(group)
    for b in range(count):
        counter = reference.Counter()
        want, rank = reference.findmin(X[b], y[b], max_rank=r1, counter=counter) if r0 == 0 else (
            reference.find(X[b], y[b], r0, counter), r0)
        t = jax.tree.map(lambda a: a[b], out.tree)
        assert bool(out.found[b]) == (want is not None), b
        if want is not None:
            assert nested(t) == want, b
            assert int(out.rank[b]) == rank
        assert int(out.calls[b]) == counter.calls, b
    assert 0.05 < out.found.mean() < 1.0  # both outcomes are exercised


@pytest.mark.parametrize("group", GROUPS[:3], ids=[f"n{g[0]}-m{g[1]}" for g in GROUPS[:3]])
def test_found_trees_are_consistent_reduced_of_rank_at_most_r_within_lemma_1(group):
    n, m, count, r0, r1 = group
    X, y, out = batched(group)
    trees = jax.tree.map(jnp.asarray, out.tree)
    predictions = np.asarray(jax.vmap(node_tree.predict)(trees, jnp.asarray(X)))
    ranks = np.asarray(jax.vmap(node_tree.rank)(trees))
    sizes = np.asarray(out.tree.size)
    for b in np.flatnonzero(out.found):
        np.testing.assert_array_equal(predictions[b], y[b])
        assert ranks[b] <= out.rank[b]
        r = ranks[b]
        if r >= 1:  # Lemma 1: 2^(r+1) - 1 <= nodes <= 2 sum_{i<=r} C(n, i) - 1 for a reduced tree
            assert 2 ** (r + 1) - 1 <= sizes[b] <= 2 * sum(math.comb(n, i) for i in range(r + 1)) - 1
        t = jax.tree.map(lambda a: a[b], out.tree)
        assert _reduced(t)
    # FINDMIN returns a tree of the least rank: the found tree's rank is the FIND bound that succeeded.
    if r0 == 0:
        np.testing.assert_array_equal(ranks[out.found], out.rank[out.found])


def assert_lemma_1(t, n: int):
    """Lemma 1 for a reduced tree of rank r >= 1 over n variables: 2^(r+1) - 1 <= nodes <= 2 L(n, r) - 1."""
    r, size = int(node_tree.rank(t)), int(t.size)
    if r >= 1:
        assert 2 ** (r + 1) - 1 <= size <= 2 * sum(math.comb(n, i) for i in range(r + 1)) - 1, (r, size)


def _reduced(t, slot=0, seen=()):
    f = int(t.feature[slot])
    if f < 0:
        return True
    return f not in seen and _reduced(t, int(t.left[slot]), seen + (f,)) and _reduced(t, int(t.right[slot]), seen + (f,))


def test_findmin_rank_equals_the_least_rank_by_exhaustive_search():
    """On tiny samples (n <= 4), r(S) by dynamic programming over every root variable (no FIND)."""
    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 4):
        for _ in range(40):
            m = int(rng.integers(1, 2**n + 3))
            X, y = rng.integers(0, 2, (m, n)), rng.integers(0, 2, m)
            # from_arrays(X, y) (one word, m <= 18), packed from 32 zero-padded rows: one shape per n
            pad = np.zeros((32 - m, n), int)
            data = sampling.prefix(jt.from_arrays(np.r_[X, pad], np.r_[y, pad[:, 0]]), m)
            s = rank_lib.search(data, max_rank=n)
            want = reference.sample_rank(X, y)
            assert (int(s.rank) if bool(s.found) else None) == want, (X, y)


def test_conflicting_examples_have_no_tree_and_give_the_majority_leaf():
    X = np.array([[0, 1], [0, 1], [1, 0], [1, 1]])
    s = rank_lib.search(jt.from_arrays(X, [1, 0, 1, 1]), max_rank=2)
    assert not bool(s.found) and not bool(s.exhausted) and int(s.rank) == -1
    assert int(s.tree.size) == 1 and int(s.tree.feature[0]) == -1 and int(s.tree.label[0]) == 1


def test_the_call_budget_stops_the_search():
    X, y = labelled_samples(0, 8, 32, 5)
    full = rank_lib.search(jt.from_arrays(X[4], y[4]), max_rank=3)
    cut = rank_lib.search(jt.from_arrays(X[4], y[4]), max_rank=3, max_calls=int(full.calls) // 2)
    assert bool(cut.exhausted) and not bool(cut.found)
    assert int(full.calls) // 2 <= int(cut.calls) <= int(full.calls) // 2 + 2 * 8  # a rank-1 step counts <= 2n calls


def test_weights_select_the_sample():
    X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    data = jt.with_weights(jt.from_arrays(X, [0, 1, 1, 0]), np.r_[1.0, 0.0, 2.0, 1.0, np.zeros(28)].astype(np.float32))
    s = rank_lib.search(data, max_rank=2)
    want, rank = reference.findmin(X[[0, 2, 3]], [0, 1, 0])
    assert nested(s.tree) == want and int(s.rank) == rank


def test_bad_input_is_refused():
    data = jt.from_arrays([[0, 1], [1, 0]], [0, 1])
    for kwargs, match in (({"max_rank": -1}, "max_rank"), ({"max_rank": 2, "min_rank": 3}, "min_rank"),
                          ({"max_rank": 1, "max_calls": 0}, "max_calls"), ({"max_rank": 1.5}, "max_rank")):
        with pytest.raises(ValueError, match=match):
            rank_lib.search(data, **kwargs)
    with pytest.raises(ValueError, match="m >= 1"):
        rank_lib.search(data._replace(valid=jnp.zeros_like(data.valid)), max_rank=1)
    with pytest.raises(ValueError, match="data.y"):
        rank_lib.search(data._replace(y=jnp.zeros((3,), jnp.uint32)), max_rank=1)
    with pytest.raises(ValueError, match="r must be"):
        reference.find([[0]], [1], -1)


def test_ranks_above_n_count_as_n():
    X, y = labelled_samples(1, 4, 8, 1)
    a = rank_lib.search(jt.from_arrays(X[0], y[0]), max_rank=4, min_rank=4)
    b = rank_lib.FindMin(max_rank=9, min_rank=9).search(jt.from_arrays(X[0], y[0]))
    assert nested(a.tree) == nested(b.tree) and int(a.calls) == int(b.calls)


# ------------------------------------------------------------------------------------ rank of trees


# The constructors and tree summaries as compiled programs: one per shape, not one small program per
# operation and shape run eagerly.
_heap_rank, _rank, _n_leaves, _depth = (jax.jit(f) for f in (tree.rank, node_tree.rank, node_tree.n_leaves,
                                                             node_tree.depth))
_random_tree = jax.jit(jt.random_tree, static_argnames=("n", "d"))
_random_decision_list = jax.jit(jt.random_decision_list, static_argnames=("n", "length"))
_random_rank_tree = jax.jit(jt.random_rank_tree, static_argnames=("n", "r", "length"))


def test_rank_of_the_target_families():
    key = jax.random.key(0)
    for k in (1, 3):  # a k-parity's tree is complete of depth k: rank k
        features = np.concatenate([np.full(2**level, level) for level in range(k)])
        leaves = np.array([bin(i).count("1") % 2 for i in range(2**k)])
        f = jt.decision_tree(features, leaves, n=6)
        assert int(_heap_rank(f.as_tree())) == k
        assert int(_rank(node_tree.from_heap(f.as_tree()))) == k
    for d in (0, 3):  # complete depth-d trees: rank d
        f = _random_tree(key, n=8, d=d)
        assert int(_heap_rank(f.as_tree())) == d
    for length in (1, 5):
        assert int(_rank(_random_decision_list(key, n=9, length=length).tree)) == 1
    for r, length in ((2, 2), (3, 2)):
        f = _random_rank_tree(key, n=8, r=r, length=length)
        assert int(_rank(f.tree)) == r
        assert_lemma_1(f.tree, 8)
        assert int(_n_leaves(f.tree)) == (length + 1) ** r and int(_depth(f.tree)) == r * length


def test_rank_batches_under_vmap():
    keys = jax.random.split(jax.random.key(1), 6)
    trees = jax.vmap(lambda k: jt.random_rank_tree(k, 8, 2, 2).tree)(keys)
    np.testing.assert_array_equal(jax.vmap(node_tree.rank)(trees), 2)


def test_rank_trees_oracle_matches_enumeration():
    n = 7
    allx = np.array(list(itertools.product([0, 1], repeat=n)))[:, ::-1]
    rng = np.random.default_rng(0)
    for seed, (r, length) in enumerate(((1, 5), (2, 2), (3, 2))):
        f = jt.random_rank_tree(jax.random.key(seed), n, r, length)
        values = np.asarray(f(jnp.asarray(allx)))
        np.testing.assert_array_equal(np.asarray(jt.bits.unpack(f.bits(jt.bits.pack(jnp.asarray(allx.T, bool))), 2**n)),
                                      values == 1)
        p = rng.uniform(0.1, 0.9, n)
        fixed = np.zeros(n, bool)
        fixed[[1, 4]] = True
        vals = np.zeros(n, bool)
        vals[1] = True
        mu, mu1 = f.means(jnp.asarray(p, jnp.float32), jnp.asarray(fixed), jnp.asarray(vals))
        w = np.prod(np.where(allx == 1, p, 1 - p), axis=1) * np.all(allx[:, fixed] == vals[fixed], axis=1)
        assert abs(float(mu) - (w * values).sum() / w.sum()) < 2e-6
        assert abs(float(f.mean(jnp.asarray(p, jnp.float32), jnp.asarray(fixed), jnp.asarray(vals))) - float(mu)) < 2e-7
        for i in np.flatnonzero(~fixed):
            wi = w * allx[:, i]
            assert abs(float(mu1[i]) - (wi * values).sum() / wi.sum()) < 2e-6
        np.testing.assert_array_equal(np.asarray(f.support_mask(n)), np.isin(np.arange(n), np.asarray(f.tree.feature)))


def test_random_rank_tree_bad_input():
    key = jax.random.key(0)
    for kwargs, match in (({"n": 4, "r": 3, "length": 2}, "length"), ({"n": 4, "r": 5}, "r must"),
                          ({"n": 0, "r": 1}, "n must")):
        with pytest.raises(ValueError, match=match):
            jt.random_rank_tree(key, **kwargs)


def random_heap_tree(rng, n: int, depth: int):
    """A random complete heap tree of the given depth whose tests may repeat a variable on a path."""
    size = tree.heap_size(depth)
    feature = np.where(tree.node_levels(depth) < depth, rng.integers(0, n, size), -1)
    label = rng.integers(0, 2, size)
    return tree.Tree(jnp.asarray(feature, jnp.int32), jnp.asarray(label, jnp.int32), jnp.ones(size, jnp.float32),
                     jnp.asarray(label, jnp.float32), jnp.zeros(size, jnp.float32))


def random_node_tree(rng, n: int, depth: int):
    """:func:`random_heap_tree` as a node tree."""
    return node_tree.from_heap(random_heap_tree(rng, n, depth))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_reduce_keeps_the_function_and_removes_repeated_tests(seed):
    n, depth = 4, 5  # one shape: one compilation
    t = random_node_tree(np.random.default_rng(seed), n, depth)
    r = node_tree.reduce(t, n)
    allx = jnp.asarray(list(itertools.product([0, 1], repeat=n)))
    np.testing.assert_array_equal(np.asarray(r.predict(allx)), np.asarray(t.predict(allx)))
    assert _reduced(r) and int(node_tree.depth(r)) <= n
    assert_lemma_1(r, n)
    assert int(r.size) == int(node_tree.n_leaves(r)) * 2 - 1
    assert int(node_tree.rank(r)) <= int(node_tree.rank(t))


def padded(t: node_tree.NodeTree, capacity: int) -> node_tree.NodeTree:
    """``t`` in ``capacity`` slots (the extra ones unused)."""
    extra = capacity - t.capacity
    return node_tree.NodeTree(*(jnp.pad(a, (0, extra), constant_values=-1 if i < 4 else 0)
                                for i, a in enumerate(t[:-1])), t.size)


def test_exact_error_is_the_enumerated_error_for_any_tree():
    """The exact error of heap trees and node trees (the node trees' oracle means computed
    node_tree.EXACT_CHUNK slots at a time, over the slots in use) is Pr[t(x) != f(x)] summed over every x:
    for trees that test a variable twice on a path (the contradicting side unreachable), for node trees
    of several chunks and of one, padded to one capacity and batched."""
    n, capacity = 6, 300
    allx = np.array(list(itertools.product([0, 1], repeat=n)))
    rng = np.random.default_rng(7)
    f = jt.random_rank_tree(jax.random.key(2), n, 2, 2)
    fx = np.asarray(f(jnp.asarray(allx)))
    p = rng.uniform(0.1, 0.9, n).astype(np.float32)
    w = np.prod(np.where(allx == 1, p, 1 - p), axis=1)
    trees = [random_node_tree(rng, n, depth) for depth in (7, 1, 4)]  # 255 slots (4 chunks of 64), 3, 31
    assert 255 > 2 * node_tree.EXACT_CHUNK
    nodes = jax.tree.map(lambda *a: jnp.stack(a), *[padded(t, capacity) for t in trees])
    errors = jax.jit(jax.vmap(lambda t: t.exact_error(jnp.asarray(p), f)))(nodes)
    for b, t in enumerate(trees):
        enumerated = float((w * (np.asarray(t.predict(jnp.asarray(allx))) != fx)).sum())
        assert abs(float(errors[b]) - enumerated) < 1e-6, b
    for _ in range(2):  # heap trees with repeated tests, directly
        h = random_heap_tree(rng, n, 4)
        enumerated = float((w * (np.asarray(h.predict(jnp.asarray(allx))) != fx)).sum())
        assert abs(float(h.exact_error(jnp.asarray(p), f)) - enumerated) < 1e-6


def test_conversions_to_heap_and_to_scikit_learn_arrays():
    f = jt.random_rank_tree(jax.random.key(3), n=8, r=2, length=2)
    allx = jnp.asarray(np.random.default_rng(0).integers(0, 2, (200, 8)))
    heap = node_tree.to_heap(f.tree)
    np.testing.assert_array_equal(np.asarray(heap.predict(allx)), np.asarray(f(allx)))
    assert int(tree.rank(heap)) == 2
    arrays = node_tree.to_sklearn(f.tree)
    out = []
    for x in np.asarray(allx):
        node = 0
        while arrays["children_left"][node] >= 0:
            go_right = x[arrays["feature"][node]] > arrays["threshold"][node]
            node = arrays["children_right"][node] if go_right else arrays["children_left"][node]
        out.append(int(np.argmax(arrays["value"][node, 0])))
    np.testing.assert_array_equal(out, np.asarray(f(allx)))
    assert arrays["max_depth"] == 4


# ---------------------------------------------------------------------------------- the learners


def test_findmin_learns_a_rank_2_target_exactly_from_enough_examples():
    """Theorem 2's direction: with m well above the examples' needs, FINDMIN's exact error is small
    and the tree it finds has rank <= 2 = the target's."""
    def trial(key):
        kp, kf, ks = jax.random.split(key, 3)
        problem = jt.Synthetic(jt.smoothed(c=0.2).marginals(kp, 10), jt.random_rank_tree(kf, 10, 2, 2))
        data = problem.train(ks, 512)
        s = rank_lib.FindMin(max_rank=3).search(data)
        return jt.evaluate(s.tree, problem).error, s.rank

    errors, ranks = jax.jit(jax.vmap(trial))(jax.random.split(jax.random.key(0), 16))
    assert np.all(np.asarray(ranks) <= 2) and np.all(np.asarray(ranks) >= 1)
    assert float(np.median(errors)) < 0.02


def test_sample_bound_is_theorem_2():
    n, r, eps, delta = 16, 2, 0.1, 0.05
    want = ((math.e * n / r) ** r * math.log(8 * n) + math.log(1 / delta)) / eps
    assert rank_lib.sample_bound(n, r, eps, delta) == pytest.approx(want)
    with pytest.raises(ValueError, match="eps"):
        rank_lib.sample_bound(n, r, 0.0, delta)

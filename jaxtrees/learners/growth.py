"""Level-wise top-down impurity-based growth: the loop shared by every tree learner.

All nodes of a level are split at once, each on its admissible feature of largest purity gain, from four statistics
per node: w (its weight), wy (the weight of its examples labelled 1), w1[i] (the weight with x_i = 1) and w1y[i] (with
x_i = 1 and label 1). They come from a sample (:mod:`jaxtrees.learners.greedy`: AND + popcount on bitsets, or weighted
sums) or, exactly, from the distribution (:mod:`jaxtrees.learners.population`); all after them is shared: the rule
(:mod:`~jaxtrees.learners.growth_rule`), the split decisions (:mod:`~jaxtrees.learners.splits`) and this loop.

>>> rule = GrowthRule(max_depth=3, impurity="gini")
>>> rule.impurity.name, rule.tie_break
('gini', 'lowest')
"""

from __future__ import annotations

import contextlib
import threading

import jax
import jax.numpy as jnp

from jaxtrees.core import checks
from jaxtrees.core import impurity as impurity_lib
from jaxtrees.hypotheses.tree import Tree, interleave
from jaxtrees.learners.growth_rule import MAX_DEPTH, GrowthRule
from jaxtrees.learners.splits import LevelStats, decide

# re-exported: public path (jaxtrees.learners.growth.<name>, as before the split of issue 69)
from jaxtrees.learners.feature_subsets import UNROLL_WORDS  # noqa: F401
from jaxtrees.learners.growth_rule import (EXACT_WEIGHT_RANGE, MAX_FEATURES, MAX_PATH_DEPTH,  # noqa: F401
                                           TIE_BREAKS, WeightCountingWarning, check_heap_depth, check_key,
                                           resolve_weights)
from jaxtrees.learners.splits import Sides  # noqa: F401

#: Nodes per step of the level loop (:func:`level_loop`).
LOOP_CHUNK = 4
#: Shallower rules stay unrolled in a level loop: their few levels compile about as fast as the loop.
LOOP_MIN_DEPTH = 6
_loop = threading.local()  # per thread: the runner traces programs on background threads


@contextlib.contextmanager
def level_loop(chunk: int | None = LOOP_CHUNK):
    """Trees traced in this context (in this thread) by :func:`~jaxtrees.learners.greedy.grow` with a
    rule of depth >= LOOP_MIN_DEPTH grow their levels in a ``lax`` loop, ``chunk`` nodes per step (None: unrolled).

    The trees are the same either way. The loop compiles one level's program instead of D levels'
    (on a 2-core CPU about 3-4 s instead of 6-12 s at depth 6-10) and runs 2-5x slower on XLA:CPU
    (fixed-width steps and per-step overhead; docs/benchmarks.md): worth it for programs run on few
    trials. Random rules draw the same words in both (each chunk computes its rows' part of the level's draw).
    """
    if chunk is not None:
        checks.integer("chunk", chunk, low=1, high=2**MAX_DEPTH)
        if chunk & (chunk - 1):
            raise ValueError(f"chunk must be a power of two, got {chunk}")
    before = getattr(_loop, "chunk", None)
    _loop.chunk = chunk
    try:
        yield
    finally:
        _loop.chunk = before


def loop_chunk(rule: "GrowthRule") -> int | None:
    """The chunk that :func:`level_loop` sets for ``rule`` now (None: levels unrolled)."""
    chunk = getattr(_loop, "chunk", None)
    return None if chunk is None or rule.max_depth < LOOP_MIN_DEPTH else chunk


def grow_levels(root: LevelStats, state, children, rule: GrowthRule, key, *, min_count: bool,
                purity_tol: float, depth=None, impurity=None, features=None, chunk: int | None = None) -> Tree:
    """The shared growth loop.

    ``children(state, stats, feature, split, with_features) -> (state', stats')`` gives the
    next level (children of node j at 2j, 2j+1), with per-feature statistics only when
    ``with_features`` (a bool, or a traced bool where ``depth`` is given). ``min_count`` applies
    min_samples_split / min_samples_leaf to the example counts (:attr:`LevelStats.counts`); a node
    whose mean label is within ``purity_tol`` of 0 or 1 is pure. ``depth`` (traced, <= rule.max_depth)
    makes the nodes at that depth leaves; ``impurity`` (an :class:`~jaxtrees.core.impurity.Selected`)
    replaces ``rule.impurity``; ``features`` (traced) says that only the first that many features are
    the data's (the others padding, never chosen; :func:`decide`).

    ``chunk`` (a power of two, or None) grows the levels in a ``lax`` loop over chunks of that many
    nodes (:func:`_grow_chunked`: the program holds one level's ops instead of D levels'; ``children``
    must then accept a traced ``with_features``); None unrolls the levels.
    """
    if chunk is not None and rule.max_depth >= 1:
        return _grow_chunked(root, state, children, rule, key, min_count=min_count, purity_tol=purity_tol,
                             depth=depth, impurity=impurity, features=features, chunk=chunk)
    n = root.w1.shape[-1]
    stats = root
    used = jnp.zeros((1, n), bool)
    levels = []
    for level in range(rule.max_depth + 1):
        w = stats.w.astype(jnp.float32)
        wy = stats.wy.astype(jnp.float32)
        mean = impurity_lib.ratio(wy, w)
        label = stats.label
        if level == rule.max_depth:
            levels.append((jnp.full(w.shape, -1, jnp.int32), label, w, mean, jnp.zeros_like(w)))
            break
        feature, best = decide(stats, used, rule, jax.random.fold_in(key, level), min_count=min_count,
                               purity_tol=purity_tol, impurity=impurity, features=features)
        with_features = level + 1 < rule.max_depth
        if depth is not None:
            feature, best = jnp.where(level < depth, feature, -1), jnp.where(level < depth, best, 0.0)
            with_features = with_features and level + 1 < depth
        split = feature >= 0
        levels.append((feature, label, w, mean, best))
        state, stats = children(state, stats, feature, split, with_features)
        chosen = (feature[:, None] == jnp.arange(n)) & split[:, None]
        used = interleave(used | chosen, used | chosen)
    return Tree(*(jnp.concatenate(parts) for parts in zip(*levels)))


def _grow_chunked(root: LevelStats, state, children, rule: GrowthRule, key, *, min_count: bool,
                  purity_tol: float, depth, impurity, features, chunk: int) -> Tree:
    """:func:`grow_levels` as a ``lax.scan`` over the levels d < D, each a ``lax.map`` over the
    2^(D-1) / C chunks of C = ``chunk`` consecutive node slots of a fixed-width level buffer; the
    max(1, 2^d / C) chunks that hold level d's nodes are grown (a narrower level is one chunk whose
    other slots hold empty nodes, w = 0), the others skipped by a ``lax.cond``. A chunk's children
    fill the next buffer at twice its offset. A node's split depends on its own statistics and on its
    row of the level's random draws only (a chunk computes its rows' words: ``rows`` of :func:`decide`),
    so the tree is the unrolled loop's.
    """
    D, n = rule.max_depth, root.w1.shape[-1]
    C = min(chunk, 2 ** (D - 1))
    K, wide = 2 ** (D - 1) // C, 2 ** (D - 1)  # chunks per level, slots of the parent buffer

    def buffer(a):
        return jnp.zeros((wide,) + a.shape[1:], a.dtype).at[: a.shape[0]].set(a)

    last = D if depth is None else depth  # nodes at this depth are leaves
    stop = D if depth is None else jnp.minimum(depth + 1, D)  # levels with nodes that may split

    def grow_chunk(d, c, part):
        node_state, stats, used = part
        w = stats.w.astype(jnp.float32)
        wy = stats.wy.astype(jnp.float32)
        mean = impurity_lib.ratio(wy, w)
        label = stats.label
        feature, best = decide(stats, used, rule, jax.random.fold_in(key, d), min_count=min_count,
                               purity_tol=purity_tol, impurity=impurity, features=features,
                               rows=(c * C, jnp.left_shift(1, d)))
        feature, best = jnp.where(d < last, feature, -1), jnp.where(d < last, best, 0.0)
        split = feature >= 0
        child_state, child_stats = children(node_state, stats, feature, split, (d + 1 < D) & (d + 1 < last))
        chosen = (feature[:, None] == jnp.arange(n)) & split[:, None]
        return (feature, label, w, mean, best), (child_state, child_stats, interleave(used | chosen, used | chosen))

    def level(current, d):
        chunks = jnp.maximum(1, jnp.left_shift(1, d) // C)
        parts = jax.tree.map(lambda a: a.reshape((K, C) + a.shape[1:]), current)

        def one(args):
            c, part = args
            return jax.lax.cond((c < chunks) & (d < stop), grow_chunk, empty, d, c, part)

        if K == 1:
            out, following = jax.tree.map(lambda a: a[None], one((0, jax.tree.map(lambda a: a[0], parts))))
        else:
            out, following = jax.lax.map(one, (jnp.arange(K), parts))
        out = jax.tree.map(lambda a: a.reshape((wide,) + a.shape[2:]), out)
        following = jax.tree.map(lambda a: a.reshape((2 * wide,) + a.shape[2:]), following)
        leaf = (following[1].w, following[1].wy, following[1].label)
        following = jax.tree.map(lambda a: a[:wide], following)
        return following, (out, leaf)

    def empty(d, c, part):
        shapes = jax.eval_shape(grow_chunk, d, c, part)
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        return (jnp.full(shapes[0][0].shape, -1, jnp.int32),) + zeros[0][1:], zeros[1]

    current = (jax.tree.map(buffer, state), jax.tree.map(buffer, root), jnp.zeros((wide, n), bool))
    _, (out, leaf) = jax.lax.scan(level, current, jnp.arange(D, dtype=jnp.int32))
    # The leaf level D: the children of level D - 1 (empty when an earlier depth stopped the growth).
    w_leaf, wy_leaf, label_leaf = (a[-1] for a in leaf)
    w, wy = w_leaf.astype(jnp.float32), wy_leaf.astype(jnp.float32)
    leaves = (jnp.full(2 * wide, -1, jnp.int32), label_leaf, w,
              impurity_lib.ratio(wy, w), jnp.zeros(2 * wide, jnp.float32))
    return Tree(*(jnp.concatenate([a[d, : 2**d] for d in range(D)] + [b]) for a, b in zip(out, leaves)))


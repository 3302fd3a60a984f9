"""Greedy top-down trees from a sample (ID3 / C4.5 / CART on binary features): :func:`grow` and
the :class:`GreedyTree` learner.

The node statistics are counted on bitsets (AND + popcount, the left child by sibling subtraction) or, for weighted
data, by one float32 matrix product per level (:func:`counting` says how); the shared level loop of
:mod:`~jaxtrees.learners.growth` does the rest.

>>> import jax
>>> from jaxtrees.core import distributions, sampling
>>> from jaxtrees import targets
>>> from jaxtrees.hypotheses import tree
>>> key = jax.random.key(0)
>>> p = distributions.smoothed(c=0.2).marginals(key, 16)
>>> f = targets.random_junta(key, n=16, k=3)
>>> s = sampling.draw(key, p, f, m=2000)
>>> t = jax.jit(grow)(s, GrowthRule(max_depth=3, impurity="gini"))
>>> bool(jax.numpy.all(tree.features_used(t, 16) == f.support_mask(16)))
True
>>> t2 = jax.jit(GreedyTree(GrowthRule(max_depth=3, impurity="gini")).fit)(key, s)     # the learner
>>> bool(jax.numpy.all(t2.feature == t.feature))
True
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxtrees.core import bits, checks, prng
from jaxtrees.core import impurity as impurity_lib
from jaxtrees.core.sampling import Data
from jaxtrees.hypotheses.tree import Tree, interleave
from jaxtrees.learners.base import check_data
from jaxtrees.learners.growth import (GrowthRule, LevelStats, Sides, check_heap_depth, check_key, grow_levels,
                                      loop_chunk, resolve_weights)


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class GreedyTree:
    """The learner: :func:`grow` with a fixed :class:`GrowthRule` (ID3 with entropy, CART with
    Gini, Kearns-Mansour, ...). ``fit(key, data) -> Tree``; the key is read only by
    random tie-breaks and feature bagging (``rule.random``)."""

    rule: GrowthRule
    access = "sample"

    def fit(self, key, data: Data, *, features=None) -> Tree:
        """The tree on ``data``; ``features``: :func:`grow`'s (the data's features, the rest padding)."""
        check_data(data)
        return grow(data, self.rule, key, features=features)

    def reweighted(self, data: Data):
        """``fit(key, weight) -> Tree`` on ``data`` under many weightings (:func:`~jaxtrees.learners.base.reweighted`)."""
        return reweighted_growth(data, self.rule)


def reweighted_growth(data: Data, rule: GrowthRule):
    """``fit(key, weight) -> Tree``: :func:`grow` on ``data`` with ``weight: float32[32 W]``, the
    unpacked features (:func:`dense`) computed once for every call."""
    check_data(data)
    check_heap_depth(rule)
    shared = dense(data)
    chunk = loop_chunk(rule)
    return lambda key, weight: _grow(data._replace(weight=weight), rule, check_key(rule, key), dense=shared,
                                     chunk=chunk)


def grow(data: Data, rule: GrowthRule, key=None, *, depth=None, impurity=None, features=None) -> Tree:
    """Grow a tree on one packed data set (weighted if ``data.weight`` is set). ``key`` is needed
    only for random tie-breaks and feature bagging (``rule.random``).

    Values that may be traced (one compiled program for all of them): ``depth`` (0 <= depth <=
    rule.max_depth; nodes at that depth are leaves, and where it is the same for a vmapped group
    the levels below it are not counted) and ``impurity`` (a built-in's name, its index in
    :data:`jaxtrees.core.impurity.NAMES` or a :class:`~jaxtrees.core.impurity.Selected`, replacing
    ``rule.impurity``), ``features`` (1 <= features <= n: the data's features are the first that many
    rows of ``data.X``, the others padding, never chosen; ``rule.max_features`` counts the data's, and
    with a threefry key (partitionable, JAX's default) and the lowest tie-break the tree is the one grown
    without the padding; random tie-breaks draw over the padded width). The
    tree's arrays keep ``rule.max_depth``'s shape.

    Float weights spanning more than 2^12 are counted exactly unless ``rule.exact_weights`` says otherwise
    (:func:`~jaxtrees.learners.growth.resolve_weights`; traced ones by differences, with a warning).

    ``data`` is checked (:func:`~jaxtrees.learners.base.check_data`): its shapes always, also when traced (y,
    valid and weights against X's words: a ValueError naming both shapes), its values where concrete. Traced
    bad values cannot raise (issue 64 item 8): data with no valid example of positive weight (m = 0, the poison
    of :func:`~jaxtrees.core.sampling.draw` and :func:`~jaxtrees.core.sampling.with_weights` for a bad p,
    noise, k or weight) or with a negative or non-finite weight on a valid example gives a tree whose
    ``weight``, ``mean`` and ``gain`` are all NaN (:func:`poisoned`), so ``sample_error`` and ``exact_error`` of it
    are NaN on any data, never a plausible tree; valid data gives bitwise the tree it always did.

    Batch with ``jax.vmap(grow, in_axes=(0, None, 0))`` (the rule is static). Compiled on first
    call for each rule and data shape (``jax.jit``), so an eager call costs one compile, not one per op.
    """
    if not isinstance(rule, GrowthRule):
        raise ValueError(f"rule must be a jaxtrees.GrowthRule, e.g. GrowthRule(max_depth=4), got {type(rule).__name__}")
    if not isinstance(data, Data):
        raise ValueError(f"data must be a packed jaxtrees Data (jt.from_arrays(X, y), jt.draw(...)), got "
                         f"{type(data).__name__}")
    check_data(data)
    check_heap_depth(rule)
    rule = resolve_weights(rule, data.weight)
    if depth is not None:
        if checks.is_concrete(depth):
            checks.integer("depth", int(depth), low=0, high=rule.max_depth)
        depth = jnp.asarray(depth, jnp.int32)
    if impurity is not None:
        impurity = impurity_lib.selected(impurity)  # a name is checked there
    if features is not None:
        features = check_features(features, data.X.shape[-2])
    return _grow(data, rule, check_key(rule, key), depth, impurity, chunk=loop_chunk(rule), features=features)


def check_features(features, n: int):
    """``features`` (the data's feature count, the other rows of ``X`` padding) as an int32 scalar: an integer
    scalar, in [1, n] where it is concrete (a traced count must be in range: the rows past it are never chosen)."""
    try:
        integer = jnp.ndim(features) == 0 and jnp.issubdtype(jnp.result_type(features), jnp.integer)
    except TypeError:
        integer = False
    if not integer:
        raise ValueError(f"features must be an integer scalar in [1, {n}], got {features!r}")
    if checks.is_concrete(features):
        checks.integer("features", int(features), low=1, high=n)
    return jnp.asarray(features, jnp.int32)


@functools.partial(jax.jit, static_argnames=("rule", "chunk"))
def _grow(data: Data, rule: GrowthRule, key, depth=None, impurity=None, dense=None, chunk=None,
          features=None) -> Tree:
    if rule.random and not prng.fusible(key):  # a chunk computes its words of a level's draw: threefry only
        chunk = None
    X = data.X
    mask, count, totals, unit = counting(data, dense, exact=rule.exact_weights)
    root = node_stats(count, totals, mask[None])

    def children(masks, stats, feature, split, with_features):
        right = jnp.where(split[:, None], masks & X[jnp.maximum(feature, 0)], jnp.uint32(0))
        left = jnp.where(split[:, None], masks & ~right, jnp.uint32(0))
        if stats.sides is not None:  # weighted: every node's own sums, no differences (Sides)
            return interleave(left, right), node_stats(count, totals, interleave(left, right), with_features)
        if data.weight is None or with_features is False:  # the left child: the parent minus the right one
            w_r, wy_r = _take(stats.w1, feature, split), _take(stats.w1y, feature, split)
            w = interleave(jnp.where(split, stats.w - w_r, 0), w_r)
            wy = interleave(jnp.where(split, stats.wy - wy_r, 0), wy_r)
            n = None
            if stats.n is not None:
                n_r = _take(stats.n1, feature, split)
                n = interleave(jnp.where(split, stats.n - n_r, 0), n_r)
        else:  # float sums of nodes that will be split: each node's own, so that a pure node has wy = 0 or
            # wy = w exactly (a difference of two sums of the same weights is off by rounding: it looked impure)
            w, wy, n, _ = totals(interleave(left, right))
        if with_features is False:
            return None, LevelStats(w, wy, None, None, n, None)
        if with_features is True:
            right_counts = count(right)
        else:  # traced (a depth bound): skipped where a vmapped group shares it
            zeros = lambda r: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(count, r))  # noqa: E731
            right_counts = jax.lax.cond(with_features, count, zeros, right)
        keep = split[:, None]
        parent = (stats.w1, stats.w1y, stats.n1)
        w1, w1y, n1 = (None if r is None else interleave(jnp.where(keep, s - r, 0), r)
                       for s, r in zip(parent, right_counts[:3]))
        return interleave(left, right), LevelStats(w, wy, w1, w1y, n, n1)

    tree = grow_levels(root, mask[None], children, rule, key, min_count=True, purity_tol=0.0, depth=depth,
                       impurity=impurity, features=features, chunk=chunk)
    tree = tree if unit is None else tree._replace(weight=tree.weight * unit)
    return nan_where(poisoned(data, mask), tree)


def poisoned(data: Data, mask):
    """A bool scalar: ``data`` holds no example that counts (``mask``, :func:`counting`'s, is empty: m = 0 or no
    positive weight) or a valid example's weight is negative or not finite; what eager calls refuse."""
    bad = ~jnp.any(mask != 0)
    if data.weight is not None:
        w = data.weight
        ok = (w >= 0) if jnp.issubdtype(w.dtype, jnp.integer) else jnp.isfinite(w) & (w >= 0)
        bad |= jnp.any(bits.unpack(data.valid, w.shape[-1]) & ~ok)
    return bad


def nan_where(bad, tree: Tree) -> Tree:
    """``tree`` with its float fields (weight, mean, gain) all NaN where ``bad``; a select, so bitwise unchanged
    elsewhere."""
    nan = lambda a: jnp.where(bad, jnp.nan, a)  # noqa: E731
    return tree._replace(weight=nan(tree.weight), mean=nan(tree.mean), gain=nan(tree.gain))


def node_stats(count, totals, masks, with_features=True) -> LevelStats:
    """:class:`LevelStats` of the nodes with example bitsets ``masks`` from :func:`counting`'s functions, each
    node counted on its own (per-feature statistics only ``with_features``: a bool, or traced)."""
    w, wy, n, wn = totals(masks)
    if with_features is False:
        return LevelStats(w, wy, None, None, n, None, None if wn is None else Sides(wn))
    if with_features is True:
        w1, w1y, n1, parts = count(masks)
    else:  # traced (a depth bound): skipped where a vmapped group shares it
        zeros = lambda r: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(count, r))  # noqa: E731
        w1, w1y, n1, parts = jax.lax.cond(with_features, count, zeros, masks)
    return LevelStats(w, wy, w1, w1y, n, n1, None if wn is None else Sides(wn, *parts))


class Dense(NamedTuple):
    """A data set's bits as float32 0 / 1, for weighted counting: ``X: [n, 32 W]``, ``y: [32 W]``."""

    X: jax.Array
    y: jax.Array


def dense(data: Data) -> Dense:
    """:class:`Dense` of ``data``: computed once outside a loop that refits one data set under new
    weights (XLA does not hoist the 32x larger unpacked features out of a loop by itself)."""
    slots = data.X.shape[-1] * bits.WORD_BITS
    return Dense(bits.unpack_float(data.X, slots), bits.unpack_float(data.y, slots))


def counting(data: Data, shared: Dense | None = None, *, exact: bool = False):
    """``(mask, count, totals, unit)`` for one data set (``shared``: its :func:`dense` bits, if computed already):
    the bitset of the examples that count (valid, and
    of positive weight when weighted) and, for nodes given by their example bitsets ``masks:
    uint32[L, W]``, ``count(masks) -> (w1, w1y, n1, parts)`` (``[L, n]``: the weight with x_i = 1, and
    labelled 1; n1 the example counts, None when unweighted; ``parts``: float weights' (w1n, w0y, w0n) of
    :class:`~jaxtrees.learners.growth.Sides`, else None) and ``totals(masks) -> (w, wy, n, wn)`` (``[L]``; the
    same for the nodes themselves; wn the weight labelled 0 for float weights, else None), as
    :class:`LevelStats` wants them; ``unit``: what the node weights are multiplied by to be in the data's
    units (None: they are).

    Counting (DESIGN.md): node bitsets ``M: uint32[L, W]`` are ANDed with every feature and with the
    labels, ``w1[l, i] = popcount(M[l] & X[i])``, ``w1y[l, i] = popcount(M[l] & y & X[i])``. Only the
    right child (x_f = 1) of each split is counted; the left child's statistics are the parent's minus
    the right child's (sibling subtraction), so a depth-D tree costs 2^(D-1) node counts, each of
    2 n W word operations.

    Weighted data (``data.weight``: AdaBoost's weights, bagging's bootstrap counts) cannot be
    popcounted. Its statistics are sums over the unpacked node masks, one matrix product per level,

        [w1 | w1y][l, i] = sum_t M[l, t] u_t (1 | y_t) X[i, t],   i.e.  [M * u; M * u * y] @ X^T,

    in float32 at full matmul precision (exact for integer counts below 2^24; :func:`weighted_counts`); a
    weighted node that may split gets its own sums (``totals``), not its parent's minus its sibling's, whose
    rounding makes a pure node look impure.

    Float weights (issue 58) are first scaled by the power of two that puts the largest in [1/2, 1) (exact, so a
    tree never depends on a uniform scale of the weights, and sums of 1e38s do not overflow). With ``exact``
    (``GrowthRule.exact_weights``) every node is counted on its own, by label and on both sides of every
    feature, [M u (1 - y); M u y] @ [X; 1 - X]^T (:class:`~jaxtrees.learners.growth.Sides`): no statistic is a difference of sums, so an example of weight 1
    beside one of 1e9 still counts (relative float32 precision), at 4x the products of the counts by
    difference (docs/benchmarks.md, "Weights at any scale"). Integer weights (bagging's counts) sum exactly
    and keep the differences. The node masks stay bitsets, and the stop rules
    ``min_samples_split`` / ``min_samples_leaf`` count the examples of positive weight (popcounts), as
    scikit-learn counts samples. scripts/bench_weighted.py compares this with a bit-sliced popcount
    formulation and with scikit-learn's ``sample_weight``.
    """
    X, y, valid = data.X, data.y, data.valid
    if data.weight is None:
        # Counts are at most the 32 W slots: int16 when that fits halves the traffic of the [L, n] counts.
        dtype = jnp.int16 if X.shape[-1] * bits.WORD_BITS < 2**15 else jnp.int32

        ones_y = jnp.where(jnp.arange(2)[:, None] == 0, bits.ALL_ONES, y[None, :])  # [2, W]: all ones, then y
        # The words up to the last valid one: a prefix of a sample (sampling.prefix) counts only its own words.
        words = jnp.max(jnp.where(valid != 0, jnp.arange(1, valid.shape[-1] + 1, dtype=jnp.int32), 0))

        def count(masks):
            # [masks; masks & y] by a select, not a concatenate: XLA:CPU fuses this operand into the
            # counting reduction, where a concatenate is a branch in the word loop that LLVM
            # vectorizes only at -O3 (docs/benchmarks.md, "LLVM optimization level").
            both = (ones_y[:, None, :] & masks[None]).reshape(2 * masks.shape[0], -1)  # [2L, W]
            c = bits.count_and(both[:, None, :], X[None, :, :], words).astype(dtype)  # [2L, n]
            return c[: masks.shape[0]], c[masks.shape[0]:], None

        def counted(masks):
            w1, w1y, n1 = count(masks)
            return w1, w1y, n1, None

        return valid, counted, lambda masks: (bits.count(masks), bits.count(masks & y), None, None), None

    slots = data.weight.shape[-1]
    integer = jnp.issubdtype(data.weight.dtype, jnp.integer)
    u, unit = (data.weight.astype(jnp.float32), None) if integer else rescaled(data.weight)
    integer = integer or not exact  # by differences: exact for integers, fast for floats
    mask = valid & bits.pack(u > 0)
    Xf, yf = dense(data) if shared is None else shared  # [n, S], [S]
    n = X.shape[-2]

    def weighted(masks):
        return bits.unpack(masks, slots).astype(jnp.float32) * u  # [L, S]

    def count(masks):
        mu = weighted(masks)
        n1 = bits.count_and(masks[:, None, :], X[None, :, :])  # examples, for the stop rules
        if integer:
            c = weighted_counts(Xf, jnp.concatenate([mu, mu * yf]))  # [2L, n]
            return c[: masks.shape[0]], c[masks.shape[0]:], n1, None
        c = weighted_counts(jnp.concatenate([Xf, 1.0 - Xf]), jnp.concatenate([mu * (1.0 - yf), mu * yf]))
        L = masks.shape[0]
        w1n, w1y, w0n, w0y = c[:L, :n], c[L:, :n], c[:L, n:], c[L:, n:]
        return w1n + w1y, w1y, n1, (w1n, w0y, w0n)

    def totals(masks):
        mu = weighted(masks & mask)
        wy = jnp.sum(mu * yf, axis=-1)
        if integer:
            return jnp.sum(mu, axis=-1), wy, bits.count(masks & mask), None
        wn = jnp.sum(mu * (1.0 - yf), axis=-1)
        return wn + wy, wy, bits.count(masks & mask), wn

    return mask, count, totals, unit


def rescaled(weight):
    """``(u, unit)``: float weights times the power of two 2^-e that puts the largest in [1/2, 1), and 2^e
    (exact: the same splits for any uniform scale; 0 weights stay 0); unit is NaN where a weight is NaN
    (:func:`~jaxtrees.core.sampling.with_weights`' flag for traced bad weights), so the tree's weights are."""
    w = weight.astype(jnp.float32)
    _, e = jnp.frexp(jnp.max(w))
    unit = jnp.where(jnp.any(jnp.isnan(w)), jnp.nan, jnp.ldexp(jnp.float32(1.0), e))  # NaN weights: a NaN tree
    return jnp.ldexp(w, -e), unit


def weighted_counts(Xf, U):
    """``float32[R, n]``: ``U @ Xf.T`` for ``Xf: [n, S]``, ``U: [R, S]``, in the forms XLA:CPU runs fast
    (docs/benchmarks.md, "Weighted counting"): one matrix-vector product per row of U when R <= 2 (one
    node), else ``Xf @ U.T`` with the transpose kept out of the product (a barrier: folded in, vmapped
    products of this shape run 5-14x slower)."""
    highest = jax.lax.Precision.HIGHEST
    if U.shape[0] <= 2:
        return jnp.stack([jnp.matmul(Xf, row, precision=highest) for row in U])
    return jax.lax.optimization_barrier(jnp.matmul(Xf, U.T, precision=highest)).T


def _take(a, feature, split):
    return jnp.where(split, jnp.take_along_axis(a, jnp.maximum(feature, 0)[:, None], axis=-1)[:, 0], 0)

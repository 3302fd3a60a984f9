"""The split decision of one level of nodes: each node's best admissible feature, or a leaf.

:class:`LevelStats` holds a level's statistics per node (w, wy, w1[i], w1y[i]: :mod:`jaxtrees.learners.growth`) and,
for weighted data, their direct sums (:class:`Sides`); :func:`decide` scores the admissible features' gains, breaks
ties (lowest or random) and applies the stop rules. With ``max_features`` a node chooses among a random subset of its
features (:mod:`jaxtrees.learners.feature_subsets`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxtrees.core import impurity as impurity_lib
from jaxtrees.core import prng
from jaxtrees.learners.feature_subsets import random_subset, subset_size
from jaxtrees.learners.growth_rule import GrowthRule


class Sides(NamedTuple):
    """Weighted data's direct sums (issue 58): the label-0 weight and the x_i = 0 side of every node, summed
    over their own examples, not taken as differences (w - wy, w - w1) that cancel where a few heavy examples
    hold nearly all of a node's weight. Present, the split decisions read them (:func:`_choose`)."""

    wn: jax.Array  # [L]: the weight labelled 0
    w1n: jax.Array | None = None  # [L, n]: x_i = 1, labelled 0
    w0y: jax.Array | None = None  # [L, n]: x_i = 0, labelled 1
    w0n: jax.Array | None = None  # [L, n]: x_i = 0, labelled 0


class LevelStats(NamedTuple):
    """Statistics of the L nodes of one level (see :mod:`jaxtrees.learners.growth`).

    ``n, n1`` are the example counts that ``min_samples_split`` / ``min_samples_leaf`` read
    when they differ from the weights (weighted data); None means "the weights are the counts".
    ``sides`` (weighted data): :class:`Sides`, the same weights by label and side summed directly.
    """

    w: jax.Array  # [L]
    wy: jax.Array  # [L]
    w1: jax.Array  # [L, n]
    w1y: jax.Array  # [L, n]
    n: jax.Array | None = None  # [L]
    n1: jax.Array | None = None  # [L, n]
    sides: Sides | None = None

    @property
    def label(self):
        """``int32[L]``: 1 iff strictly more than half of the node's weight is labelled 1."""
        if self.sides is not None:
            return (self.wy > self.sides.wn).astype(jnp.int32)
        return (2 * self.wy > self.w).astype(jnp.int32)

    @property
    def counts(self):
        """``(n, n1)``: example counts of the nodes and of their x_i = 1 children."""
        return (self.w, self.w1) if self.n is None else (self.n, self.n1)


def decide(stats: LevelStats, used, rule: GrowthRule, key, *, min_count: bool, purity_tol: float, impurity=None,
           features=None, rows=None):
    """Split decision of every node of a level: ``(feature, gain)``, feature -1 (gain 0) for a leaf.

    A node splits on its best admissible feature (:func:`_choose`) unless it is empty, pure
    (mean label within ``purity_tol`` of 0 or 1), its best gain is below ``rule.min_gain`` or,
    with ``min_count``, it has fewer than ``rule.min_samples_split`` examples. ``used: bool[L, n]``
    marks the features already tested on each node's path; ``impurity`` replaces ``rule.impurity``.
    ``rows = (offset, L)`` (traced) says that the nodes are rows offset, offset + 1, ... of a level of
    L nodes: the random draws are then those rows of the level's (a threefry key is needed).
    ``features`` (an int32, may be traced; 1 <= features <= n): the first ``features`` of the n features
    are the data's, the others padding that is never chosen, and ``rule.max_features`` counts only the
    data's. With a threefry key and the ``"lowest"`` tie-break, a node's split is then the one it has on
    the data without the padding (the same random words: :func:`~jaxtrees.learners.feature_subsets.random_subset`).
    """
    w = stats.w.astype(jnp.float32)
    wy = stats.wy.astype(jnp.float32)
    feature, best = _choose(stats, used, rule, key, min_count, rule.impurity if impurity is None else impurity, rows,
                            features)
    if stats.sides is None:
        pure = (wy <= purity_tol * w) | (wy >= (1.0 - purity_tol) * w)
    else:  # the label-0 weight summed, not w - wy (which a heavy example labelled 1 rounds to 0)
        pure = (wy <= purity_tol * w) | (stats.sides.wn.astype(jnp.float32) <= purity_tol * w)
    split = (w > 0) & ~pure & (feature >= 0)
    split &= best >= rule.min_gain - rule.tie_tol * max(1.0, abs(rule.min_gain))
    if min_count:
        split &= stats.counts[0] >= rule.min_samples_split
    return jnp.where(split, feature, -1), jnp.where(split, best, 0.0)


def _choose(stats: LevelStats, used, rule: GrowthRule, key, min_count: bool, G, rows=None, features=None):
    """Best admissible feature per node (-1 if none) and its gain.

    With ``rule.max_features`` = k < n the candidates are each node's random subset
    (:func:`~jaxtrees.learners.feature_subsets.random_subset`, k slots in increasing feature order) and only
    their statistics are gathered and scored; otherwise every feature is a candidate. ``features``: see
    :func:`decide`.
    """
    w = stats.w.astype(jnp.float32)[:, None]
    wy = stats.wy.astype(jnp.float32)[:, None]
    w1 = stats.w1.astype(jnp.float32)
    w0 = w - w1 if stats.sides is None else (stats.sides.w0y + stats.sides.w0n).astype(jnp.float32)
    admissible = ~used & (w1 > 0) & (w0 > 0)
    if min_count:
        n, n1 = stats.counts
        admissible &= (n1 >= rule.min_samples_leaf) & ((n[:, None] - n1) >= rule.min_samples_leaf)
    subset = rule.features_per_node(w1.shape[-1])
    size = None
    if features is not None:
        admissible &= jnp.arange(w1.shape[-1]) < features
        if subset is not None:  # k of the data's features: at most k_max = subset of the padded n
            size = subset_size(rule, features)
    columns = (stats.w1, stats.w1y) if stats.sides is None else (stats.w1, stats.w1y) + tuple(stats.sides[1:])
    columns = [a.astype(jnp.float32) for a in columns]
    candidate = None
    if subset is not None:
        candidate, admissible = random_subset(jax.random.fold_in(key, 1), admissible, subset, rows, size)
        columns = [jnp.take_along_axis(a, candidate, axis=-1) for a in columns]
    g, scale = _gains(G, w, wy, columns, None if stats.sides is None else stats.sides.wn.astype(jnp.float32)[:, None])
    g = jnp.where(admissible, g, -jnp.inf)
    best = jnp.max(g, axis=-1)
    tied = admissible & (g >= best[:, None] - rule.tie_tol * scale)
    if rule.tie_break == "random":
        if rows is None:
            priority = jax.random.uniform(key, g.shape)
        else:  # rows offset + r of a [L, g.shape[1]] draw
            offset, _ = rows
            index = (offset + jnp.arange(g.shape[0]))[:, None] * g.shape[1] + jnp.arange(g.shape[1])
            priority = prng.uniform_at(key, index.astype(jnp.uint32))
        pick = jnp.argmax(jnp.where(tied, priority, -1.0), axis=-1)
    else:
        pick = jnp.argmax(tied, axis=-1)  # the lowest feature: candidates are in increasing order
    feature = pick if candidate is None else jnp.take_along_axis(candidate, pick[:, None], axis=-1)[:, 0]
    feature = jnp.where(jnp.any(admissible, axis=-1), feature, -1).astype(jnp.int32)
    return feature, jnp.where(feature >= 0, best, 0.0)


def _gains(G, w, wy, columns, wn=None):
    """``(gain [L, k], scale [L, 1])``: the gains of the candidate splits and G(mu), the node's impurity (float32
    gain errors scale with it). ``columns``: (w1, w1y) per candidate, and with ``wn`` (weighted data's
    :class:`Sides`) also (w1n, w0y, w0n). With sides every mean is the minority label's, q = min(wy, wn) / w,
    each child's from its own sums: no quantity is a difference of sums, so a node whose weight a few
    examples dominate keeps its light examples' gains (relative precision; :func:`impurity.gain`'s
    ``relative``), where mu = wy / w would round them away."""
    ratio = impurity_lib.ratio
    if wn is None:
        w1, w1y = columns
        w0, w0y = w - w1, wy - w1y
        g = impurity_lib.gain(G, ratio(wy, w), ratio(w1, w), ratio(w1y, w1), ratio(w0y, w0), ratio(w0, w))
        return g, G(jnp.clip(ratio(wy, w), 0.0, 1.0))
    w1, w1y, w1n, w0y, w0n = columns
    flip = wy > wn  # the minority label is 0: count it
    a, a1, a0 = jnp.where(flip, wn, wy), jnp.where(flip, w1n, w1y), jnp.where(flip, w0n, w0y)
    w0 = w0y + w0n
    q = ratio(a, w)
    g = impurity_lib.gain(G, q, ratio(w1, w), ratio(a1, w1), ratio(a0, w0), ratio(w0, w), relative=True)
    return g, G(jnp.clip(q, 0.0, 1.0))


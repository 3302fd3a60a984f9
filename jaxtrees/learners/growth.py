"""Level-wise top-down impurity-based growth: the rule and the loop shared by every tree learner.

All nodes of a level are split at once, each on its admissible feature of largest purity gain, from four statistics
per node: w (its weight), wy (the weight of its examples labelled 1), w1[i] (the weight with x_i = 1) and w1y[i] (with
x_i = 1 and label 1). They come from a sample (:mod:`jaxtrees.learners.greedy`: AND + popcount on bitsets, or weighted
sums) or, exactly, from the distribution (:mod:`jaxtrees.learners.population`); everything after them (gains,
tie-breaking, stop rules, tree arrays) is here and shared.

>>> rule = GrowthRule(max_depth=3, impurity="gini")
>>> rule.impurity.name, rule.tie_break
('gini', 'lowest')
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import warnings
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits, checks, prng
from jaxtrees.core import impurity as impurity_lib
from jaxtrees.hypotheses.tree import Tree, interleave

TIE_BREAKS = ("lowest", "random")
#: The named rules for :attr:`GrowthRule.max_features`.
MAX_FEATURES = ("sqrt", "log2")
#: Deepest tree that :func:`grow` and :func:`~jaxtrees.learners.population.grow_exact` store: the heap then
#: has 2^25 - 1 slots per tree. Deeper rules are for :func:`~jaxtrees.learners.population.follow_path`.
MAX_DEPTH = 24
#: Deepest rule at all (a path of this many queries).
MAX_PATH_DEPTH = 2**20
#: Nodes per step of the level loop (:func:`level_loop`).
LOOP_CHUNK = 4
#: Shallower rules stay unrolled in a level loop: their few levels compile about as fast as the loop.
LOOP_MIN_DEPTH = 6
#: :func:`_nth_set_bit` steps through up to this many words of a feature bitset (256 features), then searches.
UNROLL_WORDS = 8
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


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class GrowthRule:
    """How a tree is grown; hashable and static under ``jax.jit`` / ``jax.vmap``.

    Attributes:
      max_depth: D >= 0; nodes at depth D are leaves. Stored trees need D <= MAX_DEPTH (24);
        path mode (:func:`~jaxtrees.learners.population.follow_path`) allows up to MAX_PATH_DEPTH.
      impurity: ``"entropy"``, ``"gini"``, ``"kearns_mansour"``, an :class:`Impurity` or a
        concave callable G (see :mod:`jaxtrees.core.impurity`).
      tie_break: among features whose gain g is tied with the node's best gain b, i.e.
        g >= b - tie_tol G(mu) (mu the node's mean label), ``"lowest"`` takes the lowest index,
        ``"random"`` a uniformly random one (needs a key).
      min_samples_split: a node with fewer examples is not split (>= 2).
      min_samples_leaf: a split is admissible only if both children get at least this many
        examples (>= 1, so a feature constant on the node is never chosen).
      min_gain: a node splits only if its best gain is >= min_gain - tie_tol max(1, |min_gain|),
        so with the default 0 any impure node with an admissible feature splits, as in ID3. The
        gain is the node's own (scikit-learn's min_impurity_decrease weighs it by the node's share).
      max_features: feature bagging per node (random forests): each node chooses among a random
        subset of this many of its admissible features (all of them if fewer), drawn afresh per node
        from the growth key; an int >= 1, ``"sqrt"`` (max(1, floor(sqrt n))), ``"log2"``
        (max(1, floor(log2 n))) or None (every feature). As scikit-learn's ``max_features``,
        features constant on the node do not count toward the subset.
      tie_tol: tolerance for tied gains, relative to the node's impurity G(mu). Gains are
        float32 differences of impurities of size G(mu), so gains equal in exact arithmetic can
        differ by ~1e-7 G(mu); the default 1e-6 ties them. Gains are computed so that a split
        that changes nothing has gain exactly 0 and a feature and its complement have bitwise
        equal gains, so those ties hold even with ``tie_tol=0``. In exact (population) growth,
        where there is no sampling noise, real gains below 1e-6 G(mu) are tied too: set
        ``tie_tol=0`` to resolve them.
      exact_weights: float-weighted data is counted by label and on both sides of every split, each node on
        its own (:class:`Sides`, issue 58): no statistic is a difference of sums, so an example of weight 1
        beside one of 1e9 still counts, at about 3-8x the time of weighted growth by differences (which
        rounds such light examples away: ratios of weights beyond ~2^12 are unsafe there). None (the
        default) decides per call of :func:`~jaxtrees.learners.greedy.grow` (:func:`resolve_weights`):
        exact where concrete float weights span more than EXACT_WEIGHT_RANGE = 2^12, by differences
        otherwise, and, for traced float weights (whose range is unknown when tracing), by differences
        with a :class:`WeightCountingWarning` naming ``exact_weights``. True or False: always, no warning.

    Features are never reused on a path (ID3), and a pure node is a leaf.
    """

    max_depth: int
    impurity: impurity_lib.Impurity | str | Callable = "entropy"
    tie_break: str = "lowest"
    min_samples_split: int = 2
    min_samples_leaf: int = 1
    min_gain: float = 0.0
    tie_tol: float = 1e-6
    max_features: int | str | None = None
    exact_weights: bool | None = None

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        set_("max_depth", checks.integer("max_depth", self.max_depth, low=0, high=MAX_PATH_DEPTH))
        set_("impurity", impurity_lib.get(self.impurity))
        checks.choice("tie_break", self.tie_break, TIE_BREAKS)
        set_("min_samples_split", checks.integer("min_samples_split", self.min_samples_split, low=2))
        set_("min_samples_leaf", checks.integer("min_samples_leaf", self.min_samples_leaf, low=1))
        set_("min_gain", checks.real("min_gain", self.min_gain))
        set_("tie_tol", checks.real("tie_tol", self.tie_tol, low=0.0))
        if isinstance(self.max_features, str):
            checks.choice("max_features", self.max_features, MAX_FEATURES)
        elif self.max_features is not None:
            set_("max_features", checks.integer("max_features", self.max_features, low=1))
        if self.exact_weights is not None and not isinstance(self.exact_weights, (bool, np.bool_)):
            raise ValueError(f"exact_weights must be True, False or None (decided from the weights), got "
                             f"{self.exact_weights!r}")
        set_("exact_weights", None if self.exact_weights is None else bool(self.exact_weights))

    @property
    def random(self) -> bool:
        """Whether growth reads its key (random tie-breaks or feature bagging)."""
        return self.tie_break == "random" or self.max_features is not None

    def features_per_node(self, n: int) -> int | None:
        """How many of a node's n features it may choose among: k < n, or None for all of them."""
        if self.max_features is None:
            return None
        rule = {"sqrt": lambda: int(math.isqrt(n)), "log2": lambda: int(math.log2(n))}.get(self.max_features)
        k = max(1, rule() if rule else self.max_features)
        return k if k < n else None


#: With ``GrowthRule.exact_weights=None``, float weights spanning more than this ratio are counted exactly: float32
#: sums by differences round away light examples beside heavy ones (issue 58).
EXACT_WEIGHT_RANGE = 2.0**12


class WeightCountingWarning(UserWarning):
    """Growth counts traced float weights by differences, which cannot resolve ratios beyond EXACT_WEIGHT_RANGE."""


def resolve_weights(rule: GrowthRule, weight) -> GrowthRule:
    """``rule`` with ``exact_weights`` decided for ``weight`` (a data set's weights, or None) where it is None:
    True for concrete float weights whose positive ones span more than EXACT_WEIGHT_RANGE, else False; traced
    float weights get False and a :class:`WeightCountingWarning` (their range is unknown while tracing)."""
    if rule.exact_weights is not None:
        return rule
    if weight is None or jnp.issubdtype(jnp.result_type(weight), jnp.integer):  # integer counts sum exactly
        return dataclasses.replace(rule, exact_weights=False)
    if not checks.is_concrete(weight):
        warnings.warn("grow got traced float weights (inside jax.jit or jax.vmap), whose range cannot be read while "
                      "tracing: they are counted by differences of float32 sums, which round away examples lighter "
                      "than ~2^-12 of the heaviest in a node; pass GrowthRule(exact_weights=True) to count them "
                      "exactly (3-8x the time), or exact_weights=False to keep this and silence the warning",
                      WeightCountingWarning, stacklevel=3)
        return dataclasses.replace(rule, exact_weights=False)
    w = np.asarray(weight)
    positive = w[w > 0]
    wide = bool(positive.size) and float(positive.max()) > EXACT_WEIGHT_RANGE * float(positive.min())
    return dataclasses.replace(rule, exact_weights=wide)


class Sides(NamedTuple):
    """Weighted data's direct sums (issue 58): the label-0 weight and the x_i = 0 side of every node, summed
    over their own examples, not taken as differences (w - wy, w - w1) that cancel where a few heavy examples
    hold nearly all of a node's weight. Present, the split decisions read them (:func:`_choose`)."""

    wn: jax.Array  # [L]: the weight labelled 0
    w1n: jax.Array | None = None  # [L, n]: x_i = 1, labelled 0
    w0y: jax.Array | None = None  # [L, n]: x_i = 0, labelled 1
    w0n: jax.Array | None = None  # [L, n]: x_i = 0, labelled 0


class LevelStats(NamedTuple):
    """Statistics of the L nodes of one level (see the module docstring).

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
    the data without the padding (the same random words: :func:`_random_subset`).
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
    (:func:`_random_subset`, k slots in increasing feature order) and only their statistics are
    gathered and scored; otherwise every feature is a candidate. ``features``: see :func:`decide`.
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
            size = _subset_size(rule, features)
    columns = (stats.w1, stats.w1y) if stats.sides is None else (stats.w1, stats.w1y) + tuple(stats.sides[1:])
    columns = [a.astype(jnp.float32) for a in columns]
    candidate = None
    if subset is not None:
        candidate, admissible = _random_subset(jax.random.fold_in(key, 1), admissible, subset, rows, size)
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


def _subset_size(rule: GrowthRule, features):
    """``int32``: :meth:`GrowthRule.features_per_node` of a traced feature count (all of them where it
    gives None): floor(sqrt n) or floor(log2 n) by integer arithmetic, at least 1."""
    n = jnp.asarray(features, jnp.int32)
    if rule.max_features == "sqrt":
        k = jnp.floor(jnp.sqrt(n.astype(jnp.float32))).astype(jnp.int32)
        k = jnp.where(k * k > n, k - 1, jnp.where((k + 1) * (k + 1) <= n, k + 1, k))  # float rounding, either way
    elif rule.max_features == "log2":
        k = 31 - jax.lax.clz(n)
    else:
        k = jnp.int32(rule.max_features)
    return jnp.minimum(jnp.maximum(k, 1), n)


def _random_subset(key, admissible, k: int, rows=None, size=None):
    """``(feature: int32[L, k], drawn: bool[L, k])``: per row of ``admissible: bool[L, n]``, k of its
    a admissible features uniformly at random, all a if a <= k, in increasing order (``drawn``
    marks the first min(a, k) slots; the others hold feature 0).

    A uniform k-subset of the ranks {0, ..., a-1} by Floyd's algorithm, from k random words per
    row: for j = a-k, ..., a-1 draw u uniform on {0, ..., j} (:func:`_below`) and add u, or j if u
    is in already. The subset is kept as a bitset over ranks; its t-th rank and the admissible
    feature of that rank are read off packed rows (:func:`_nth_set_bit`). Only packing
    ``admissible`` touches all n features. ``rows = (offset, L)``: the rows are rows offset, ... of
    a level of L (the words are those rows' of the level's draw). ``size`` (traced, 1 <= size <= k): draw
    that many, in k slots (the first ``size`` slots and their words are those of a draw of ``size``).
    """
    present = bits.pack(admissible)  # [L, W]
    a = bits.count(present)
    if rows is None:
        words = prng.bits(key, (k, present.shape[0]))
    else:  # columns offset + r of a [k, L] draw
        offset, width = rows
        index = jnp.arange(k)[:, None] * width + offset + jnp.arange(present.shape[0])
        words = prng.words_at(key, index.astype(jnp.uint32))
    slots, k = k, (k if size is None else size)
    slot = jnp.arange(present.shape[-1], dtype=jnp.uint32)
    bit = lambda r: jnp.where(slot == (r[:, None] >> 5), jnp.uint32(1) << (r[:, None] & 31), 0)  # noqa: E731

    def add(taken, step):
        t, word = step
        j = (a - k + t).astype(jnp.uint32)
        u = _below(word, j + 1)
        has_u = jnp.any(taken & bit(u) != 0, axis=-1)
        grown = taken | bit(jnp.where(has_u, j, u))
        return (grown if size is None else jnp.where(t < k, grown, taken)), None

    taken, _ = jax.lax.scan(add, jnp.zeros_like(present), (jnp.arange(slots), words))
    taken = jnp.where((a <= k)[:, None], bits.prefix_mask(present.shape[-1], a[:, None]), taken)
    drawn = jnp.arange(slots) < (a[:, None] if size is None else jnp.minimum(a, k)[:, None])
    rank = _nth_set_bit(taken, jnp.broadcast_to(jnp.arange(slots), drawn.shape))
    return jnp.where(drawn, _nth_set_bit(present, rank), 0), drawn


def _below(word, bound):
    """floor(word bound / 2^32) for uint32 arrays: uniform words give each of 0, ..., bound-1 with
    probability within bound / 2^32 of 1 / bound. The high word of the 64-bit product, from
    16-bit halves: it vectorizes, where a remainder (word mod bound) does not on CPU."""
    half = jnp.uint32(0xFFFF)
    (w1, w0), (b1, b0) = ((x >> 16, x & half) for x in (word, bound))
    cross, cross_ = w1 * b0, w0 * b1
    middle = ((w0 * b0) >> 16) + (cross & half) + (cross_ & half)
    return w1 * b1 + (cross >> 16) + (cross_ >> 16) + (middle >> 16)


def _nth_set_bit(words, r):
    """``int32[L, k]``: index of the r-th (from 0) set bit of each row of ``words: uint32[L, W]``,
    for ``r: int32[L, k]`` below the row's popcount (else meaningless). The word holding the bit is the
    first whose running popcount exceeds r (a binary search per row: the program's size does not grow with
    W, where a loop over the words unrolled W steps, issue 58); r drops by the popcount of the words
    before it. Within the word, halving: the low half of the remaining bits is skipped (r drops by its
    popcount) if it holds <= r set bits."""
    popcount = lambda x: jax.lax.population_count(x).astype(jnp.int32)  # noqa: E731
    if words.shape[-1] <= UNROLL_WORDS:  # a few words: a step per word, as fast as ever
        found = jnp.zeros(r.shape, bool)
        word = jnp.zeros(r.shape, jnp.uint32)
        position = jnp.zeros(r.shape, jnp.int32)
        for i in range(words.shape[-1]):
            here = ~found & (r < popcount(words[:, i, None]))
            word = jnp.where(here, words[:, i, None], word)
            position = jnp.where(here, i * bits.WORD_BITS, position)
            r = jnp.where(found | here, r, r - popcount(words[:, i, None]))
            found |= here
    else:
        counts = popcount(words)  # [L, W]
        running = jnp.cumsum(counts, axis=-1)
        index = jax.vmap(lambda c, q: jnp.searchsorted(c, q, side="right"))(running, r).astype(jnp.int32)
        index = jnp.minimum(index, words.shape[-1] - 1)
        word = jnp.take_along_axis(words, index, axis=-1)
        r = r - (jnp.take_along_axis(running, index, axis=-1) - jnp.take_along_axis(counts, index, axis=-1))
        position = index * bits.WORD_BITS
    for width in (16, 8, 4, 2, 1):
        low = popcount(word & jnp.uint32((1 << width) - 1))
        skip = r >= low
        r = jnp.where(skip, r - low, r)
        word = jnp.where(skip, word >> width, word)
        position = position + jnp.where(skip, width, 0)
    return position


def check_heap_depth(rule: GrowthRule):
    """Stored (heap-layout) trees need max_depth <= MAX_DEPTH."""
    if rule.max_depth > MAX_DEPTH:
        raise ValueError(f"max_depth must be in [0, {MAX_DEPTH}] to grow a stored tree (2^(D+1) - 1 heap "
                         f"slots), got {rule.max_depth}; follow single paths with population.follow_path instead")


def check_key(rule: GrowthRule, key):
    """The key for random tie-breaks and feature bagging; a fixed dummy when the rule uses neither."""
    if key is None:
        if rule.random:
            raise ValueError('key is required when tie_break="random" or max_features is set')
        return jax.random.key(0)
    return checks.key("key", key)

"""The rule of level-wise growth: :class:`GrowthRule` (how a tree is grown) and the checks of a rule's use.

A rule is hashable and static under ``jax.jit``; every tree learner reads one. :func:`resolve_weights` decides, per
data set, how a rule counts float weights (issue 58); :func:`check_heap_depth` and :func:`check_key` check a rule
against a stored tree's depth and a key.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import checks
from jaxtrees.core import impurity as impurity_lib

TIE_BREAKS = ("lowest", "random")
#: The named rules for :attr:`GrowthRule.max_features`.
MAX_FEATURES = ("sqrt", "log2")
#: Deepest tree that :func:`~jaxtrees.learners.greedy.grow` and :func:`~jaxtrees.learners.population.grow_exact`
#: store: the heap then has 2^25 - 1 slots per tree. Deeper rules are for
#: :func:`~jaxtrees.learners.population.follow_path`.
MAX_DEPTH = 24
#: Deepest rule at all (a path of this many queries).
MAX_PATH_DEPTH = 2**20


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
        its own (:class:`~jaxtrees.learners.splits.Sides`, issue 58): no statistic is a difference of sums, so an
        example of weight 1 beside one of 1e9 still counts, at about 3-8x the time of weighted growth by
        differences (which rounds such light examples away: ratios of weights beyond ~2^12 are unsafe there). None (the
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

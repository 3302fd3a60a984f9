"""Bagging and random forests (seed 001: bagging, feature bagging, random forests; Breiman 2001).

Member t of T fits ``base`` to a bootstrap resample (:func:`bootstrap`), built as a packed data set so that unweighted
growth counts it by AND + popcount. Features are bagged per node (the growth rule's ``max_features``: the random
forest) or per member (``features_per_member``: the random-subspace method). The members vote by averaging
(:class:`~jaxtrees.hypotheses.ensemble.Forest`) or by majority (:class:`~jaxtrees.hypotheses.ensemble.Ensemble`),
with an out-of-bag error (:class:`OutOfBag`); they are ``jax.vmap``-ed, so T trees grow as one batch.

>>> import jax
>>> from jaxtrees import targets
>>> from jaxtrees.core import distributions, sampling
>>> key = jax.random.key(0)
>>> p, f = distributions.uniform().marginals(key, 16), targets.random_junta(key, n=16, k=3)
>>> data = sampling.draw(key, p, f, m=500, noise=0.1)
>>> forest = jax.jit(random_forest(members=50, max_depth=6).fit)(key, data)
>>> forest.members.feature.shape, round(float(forest.oob.error), 1)   # 50 trees of 127 slots; noise 0.1
((50, 127), 0.2)
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxtrees.core import bits, checks, prng
from jaxtrees.core.sampling import Data
from jaxtrees.hypotheses.ensemble import Ensemble, Forest
from jaxtrees.learners.base import check_data
from jaxtrees.learners.greedy import GreedyTree, check_features
from jaxtrees.learners.growth import GrowthRule

#: How :class:`Bagging` combines its members.
VOTES = ("average", "majority")


class OutOfBag(NamedTuple):
    """The out-of-bag estimate: each example labelled by the vote of the members whose bootstrap
    sample left it out; ``error`` over the ``counted`` examples left out at least once (NaN if none)."""

    error: jax.Array  # float32
    counted: jax.Array  # int32


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Bagging:
    """``fit(key, data) -> Forest | Ensemble``: ``members`` fits of ``base`` (a learner of weighted
    samples; trees for ``vote="average"``, which averages ``probability``) on bootstrap samples.

    Feature bagging comes two ways:

    - per node, the growth rule's ``max_features`` (:class:`~jaxtrees.learners.growth.GrowthRule`):
      each node chooses among a random subset of its features, the random forest's rule;
    - per member, ``features_per_member``: member t sees only a random subset of that many features
      (the others are zeroed, so constant, so never chosen): the random-subspace method.

    The votes: ``"average"`` returns a :class:`~jaxtrees.hypotheses.ensemble.Forest` (the mean of the
    members' leaf probabilities, scikit-learn's rule), ``"majority"`` an
    :class:`~jaxtrees.hypotheses.ensemble.Ensemble` of unit weights. Either carries
    :class:`OutOfBag`: every example is scored by the vote of the members whose bootstrap left it
    out.
    """

    base: object
    members: int = 100
    vote: str = "average"
    features_per_member: int | None = None
    access = "sample"

    def __post_init__(self):
        checks.integer("members", self.members, low=1)
        checks.choice("vote", self.vote, VOTES)
        if self.features_per_member is not None:
            checks.integer("features_per_member", self.features_per_member, low=1)
        if getattr(self.base, "access", None) != "sample":
            raise ValueError(f"base must be a learner that fits samples (access 'sample'), got {self.base!r}")

    def fit(self, key, data: Data, *, features=None):
        """The ensemble on ``data``. ``features`` (may be traced): only the first that many rows of ``data.X``
        are the data's features, the others padding (never chosen; ``max_features`` and ``features_per_member``
        count the data's), and the slots past the valid ones may be padding too: with the default key (threefry)
        and the lowest tie-break the members are those fitted without the padding (one program serves data sets
        of several shapes). A traced ``features`` below ``features_per_member`` keeps every data feature."""
        check_data(data)
        n = data.X.shape[-2]
        if features is not None:
            features = check_features(features, n)
            if checks.is_concrete(features):
                n = int(features)
            if not _takes_features(self.base):
                raise ValueError(f"features needs a base learner whose fit takes features= (GreedyTree), got "
                                 f"{self.base!r}")
        if self.features_per_member is not None and self.features_per_member > n:
            raise ValueError(f"features_per_member must be in [1, n] = [1, {n}], got {self.features_per_member}")
        return _fit(key, data, self, features)


def random_forest(members: int = 100, max_depth: int = 10, max_features="sqrt", impurity="gini") -> Bagging:
    """Breiman's random forest: ``members`` CART trees (``impurity``, depth <= ``max_depth``) on
    bootstrap samples, ``max_features`` per node, averaged votes; scikit-learn's
    ``RandomForestClassifier(n_estimators=members, max_depth=max_depth, max_features=max_features)``."""
    rule = GrowthRule(max_depth=max_depth, impurity=impurity, max_features=max_features)
    return Bagging(GreedyTree(rule), members=members)


def bootstrap(key, data: Data):
    """``(sample, counts)``: m draws with replacement from the m examples of ``data``, as a packed
    data set whose first m slots are the draws (weights carried along), and ``counts: int32[32 W]``,
    how often each slot of ``data`` was drawn.

    m draws with replacement from the m examples are the data set with example i repeated c_i times,
    (c_1, ..., c_m) ~ Multinomial(m, 1/m). The resample is built as a packed data set of m rows (a
    gather of bit columns), so unweighted growth counts it by AND + popcount, and a tree grown on it
    equals one grown with the integer weights c_i (tests/test_weighted_growth.py).
    """
    slots = data.valid.shape[-1] * bits.WORD_BITS
    valid = bits.unpack(data.valid, slots)
    m = jnp.sum(valid.astype(jnp.int32))
    where = jnp.searchsorted(jnp.cumsum(valid.astype(jnp.int32)), jnp.arange(1, slots + 1))  # the j-th example's slot
    drawn = jnp.arange(slots) < m
    source = jnp.where(drawn, where[jax.random.randint(key, (slots,), 0, m)], slots)  # slot `slots`: no draw
    column = jnp.minimum(source, slots - 1)
    # Each example's features and label as the bits of a row of words (one word for n < 32), a row gathered
    # per draw, and the draws' bits packed back along their 32 slots per word: not a gather per bit
    # (docs/benchmarks.md, "Exact scoring of node trees, FINDMIN's counts and the bootstrap").
    table = jnp.concatenate([data.X, data.y[None]])  # [n + 1, W]
    rows = bits.pack(bits.unpack(table, slots).T)[column]  # [slots, ceil((n + 1) / 32)]
    rows = bits.unpack(jnp.where(drawn[:, None], rows, 0), table.shape[0])  # [slots, n + 1]
    rows = rows.astype(jnp.uint32).reshape(-1, bits.WORD_BITS, table.shape[0])
    packed = jnp.sum(rows << jnp.arange(bits.WORD_BITS, dtype=jnp.uint32)[:, None], axis=1, dtype=jnp.uint32).T
    weight = None if data.weight is None else jnp.where(drawn, data.weight[column], 0)
    sample = Data(packed[:-1], packed[-1], bits.pack(drawn), weight)
    counts = jnp.zeros(slots + 1, jnp.int32).at[source].add(1)[:slots]  # a scatter-add, not a sort and two searches
    return sample, counts


def _takes_features(learner) -> bool:
    return "features" in inspect.signature(learner.fit).parameters


@functools.partial(jax.jit, static_argnames="bagger")
def _fit(key, data: Data, bagger: Bagging, features=None):
    n = data.X.shape[-2]

    def member(key):
        draw_key, feature_key, fit_key = prng.split(key, 3)
        sample, counts = bootstrap(draw_key, data)
        if bagger.features_per_member is not None:
            priority = jax.random.uniform(feature_key, (n,))
            if features is not None:  # the padding never drawn (the data's words are the first n: the same draw)
                priority = jnp.where(jnp.arange(n) < features, priority, -1.0)
            seen = priority >= jax.lax.top_k(priority, bagger.features_per_member)[0][-1]
            sample = sample._replace(X=jnp.where(seen[:, None], sample.X, jnp.uint32(0)))
        return bagger.base.fit(fit_key, sample, **({} if features is None else {"features": features})), counts

    members, counts = jax.vmap(member)(prng.split(key, bagger.members))
    slots = data.valid.shape[-1] * bits.WORD_BITS
    x = bits.unpack(data.X, slots).T
    if bagger.vote == "average":
        votes = jax.vmap(lambda h: h.probability(x))(members) - 0.5  # [T, slots]
    else:
        votes = jax.vmap(lambda h: h.predict(x))(members) - 0.5
    out = counts == 0
    total = jnp.sum(jnp.where(out, votes, 0.0), axis=0)  # positive iff the out-of-bag vote says 1
    counted = bits.unpack(data.valid, slots) & jnp.any(out, axis=0)
    wrong = counted & ((total > 0) != bits.unpack(data.y, slots))
    n_counted = jnp.sum(counted.astype(jnp.int32))
    oob = OutOfBag(jnp.sum(wrong) / jnp.where(n_counted > 0, n_counted, jnp.nan), n_counted)
    if bagger.vote == "average":
        return Forest(members, oob)
    return Ensemble(members, jnp.ones(bagger.members, jnp.float32), oob)

"""Votes of hypotheses: weighted votes of labels (:class:`Ensemble`), H(x) = 1 iff
sum_t a_t (2 h_t(x) - 1) > 0, and averaged probabilities (:class:`Forest`).

An :class:`Ensemble` is what boosting (a_t = AdaBoost's alpha_t) and bagging by majority (a_t = 1) return. ``members`` is one
hypothesis pytree with a leading axis of T members (e.g. T stumps as one
:class:`~jaxtrees.hypotheses.tree.Tree` of arrays [T, nodes]), ``weights: float32[T]``; a member of
weight 0 does not vote. A tied vote gives 0 (below: x = (1, 0, 0) after two votes). ``rounds``
optionally carries what the learner recorded per member (:class:`~jaxtrees.learners.boosting.Rounds`
for AdaBoost).

>>> import jax.numpy as jnp
>>> from jaxtrees.hypotheses.tree import stump
>>> members = jax.tree.map(lambda *a: jnp.stack(a), stump(0), stump(1), stump(2))
>>> H = Ensemble(members, jnp.array([1.0, 1.0, 1.0]))      # the majority of x_0, x_1, x_2
>>> H.predict(jnp.array([[1, 1, 0], [1, 0, 0]])).tolist()
[1, 0]
>>> H.staged_errors(sampling.from_arrays([[1, 1, 0], [1, 0, 0]], [1, 0])).tolist()  # after 1, 2, 3 votes
[0.5, 0.0, 0.0]
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxtrees.core import bits, impurity, sampling


class Ensemble(NamedTuple):
    """H = 1[sum_t weights[t] (2 members[t](x) - 1) > 0]; scored on test data (``exact = False``)."""

    members: Any  # a hypothesis pytree with a leading axis of T members
    weights: jax.Array  # float32[T]
    rounds: Any = None  # what the learner recorded per member, or None

    exact = False

    def votes(self, x):
        """``float32[..., T]``: each member's signed vote a_t (2 h_t(x) - 1) on plain inputs."""
        labels = jax.vmap(lambda h: h.predict(x), out_axes=-1)(self.members)
        return self.weights * (2.0 * labels - 1.0)

    def predict(self, x):
        return (jnp.sum(self.votes(x), axis=-1) > 0).astype(jnp.int32)

    def predict_bits(self, X):
        return bits.pack(self._sweep(X, lambda margin: None)[0] > 0)

    def staged_errors(self, data: sampling.Data):
        """``float32[T]``: the error on ``data`` of the vote of the first t members, t = 1 .. T."""
        errors = _errors(data)
        return self._sweep(data.X, lambda margin: errors(margin > 0))[1]

    def _sweep(self, X, stat):
        """``(margin, stats)``: the vote sum_t a_t (2 h_t - 1) on the slots of packed inputs ``X`` and
        ``stat`` of its running value after each member (a ``lax.scan``: no [T, 32 W] array)."""
        slots = X.shape[-1] * bits.WORD_BITS

        def step(margin, member):
            h, a = member
            margin = margin + a * (2.0 * bits.unpack(h.predict_bits(X), slots).astype(jnp.float32) - 1.0)
            return margin, stat(margin)

        return jax.lax.scan(step, jnp.zeros(slots, jnp.float32), (self.members, self.weights))


class Forest(NamedTuple):
    """H(x) = 1[(1/T) sum_t q_t(x) > 1/2], q_t(x) the mean training label of the leaf of member t
    that x reaches (``member.probability``): the averaged vote of a random forest, as
    scikit-learn's ``predict_proba`` averages (a tie at 1/2 gives 0). Scored on test data
    (``exact = False``); ``oob`` is what bagging recorded (:class:`~jaxtrees.learners.bagging.OutOfBag`).
    """

    members: Any  # trees with a leading axis of T members
    oob: Any = None

    exact = False

    def probabilities(self, x):
        """``float32[..., T]``: every member's q_t(x) on plain inputs."""
        return jax.vmap(lambda h: h.probability(x), out_axes=-1)(self.members)

    def probability(self, x):
        return jnp.mean(self.probabilities(x), axis=-1)

    def predict(self, x):
        return (self.probability(x) > 0.5).astype(jnp.int32)

    def predict_bits(self, X):
        return bits.pack(self.predict(_plain(X)))

    def staged_errors(self, data: sampling.Data):
        """``float32[T]``: the error on ``data`` of the averaged vote of the first t members."""
        q = self.probabilities(_plain(data.X))  # [32 W, T]: the members' votes at once (a scan over them is slower)
        running = jnp.cumsum(q, axis=-1) / jnp.arange(1, q.shape[-1] + 1)
        return jax.vmap(_errors(data))(running.T > 0.5)


def _plain(X):
    """``bool[32 W, n]``: packed inputs ``uint32[n, W]`` as one plain input per bit slot."""
    return bits.unpack(X, X.shape[-1] * bits.WORD_BITS).T


def _errors(data: sampling.Data):
    """``errors(predicted: bool[32 W]) -> float32``: the (weighted) error of the predictions on ``data``."""
    slots = data.X.shape[-1] * bits.WORD_BITS
    y = bits.unpack(data.y, slots)
    valid = bits.unpack(data.valid, slots).astype(jnp.float32)
    weight = valid if data.weight is None else valid * data.weight
    total = jnp.sum(weight)
    return lambda predicted: impurity.quotient(jnp.sum(jnp.where(predicted != y, weight, 0.0)), total)

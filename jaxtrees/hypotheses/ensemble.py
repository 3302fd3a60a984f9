"""Weighted votes of hypotheses: H(x) = 1 iff sum_t a_t (2 h_t(x) - 1) > 0.

What boosting (a_t = AdaBoost's alpha_t) and bagging (a_t = 1) return. ``members`` is one
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

from jaxtrees.core import bits, sampling


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
        return bits.pack(self._margins(X)[-1] > 0)

    def staged_errors(self, data: sampling.Data):
        """``float32[T]``: the error on ``data`` of the vote of the first t members, t = 1 .. T."""
        W = data.X.shape[-1]
        wrong = (self._margins(data.X) > 0) != bits.unpack(data.y, W * bits.WORD_BITS)[None]
        valid = bits.unpack(data.valid, W * bits.WORD_BITS).astype(jnp.float32)
        weight = valid if data.weight is None else valid * data.weight
        return wrong.astype(jnp.float32) @ weight / jnp.sum(weight)

    def _margins(self, X):
        """``float32[T, 32 W]``: the running vote sum_{s <= t} a_s (2 h_s - 1) on packed inputs."""
        W = X.shape[-1]
        labels = jax.vmap(lambda h: bits.unpack(h.predict_bits(X), W * bits.WORD_BITS))(self.members)
        return jnp.cumsum(self.weights[:, None] * (2.0 * labels - 1.0), axis=0)

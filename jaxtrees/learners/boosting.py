"""AdaBoost (seed 004, Algorithm 1; Freund and Schapire 1997) over any weighted weak learner.

The seed's weak learners: decision stumps (:class:`~jaxtrees.learners.stumps.Stump`, least weighted error;
``impurity="gini"`` as scikit-learn's), d-parities (the character chi_S with |S| <= d or its negation of largest
weighted correlation: :class:`~jaxtrees.learners.parities.Parities`, equal to ``LowDegree(degree=d, max_terms=1)``)
and CART-16 trees. The rounds are one ``lax.scan``, so ``jax.vmap(AdaBoost(...).fit)`` boosts many splits or data sets
at once; the output is the weighted vote (:class:`~jaxtrees.hypotheses.ensemble.Ensemble`) with a record per round
(:class:`Rounds`). The update and its edge cases (perfect rounds, tiny errors) are stated at :class:`AdaBoost`.

>>> import jax, jax.numpy as jnp
>>> from jaxtrees.core import sampling
>>> from jaxtrees.learners.stumps import Stump
>>> X = jnp.array([[0, 0], [0, 1], [1, 0], [1, 1]] * 4)
>>> data = sampling.from_arrays(X, (X[:, 0] | X[:, 1]).astype(int))      # x_0 OR x_1: no single stump
>>> H = jax.jit(AdaBoost(Stump(), rounds=3).fit)(jax.random.key(0), data)
>>> H.rounds.train_error.tolist()                                           # ... but three rounds do
[0.25, 0.25, 0.0]
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxtrees.core import bits, checks, prng
from jaxtrees.core.sampling import Data
from jaxtrees.hypotheses.ensemble import Ensemble
from jaxtrees.learners.base import check_data, reweighted

#: The smallest weighted error of a round with a wrong example (alpha_t <= 1/2 ln(1 / MIN_EPS) ~ 20.8).
MIN_EPS = 2.0**-60


class Rounds(NamedTuple):
    """AdaBoost's record, one entry per round t = 1 .. T (``float32[T]`` each)."""

    gamma: jax.Array  # the edge sum_i D_t(i) Y_i h_t(x_i) = 1 - 2 eps_t
    train_error: jax.Array  # the (weighted) training error of H after t rounds
    bound: jax.Array  # prod_{s <= t} 2 sqrt(eps_s (1 - eps_s)), an upper bound on train_error


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class AdaBoost:
    """``fit(key, data) -> Ensemble`` of ``rounds`` members of ``weak`` (a learner that takes
    weights, e.g. :class:`~jaxtrees.learners.stumps.Stump`), with :class:`Rounds` attached.

    With labels Y = 2y - 1 in {-1, +1} and D_1 uniform over the examples (or proportional to the
    data's weights), round t fits h_t = weak.fit(key_t, data weighted by D_t) and sets

        gamma_t = sum_i D_t(i) Y_i h_t(x_i) = 1 - 2 eps_t,    alpha_t = 1/2 ln((1 + gamma_t) / (1 - gamma_t)),
        D_{t+1}(i) = D_t(i) exp(-alpha_t Y_i h_t(x_i)) / Z_t.

    The output is H(x) = sign(sum_t alpha_t h_t(x)) (:class:`~jaxtrees.hypotheses.ensemble.Ensemble`),
    with per round (:class:`Rounds`) gamma_t, the training error of H after t rounds and the bound
    prod_{s <= t} 2 sqrt(eps_s (1 - eps_s)) <= exp(-2 sum_s (1/2 - eps_s)^2) on it (001). The rounds are one
    ``lax.scan``, so ``jax.vmap(AdaBoost(...).fit)`` boosts many splits or data sets at once.

    eps_t is summed over the examples h_t gets wrong (not taken as (1 - gamma_t) / 2, which rounds to 0
    in float32 once the wrong examples' weights fall below 2^-24). A round whose h_t labels every
    training example correctly ends boosting cleanly: instead of an infinite alpha_t it gets
    1 + sum_{s < t} |alpha_s| (so H = h_t on every training example), and every later round gets
    alpha = 0 (no inf, no NaN). A round that errs only on examples of tiny weight is an ordinary round
    (eps_t clipped below at ``MIN_EPS``): the perfect round's dominant vote would make H err wherever
    h_t does, above the bound (seen on cancer with CART-16: training error 0.008 against a bound of 0).
    A round with gamma_t < 0 gets alpha_t < 0 (the vote of the complement of h_t); gamma_t = 0 gives
    alpha_t = 0 and leaves D unchanged.
    """

    weak: object
    rounds: int = 100
    access = "sample"

    def __post_init__(self):
        checks.integer("rounds", self.rounds, low=1)
        if getattr(self.weak, "access", None) != "sample":
            raise ValueError(f"weak must be a learner that fits weighted samples (access 'sample'), got {self.weak!r}")

    def fit(self, key, data: Data) -> Ensemble:
        check_data(data)
        return _boost(key, data, self)


@functools.partial(jax.jit, static_argnames="booster")
def _boost(key, data: Data, booster: AdaBoost) -> Ensemble:
    slots = data.valid.shape[-1] * bits.WORD_BITS
    valid = bits.unpack(data.valid, slots).astype(jnp.float32)
    start = valid if data.weight is None else valid * data.weight
    start = start / jnp.sum(start)
    Y = 2.0 * bits.unpack(data.y, slots).astype(jnp.float32) - 1.0
    fit = reweighted(booster.weak, data)

    def round_(carry, key_t):
        D, margin, active, log_bound, total = carry
        h = fit(key_t, D)
        vote = 2.0 * bits.unpack(h.predict_bits(data.X), slots).astype(jnp.float32) - 1.0
        wrong = (Y * vote < 0) & (start > 0)
        eps = jnp.clip(jnp.sum(jnp.where(wrong, D, 0.0)), 0.0, 1.0)
        gamma = 1.0 - 2.0 * eps
        perfect = ~jnp.any(wrong)
        clipped = jnp.clip(eps, MIN_EPS, 1.0 - MIN_EPS)
        alpha = jnp.where(perfect, 1.0 + total, 0.5 * jnp.log((1.0 - clipped) / clipped))
        alpha = jnp.where(active, alpha, 0.0)
        D = D * jnp.exp(-alpha * Y * vote)
        D = D / jnp.sum(D)
        margin = margin + alpha * vote
        train_error = jnp.sum(start * (Y * margin <= 0))
        bound_eps = jnp.where(perfect, 0.0, clipped)
        log_bound = log_bound + jnp.where(active, jnp.log(2.0 * jnp.sqrt(bound_eps * (1.0 - bound_eps))), 0.0)
        active = active & ~perfect
        carry = (D, margin, active, log_bound, total + jnp.abs(alpha))
        return carry, (h, alpha, gamma, train_error, jnp.exp(log_bound))

    carry = (start, jnp.zeros_like(start), jnp.bool_(True), jnp.float32(0.0), jnp.float32(0.0))
    _, (members, alpha, gamma, train_error, bound) = lax.scan(round_, carry, prng.split(key, booster.rounds))
    return Ensemble(members, alpha, Rounds(gamma, train_error, bound))

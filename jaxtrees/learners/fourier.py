"""Fourier learners from random examples: the low-degree algorithm of Linial, Mansour and Nisan.

LMN (seed 001, "the LMN algorithm"): for every S with |S| <= d, estimate f^(S) = E[F phi_S]
(F = 1 - 2y) by its sample mean, keep the estimates with |f~(S)| >= ``threshold`` (the
``max_terms`` largest, if set), and predict h(x) = 1[sum_S f~(S) phi_S(x) < 0]
(:class:`~jaxtrees.hypotheses.polynomial.Polynomial`). If f has all but eps of its Fourier
weight on degree <= d, m = O(n^d log(n^d / delta) / eps) examples give error O(eps).

Counting (unweighted data, uniform basis): chi_S(x) = (-1)^(XOR_{i in S} x_i), so with the
packed rows of the sample, m f~(S) = m - 2 popcount(valid & (y XOR X_{i1} XOR ... XOR X_{id})):
each estimate is exact integer counting, n^d sets x W words of XOR + popcount. Weighted data
(AdaBoost's weights, bootstrap counts) and the p-biased basis (marginals estimated from the same
sample) take weighted sums over the unpacked examples, 32 at a time.

>>> import jax
>>> from jaxtrees import targets
>>> from jaxtrees.core import distributions, sampling
>>> key = jax.random.key(0)
>>> f = targets.parity([2, 5], n=8)                    # a uniform 2-parity: ID3 sees no gain
>>> data = sampling.draw(key, distributions.uniform().marginals(key, 8), f, m=256)
>>> h = jax.jit(LowDegree(degree=2, max_terms=4).fit)(key, data)
>>> h.sets[0].tolist(), round(float(h.values[0]), 3)   # the largest estimate: S = {2, 5}, f^(S) = 1
([2, 5], 1.0)
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax

from jaxtrees.core import bits, checks
from jaxtrees.core.sampling import Data
from jaxtrees.hypotheses.polynomial import Polynomial, characters, subsets
from jaxtrees.learners.base import check_data

#: Bases of :class:`LowDegree`: the uniform chi_S, or the p-biased phi_S for the sample's marginals.
BASES = ("uniform", "biased")


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class LowDegree:
    """The LMN learner: ``fit(key, data) -> Polynomial`` over the sets of size <= ``degree``.

    - ``degree``: d >= 1 (and <= n, checked at fit);
    - ``threshold``: keep |f~(S)| >= threshold, in [0, 1) (0 keeps every estimate);
    - ``max_terms``: keep only the T largest |f~(S)| (the hypothesis then has K = T rows, which
      makes predicting cheap); None keeps all sum_{j <= d} C(n, j);
    - ``basis``: ``"uniform"`` (chi_S) or ``"biased"`` (phi_S for the marginals p^_i of the
      sample, clipped into [1 / 2m, 1 - 1 / 2m]).

    The key is not read: the estimates are a deterministic function of the sample.
    """

    degree: int = 2
    threshold: float = 0.0
    max_terms: int | None = None
    basis: str = "uniform"
    access = "sample"

    def __post_init__(self):
        checks.integer("degree", self.degree, low=1)
        checks.real("threshold", self.threshold, low=0.0, high=1.0, high_open=True)
        if self.max_terms is not None:
            checks.integer("max_terms", self.max_terms, low=1)
        checks.choice("basis", self.basis, BASES)

    def fit(self, key, data: Data) -> Polynomial:
        del key
        check_data(data)
        n = data.X.shape[-2]
        if self.degree > n:
            raise ValueError(f"degree must be in [1, n] = [1, {n}] (sets of at most n features), got {self.degree}")
        sets = subsets(n, self.degree)
        if self.max_terms is not None and self.max_terms > len(sets):
            raise ValueError(f"max_terms must be in [1, {len(sets)}] (the sets of degree <= {self.degree} over "
                             f"n = {n}), got {self.max_terms}")
        return _fit(data, jnp.asarray(sets), self)


@functools.partial(jax.jit, static_argnames="learner")
def _fit(data: Data, sets, learner: LowDegree) -> Polynomial:
    if learner.basis == "uniform" and data.weight is None:
        p, values = None, _count_uniform(data, sets)
    else:
        p = estimated_marginals(data) if learner.basis == "biased" else None
        values = _weighted_means(data, sets, p)
    values = jnp.where(jnp.abs(values) >= learner.threshold, values, 0.0)
    if learner.max_terms is not None:
        _, top = lax.top_k(jnp.abs(values), learner.max_terms)
        sets, values = sets[top], values[top]
    return Polynomial(sets, values, p)


def _count_uniform(data: Data, sets):
    """f~(S) = 1 - 2 popcount(valid & (y ^ XOR_{i in S} X_i)) / m for every row of ``sets``."""
    X = jnp.concatenate([data.X, jnp.zeros_like(data.X[:1])])  # row n: the padding index, all zeros
    parity = bits.reduce_xor(X[sets], axis=-2)  # [K, W]
    disagree, m = bits.count((parity ^ data.y) & data.valid), bits.count(data.valid)
    return (m - 2 * disagree).astype(jnp.float32) / m.astype(jnp.float32)  # one rounding, as the weighted path


def _example_weights(data: Data):
    """``float32[W, 32]``: each bit slot's weight (1 for valid examples when unweighted, 0 elsewhere)."""
    W = data.valid.shape[-1]
    valid = bits.unpack(data.valid, W * bits.WORD_BITS).astype(jnp.float32)
    weight = valid if data.weight is None else valid * data.weight
    return weight.reshape(W, bits.WORD_BITS)


def estimated_marginals(data: Data):
    """p^_i: the (weighted) fraction of examples with x_i = 1, clipped into [1 / 2m, 1 - 1 / 2m]."""
    n, W = data.X.shape
    weight = _example_weights(data).reshape(-1)
    ones = bits.unpack(data.X, W * bits.WORD_BITS).astype(jnp.float32) @ weight
    eps = 0.5 / bits.count(data.valid).astype(jnp.float32)
    return jnp.clip(ones / jnp.sum(weight), eps, 1.0 - eps)


#: Words of examples whose characters are evaluated per step of the weighted estimate.
WORDS_PER_STEP = 8


def _weighted_means(data: Data, sets, p):
    """f~(S) = sum_t w_t F_t phi_S(x_t) / sum_t w_t, 32 * WORDS_PER_STEP examples per step."""
    weight = _example_weights(data)

    def word(args):  # one word's 32 examples -> their weighted sum of F phi_S, float32[K]
        column, y, w = args
        x = bits.unpack(column[:, None], bits.WORD_BITS).T  # [32, n]
        F = 1.0 - 2.0 * bits.unpack(y[None], bits.WORD_BITS).astype(jnp.float32)
        return (w * F) @ characters(sets, x, p)

    sums = lax.map(word, (data.X.T, data.y, weight), batch_size=WORDS_PER_STEP)
    return jnp.sum(sums, axis=0) / jnp.sum(weight)

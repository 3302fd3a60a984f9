"""The exact d-parity weak learner of seed 004: the character chi_S, |S| <= d, or its negation with
the largest weighted correlation, found as the largest entry of a Gram product (meet in the middle).

It equals ``LowDegree(degree=d, max_terms=1)`` (:mod:`~jaxtrees.learners.fourier`), which lists every set (1.1e7 of
them at d = 3 and n = 403, the OCR sets); here, as in the seed's Algorithm 2, S is split into halves and the largest
correlation over pairs of half-size characters is taken exactly, block by block (:class:`Parities` derives it).

>>> import jax
>>> from jaxtrees import targets
>>> from jaxtrees.core import distributions, sampling
>>> key = jax.random.key(0)
>>> f = targets.parity([1, 4, 6], n=10)                 # a uniform 3-parity, 0.05 label noise
>>> data = sampling.draw(key, distributions.uniform().marginals(key, 10), f, m=512, noise=0.05)
>>> h = jax.jit(Parities(degree=3).fit)(key, data)
>>> h.sets.tolist(), round(float(h.values[0]), 3)     # c_S = 1 - 2 (the sample's flipped fraction)
([[1, 4, 6]], 0.852)
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxtrees.core import bits, checks
from jaxtrees.core.sampling import Data
from jaxtrees.hypotheses.polynomial import MAX_SETS, Polynomial, n_subsets, subsets
from jaxtrees.learners.base import check_data
from jaxtrees.learners.fourier import example_weights

#: Sets of H_b per step of the search: one step's characters are a [1024, m] float32 tile (4 MiB at m = 1024).
SETS_PER_STEP = 1024


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Parities:
    """The d-parity learner: ``fit(key, data) -> Polynomial`` with one term, the S with |S| <= ``degree``
    of largest weighted |c_S| and its coefficient c_S (so h is chi_S or its negation).

    ``degree``: d >= 1 (and <= n, checked at fit, with sum_{j <= d - d // 2} C(n, j) <= ``MAX_SETS``).
    The key is not read: the search is a deterministic function of the sample.

    With F = 1 - 2y, weights w (1 unweighted) and v = w F / sum w over the examples, the weak learner
    picks the S with |S| <= d of largest |c_S|, c_S = sum_x v_x chi_S(x), chi_S(x) = prod_{i in S}
    (1 - 2 x_i), and predicts 1[c_S chi_S(x) < 0]: chi_S if c_S < 0, its negation if c_S > 0. That is
    ``LowDegree(degree=d, max_terms=1)`` (:mod:`~jaxtrees.learners.fourier`), which lists all
    sum_{j <= d} C(n, j) sets; at d = 3 and n = 403 (the OCR sets) they are 1.1e7.

    The seed's Algorithm 2 (Grigorescu, Reyzin and Vempala 2011) splits S in halves instead: with
    d = a + b, a = floor(d / 2), every S with |S| <= d is the symmetric difference S1 xor S2 of an S1
    in H_a (the sets of size <= a, the empty set included) and an S2 in H_b, and since
    chi_S1 chi_S2 = chi_{S1 xor S2},

        c_{S1 xor S2} = sum_x v_x chi_S1(x) chi_S2(x) = G[S1, S2],    G = C_a^T diag(v) C_b,

    with C_a, C_b the m x |H_a| and m x |H_b| matrices of +-1 characters. The algorithm looks for the
    closest pair, in Hamming distance over the sample, of a (d/2)-parity and a (d/2)-parity XOR the
    label, approximately (Andoni and Indyk 2006); this learner takes max |G| exactly: a ``lax.scan``
    over blocks of ``SETS_PER_STEP`` sets of H_b, each one float32 product of the block's characters
    (the only part of C_b held at a time) with all of diag(v) C_a. At d = 3 that is
    (n + 1) (1 + n + C(n, 2)) m multiply-adds, about 3 C(n, 3) m (each 3-set is met once per element
    as S1), as dense products rather than one gather per set.

    Ties: the first maximum of |G| with the pairs ordered by S2 (in the order of
    :func:`~jaxtrees.hypotheses.polynomial.subsets`), then by S1.
    """

    degree: int = 2
    access = "sample"

    def __post_init__(self):
        checks.integer("degree", self.degree, low=1)

    def fit(self, key, data: Data) -> Polynomial:
        del key
        check_data(data)
        n, d = data.X.shape[-2], self.degree
        if d > n:
            raise ValueError(f"degree must be in [1, n] = [1, {n}] (sets of at most n features), got {d}")
        count = n_subsets(n, d - d // 2)
        if count > MAX_SETS:
            raise ValueError(f"degree {d} over n = {n} coordinates pairs the {count} sets of size <= {d - d // 2}; "
                             f"at most {MAX_SETS} are supported (lower the degree or n)")
        return _fit(data, self)


def _subsets(n: int, size: int) -> np.ndarray:
    """``int32[K, size]``: :func:`subsets`, with size 0 giving the empty set alone."""
    return subsets(n, size) if size else np.full((1, 0), n, np.int32)


def _characters(factors, sets):
    """``float32[K, slots]``: chi_S over the examples for the rows of ``sets`` (padded with n) from
    ``factors: float32[n + 1, slots]``, the rows 1 - 2 x_i and a last row of ones."""
    return jnp.prod(factors[sets], axis=-2)


@functools.partial(jax.jit, static_argnames="learner")
def _fit(data: Data, learner: Parities) -> Polynomial:
    n, W = data.X.shape
    slots = W * bits.WORD_BITS
    a = learner.degree // 2
    halves, sets = _subsets(n, a), _subsets(n, learner.degree - a)
    block = min(SETS_PER_STEP, len(sets))
    steps = -(-len(sets) // block)
    padded = np.full((steps * block, sets.shape[1]), n, np.int32)  # padding rows: the empty set again
    padded[:len(sets)] = sets
    halves, padded = jnp.asarray(halves), jnp.asarray(padded)

    weight = example_weights(data).reshape(-1)
    F = 1.0 - 2.0 * bits.unpack(data.y, slots).astype(jnp.float32)
    factors = 1.0 - 2.0 * bits.unpack(data.X, slots).astype(jnp.float32)
    factors = jnp.concatenate([factors, jnp.ones((1, slots), jnp.float32)])
    left = _characters(factors, halves) * (weight * F / jnp.sum(weight))  # [|H_a|, slots]: v chi_S1

    def step(best, args):  # one block of S2 against every S1; keep the first largest |G|
        start, rows = args
        gram = jnp.matmul(_characters(factors, rows), left.T, precision=lax.Precision.HIGHEST)  # [block, |H_a|]
        k = jnp.argmax(jnp.abs(gram))
        value = gram.reshape(-1)[k]
        better = jnp.abs(value) > jnp.abs(best[0])
        found = (value, k % len(halves), start + k // len(halves))
        return tuple(jnp.where(better, new, old) for new, old in zip(found, best)), None

    starts = jnp.arange(steps, dtype=jnp.int32) * block
    init = (jnp.float32(0.0), jnp.int32(0), jnp.int32(0))  # the first pair (S1 = S2 = {}) if every c_S is 0
    (value, i, j), _ = lax.scan(step, init, (starts, padded.reshape(steps, block, -1)))
    members = [jnp.zeros(n + 1, bool).at[s[row]].set(True)[:n] for s, row in ((halves, i), (padded, j))]
    S = jnp.nonzero(members[0] ^ members[1], size=learner.degree, fill_value=n)[0].astype(jnp.int32)
    return Polynomial(S[None], value[None])

"""Sign-of-polynomial hypotheses h(x) = 1[P(x) < 0], and the sparse spectra they share a form with.

What the Fourier learners (LMN, sparse recovery, Kushilevitz-Mansour) return: P = sum_S c_S phi_S
over K sets S of at most d coordinates (``sets: int32[K, d]``, padded with the index n),
``values: float32[K]``, in the uniform basis chi_S or the p-biased phi_S
(:mod:`jaxtrees.fourier.transforms`). With F = 1 - 2f a coefficient is E[F phi_S], so h labels
x by the sign of the estimated F. :class:`Spectrum` holds the same sum with its sets packed as
bitsets; :meth:`Polynomial.spectrum` converts, so the summaries of :mod:`jaxtrees.fourier` apply.

>>> import jax.numpy as jnp
>>> sets = subsets(3, 2)                            # all S with |S| <= 2 of 3 coordinates
>>> sets.shape, sets[4].tolist(), sets[0].tolist()  # K = 1 + 3 + 3; row 0 is the empty set
((7, 2), [0, 1], [3, 3])
>>> h = Polynomial(jnp.asarray(sets), jnp.zeros(7).at[4].set(1.0))   # P = chi_{0,1}
>>> h.predict(jnp.array([[0, 0, 1], [1, 0, 0], [1, 1, 0]])).tolist()  # x_0 XOR x_1
[0, 1, 0]
"""

from __future__ import annotations

import functools
import itertools
from math import comb
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits, checks

#: Most sets one polynomial spans (the full degree-<= d character set must fit: 2^20 sets of
#: degree 2 is n = 1448; every example evaluates all of them).
MAX_SETS = 2**20


def n_subsets(n: int, degree: int) -> int:
    """K = sum_{j <= degree} C(n, j): how many sets of at most ``degree`` of n coordinates."""
    return sum(comb(n, j) for j in range(degree + 1))


def subsets(n: int, degree: int) -> np.ndarray:
    """``int32[K, degree]``: every S of at most ``degree`` of n coordinates, by size then
    lexicographically, each padded with the index n (so row 0 is the empty set)."""
    n = checks.integer("n", n, low=1)
    degree = checks.integer("degree", degree, low=1, high=n)
    count = n_subsets(n, degree)
    if count > MAX_SETS:
        raise ValueError(f"degree <= {degree} over n = {n} coordinates spans {count} sets; at most {MAX_SETS} "
                         f"are supported (lower the degree or n)")
    rows = np.full((count, degree), n, np.int32)
    row = 1  # row 0: the empty set (all padding)
    for size in range(1, degree + 1):
        block = np.array(list(itertools.combinations(range(n), size)), np.int32).reshape(-1, size)
        rows[row:row + len(block), :size] = block
        row += len(block)
    return rows


def characters(sets, x, p=None):
    """``float32[..., K]``: phi_S(x) for every row of ``sets: int32[K, d]`` and plain inputs
    ``x: {0,1}[..., n]`` (uniform chi_S when ``p`` is None, else p-biased)."""
    x = jnp.asarray(x).astype(jnp.float32)
    if p is None:
        factors = 1.0 - 2.0 * x
    else:
        p = jnp.asarray(p, jnp.float32)
        factors = (x - p) / jnp.sqrt(p * (1.0 - p))
    factors = jnp.concatenate([factors, jnp.ones(x.shape[:-1] + (1,), jnp.float32)], axis=-1)
    # Slot j of every set picked by a product with its one-hot columns (exact: one term of each sum
    # is nonzero), not a gather: XLA:CPU gathered [examples, K, d] elements one at a time (5x slower).
    out = None
    for j in range(sets.shape[-1]):
        onehot = (jnp.arange(factors.shape[-1])[:, None] == sets[..., j][..., None, :]).astype(jnp.float32)
        slot = jnp.matmul(factors, onehot, precision=jax.lax.Precision.HIGHEST)
        out = slot if out is None else out * slot
    return out


class Spectrum(NamedTuple):
    """K Fourier coefficients: the sets ``masks: uint32[K, W]`` (packed) and ``values: float32[K]``.

    The same kind of object as a :class:`Polynomial` with its sets packed as bitsets (bit i of
    word i // 32, W = ceil(n / 32)) rather than listed, which is what sums, merges and
    comparisons of sets need; :mod:`jaxtrees.fourier.spectra` builds spectra and summarizes them.
    """

    masks: jax.Array
    values: jax.Array


class Polynomial(NamedTuple):
    """h(x) = 1[sum_k values[k] phi_{sets[k]}(x) < 0]; a hypothesis scored on test data.

    A padding index n contributes the factor 1; the basis is the uniform
    chi_S(x) = prod_{i in S} (1 - 2 x_i) when ``p`` is None, else the p-biased
    phi_S(x) = prod_{i in S} (x_i - p_i) / sigma_i for marginals ``p: float32[n]``.
    """

    sets: jax.Array  # int32[K, d], padded with n
    values: jax.Array  # float32[K]
    p: jax.Array | None = None  # float32[n]: the p-biased basis' marginals; None: uniform

    #: No exact error (it would need the polynomial's sign on all of {0,1}^n); scored on test data.
    exact = False

    def evaluate(self, x):
        """P(x) ``float32[...]`` for plain inputs ``x: {0,1}[..., n]``."""
        return jnp.matmul(characters(self.sets, x, self.p), self.values, precision=jax.lax.Precision.HIGHEST)

    def predict(self, x):
        return predict(self, x)

    def predict_bits(self, X):
        return predict_bits(self, X)

    def spectrum(self, n: int) -> Spectrum:
        """P as a :class:`Spectrum` over n coordinates (one packed mask per row of ``sets``), so
        ``fourier.spectra.squared_distance(spectrum(f), h.spectrum(n))`` is E[(F - P)^2] exactly
        (an upper bound on Pr[h(x) != f(x)])."""
        onehot = jnp.arange(n + 1) == self.sets[..., None]  # [..., K, d, n + 1]; index n is padding
        return Spectrum(bits.pack(jnp.any(onehot, axis=-2)[..., :n]), self.values)


@jax.jit
def predict(h: Polynomial, x):
    """Labels ``int32[...]`` for plain inputs ``x: {0,1}[..., n]``: 1 where P(x) < 0."""
    return (h.evaluate(x) < 0).astype(jnp.int32)


#: Words of packed examples evaluated per step of :func:`predict_bits` (256 examples x K sets).
WORDS_PER_STEP = 8


@functools.partial(jax.jit, static_argnames="batch_size")
def predict_bits(h: Polynomial, X, batch_size: int = WORDS_PER_STEP):
    """Packed labels ``uint32[W]`` for packed inputs ``X: uint32[n, W]``, a few words at a time
    (``lax.map``), so memory is ``batch_size * 32 * K`` floats whatever W is."""
    def word(column):  # uint32[n] -> the 32 examples of one word, labelled and packed
        x = bits.unpack(column[:, None], bits.WORD_BITS).T  # bool[32, n]
        return bits.pack(predict(h, x) == 1)[0]

    return jax.lax.map(word, X.T, batch_size=batch_size)

"""The junta and parity targets: :class:`Junta` (a truth table on a support), :class:`Parity`, :class:`MaskParity`.

Each evaluates f(x) on examples, on packed bits (``f.bits``) and by its exact means on a product distribution with
some coordinates fixed (``f.means``); a padded :class:`Junta` (``size`` set) has a traced support size. Their
constructors, checked and random, live in :mod:`jaxtrees.targets.juntas`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits
from jaxtrees.targets.base import indices_mask, leading_shape, scatter_support, select


class OnSupport:
    """The members every target on an explicit support ``support: int32[k]`` shares."""

    __slots__ = ()

    @property
    def k(self) -> int:
        return self.support.shape[-1]

    @property
    def batch_shape(self) -> tuple:
        return leading_shape(self.support, 1)

    def support_mask(self, n: int):
        return indices_mask(self.support, n)


class _JuntaArrays(NamedTuple):
    support: jax.Array  # int32[k], distinct indices
    table: jax.Array  # bool[2^k]
    size: jax.Array | None = None  # int32: the support is support[:size] (padded juntas only)


class Junta(_JuntaArrays, OnSupport):
    """f(x) = table[sum_t x[support[t]] 2^t].

    A padded junta (``size`` set, e.g. traced) has K = len(support) >= size distinct indices and a
    table that ignores every bit t >= size; its support is ``support[:size]``.
    """

    __slots__ = ()

    def relevant(self):
        """``bool[k]``: which support variables f actually depends on."""
        return relevant_vars(self.table, self.k)

    def in_range(self):
        """A bool scalar: whether a padded junta's (traced) size lies in [1, K] (always True unpadded). Out of
        range (a traced k > k_max, issue 58) the junta is flagged, not clamped: its exact means are NaN, its
        support mask empty, and :func:`~jaxtrees.core.sampling.draw` returns no valid examples."""
        if self.size is None:
            return jnp.bool_(True)
        return (self.size >= 1) & (self.size <= self.k)

    def support_mask(self, n: int):
        if self.size is None:
            return indices_mask(self.support, n)
        return jnp.any((self.support[:, None] == jnp.arange(n)) & self._real()[:, None], axis=0) & self.in_range()

    def _real(self):
        """``bool[K]``: which slots of the support are real (all of them unless padded)."""
        return jnp.arange(self.k) < (self.k if self.size is None else self.size)

    def __call__(self, x):
        x = jnp.asarray(x)
        index = jnp.sum(x[..., self.support].astype(jnp.int32) << jnp.arange(self.k), axis=-1)
        return self.table[index].astype(jnp.int32)

    def bits(self, X):
        table = jnp.where(self.table[:, None], bits.ALL_ONES, jnp.uint32(0)) * jnp.ones((1, X.shape[-1]), jnp.uint32)
        return select(table, X[self.support])

    def means(self, p, fixed, values):
        # Pr[x_{j_t} = 1 | restriction], then sum over the 2^k assignments a of T[a] Pr[a].
        q1 = jnp.where(fixed[self.support], values[self.support].astype(p.dtype), p[self.support])
        a = bits.assignments(self.k)  # bool[2^k, k]
        real = self._real()
        # Padding slots t (bits the table ignores) are pinned to 0 exactly: factor 1[a_t = 0].
        factors = jnp.where(real, jnp.where(a, q1, 1.0 - q1), (~a).astype(p.dtype))  # [2^k, k]
        table = self.table.astype(p.dtype)
        mu = jnp.sum(table * jnp.prod(factors, axis=-1))
        # mu1 for x_{j_t} = 1: factor t becomes 1[a_t = 1].
        eye = jnp.eye(self.k, dtype=bool)[:, None, :]  # [k, 1, k]
        pinned = jnp.where(eye, a[None].astype(p.dtype), factors[None])  # [k, 2^k, k]
        mu1_support = jnp.sum(table * jnp.prod(pinned, axis=-1), axis=-1)  # [k]
        if self.size is not None:  # a traced size out of range: NaN, not a plausible junta (in_range)
            mu, mu1_support = (jnp.where(self.in_range(), a, jnp.nan) for a in (mu, mu1_support))
        return mu, scatter_support(self.support, jnp.where(real, mu1_support, mu), mu, p.shape[-1])


class _ParityArrays(NamedTuple):
    support: jax.Array  # int32[k], distinct indices


class Parity(_ParityArrays, OnSupport):
    """chi_J(x) = sum_{j in support} x_j mod 2."""

    __slots__ = ()

    def relevant(self):
        """``bool[k]``: a parity depends on every variable of its support."""
        return jnp.ones(self.support.shape, bool)

    def __call__(self, x):
        x = jnp.asarray(x)
        return (jnp.sum(x[..., self.support].astype(jnp.int32), axis=-1) % 2).astype(jnp.int32)

    def bits(self, X):
        return bits.reduce_xor(X[self.support], axis=0)

    def means(self, p, fixed, values):
        # E[(-1)^f] = prod_j E[(-1)^{x_j}] = prod_j (1 - 2 Pr[x_j = 1])  (002 Lemma 13).
        q1 = jnp.where(fixed[self.support], values[self.support].astype(p.dtype), p[self.support])
        s = 1.0 - 2.0 * q1
        mu = (1.0 - jnp.prod(s)) / 2.0
        others = jnp.prod(jnp.where(jnp.eye(self.k, dtype=bool), 1.0, s[None, :]), axis=-1)
        return mu, scatter_support(self.support, (1.0 + others) / 2.0, mu, p.shape[-1])


class MaskParity(NamedTuple):
    """chi_J(x) = sum_{j in J} x_j mod 2 for J given as a mask ``bool[n]`` (|J| may be traced)."""

    mask: jax.Array  # bool[n]

    @property
    def batch_shape(self) -> tuple:
        return leading_shape(self.mask, 1)

    def __call__(self, x):
        x = jnp.asarray(x)
        return (jnp.sum((x != 0) & self.mask, axis=-1, dtype=jnp.int32) % 2).astype(jnp.int32)

    def bits(self, X):
        return bits.reduce_xor(jnp.where(self.mask[:, None], X, jnp.uint32(0)), axis=0)

    def means(self, p, fixed, values):
        # As Parity.means, with factor 1 off the mask: E[(-1)^f] = prod_{j in J} (1 - 2 q_j).
        q1 = jnp.where(fixed, values.astype(p.dtype), p)
        s = jnp.where(self.mask, 1.0 - 2.0 * q1, 1.0)
        mu = (1.0 - jnp.prod(s)) / 2.0
        ones = jnp.ones((1,), s.dtype)
        before = jnp.cumprod(jnp.concatenate([ones, s[:-1]]))  # prod_{j < i} s_j
        after = jnp.flip(jnp.cumprod(jnp.concatenate([ones, jnp.flip(s)[:-1]])))  # prod_{j > i} s_j
        return mu, jnp.where(self.mask, (1.0 + before * after) / 2.0, mu)

    def support_mask(self, n: int):
        del n
        return self.mask

    def padded(self, k, k_max: int) -> Junta:
        """This parity as a :class:`Junta` padded to ``k_max`` (k = |J| may be traced, k <= k_max <= n):
        J's indices ascending, then others, and a table that ignores the padding; the same labels."""
        support = jnp.argsort(~self.mask, stable=True)[:k_max].astype(jnp.int32)  # J first, ascending
        k = jnp.asarray(k, jnp.int32)
        return Junta(support, parity_table(k_max)[jnp.arange(2**k_max) & ((1 << k) - 1)], k)


def parity_table(k: int) -> jax.Array:
    """``bool[2^k]``: the truth table of the parity of k bits (row a: the parity of a's bits)."""
    return jnp.asarray(np.bitwise_count(np.arange(2**k)) % 2 == 1)


def relevant_vars(table, k):
    """``bool[k]``: which of its k variables the truth table ``table`` (2^k entries) depends on."""
    out = []
    for t in range(k):
        halves = table.reshape(2 ** (k - 1 - t), 2, 2**t)
        out.append(jnp.any(halves[:, 0] != halves[:, 1]))
    return jnp.stack(out) if out else jnp.zeros((0,), bool)


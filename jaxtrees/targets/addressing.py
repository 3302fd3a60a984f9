"""The addressing functions of 002: f_{c,k} (Sec. 4), f_{c,k,S} (Sec. 5) and their codes.

Memory bits y_a after A addressing bits; the address bits are z_i = XOR_{j in S_i} x_j and
f(x, y) = y_{z(x)}, with address a = sum_i z_i 2^i. :func:`random_code` and :func:`code_distance`
build and check S. :mod:`jaxtrees.targets.agnostic` pins memory bits (f_pi of Sec. 6).

>>> f = addressing(c=1, k=2)                  # A = 4 addressing bits, 4 memory bits
>>> f.n, f.support_mask(f.n).tolist()
(8, [True, True, True, True, True, True, True, True])
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits, checks
from jaxtrees.targets.base import leading_shape, select

#: float32 products at full precision (a GPU's default rounds their inputs to TF32's 10 bits).
_matmul = functools.partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)


class Addressing(NamedTuple):
    """f(x) = y_{a(x)}: memory bit y_a = x[A + a], a(x) = sum_i z_i 2^i, z_i = XOR of x_j over j in S_i.

    ``code: bool[k, A]`` has row i the indicator of S_i over the A addressing bits; the 2^k
    memory bits are variables A .. A + 2^k - 1, so n = A + 2^k (further coordinates are
    irrelevant). Memory bits with ``pinned[a]``
    are constants ``pinned_value[a]`` (the restriction pi of 002 Sec. 6; the variable y_a is
    then irrelevant); f_{c,k} and f_{c,k,S} pin none.
    """

    code: jax.Array  # bool[k, A]
    pinned: jax.Array  # bool[2^k]
    pinned_value: jax.Array  # bool[2^k]

    @property
    def k(self) -> int:
        return self.code.shape[-2]

    @property
    def batch_shape(self) -> tuple:
        return leading_shape(self.code, 2)

    def support_mask(self, n: int):
        """Every addressing bit and the memory bits that are not pinned."""
        del n
        return jnp.concatenate([jnp.ones(self.code.shape[:-2] + (self.n_address,), bool), ~self.pinned], axis=-1)

    @property
    def n_address(self) -> int:
        return self.code.shape[-1]

    @property
    def n(self) -> int:
        return self.n_address + 2**self.k

    def address(self, x):
        """``int32[...]``: a(x) for plain inputs."""
        z = (x[..., : self.n_address].astype(jnp.int32) @ self.code.T.astype(jnp.int32)) % 2
        return jnp.sum(z << jnp.arange(self.k), axis=-1)

    def __call__(self, x):
        x = jnp.asarray(x)
        memory = jnp.where(self.pinned, self.pinned_value, x[..., self.n_address:self.n].astype(bool))
        return jnp.take_along_axis(memory, self.address(x)[..., None], axis=-1)[..., 0].astype(jnp.int32)

    def bits(self, X):
        A = self.n_address
        z = bits.reduce_xor(jnp.where(self.code[:, :, None], X[None, :A], jnp.uint32(0)), axis=1)  # [k, W]
        constant = jnp.where(self.pinned_value, bits.ALL_ONES, jnp.uint32(0))[:, None]
        return select(jnp.where(self.pinned[:, None], constant, X[A:self.n]), z)  # coordinates >= n: irrelevant

    def address_distribution(self, s):
        """Pr[z(x) = a] for every a, given s_j = E[(-1)^{x_j}] = 1 - 2 Pr[x_j = 1] (002 Lemma 16):

            Pr[z = a] = 2^-k sum_{I subset [k]} (-1)^{|a & I|} chi_I,   chi_I = prod_{j in S_I} s_j,

        S_I the symmetric difference of the S_i, i in I. ``s: [A]`` -> ``[2^k]``.
        """
        return walsh(jnp.prod(self._factors(s), axis=-1)) / 2**self.k

    def means(self, p, fixed, values):
        """The oracle in the Fourier basis of the address (002 Lemma 16), in O(2^k A) per call.

        With m_a = E[y_a | rho] and mhat_I = 2^-k sum_a (-1)^{|a & I|} m_a, mu = sum_I chi_I mhat_I
        is multilinear in s, so pinning addressing bit j to 1 (s_j := -1) gives
        mu1_j = mu - (1 + s_j) d mu / d s_j, with d mu / d s_j = sum_{I: j in S_I} mhat_I chi_I / s_j.
        For s_j = 0 (p_j = 1/2) the quotient is the product over S_I without j, nonzero only
        when j is the one zero factor of S_I. Pinning memory bit a to 1 adds Pr[z = a](1 - m_a).
        """
        A = self.n_address
        q = jnp.where(fixed, values.astype(p.dtype), p)
        memory = jnp.where(self.pinned, self.pinned_value.astype(p.dtype), q[A:self.n])
        s = 1.0 - 2.0 * q[:A]
        zero = jnp.abs(s) < _TINY
        inside = self._in_sym_diff()  # [2^k, A]
        chi_nonzero = jnp.prod(jnp.where(inside, jnp.where(zero, 1.0, s), 1.0), axis=-1)  # [2^k]
        zeros = _matmul(inside.astype(p.dtype), zero.astype(p.dtype))  # [2^k]: zero factors of chi_I
        chi = jnp.where(zeros == 0, chi_nonzero, 0.0)
        memory_hat = walsh(memory) / 2**self.k
        mu = _matmul(chi, memory_hat)
        weighted = inside.T.astype(p.dtype)  # [A, 2^k]
        from_nonzero = _matmul(weighted, memory_hat * chi) / jnp.where(zero, 1.0, s)
        from_zero = _matmul(weighted, jnp.where(zeros == 1, memory_hat * chi_nonzero, 0.0))
        mu1_address = mu - (1.0 + s) * jnp.where(zero, from_zero, from_nonzero)
        prob = walsh(chi) / 2**self.k
        mu1_memory = jnp.where(self.pinned, mu, mu + prob * (1.0 - memory))
        beyond = jnp.full(p.shape[-1] - self.n, mu)  # coordinates >= n: pinning them changes nothing
        return mu, jnp.concatenate([mu1_address, mu1_memory, beyond])

    def _in_sym_diff(self):
        """``bool[2^k, A]``: j in S_I (row I)."""
        subsets = bits.assignments(self.k).astype(jnp.int32)
        return (subsets @ self.code.astype(jnp.int32)) % 2 == 1

    def _factors(self, s):
        return jnp.where(self._in_sym_diff(), s, 1.0)


def addressing(c: int, k: int) -> Addressing:
    """f_{c,k} of 002 Sec. 4: k disjoint groups of ck addressing bits (A = c k^2), 2^k memory bits;
    group i is bits i ck .. (i+1) ck - 1 and z_i its parity."""
    c = checks.integer("c", c, low=1)
    k = checks.integer("k", k, low=1, high=16)
    return from_code(np.kron(np.eye(k, dtype=bool), np.ones((1, c * k), bool)))


def coded_addressing(code) -> Addressing:
    """f_{c,k,S} of 002 Sec. 5 for the sets S_i given as the rows of ``code: {0,1}[k, A]``."""
    code = np.asarray(code)
    if code.ndim != 2 or code.shape[0] < 1 or code.shape[1] < 1:
        raise ValueError(f"code must be a 2-d 0/1 array of shape (k, A), got shape {code.shape}")
    checks.integer("k = code.shape[0]", code.shape[0], low=1, high=16)
    if not np.isin(code, (0, 1)).all():
        raise ValueError("code must be binary (0/1 or bool)")
    return from_code(code)


def code_distance(code) -> int:
    """min over non-empty I of |symmetric difference of S_i, i in I| (002 Sec. 5), by enumeration."""
    code = np.asarray(code, np.int64)
    k = code.shape[0]
    subsets = (np.arange(1, 2**k)[:, None] >> np.arange(k)) & 1
    return int(((subsets @ code) % 2).sum(axis=1).min())


def random_code(seed: int, k: int, length: int, min_distance: int = 0, tries: int = 1000) -> np.ndarray:
    """A random binary linear code: k uniformly random subsets of [length] (rows of a generator
    matrix), redrawn until ``code_distance >= min_distance``; raises ValueError after ``tries``."""
    k = checks.integer("k", k, low=1, high=16)
    length = checks.integer("length", length, low=1)
    min_distance = checks.integer("min_distance", min_distance, low=0, high=length)
    rng = np.random.default_rng(seed)
    for _ in range(tries):
        code = rng.random((k, length)) < 0.5
        if code_distance(code) >= min_distance:
            return code
    raise ValueError(f"no random code with k = {k}, length = {length} reached min_distance = {min_distance} "
                     f"in {tries} tries; lower min_distance or raise length")


def walsh(v):
    """Walsh-Hadamard transform over the last axis (length 2^k): out[I] = sum_a (-1)^{|a & I|} v[a].

    k butterfly passes, O(k 2^k).
    """
    size = v.shape[-1]
    step = 1
    while step < size:
        pairs = v.reshape(v.shape[:-1] + (-1, 2, step))
        even, odd = pairs[..., 0, :], pairs[..., 1, :]
        v = jnp.stack([even + odd, even - odd], axis=-2).reshape(v.shape)
        step *= 2
    return v


#: |s_j| below this counts as s_j = 0 in the addressing oracle (an error of at most this in mu).
_TINY = 1e-20


def from_code(code):
    k = code.shape[0]
    return Addressing(jnp.asarray(code, bool), jnp.zeros((2**k,), bool), jnp.zeros((2**k,), bool))

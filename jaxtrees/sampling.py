"""Labelled samples, bit-packed along the sample axis.

A :class:`Sample` of m examples on n features holds ``X: uint32[n, W]`` (feature i's bitset over the
examples), labels ``y: uint32[W]`` and ``valid: uint32[W]`` (the first m bits set), W = ceil(m/32).

>>> import jax
>>> from jaxtrees import distributions, targets
>>> key = jax.random.key(0)
>>> p = distributions.smoothed(c=0.1).marginals(key, 16)
>>> f = targets.random_parity(key, n=16, k=3)
>>> s = draw(key, p, f, m=100)
>>> s.X.shape, s.y.shape, int(s.m)
((16, 4), (4,), 100)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees import _checks, bits


class Sample(NamedTuple):
    X: jax.Array  # uint32[n, W]
    y: jax.Array  # uint32[W]
    valid: jax.Array  # uint32[W]

    @property
    def n(self) -> int:
        return self.X.shape[-2]

    @property
    def m(self):
        """Number of examples (an int32 array: traced under jit)."""
        return bits.count(self.valid)


def draw(key, p, target, m: int, noise: float = 0.0) -> Sample:
    """m i.i.d. examples x ~ prod_i Bernoulli(p_i), labelled y = target(x) XOR Bernoulli(noise).

    ``p: float32[n]``; ``m`` is static (it fixes shapes). Batch over distributions and targets with
    ``jax.vmap(draw, in_axes=(0, 0, 0, None, None))``.
    """
    m = _checks.integer("m", m, low=1)
    noiseless = False
    if _checks.is_concrete(noise):
        noiseless = _checks.real("noise", noise, low=0.0, high=1.0) == 0.0
    n = jnp.shape(p)[-1]
    k_x, k_noise = jax.random.split(key)
    X = bits.pack(jax.random.uniform(k_x, (n, m), jnp.float32) < jnp.asarray(p)[:, None])
    y = target.bits(X)
    if not noiseless:
        y = y ^ bits.pack(jax.random.bernoulli(k_noise, noise, (m,)))
    valid = bits.valid_mask(m)
    return Sample(X, y & valid, valid)


def prefix(sample: Sample, m) -> Sample:
    """The first m examples of ``sample`` (``m`` may be traced; shapes are unchanged).

    Growing on the prefixes of one sample for a grid of m uses common random numbers: the trees
    for different m are then coupled, and one compiled program serves the whole grid.
    """
    valid = sample.valid & bits.prefix_mask(sample.valid.shape[-1], m)
    return Sample(sample.X, sample.y & valid, valid)


def from_arrays(X, y) -> Sample:
    """Pack a plain data set: ``X: {0,1}[m, n]`` (rows are examples) and ``y: {0,1}[m]``."""
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a 2-d array of shape (m, n) with m, n >= 1, got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape (m,) = ({X.shape[0]},) to match X, got {y.shape}")
    if not np.isin(X, (0, 1)).all():
        raise ValueError("X must be binary: every entry 0 or 1 (bool or numeric)")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("y must be binary: every entry 0 or 1 (bool or numeric)")
    Xp = bits.pack(jnp.asarray(X.T.astype(bool)))
    return Sample(Xp, bits.pack(jnp.asarray(y.astype(bool))), bits.valid_mask(X.shape[0]))

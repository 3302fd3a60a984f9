"""Random words from ``jax.random`` keys, bit for bit as ``jax.random`` draws them, made fusible.

``bits``, ``uniform`` and ``bernoulli`` equal ``jax.random.bits`` (uint32), ``jax.random.uniform``
(float32) and ``jax.random.bernoulli`` (float32 p) for a single threefry key (JAX's default) under
``jax_threefry_partitionable=True`` (the default since JAX 0.5); for any other key type or
setting they call ``jax.random`` itself, so results never depend on which path ran. The hash is
written as plain array arithmetic, which XLA fuses into the code that consumes the words (on a
2-core CPU about 6x faster than JAX's rolled Threefry loop; ``scripts/bench_sampling.py``).

>>> key = jax.random.key(0)
>>> bool((bits(key, (3, 5)) == jax.random.bits(key, (3, 5), jnp.uint32)).all())
True
>>> bool((uniform(key, (4,)) == jax.random.uniform(key, (4,), jnp.float32)).all())
True
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

# Why this module: under partitionable threefry, word i of a draw is x0 ^ x1 for
# (x0, x1) = Threefry-2x32_20(key, (hi(i), lo(i))), i the row-major flat index, a pure function of
# the index. On CPU, JAX lowers Threefry to a rolled loop over its five round groups, which XLA
# cannot fuse with anything: about 0.1 G words/s on a 2-core CPU. Written here with the 20 rounds
# unrolled as plain array arithmetic, XLA fuses the whole hash into the code that consumes the
# words (a comparison, a bit-serial adder), so the words are never stored: about 6x faster there.
# On GPU both forms are fused elementwise kernels.
#
# Threefry-2x32 (Salmon et al., SC 2011) as jax._src.random.threefry2x32 defines it: 20 rounds in
# five groups of four, rotation constants alternating between the two rows, a key injection
# after each group.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KEY_PARITY = np.uint32(0x1BD11BDA)
MAX_WORDS = 2**32  # larger draws (counters with a nonzero high word) go to jax.random


def _rotate_left(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds: the pair of uint32 arrays that JAX's threefry primitive
    returns for key words (k0, k1) and counter words (x0, x1), all broadcasting together."""
    k0, k1, x0, x1 = (jnp.asarray(v, jnp.uint32) for v in (k0, k1, x0, x1))
    ks = (k0, k1, k0 ^ k1 ^ _KEY_PARITY)
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for group in range(5):
        for r in _ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, r) ^ x0
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + ks[(group + 2) % 3] + np.uint32(group + 1)
    return x0, x1


def _threefry_key_words(key):
    """(k0, k1) for a threefry key under partitionable threefry, else None (use jax.random)."""
    if not jax.config.jax_threefry_partitionable:
        return None
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if str(jax.random.key_impl(key)) != "threefry2x32" or key.shape != ():
            return None
        data = jax.random.key_data(key)
    else:  # a legacy uint32[2] key, read with the default implementation
        if jax.config.jax_default_prng_impl != "threefry2x32" or key.shape != (2,) or key.dtype != jnp.uint32:
            return None
        data = key
    return data[..., 0], data[..., 1]


def fusible(key) -> bool:
    """True if this module computes the key's words itself (threefry key, partitionable mode);
    else ``bits`` and friends call ``jax.random``."""
    return _threefry_key_words(key) is not None


def words_at(key, index):
    """Word ``index`` (uint32 array, any shape) of the key's stream: ``bits(key, shape)`` is
    ``words_at(key, row-major flat iota of shape)``. Lets a consumer compute exactly the words
    it needs, in the order it needs them, without building the full draw. Only for keys with
    ``fusible(key)`` and indices below ``MAX_WORDS``."""
    words = _threefry_key_words(key)
    if words is None:
        raise TypeError("words_at needs a threefry key and jax_threefry_partitionable=True")
    x0, x1 = threefry2x32(*words, jnp.uint32(0), index)
    return x0 ^ x1


def pair_at(key, index):
    """Both words of the hash behind :func:`words_at` (their xor is ``words_at(key, index)``):
    ``(x0, x1)``, two independent uniform words per hash, as Random123 and JAX's non-partitionable
    threefry use them. Half the hashing of :func:`words_at` per random word; not a stream that
    ``jax.random`` draws. Same conditions as :func:`words_at`."""
    words = _threefry_key_words(key)
    if words is None:
        raise TypeError("pair_at needs a threefry key and jax_threefry_partitionable=True")
    return threefry2x32(*words, jnp.uint32(0), index)


def split(key, num: int = 2):
    """``jax.random.split(key, num)`` as fusible array code where possible: under partitionable threefry
    key i's words are Threefry-2x32(key, (0, i)), which JAX lowers to a rolled loop on CPU (several
    kernels per call, in every trial that splits its key); here one fused hash over ``iota(num)``.

    >>> key = jax.random.key(7)
    >>> bool((jax.random.key_data(split(key, 3)) == jax.random.key_data(jax.random.split(key, 3))).all())
    True
    """
    words = _threefry_key_words(key)
    if words is None:
        return jax.random.split(key, num)
    return _like(key, *threefry2x32(*words, jnp.uint32(0), lax.iota(jnp.uint32, num)))


def fold_in(key, data):
    """``jax.random.fold_in(key, data)`` for a scalar ``data`` (cast to uint32), as fusible array
    code where possible: the new key's words are Threefry-2x32(key, (0, data)). JAX lowers that
    hash to a rolled loop on CPU (five small steps per call, inside every training step that
    folds in its step number); here it is a few dozen fused integer operations.

    >>> key = jax.random.key(7)
    >>> bool((jax.random.key_data(fold_in(key, 3)) == jax.random.key_data(jax.random.fold_in(key, 3))).all())
    True
    """
    words = _threefry_key_words(key)
    if words is None or jnp.ndim(data) != 0:
        return jax.random.fold_in(key, data)
    return _like(key, *threefry2x32(*words, jnp.uint32(0), jnp.asarray(data).astype(jnp.uint32)))


def _like(key, y0, y1):
    """Keys of words (y0, y1), typed like ``key`` (a threefry key array, or legacy uint32 words)."""
    new = jnp.stack([y0, y1], axis=-1)
    return jax.random.wrap_key_data(new, impl="threefry2x32") if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else new


def bits(key, shape):
    """``jax.random.bits(key, shape, jnp.uint32)``, as fusible array code where possible."""
    shape = tuple(shape)
    if not fusible(key) or math.prod(shape) >= MAX_WORDS:
        return jax.random.bits(key, shape, jnp.uint32)
    return words_at(key, lax.iota(jnp.uint32, math.prod(shape)).reshape(shape))


def uniform(key, shape):
    """``jax.random.uniform(key, shape, jnp.float32)`` (on [0, 1)): 23 random mantissa bits."""
    return _unit_interval(bits(key, shape))


def uniform_at(key, index):
    """The uniform of word ``index`` of the key's stream: ``uniform(key, shape)`` is
    ``uniform_at(key, row-major flat iota of shape)``; a consumer can so draw in another layout
    (see :func:`words_at`, whose conditions apply)."""
    return _unit_interval(words_at(key, index))


def _unit_interval(words):
    mantissa = (words >> np.uint32(9)) | np.uint32(0x3F800000)
    return jnp.maximum(0.0, lax.bitcast_convert_type(mantissa, jnp.float32) - 1.0)


def bernoulli(key, p, shape):
    """``jax.random.bernoulli(key, p, shape)`` for float32 ``p``: ``uniform < p``."""
    return uniform(key, shape) < jnp.asarray(p, jnp.float32)

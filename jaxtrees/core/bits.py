"""Bitsets along the sample axis.

A sample of m examples is stored as ``uint32[..., W]`` with ``W = ceil(m / 32)``: bit ``b`` of word
``w`` holds example ``32 w + b``. Bits past m are zero, and ``valid_mask(m)`` marks the real ones,
so counting a set of examples is ``popcount(mask & bits)`` summed over words.

>>> import jax.numpy as jnp
>>> x = jnp.array([[1, 0, 1], [0, 0, 1]], dtype=bool)
>>> packed = pack(x)            # uint32[2, 1]
>>> unpack(packed, 3).astype(int).tolist()
[[1, 0, 1], [0, 0, 1]]
>>> int(count(packed[0]))
2
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

WORD_BITS = 32
ALL_ONES = np.uint32(0xFFFFFFFF)


def n_words(m: int) -> int:
    """Number of 32-bit words that hold m bits."""
    return -(-m // WORD_BITS)


def pack(bits):
    """Pack a boolean array ``[..., m]`` into ``uint32[..., ceil(m/32)]`` along its last axis.

    The full words and the last, partial one are summed apart: zero padding fused into the sum
    costs XLA CPU a bounds check per bit (7x slower packing 131 bits per row)."""
    bits = jnp.asarray(bits).astype(jnp.uint32)
    m = bits.shape[-1]
    full = m // WORD_BITS
    shifts = jnp.arange(WORD_BITS, dtype=jnp.uint32)
    words = bits[..., : full * WORD_BITS].reshape(bits.shape[:-1] + (full, WORD_BITS)) << shifts
    words = jnp.sum(words, axis=-1, dtype=jnp.uint32)
    if full * WORD_BITS == m:
        return words
    last = jnp.sum(bits[..., full * WORD_BITS:] << shifts[: m - full * WORD_BITS], axis=-1, dtype=jnp.uint32)
    return jnp.concatenate([words, last[..., None]], axis=-1)


def unpack(words, m: int):
    """Inverse of :func:`pack`: ``uint32[..., W]`` to ``bool[..., m]``."""
    shifts = jnp.arange(WORD_BITS, dtype=jnp.uint32)
    bits = (words[..., None] >> shifts) & jnp.uint32(1)
    return bits.reshape(words.shape[:-1] + (-1,))[..., :m].astype(bool)


def unpack_float(words, m: int):
    """:func:`unpack` as ``float32[..., m]`` 0 / 1, by a conversion: where the unpacked bits feed a
    product in a loop body, XLA:CPU ran a select of 1.0 / 0.0 2-8x slower (docs/benchmarks.md,
    "Weighted counting")."""
    return unpack(words, m).astype(jnp.float32)


def assignments(k: int):
    """``bool[2^k, k]``: every point of {0,1}^k, row a holding the bits of a, least significant first.

    >>> assignments(2).astype(int).tolist()
    [[0, 0], [1, 0], [0, 1], [1, 1]]
    """
    return jnp.asarray((np.arange(2**k)[:, None] >> np.arange(k)) & 1, bool)


def valid_mask(m: int):
    """``uint32[ceil(m/32)]`` with the first m bits set."""
    return prefix_mask(n_words(m), m)


def prefix_mask(words: int, m):
    """``uint32[words]`` with the first m bits set; ``m`` may be traced (0 <= m <= 32 words)."""
    r = jnp.clip(m - WORD_BITS * jnp.arange(words), 0, WORD_BITS).astype(jnp.uint32)
    partial = (jnp.uint32(1) << jnp.minimum(r, WORD_BITS - 1)) - jnp.uint32(1)
    return jnp.where(r >= WORD_BITS, ALL_ONES, partial)


#: Words summed by one reduction. XLA CPU rewrites a longer reduction into a windowed tree whose
#: input (here every word's popcount, as int32) it stores in full, so :func:`count_and` sums
#: longer axes in blocks of at most this many words.
REDUCE_SPAN = 32
#: Block sums :func:`count_and` adds per step of its loop over longer axes.
BLOCKS_PER_STEP = 8


def count(words, axis=-1):
    """Number of set bits, summed over ``axis`` (int32)."""
    return jnp.sum(lax.population_count(words).astype(jnp.int32), axis=axis)


def count_and(a, b, words=None):
    """``count(a & b, axis=-1)`` for word arrays that broadcast together, without storing ``a & b``.

    A word axis longer than ``REDUCE_SPAN`` is cut into equal blocks of at most that many words
    (zero words pad it), each block counted by its own fused AND + popcount + sum, the block
    sums added ``BLOCKS_PER_STEP`` at a time in a ``fori_loop`` if there are more. As one
    reduction over a 64-word axis, XLA CPU stored every word's popcount and growth at m = 2048
    ran 4.5x slower than at m = 1024.

    ``words`` (an int32 scalar, may be traced): ``a & b`` is zero past its first ``words`` words (a
    prefix of a sample). On an axis of at least ``PREFIX_MIN_WORDS`` the loop then adds
    ``PREFIX_BLOCKS_PER_STEP`` blocks of ``REDUCE_SPAN`` words per step and stops after the steps that
    hold them: a fit on the first m examples costs about m, not the axis' length. The result is the same.
    """
    a, b = jnp.asarray(a), jnp.asarray(b)
    length = jnp.broadcast_shapes(a.shape, b.shape)[-1]  # raises if they do not broadcast
    prefix = words is not None and length >= PREFIX_MIN_WORDS
    if length <= REDUCE_SPAN:
        return count(a & b)
    if prefix:
        blocks, span = PREFIX_BLOCKS_PER_STEP, REDUCE_SPAN
        steps = -(-length // (blocks * span))
    else:
        steps = -(-length // (REDUCE_SPAN * BLOCKS_PER_STEP))
        blocks = min(-(-length // REDUCE_SPAN), BLOCKS_PER_STEP)  # per step
        span = -(-length // (steps * blocks))
    a, b = (v if v.shape[-1] == 1 else jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, steps * blocks * span - length)])
            for v in (a, b))

    def step(s, total):
        for j in range(blocks):
            start = (s * blocks + j) * span
            a_j, b_j = (v if v.shape[-1] == 1 else lax.dynamic_slice_in_dim(v, start, span, axis=-1) for v in (a, b))
            total = total + count(a_j & b_j)
        return total

    total = jnp.zeros(jnp.broadcast_shapes(a.shape[:-1], b.shape[:-1]), jnp.int32)
    if prefix:  # the steps that hold the first ``words`` words
        used = jnp.clip((jnp.asarray(words, jnp.int32) + blocks * span - 1) // (blocks * span), 0, steps)
        return lax.fori_loop(0, used, step, total)
    return step(0, total) if steps == 1 else lax.fori_loop(0, steps, step, total)


#: Blocks of ``REDUCE_SPAN`` words a step of :func:`count_and`'s loop over a prefix adds (128 words: the
#: fastest of 1, 2, 4 and 8 for the full juntas study's prefixes; docs/benchmarks.md).
PREFIX_BLOCKS_PER_STEP = 4
#: Shorter axes ignore ``count_and``'s ``words``: a loop of fewer steps cost more than it saved (at 256 words,
#: 2.5 ms as one step against 4.8-5.6 ms as a loop of two, 32 vmapped depth-6 trees, n = 64).
PREFIX_MIN_WORDS = 4 * PREFIX_BLOCKS_PER_STEP * REDUCE_SPAN


def reduce_or(words, axis=0):
    """Bitwise OR over ``axis`` (negative counts from the end)."""
    return lax.reduce(words, jnp.uint32(0), lax.bitwise_or, (axis % jnp.ndim(words),))


def reduce_xor(words, axis=0):
    """Bitwise XOR over ``axis`` (negative counts from the end)."""
    return lax.reduce(words, jnp.uint32(0), lax.bitwise_xor, (axis % jnp.ndim(words),))


def carry_out(digits, addend, *, n_digits: int | None = None):
    """Carry out of the b-bit additions ``V_t + addend``, one per bit lane t, as a word.

    ``digits: uint32[b, ...]`` are b words; lane t (bit t) of ``digits[j]`` is binary digit j of
    the b-bit integer ``V_t`` (``digits[0]`` the most significant). ``digits`` may instead be a
    function ``j -> digit word j`` (j a traced int32) with ``n_digits = b`` (ignored for an
    array): the words are then made inside the loop, one at a time, and never stored together.
    Such a function may return a tuple of g words, digits ``g j .. g j + g - 1`` (b a multiple
    of g), e.g. both words of one hash. ``addend`` is a non-negative
    integer array broadcasting against a digit word; only its low b bits are read. Returns
    ``uint32[...]`` whose bit t is ``[V_t + (addend mod 2^b) >= 2^b]``.

    This is a ripple-carry adder run on 32 lanes at once, least significant digit first: with
    ``a_j`` digit j of the addend and carry ``r`` (0 below the lowest digit), the carry out of
    digit j is the majority of (v_j, a_j, r), that is ``r = (v_j | r) if a_j else (v_j & r)``.
    Two word operations per digit; no lane is looked at on its own. The digits run in a
    ``fori_loop``, whose result XLA stores: consumers read the finished words instead of fusing
    (and repeating) the adder and the digits' generation into each of their own loops.

    >>> import numpy as np
    >>> lanes = np.arange(4, dtype=np.uint32)              # lane t holds V_t = t, b = 2
    >>> digits = np.stack([(lanes >> 1) & 1, lanes & 1])   # most significant digit first
    >>> words = pack(digits.astype(bool))                  # uint32[2, 1]
    >>> [int(carry_out(words, a)[0]) for a in range(4)]    # lanes t with t + a >= 4
    [0, 8, 12, 14]
    """
    if callable(digits):
        if n_digits is None:
            raise TypeError("carry_out: pass n_digits = b with a digit function")
        b = n_digits

        def group(j):
            out = digits(j)
            return tuple(jnp.asarray(w, jnp.uint32) for w in (out if isinstance(out, (tuple, list)) else (out,)))

        out = jax.eval_shape(group, 0)
        g, shape = len(out), out[0].shape
        if b % g:
            raise ValueError(f"carry_out: n_digits = {b} is not a multiple of the {g} digits per call")
    else:
        words = jnp.asarray(digits, jnp.uint32)
        b, shape, g = words.shape[0], words.shape[1:], 1

        def group(j):
            return (lax.dynamic_index_in_dim(words, j, keepdims=False),)

    addend = jnp.asarray(addend).astype(jnp.uint32)

    def step(i, r):  # call i = 0 holds the least significant digits, ending at index b - 1
        j = b // g - 1 - i
        for d, v in reversed(list(enumerate(group(j)))):  # digit g j + d, least significant first
            a = ((addend >> (b - 1 - g * j - d).astype(jnp.uint32)) & jnp.uint32(1)).astype(bool)
            r = jnp.where(a, v | r, v & r)
        return r

    r = jnp.zeros(jnp.broadcast_shapes(shape, jnp.shape(addend)), jnp.uint32)
    return lax.fori_loop(0, b // g, step, r)

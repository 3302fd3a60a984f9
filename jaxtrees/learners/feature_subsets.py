"""Feature bagging's draw: per node, a uniformly random subset of its admissible features.

:func:`random_subset` draws k of each node's admissible features by Floyd's algorithm on packed feature bitsets
(only packing touches all n features); :func:`subset_size` is a rule's subset size for a traced feature count.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxtrees.core import bits, prng
from jaxtrees.learners.growth_rule import GrowthRule

#: :func:`_nth_set_bit` steps through up to this many words of a feature bitset (256 features), then searches.
UNROLL_WORDS = 8


def subset_size(rule: GrowthRule, features):
    """``int32``: :meth:`~jaxtrees.learners.growth_rule.GrowthRule.features_per_node` of a traced feature count
    (all of them where it gives None): floor(sqrt n) or floor(log2 n) by integer arithmetic, at least 1."""
    n = jnp.asarray(features, jnp.int32)
    if rule.max_features == "sqrt":
        k = jnp.floor(jnp.sqrt(n.astype(jnp.float32))).astype(jnp.int32)
        k = jnp.where(k * k > n, k - 1, jnp.where((k + 1) * (k + 1) <= n, k + 1, k))  # float rounding, either way
    elif rule.max_features == "log2":
        k = 31 - jax.lax.clz(n)
    else:
        k = jnp.int32(rule.max_features)
    return jnp.minimum(jnp.maximum(k, 1), n)


def random_subset(key, admissible, k: int, rows=None, size=None):
    """``(feature: int32[L, k], drawn: bool[L, k])``: per row of ``admissible: bool[L, n]``, k of its
    a admissible features uniformly at random, all a if a <= k, in increasing order (``drawn``
    marks the first min(a, k) slots; the others hold feature 0).

    A uniform k-subset of the ranks {0, ..., a-1} by Floyd's algorithm, from k random words per
    row: for j = a-k, ..., a-1 draw u uniform on {0, ..., j} (:func:`_below`) and add u, or j if u
    is in already. The subset is kept as a bitset over ranks; its t-th rank and the admissible
    feature of that rank are read off packed rows (:func:`_nth_set_bit`). Only packing
    ``admissible`` touches all n features. ``rows = (offset, L)``: the rows are rows offset, ... of
    a level of L (the words are those rows' of the level's draw). ``size`` (traced, 1 <= size <= k): draw
    that many, in k slots (the first ``size`` slots and their words are those of a draw of ``size``).
    """
    present = bits.pack(admissible)  # [L, W]
    a = bits.count(present)
    if rows is None:
        words = prng.bits(key, (k, present.shape[0]))
    else:  # columns offset + r of a [k, L] draw
        offset, width = rows
        index = jnp.arange(k)[:, None] * width + offset + jnp.arange(present.shape[0])
        words = prng.words_at(key, index.astype(jnp.uint32))
    slots, k = k, (k if size is None else size)
    slot = jnp.arange(present.shape[-1], dtype=jnp.uint32)
    bit = lambda r: jnp.where(slot == (r[:, None] >> 5), jnp.uint32(1) << (r[:, None] & 31), 0)  # noqa: E731

    def add(taken, step):
        t, word = step
        j = (a - k + t).astype(jnp.uint32)
        u = _below(word, j + 1)
        has_u = jnp.any(taken & bit(u) != 0, axis=-1)
        grown = taken | bit(jnp.where(has_u, j, u))
        return (grown if size is None else jnp.where(t < k, grown, taken)), None

    taken, _ = jax.lax.scan(add, jnp.zeros_like(present), (jnp.arange(slots), words))
    taken = jnp.where((a <= k)[:, None], bits.prefix_mask(present.shape[-1], a[:, None]), taken)
    drawn = jnp.arange(slots) < (a[:, None] if size is None else jnp.minimum(a, k)[:, None])
    rank = _nth_set_bit(taken, jnp.broadcast_to(jnp.arange(slots), drawn.shape))
    return jnp.where(drawn, _nth_set_bit(present, rank), 0), drawn


def _below(word, bound):
    """floor(word bound / 2^32) for uint32 arrays: uniform words give each of 0, ..., bound-1 with
    probability within bound / 2^32 of 1 / bound. The high word of the 64-bit product, from
    16-bit halves: it vectorizes, where a remainder (word mod bound) does not on CPU."""
    half = jnp.uint32(0xFFFF)
    (w1, w0), (b1, b0) = ((x >> 16, x & half) for x in (word, bound))
    cross, cross_ = w1 * b0, w0 * b1
    middle = ((w0 * b0) >> 16) + (cross & half) + (cross_ & half)
    return w1 * b1 + (cross >> 16) + (cross_ >> 16) + (middle >> 16)


def _nth_set_bit(words, r):
    """``int32[L, k]``: index of the r-th (from 0) set bit of each row of ``words: uint32[L, W]``,
    for ``r: int32[L, k]`` below the row's popcount (else meaningless). The word holding the bit is the
    first whose running popcount exceeds r (a binary search per row: the program's size does not grow with
    W, where a loop over the words unrolled W steps, issue 58); r drops by the popcount of the words
    before it. Within the word, halving: the low half of the remaining bits is skipped (r drops by its
    popcount) if it holds <= r set bits."""
    popcount = lambda x: jax.lax.population_count(x).astype(jnp.int32)  # noqa: E731
    if words.shape[-1] <= UNROLL_WORDS:  # a few words: a step per word, as fast as ever
        found = jnp.zeros(r.shape, bool)
        word = jnp.zeros(r.shape, jnp.uint32)
        position = jnp.zeros(r.shape, jnp.int32)
        for i in range(words.shape[-1]):
            here = ~found & (r < popcount(words[:, i, None]))
            word = jnp.where(here, words[:, i, None], word)
            position = jnp.where(here, i * bits.WORD_BITS, position)
            r = jnp.where(found | here, r, r - popcount(words[:, i, None]))
            found |= here
    else:
        counts = popcount(words)  # [L, W]
        running = jnp.cumsum(counts, axis=-1)
        index = jax.vmap(lambda c, q: jnp.searchsorted(c, q, side="right"))(running, r).astype(jnp.int32)
        index = jnp.minimum(index, words.shape[-1] - 1)
        word = jnp.take_along_axis(words, index, axis=-1)
        r = r - (jnp.take_along_axis(running, index, axis=-1) - jnp.take_along_axis(counts, index, axis=-1))
        position = index * bits.WORD_BITS
    for width in (16, 8, 4, 2, 1):
        low = popcount(word & jnp.uint32((1 << width) - 1))
        skip = r >= low
        r = jnp.where(skip, r - low, r)
        word = jnp.where(skip, word >> width, word)
        position = position + jnp.where(skip, width, 0)
    return position


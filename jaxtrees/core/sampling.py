"""Labelled data, bit-packed along the sample axis, and the samplers that draw it.

A :class:`Data` set of m examples on n features holds ``X: uint32[n, W]`` (feature i's bitset over
the examples), labels ``y: uint32[W]``, ``valid: uint32[W]`` (the first m bits set), W = ceil(m/32),
and optional per-example weights ``weight: float32[32 W]`` (or int32 counts; 0 past m).

>>> import jax
>>> from jaxtrees import distributions, targets
>>> key = jax.random.key(0)
>>> p = distributions.smoothed(c=0.1).marginals(key, 16)
>>> f = targets.random_parity(key, n=16, k=3)
>>> s = draw(key, p, f, m=100)
>>> s.X.shape, s.y.shape, int(s.m)
((16, 4), (4,), 100)

Random words dominate the cost of a trial on CPU. By default every Bernoulli bit costs one random
uint32 (a float uniform compared with p). With ``precision_bits=b`` the marginals are first rounded
to the grid of multiples of 2^-b (:func:`quantize`) and 32 exact Bernoulli bits are built from b
random words (:func:`packed_bernoulli`): 32/b times fewer words.

>>> s8 = draw(key, p, f, m=100, precision_bits=8)    # x_i ~ Bernoulli(quantize(p, 8)_i), exactly
>>> s8.X.shape
(16, 4)
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxtrees.core import checks, bits, prng


class Data(NamedTuple):
    """What a learner fits: packed examples, packed labels, the valid examples, optional weights.

    ``weight`` is None (every example counts once) or one number per bit slot,
    ``float32[32 W]`` (AdaBoost's real weights) or ``int32[32 W]`` (bagging's bootstrap
    counts), zero past m; set it with :func:`with_weights`.

    Poison (issue 64 item 8): bits cannot be NaN, so a sample made from a traced bad value (:func:`draw`,
    :func:`with_weights`) has no valid example (m = 0, which eager calls refuse): its ``sample_error`` is NaN
    (0 / 0) and :func:`~jaxtrees.learners.greedy.grow` on it gives a tree whose float fields are NaN.
    """

    X: jax.Array  # uint32[n, W]
    y: jax.Array  # uint32[W]
    valid: jax.Array  # uint32[W]
    weight: jax.Array | None = None  # float32[32 W] | int32[32 W]

    @property
    def n(self) -> int:
        return self.X.shape[-2]

    @property
    def m(self):
        """Number of examples (an int32 array: traced under jit)."""
        return bits.count(self.valid)


MAX_PRECISION_BITS = 31


def quantize(p, precision_bits: int):
    """p rounded to the nearest multiple of 2^-b (b = ``precision_bits``, ties to even), float32.

    These are the probabilities that ``draw(..., precision_bits=b)`` and :func:`packed_bernoulli`
    sample exactly. The rounding moves each p_i by at most 2^-(b+1) (2^-9 ~ 0.002 for b = 8,
    2^-17 for b = 16); p_i outside [0, 1] is clipped. Score trees exactly against these marginals
    (``exact_error(tree, quantize(p, b), f)``) to match the distribution the sample came from.
    Exact in float32 for b <= 24 and for any p already on the grid.

    >>> quantize(jnp.array([0.1, 0.5, 0.999]), 4).tolist()
    [0.125, 0.5, 1.0]
    """
    b = _precision(precision_bits)
    return _grid_numerator(p, b).astype(jnp.float32) / jnp.float32(2.0 ** b)


def packed_bernoulli(key, p, m: int, *, precision_bits: int | None = None):
    """Independent Bernoulli bits, bit-packed: ``uint32[..., W]`` for ``p: float32[...]``, W = ceil(m/32).

    Bit t of word w of row i is example 32 w + t, equal to 1 with probability p_i; bits past m are
    zero. ``m`` is static; ``p`` may be traced.

    ``precision_bits=None``: one float32 uniform per bit, ``uniform < p`` (as ``jax.random.bernoulli``;
    its 23-bit uniform resolves p to about 2^-23). Costs 32 random words per output word.

    ``precision_bits=b`` (1..31): exact Bernoulli(P / 2^b) with P = round(p 2^b) (see
    :func:`quantize`), from b random words per output word (both words of ceil(b/2) Threefry
    hashes for a threefry key, :func:`jaxtrees.core.prng.pair_at`). Construction and proof: draw b i.i.d.
    uniform words D_1..D_b; lane t of the b words spells a b-bit integer V_t (D_1 the most
    significant digit), and since the b * 32 lane bits are i.i.d. fair bits, V_t is uniform on
    {0, ..., 2^b - 1} and V_0, ..., V_31 are independent. Output bit t is the carry out of the
    b-bit addition V_t + P, i.e. ``[V_t + P >= 2^b]`` (:func:`bits.carry_out`: a ripple-carry adder
    run on all 32 lanes with two word operations per digit, least significant digit first, where
    the carry out of digit j is ``r = (D_j | r) if P_j else (D_j & r)``, the majority of D_j, P_j
    and r). Exactly P of the 2^b values of V_t satisfy V_t >= 2^b - P, so Pr[bit = 1] = P / 2^b
    with no approximation, and distinct output bits read disjoint sets of random bits, so they are
    independent (across lanes, words, rows and the batch). P = 2^b (p rounds to 1) has no b-bit
    form and is set to all ones explicitly; P = 0 gives zeros. The result is only as random as
    the key's generator, like every other draw.

    >>> x = packed_bernoulli(jax.random.key(0), jnp.array([0.0, 0.25, 1.0]), 40, precision_bits=2)
    >>> x.shape, [int(c) for c in bits.count(x)][::2]
    ((3, 2), [0, 40])
    """
    m = checks.integer("m", m, low=1)
    p = jnp.asarray(p)
    if precision_bits is None:
        return bits.pack(prng.uniform(key, p.shape + (m,)) < p[..., None])
    b = _precision(precision_bits)
    W = bits.n_words(m)
    P = _grid_numerator(p, b)[..., None]  # uint32[..., 1], broadcast over the words
    ones = jnp.where(P >> jnp.uint32(b) != 0, bits.ALL_ONES, jnp.uint32(0))  # p rounds to 1
    shape = p.shape + (W,)
    h = (b + 1) // 2  # hashes per output word
    if prng.fusible(key) and math.prod(shape) * h < prng.MAX_WORDS:
        # Digits 2t and 2t + 1 of output word q (row-major over p.shape + (W,)) are the two words of
        # hash q h + t (``prng.pair_at``), made where the adder reads them. An odd b gets a last,
        # least significant digit with addend digit 0: its carry is 0, so the result is unchanged.
        first = lax.iota(jnp.uint32, math.prod(shape)).reshape(shape) * jnp.uint32(h)
        digits = lambda t: prng.pair_at(key, first + t.astype(jnp.uint32))  # noqa: E731
        carry = bits.carry_out(digits, P << jnp.uint32(2 * h - b), n_digits=2 * h)
    else:  # other keys, or 2^32 hashes or more: digit j of word q is word q b + j of jax.random.bits(key, ...)
        carry = bits.carry_out(jnp.moveaxis(jax.random.bits(key, shape + (b,), jnp.uint32), -1, 0), P)
    return (carry | ones) & bits.valid_mask(m)


def _precision(precision_bits) -> int:
    return checks.integer("precision_bits", precision_bits, low=1, high=MAX_PRECISION_BITS)


def _grid_numerator(p, b: int):
    """P = round(p 2^b) clipped to [0, 2^b], uint32 (p 2^b is exact in float32)."""
    scaled = jnp.round(jnp.asarray(p, jnp.float32) * jnp.float32(2.0 ** b))
    return jnp.clip(scaled, 0.0, jnp.float32(2.0 ** b)).astype(jnp.uint32)


#: The most examples one packed sample holds (bit slots are indexed by int32).
MAX_EXAMPLES = 2**31 - 32


def draw(key, p, target, m: int, noise: float = 0.0, *, precision_bits: int | None = None) -> Data:
    """m i.i.d. examples x ~ prod_i Bernoulli(p_i), labelled y = target(x) XOR Bernoulli(noise).

    ``p: float32[n]``; ``m`` is static (it fixes shapes). Batch over distributions and targets with
    ``jax.vmap(draw, in_axes=(0, 0, 0, None, None))``.

    ``precision_bits=None`` (default) draws one float uniform per bit. ``precision_bits=b`` samples
    the rounded marginals ``quantize(p, b)`` and noise rate ``quantize(noise, b)`` exactly, from b
    random words per 32 bits instead of 32 (see :func:`packed_bernoulli`); the rounding moves each
    probability by at most 2^-(b+1). The two settings give different samples for the same key.

    Arguments are checked here (values when concrete); the sampling itself is compiled on first
    call for each shape, m and target type (``jax.jit``).

    Under ``jax.jit`` / ``jax.vmap`` a traced p outside [0, 1] (or NaN), a traced noise outside [0, 1], or a
    target whose traced parameters are out of range (``target.in_range()`` False: a padded junta's k outside
    [1, k_max]) cannot raise (issue 58): the sample is :class:`Data`'s poison, no valid examples (``valid`` all 0,
    m = 0; its bits are meaningless): ``sample_error`` on it is NaN and a tree grown on it has NaN
    float fields, so its errors on any data are NaN, never a plausible result (issue 64 item 8).
    """
    key = checks.key("key", key)
    m = checks.integer("m", m, low=1, high=MAX_EXAMPLES)
    p = checks.probabilities("p", p)
    checks.same_n("p", jnp.shape(p)[-1], target)
    if precision_bits is not None:
        precision_bits = _precision(precision_bits)
    noiseless = False
    if checks.is_concrete(noise):
        noiseless = checks.real("noise", noise, low=0.0, high=1.0) == 0.0
    return _draw(key, p, target, m, noise, precision_bits, noiseless)


@functools.partial(jax.jit, static_argnames=("m", "precision_bits", "noiseless"))
def _draw(key, p, target, m: int, noise, precision_bits: int | None, noiseless: bool) -> Data:
    n = jnp.shape(p)[-1]
    k_x, k_noise = prng.split(key)
    if precision_bits is None:
        X = bits.pack(prng.uniform(k_x, (n, m)) < jnp.asarray(p)[:, None])
    else:
        X = packed_bernoulli(k_x, p, m, precision_bits=precision_bits)
    y = target.bits(X)
    if not noiseless:
        if precision_bits is None:
            y = y ^ bits.pack(prng.bernoulli(k_noise, noise, (m,)))
        else:
            y = y ^ packed_bernoulli(k_noise, noise, m, precision_bits=precision_bits)
    valid = jnp.where(_out_of_range(p, noise, target), jnp.uint32(0), bits.valid_mask(m))
    return Data(X, y & valid, valid)


def _out_of_range(p, noise, target):
    """Whether a traced argument of :func:`draw` is out of range (a scalar bool; False for checked concrete ones)."""
    p = jnp.asarray(p, jnp.float32)
    noise = jnp.asarray(noise, jnp.float32)
    bad = jnp.any(~((p >= 0.0) & (p <= 1.0))) | ~((noise >= 0.0) & (noise <= 1.0))
    in_range = getattr(target, "in_range", None)
    return bad if in_range is None else bad | ~in_range()


class WeightRangeWarning(UserWarning):
    """:func:`with_weights` got weights that float32 cannot hold beside the largest: they count as 0."""


#: Float weights beyond this range (largest above 2^64 or smallest positive below 2^-64) are scaled by a power of two.
WEIGHT_RANGE = 2.0**64
#: Positive weights below this fraction of the largest are 0 in float32 arithmetic (XLA flushes subnormals).
WEIGHT_RESOLUTION = 2.0**-126


def with_weights(data: Data, weight) -> Data:
    """``data`` with per-example weights: ``weight: [m]`` (or already ``[32 W]``), float or integer,
    finite and >= 0 (checked when concrete); slots past m get weight 0 (they are not examples).

    Only ratios of weights matter to a learner (growth scales them by a power of two itself). Concrete float
    weights that float32 cannot hold at their scale (the largest above 2^64, or the smallest positive below
    2^-64: 1e-40 is 0 in float32 arithmetic) are scaled, in float64, by the power of two that puts the largest
    in [1/2, 1); positive weights below 2^-126 of the largest still count as 0, with a
    :class:`WeightRangeWarning` naming the range.

    A traced bad weight (negative or not finite, issue 58) cannot raise: the weights come back all NaN and
    ``valid`` empty (m = 0, :class:`Data`'s poison), so a tree grown on them has NaN float fields and its
    ``sample_error`` / ``exact_error`` are NaN, never a plausible result.

    >>> d = with_weights(from_arrays([[0], [1], [1]], [0, 1, 1]), [0.5, 0.25, 0.25])
    >>> d.weight.shape, d.weight.dtype.name
    ((32,), 'float32')
    """
    slots = data.valid.shape[-1] * bits.WORD_BITS
    w = jnp.asarray(weight) if not checks.is_concrete(weight) else np.asarray(weight)
    if w.ndim != 1 or w.shape[0] > slots or w.shape[0] == 0:
        raise ValueError(f"weight must be a 1-d array of one weight per example (at most {slots} for "
                         f"this data), got shape {w.shape}")
    integer = jnp.issubdtype(w.dtype, jnp.integer) or w.dtype == bool
    checks.nonnegative("weight", w)
    if not integer and checks.is_concrete(w):
        w = _float32_range(np.asarray(w, np.float64))
    w = jnp.pad(jnp.asarray(w).astype(jnp.int32 if integer else jnp.float32), (0, slots - w.shape[0]))
    present = bits.unpack(data.valid, slots)
    if checks.is_concrete(weight):
        return data._replace(weight=jnp.where(present, w, 0))
    bad = jnp.any(present & ((w < 0) | ~jnp.isfinite(w.astype(jnp.float32))))
    flagged = jnp.where(present, jnp.where(bad, jnp.nan, w.astype(jnp.float32)), 0)
    if integer:  # integer weights cannot hold NaN: the flag is the empty valid mask alone
        flagged = jnp.where(present & ~bad, w, 0)
    return data._replace(weight=flagged, valid=jnp.where(bad, jnp.uint32(0), data.valid),
                         y=jnp.where(bad, jnp.uint32(0), data.y))


def _float32_range(w: np.ndarray) -> np.ndarray:
    """Float64 weights scaled by a power of two where float32 cannot hold them at their scale; warns about
    positive weights that float32 arithmetic would still turn into 0 beside the largest."""
    positive = w[w > 0]
    if positive.size == 0:
        return w
    top, low = float(positive.max()), float(positive.min())
    if top > WEIGHT_RANGE or low < 1.0 / WEIGHT_RANGE:
        w = w * 2.0 ** -np.frexp(top)[1]
    if low / top < WEIGHT_RESOLUTION:
        lost = int(np.sum(positive / top < WEIGHT_RESOLUTION))
        warnings.warn(f"{lost} positive weight(s) are below 2^-126 (~1.2e-38) of the largest ({low:.3g} against "
                      f"{top:.3g}): float32 cannot resolve that range and counts them as 0; weights within 2^-126 "
                      f"of the largest count", WeightRangeWarning, stacklevel=3)
    return w


def prefix(sample: Data, m) -> Data:
    """The first m examples of ``sample`` (``m`` may be traced; shapes are unchanged). A concrete m must lie
    in [0, 32 W]; a traced one is clamped there.

    Growing on the prefixes of one sample for a grid of m uses common random numbers: the trees
    for different m are then coupled, and one compiled program serves the whole grid.
    """
    if checks.is_concrete(m):  # a traced m past the slots keeps them all, below 0 none
        value = np.asarray(m)
        slots = sample.valid.shape[-1] * bits.WORD_BITS
        if value.ndim != 0 or not np.issubdtype(value.dtype, np.integer):
            raise ValueError(f"m must be an integer scalar in [0, {slots}], got {m!r}")
        checks.integer("m", int(value), low=0, high=slots)
    valid = sample.valid & bits.prefix_mask(sample.valid.shape[-1], m)
    return sample._replace(y=sample.y & valid, valid=valid)


def head(sample: Data, m: int) -> Data:
    """The first m examples of ``sample`` in its first ceil(m / 32) words (``m`` a Python int: the
    shapes shrink, so work that scales with W, such as
    :class:`~jaxtrees.learners.fourier.SparseRecovery`'s moments, costs m).

    >>> d = head(from_arrays([[0], [1], [1]] * 20, [0, 1, 1] * 20), 33)
    >>> d.X.shape, int(d.m)
    ((1, 2), 33)
    """
    w = bits.n_words(checks.integer("m", m, low=1, high=sample.valid.shape[-1] * bits.WORD_BITS))
    part = prefix(sample, m)
    weight = None if part.weight is None else part.weight[..., :w * bits.WORD_BITS]
    return Data(part.X[..., :w], part.y[..., :w], part.valid[..., :w], weight)


def pad(data: Data, n: int, words: int) -> Data:
    """``data`` (unweighted) with zero feature rows up to n features and empty slots up to ``words`` words:
    one shape for data sets of several (a learner told the data's own count, ``features=``, fits the
    same hypothesis).

    >>> d = pad(from_arrays([[0, 1], [1, 1]], [0, 1]), 5, 3)
    >>> d.X.shape, int(d.m)
    ((5, 3), 2)
    """
    if data.weight is not None:
        raise ValueError("pad takes unweighted data (weight None)")
    widen = lambda a, shape: jnp.pad(a, [(0, t - s) for s, t in zip(a.shape, shape)])  # noqa: E731
    return Data(widen(data.X, (n, words)), widen(data.y, (words,)), widen(data.valid, (words,)))


def from_arrays(X, y) -> Data:
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
    return Data(Xp, bits.pack(jnp.asarray(y.astype(bool))), bits.valid_mask(X.shape[0]))

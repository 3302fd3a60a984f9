"""The sample statistics the Fourier learners fit from: coefficient estimates, marginals and Gram matrices.

Weighted data take weighted sums over the unpacked examples, 32 * WORDS_PER_STEP at a time (:func:`weighted_means`,
:func:`moments`). Unweighted data are counted exactly on the packed rows, XOR or AND and popcount
(:func:`count_uniform`; the Gram matrices from the tables of :func:`symmetric_differences` and :func:`subset_unions`:
:func:`uniform_gram`, :func:`biased_moments`).
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxtrees.core import bits
from jaxtrees.core.sampling import Data
from jaxtrees.hypotheses.polynomial import characters, subsets


def count_uniform(data: Data, sets):
    """f~(S) = 1 - 2 popcount(valid & (y ^ XOR_{i in S} X_i)) / m for every row of ``sets``."""
    X = jnp.concatenate([data.X, jnp.zeros_like(data.X[:1])])  # row n: the padding index, all zeros
    parity = bits.reduce_xor(X[sets], axis=-2)  # [K, W]
    disagree, m = bits.count((parity ^ data.y) & data.valid), bits.count(data.valid)
    return (m - 2 * disagree).astype(jnp.float32) / m.astype(jnp.float32)  # one rounding, as the weighted path


def example_weights(data: Data):
    """``float32[W, 32]``: each bit slot's weight (1 for valid examples when unweighted, 0 elsewhere)."""
    W = data.valid.shape[-1]
    valid = bits.unpack(data.valid, W * bits.WORD_BITS).astype(jnp.float32)
    weight = valid if data.weight is None else valid * data.weight
    return weight.reshape(W, bits.WORD_BITS)


def estimated_marginals(data: Data):
    """p^_i: the (weighted) fraction of examples with x_i = 1, clipped into [1 / 2m, 1 - 1 / 2m]."""
    n, W = data.X.shape
    weight = example_weights(data).reshape(-1)
    ones = jnp.matmul(bits.unpack(data.X, W * bits.WORD_BITS).astype(jnp.float32), weight, precision=lax.Precision.HIGHEST)
    eps = 0.5 / bits.count(data.valid).astype(jnp.float32)
    return jnp.clip(ones / jnp.sum(weight), eps, 1.0 - eps)


#: Words of examples whose characters are evaluated per step of the weighted estimate.
WORDS_PER_STEP = 8


def weighted_means(data: Data, sets, p):
    """f~(S) = sum_t w_t F_t phi_S(x_t) / sum_t w_t, 32 * WORDS_PER_STEP examples per step."""
    weight = example_weights(data)

    def word(args):  # one word's 32 examples -> their weighted sum of F phi_S, float32[K]
        column, y, w = args
        x = bits.unpack(column[:, None], bits.WORD_BITS).T  # [32, n]
        F = 1.0 - 2.0 * bits.unpack(y[None], bits.WORD_BITS).astype(jnp.float32)
        return jnp.matmul(w * F, characters(sets, x, p), precision=lax.Precision.HIGHEST)

    sums = lax.map(word, (data.X.T, data.y, weight), batch_size=WORDS_PER_STEP)
    return jnp.sum(sums, axis=0) / jnp.sum(weight)


#: :func:`symmetric_differences` serves at most this many sets (its K x K index is a constant of
#: the program: 4 MiB at K = 1024) and this many distinct symmetric differences.
TABLE_SETS, TABLE_DIFFERENCES = 1024, 2**15
#: Words of examples per step of :func:`uniform_gram`.
GRAM_WORDS_PER_STEP = 16


@functools.lru_cache(maxsize=16)
def symmetric_differences(n: int, degree: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(U ``int32[D, w]``, index ``int32[K, K]``) for the K rows of ``subsets(n, degree)``: the D
    distinct symmetric differences S_a xor S_b, each listing its coordinates padded with n, and
    for each pair (a, b) the row of U that is S_a xor S_b; None beyond ``TABLE_SETS`` sets or
    ``TABLE_DIFFERENCES`` differences.

    chi_{S_a}(x) chi_{S_b}(x) = chi_{S_a xor S_b}(x), so the uniform Gram matrix needs only the D
    character means (:func:`uniform_gram`) instead of a K x K product per example.

    >>> U, index = symmetric_differences(3, 1)      # sets {}, {0}, {1}, {2}
    >>> U[index[1, 2]].tolist(), U[index[2, 2]].tolist()   # {0} xor {1}, {1} xor {1} = {}
    ([0, 1], [3, 3])
    """
    table = _pairwise(n, degree, np.bitwise_xor)
    if table is None:
        return None
    _, unique, _, index = table
    coords = np.unpackbits(unique.view(np.uint8).reshape(len(unique), -1), axis=1, count=n).astype(bool)
    width = max(1, int(coords.sum(axis=1).max()))
    rows = np.sort(np.where(coords, np.arange(n), n), axis=1)[:, :width]
    return rows.astype(np.int32), index


def _pairwise(n: int, degree: int, combine):
    """For the K rows of ``subsets(n, degree)`` packed as bits (``uint8[K, ceil(n / 8)]``), the
    distinct ``combine(S_a, S_b)`` over all pairs (as packed void scalars), the first pair (a K + b)
    that makes each, and ``int32[K, K]``: each pair's row among them; None beyond ``TABLE_SETS``
    sets or ``TABLE_DIFFERENCES`` distinct results."""
    sets = subsets(n, degree)
    K = len(sets)
    if K > TABLE_SETS:
        return None
    member = np.zeros((K, n + 1), bool)
    member[np.arange(K)[:, None], sets] = True
    packed = np.packbits(member[:, :n], axis=1)
    pairs = np.ascontiguousarray(combine(packed[:, None, :], packed[None, :, :])).reshape(K * K, -1)
    unique, first, index = np.unique(pairs.view(f"V{pairs.shape[1]}").ravel(), return_index=True,
                                     return_inverse=True)
    if len(unique) > TABLE_DIFFERENCES:
        return None
    return packed, unique, first, index.reshape(K, K).astype(np.int32)


def uniform_gram(data: Data, differences, index):
    """The uniform Gram matrix G[a, b] = mean_t chi_{S_a}(x_t) chi_{S_b}(x_t) of unweighted
    ``data`` from the tables of :func:`symmetric_differences`: one exact count per distinct
    S_a xor S_b (XOR of its packed feature rows, popcount), ``GRAM_WORDS_PER_STEP`` words at a
    time; each entry is an exact integer sum / m, so :func:`moments`' Gram agrees to 1 ulp (the
    division's rounding)."""
    X = jnp.concatenate([data.X, jnp.zeros_like(data.X[:1])])  # row n: the padding index, all zeros
    pad = -X.shape[-1] % GRAM_WORDS_PER_STEP
    X = jnp.pad(X, ((0, 0), (0, pad))).reshape(X.shape[0], -1, GRAM_WORDS_PER_STEP).transpose(1, 0, 2)
    valid = jnp.pad(data.valid, (0, pad)).reshape(-1, GRAM_WORDS_PER_STEP)
    rows = jnp.asarray(differences)

    def step(ones, block):  # [n + 1, words] feature rows, [words] valid bits
        x, v = block
        parity = bits.reduce_xor(x[rows], axis=-2)  # [D, words]
        return ones + jnp.sum(lax.population_count(parity & v).astype(jnp.int32), axis=-1), None

    ones, _ = lax.scan(step, jnp.zeros(rows.shape[0], jnp.int32), (X, valid))
    m = bits.count(data.valid)
    means = (m - 2 * ones).astype(jnp.float32) / m.astype(jnp.float32)
    return means[jnp.asarray(index)]


@functools.lru_cache(maxsize=16)
def subset_unions(n: int, degree: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(pairs ``int32[D, 2]``, index ``int32[K, K]``, parts ``int32[K, 2^degree]``) for the K rows
    of ``subsets(n, degree)``: the D distinct unions S_a | S_b, each as one pair (a, b) that
    makes it; for each pair of rows the union's row in that list; and for each row S the rows of
    its subsets V, one per bit pattern r of S's ``degree`` slots (slot j in V iff bit j of r; a
    pattern that takes a padding slot gives row 0). None beyond ``TABLE_SETS`` sets or
    ``TABLE_DIFFERENCES`` unions. The tables of :func:`biased_moments`.

    >>> pairs, index, parts = subset_unions(3, 1)      # sets {}, {0}, {1}, {2}
    >>> pairs[index[1, 2]].tolist(), parts[2].tolist()   # {0} | {1} from rows (1, 2); {1} has {} and {1}
    ([1, 2], [0, 2])
    """
    table = _pairwise(n, degree, np.bitwise_or)
    if table is None:
        return None
    packed, _, first, index = table
    sets, K = subsets(n, degree), len(packed)
    row_of = {bytes(row): a for a, row in enumerate(packed)}
    parts = np.zeros((K, 2**degree), np.int32)
    for a, row in enumerate(sets):
        for r in range(2**degree):
            chosen = [row[j] for j in range(degree) if r >> j & 1]
            if all(i < n for i in chosen):
                subset = np.zeros(n + 1, bool)
                subset[chosen] = True
                parts[a, r] = row_of[bytes(np.packbits(subset[:n]))]
    pairs = np.stack([first // K, first % K], axis=1)
    return pairs.astype(np.int32), index, parts


def biased_moments(data: Data, sets, p, pairs, index, parts, gram: bool = True):
    """:func:`moments` in the p-biased basis for unweighted ``data``, by counting (the tables of
    :func:`subset_unions`; ``sets`` = ``subsets(n, degree)``).

    Per coordinate let z_i = x_i, or 1 - x_i where p_i > 1/2, so that nu_i = E z_i <= 1/2. Then
    phi_i = s_i (z_i - nu_i) / sigma_i (s_i = -1 for a flipped coordinate), and expanding the
    product, phi_S = sum_{V subset S} M[V, S] z_V with M[V, S] = prod_{i in V} s_i / sigma_i
    prod_{i in S minus V} (-s_i nu_i / sigma_i): at most 2^d monomials z_V = prod_{i in V} z_i. As
    z_V z_W = z_{V | W}, the Gram matrix is G = M^T Z M with Z[V, W] = mean_t z_{V | W}(x_t), and
    b = M^T (mean z_V - 2 mean y z_V). Each monomial mean is an exact count (AND of the packed
    rows, popcount): m D / 32 word operations for the D unions instead of m K^2 flops. Every term
    of the expansion stays O(1) (a coefficient 1 / sigma_i comes with a mean at most nu_i): in
    float32, |G - G_64| <= 1e-5 (tests/test_sparse_recovery.py), also for marginals near 0 or 1.
    With ``gram=False`` only b is computed (G is None; ``pairs`` and ``index`` are not read): LMN's
    estimates, K monomial counts instead of D.
    """
    n, W = data.X.shape
    degree = sets.shape[-1]
    flip = p > 0.5
    nu, sigma = jnp.where(flip, 1.0 - p, p), jnp.sqrt(p * (1.0 - p))
    sign = jnp.where(flip, -1.0, 1.0)
    inside = jnp.concatenate([sign / sigma, jnp.zeros(1)])  # index n: the padding slot (never in V)
    outside = jnp.concatenate([-sign * nu / sigma, jnp.ones(1)])
    chosen = (np.arange(2**degree)[:, None] >> np.arange(degree)) & 1  # [2^d, d]: slot j in V
    M = jnp.prod(jnp.where(chosen, inside[sets][:, None, :], outside[sets][:, None, :]), axis=-1)  # [K, 2^d]

    z = data.X ^ jnp.where(flip, jnp.uint32(0xFFFFFFFF), jnp.uint32(0))[:, None]
    z = jnp.concatenate([z, jnp.full_like(z[:1], 0xFFFFFFFF)])  # row n: the padding index, all ones
    pad = -W % GRAM_WORDS_PER_STEP
    blocks = jnp.pad(z, ((0, 0), (0, pad))).reshape(n + 1, -1, GRAM_WORDS_PER_STEP).transpose(1, 0, 2)
    labels = jnp.pad(data.y, (0, pad)).reshape(-1, GRAM_WORDS_PER_STEP)
    valid = jnp.pad(data.valid, (0, pad)).reshape(-1, GRAM_WORDS_PER_STEP)

    def step(sums, block):  # [n + 1, words] monomial rows, [words] labels and valid bits
        rows, y, v = block
        monomials = lax.reduce(rows[sets], jnp.uint32(0xFFFFFFFF), lax.bitwise_and, (1,)) & v  # [K, words]
        unions = bits.count(monomials[pairs[:, 0]] & monomials[pairs[:, 1]]) if gram else bits.count(monomials)
        return (sums[0] + unions, sums[1] + bits.count(monomials & y)), None

    zeros = (jnp.zeros(pairs.shape[0] if gram else sets.shape[0], jnp.int32), jnp.zeros(sets.shape[0], jnp.int32))
    (unions, labelled), _ = lax.scan(step, zeros, (blocks, labels, valid))
    m = bits.count(data.valid).astype(jnp.float32)
    means = unions.astype(jnp.float32) / m  # mean z_U for each distinct union U (each set V without the Gram)
    parts = jnp.asarray(parts)
    if not gram:
        signed = means - 2.0 * labelled.astype(jnp.float32) / m  # mean (1 - 2y) z_V
        return None, sum(M[:, r] * signed[parts[:, r]] for r in range(2**degree))
    Z = means[jnp.asarray(index)]  # [K, K], symmetric

    def transform(A):  # M^T A by whole rows; a loop, as XLA merged the static gathers of both
        # transforms into one pass of (2^d)^2 scattered reads per entry (4.7x slower for 64 trials)
        return lax.fori_loop(0, 2**degree, lambda r, acc: acc + M[:, r, None] * A[parts[:, r]], jnp.zeros_like(A))

    gram = transform(transform(Z).T)  # M^T (M^T Z)^T = M^T Z M
    signed = Z[:, 0] - 2.0 * labelled.astype(jnp.float32) / m  # mean (1 - 2y) z_V
    correlations = sum(M[:, r] * signed[parts[:, r]] for r in range(2**degree))
    return gram, correlations


def moments(data: Data, sets, p=None):
    """(G ``float32[K, K]``, b ``float32[K]``): the weighted means of phi(x) phi(x)^T and of
    F phi(x) over the sample, for the rows of ``sets``, ``32 * WORDS_PER_STEP`` examples per step."""
    n, W = data.X.shape
    pad = -W % WORDS_PER_STEP
    weight = jnp.pad(example_weights(data), ((0, pad), (0, 0))).reshape(-1, WORDS_PER_STEP * bits.WORD_BITS)
    X = jnp.pad(data.X.T, ((0, pad), (0, 0))).reshape(-1, WORDS_PER_STEP, n)
    y = jnp.pad(data.y, (0, pad)).reshape(-1, WORDS_PER_STEP)
    span, K = WORDS_PER_STEP * bits.WORD_BITS, sets.shape[0]

    def block(sums, args):  # 256 examples: add their weighted phi phi^T and F phi
        columns, labels, w = args
        x = bits.unpack(columns.T, span).T  # [256, n]
        F = 1.0 - 2.0 * bits.unpack(labels, span).astype(jnp.float32)
        phi = characters(sets, x, p)
        gram = jnp.matmul(phi.T, w[:, None] * phi, precision=lax.Precision.HIGHEST)
        return (sums[0] + gram, sums[1] + jnp.matmul(w * F, phi, precision=lax.Precision.HIGHEST)), None

    zeros = (jnp.zeros((K, K), jnp.float32), jnp.zeros((K,), jnp.float32))
    (gram, correlations), _ = lax.scan(block, zeros, (X, y, weight))
    total = jnp.sum(weight)
    return gram / total, correlations / total


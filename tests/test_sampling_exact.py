"""Exact Bernoulli bits from b random words per 32 bits (``precision_bits=b``).

What is shown, and how strongly:

- Exactness of the construction, without statistics: ``bits.carry_out`` on all 2^b lane values
  (b <= 5, every addend) and on random digits (b = 8, 16, 31) equals integer arithmetic; and
  ``packed_bernoulli`` output equals ``[V_t >= 2^b - P]`` with V_t read in numpy from the very
  random words it drew, so Pr[bit] = P / 2^b follows by counting.
- Statistics, each a two-sided test at family-wise false-alarm rate <= 1e-6 (z = 5 per
  Bonferroni-corrected cell, chi-square at its 1 - 1e-6 quantile), fixed keys:
  marginals vs quantize(p) on m = 2^22 (sigma <= 2^-12; a marginal off by >= 6.65 sigma ~ 0.0016
  is caught with probability >= 0.95, so sampling p instead of its rounding at the largest
  rounding 2^-9 would be, and a test checks it is seen), independence across coordinates on
  m = 2^18 (joint frequency of every pair; correlation >= 6.65 / 2^9 ~ 0.013 caught at 95%) and
  across samples (2 x 2 goodness of fit of 2^17 disjoint pairs per coordinate at lags within a
  word, across the word boundary and across words; correlation >= ~0.02 caught at 95%).
- Padding bits zero for m not divisible by 32; vmap equals a loop; the default path of ``draw``
  is bit-for-bit the float-compare code it always was.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from helpers import np_pack, np_unpack
from jaxtrees.core import bits, prng, sampling

Z = 5.0  # per-cell two-sided z bound; with the cell counts below the family-wise rate is < 1e-6
CHI2_3DF_1E6 = 30.66  # scipy.stats.chi2.isf(1e-6, 3)


def lane_digits(V, b):
    """Words whose lane t spells V[t] in b binary digits, most significant first: uint32[b, W]."""
    V = np.asarray(V, np.uint64)
    return np_pack(np.stack([(V >> (b - 1 - j)) & 1 for j in range(b)]).astype(bool))


# ----------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("b", [1, 2, 3, 4, 5])
def test_carry_out_enumerates_every_lane_value(b):
    """All 2^b values of V in the lanes of one word, every addend P: bit t is [V_t + P >= 2^b],
    so exactly P lanes of each residue block are set: Pr = P / 2^b exactly."""
    V = np.arange(32) % 2 ** b
    words = lane_digits(V, b)  # uint32[b, 1]
    P = np.arange(2 ** b, dtype=np.uint32)
    got = np.asarray(jax.jit(jax.vmap(bits.carry_out, in_axes=(None, 0)))(words, P))[:, 0]
    want = np_pack((V[None, :] + P[:, None]) >= 2 ** b)[:, 0]
    np.testing.assert_array_equal(got, want)
    assert [bin(int(w)).count("1") for w in got] == [int(p) * 32 // 2 ** b for p in P]


@pytest.mark.parametrize("b", [8, 16, 31])
def test_carry_out_random_digits(b):
    rng = np.random.default_rng(b)
    V = rng.integers(0, 2 ** b, size=(6, 64), dtype=np.uint64)  # 6 rows of 2 words
    P = rng.integers(0, 2 ** b, size=(6, 1), dtype=np.uint64)
    words = np.stack([lane_digits(v, b) for v in V], axis=1)  # uint32[b, 6, 2]
    got = np.asarray(bits.carry_out(words, P.astype(np.uint32)))
    np.testing.assert_array_equal(got, np_pack(V + P >= 2 ** b))
    if b % 2 == 0:  # digits made two per call, as from one hash
        pairs = lambda j: (jnp.asarray(words)[2 * j], jnp.asarray(words)[2 * j + 1])  # noqa: E731
        got = np.asarray(bits.carry_out(pairs, P.astype(np.uint32), n_digits=b))
        np.testing.assert_array_equal(got, np_pack(V + P >= 2 ** b))
    else:
        with pytest.raises(ValueError, match="multiple"):
            bits.carry_out(lambda j: (jnp.asarray(words)[j], jnp.asarray(words)[j]), P.astype(np.uint32), n_digits=b)


def threefry_digits(key, shape, b):
    """The documented layout for a threefry key: digits 2t, 2t + 1 of output word q are the two
    words of Threefry-2x32(key, (0, q h + t)), h = ceil(b / 2) (``prng.threefry2x32``, checked
    against Random123's known answers in test_prng.py). uint32[b, *shape]."""
    h = (b + 1) // 2
    k0, k1 = np.asarray(jax.random.key_data(key), np.uint32)
    q = np.arange(int(np.prod(shape)), dtype=np.uint32).reshape(shape)
    words = []
    for t in range(h):
        x0, x1 = prng.threefry2x32(k0, k1, np.uint32(0), q * np.uint32(h) + np.uint32(t))
        words += [np.asarray(x0), np.asarray(x1)]
    return np.stack(words[:b])


@pytest.mark.parametrize("impl", ["threefry2x32", "rbg"])  # words made in the adder / drawn first
@pytest.mark.parametrize("b", [1, 2, 5, 8])
def test_packed_bernoulli_is_the_threshold_of_its_own_words(b, impl):
    """Every grid point p = P / 2^b, P = 0..2^b: output bit t == [V_t >= 2^b - P], V_t read in
    numpy from the documented digit layout: for a threefry key both words of ceil(b / 2) hashes
    per output word (:func:`threefry_digits`), for another key ``jax.random.bits(key, (rows, W, b))``."""
    P = np.arange(2 ** b + 1)
    p = (P / 2 ** b).astype(np.float32)
    m, key = 100, jax.random.key(7, impl=impl)
    got = np.asarray(sampling.packed_bernoulli(key, p, m, precision_bits=b))
    shape = (p.size, bits.n_words(m))
    if impl == "threefry2x32":
        digits = threefry_digits(key, shape, b)
    else:
        digits = np.moveaxis(np.asarray(jax.random.bits(key, shape + (b,), jnp.uint32)), -1, 0)
    lanes = np_unpack(digits, m).astype(np.int64)  # [b, rows, m]
    V = sum(lanes[j] << (b - 1 - j) for j in range(b))
    np.testing.assert_array_equal(got, np_pack(V >= 2 ** b - P[:, None]))


def test_quantize():
    p = np.array([0.0, 1e-4, 0.1, 0.4, 100.5 / 256, 0.5, 0.999, 1.0, -0.2, 1.3], np.float32)
    for b in (1, 4, 8, 16, 23):
        q = np.asarray(sampling.quantize(p, b), np.float64)
        assert np.all(q * 2 ** b == np.round(q * 2 ** b)), b  # on the grid
        inside = (p >= 0) & (p <= 1)
        assert np.all(np.abs(q - p)[inside] <= 2.0 ** -(b + 1)), b
        np.testing.assert_array_equal(q[~inside], [0.0, 1.0])
    grid = (np.arange(257) / 256).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(sampling.quantize(grid, 8)), grid)
    assert float(sampling.quantize(100.5 / 256, 8)) == 100 / 256  # ties to even


@pytest.mark.parametrize("bad", [0, 32, 1.5, True, "8"])
def test_precision_bits_checked(bad):
    with pytest.raises(ValueError, match="precision_bits"):
        jt.draw(jax.random.key(0), jnp.full(3, 0.5), jt.parity([0], n=3), 10, precision_bits=bad)


# ----------------------------------------------------------------------------- statistics

B8 = 8
M_BIG = 2 ** 18
# Off-grid values, the extremes, and 100.5/256: rounding moves it by the largest 2^-9.
P_STAT = np.array([0.0, 1.0, 1 / 256, 255 / 256, 0.1, 0.3, 100.5 / 256, 0.5, 0.5, 0.55, 0.7, 0.9],
                  np.float32)


M_MARGINAL = 2 ** 22


def big_sample():
    x = sampling.packed_bernoulli(jax.random.key(11), P_STAT, M_MARGINAL, precision_bits=B8)
    return np_unpack(np.asarray(x), M_MARGINAL)  # bool[n, m]


X_BIG = None


def x_big():
    global X_BIG
    if X_BIG is None:
        X_BIG = big_sample()
    return X_BIG


def test_marginals_match_the_quantized_p():
    """z-test per coordinate against quantize(p, 8); exact at p = 0 and 1. The coordinate at
    100.5/256 is also far (> Z sigma) from the unrounded p: the test sees the 2^-9 rounding."""
    x = x_big()
    q = np.asarray(sampling.quantize(P_STAT, B8), np.float64)
    freq = x.mean(axis=1)
    sd = np.sqrt(q * (1 - q) / M_MARGINAL)
    assert np.all(np.abs(freq - q) <= Z * sd), (freq, q)
    np.testing.assert_array_equal(freq[:2], [0.0, 1.0])
    i = 6
    assert abs(freq[i] - P_STAT[i]) > Z * sd[i], (freq[i], P_STAT[i])


def test_independent_across_coordinates():
    """Joint frequency of ones for every pair of non-degenerate coordinates vs q_i q_j (z-test)."""
    x = x_big()[2:, :M_BIG].astype(np.float64)
    q = np.asarray(sampling.quantize(P_STAT, B8), np.float64)[2:]
    joint = x @ x.T / M_BIG
    pq = np.outer(q, q)
    sd = np.sqrt(pq * (1 - pq) / M_BIG)
    iu = np.triu_indices(q.size, 1)
    z = np.abs(joint - pq)[iu] / sd[iu]
    assert np.all(z <= Z), z.max()


@pytest.mark.parametrize("lag", [1, 2, 7, 16, 31, 32, 33, 64, 1000])
def test_independent_across_samples(lag):
    """Disjoint pairs (x_t, x_{t+lag}) (t in the even blocks of length lag) of each coordinate:
    chi-square goodness of fit of the 2 x 2 table to the product of the quantized marginals.
    Lags within a word (1..31), exactly a word (32), across the word boundary and across words."""
    x = x_big()[2:, :M_BIG]
    q = np.asarray(sampling.quantize(P_STAT, B8), np.float64)[2:]
    t = np.arange(M_BIG - lag)
    t = t[(t // lag) % 2 == 0]
    a, c = x[:, t], x[:, t + lag]
    for i in range(q.size):
        obs = np.array([np.sum(~a[i] & ~c[i]), np.sum(~a[i] & c[i]), np.sum(a[i] & ~c[i]), np.sum(a[i] & c[i])])
        pr = np.array([(1 - q[i]) ** 2, (1 - q[i]) * q[i], q[i] * (1 - q[i]), q[i] ** 2])
        exp = pr * t.size
        chi2 = np.sum((obs - exp) ** 2 / exp)
        assert chi2 <= CHI2_3DF_1E6, (i, lag, chi2)


def test_label_noise_rate():
    """Noise eta = 0.1 flips labels at rate quantize(0.1, 8) = 26/256 (z-test); eta = 0 never."""
    n, m = 4, 2 ** 16
    p = np.full(n, 0.5, np.float32)
    f = jt.parity([0, 2], n=n)
    etas = np.array([0.0, 0.1], np.float32)  # traced: no shortcut for eta = 0
    draws = jax.jit(jax.vmap(lambda e: jt.draw(jax.random.key(3), p, f, m, noise=e, precision_bits=B8)))
    ss = jax.device_get(draws(etas))
    for i, eta in enumerate(etas):
        s = jax.tree.map(lambda a: a[i], ss)
        x = np_unpack(s.X, m)
        flips = np_unpack(s.y, m) != (x[0] ^ x[2])
        q = float(sampling.quantize(eta, B8))
        assert abs(flips.mean() - q) <= Z * np.sqrt(q * (1 - q) / m) + 1e-12, (eta, flips.mean())


# ----------------------------------------------------------------------------- layout, batching


@pytest.mark.parametrize("m", [1, 33, 100])
def test_padding_bits_zero(m):
    p = np.array([0.0, 0.3, 0.5, 1.0], np.float32)
    f = jt.junta([3], [1, 1], n=4)  # constant 1
    both = jax.jit(lambda key: (sampling.packed_bernoulli(key, p, m, precision_bits=12),
                                jt.draw(key, p, f, m, noise=0.3, precision_bits=12)))
    x, s = jax.device_get(both(jax.random.key(m)))
    assert x.shape == (4, bits.n_words(m))
    valid = np_pack(np.ones(m, bool))
    assert not np.any(x & ~valid)
    np.testing.assert_array_equal(x[3], valid)  # p = 1: exactly the valid bits
    assert not np.any(x[0])
    assert not np.any(s.X & ~s.valid) and not np.any(s.y & ~s.valid)
    assert int(jt.Data(*s).m) == m


def test_vmap_equals_loop():
    """Batched draws (marginals, targets, traced noise) are bit-identical to single draws."""
    Bn, n, m = 6, 10, 200
    keys = jax.random.split(jax.random.key(5), Bn)
    p = jt.marginals(jt.smoothed(c=0.2), jax.random.key(6), n, batch=Bn)
    fs = jax.vmap(lambda k: jt.random_parity(k, n=n, k=3))(keys)
    etas = jnp.linspace(0.0, 0.3, Bn)
    draw = lambda k, p, f, e: jt.draw(k, p, f, m, noise=e, precision_bits=10)  # noqa: E731
    batched = jax.device_get(jax.jit(jax.vmap(draw))(keys, p, fs, etas))
    single = jax.jit(draw)
    for i in range(Bn):
        s = jax.device_get(single(keys[i], p[i], jax.tree.map(lambda a: a[i], fs), etas[i]))
        for field, a, c in zip(("X", "y", "valid"), batched, s):
            np.testing.assert_array_equal(a[i], c, err_msg=f"{field} {i}")


def test_default_draw_is_unchanged():
    """precision_bits=None is bit-for-bit the float-compare sampler draw always used."""
    n, m, eta = 7, 77, 0.2
    key = jax.random.key(9)
    p = jt.smoothed(c=0.3).marginals(jax.random.key(10), n)
    f = jt.random_parity(jax.random.key(12), n=n, k=2)
    k_x, k_noise = jax.random.split(key)
    X = bits.pack(jax.random.uniform(k_x, (n, m), jnp.float32) < p[:, None])
    y = (f.bits(X) ^ bits.pack(jax.random.bernoulli(k_noise, eta, (m,)))) & bits.valid_mask(m)
    s = jt.draw(key, p, f, m, noise=eta)
    np.testing.assert_array_equal(s.X, X)
    np.testing.assert_array_equal(s.y, y)
    np.testing.assert_array_equal(sampling.packed_bernoulli(k_x, p, m), X)


def test_other_prng_implementations():
    """Any typed key works, e.g. impl='rbg' (faster on some backends; note that its vmap
    batching rule does not reproduce a loop of single draws)."""
    m = 2 ** 14
    p = np.array([0.25, 0.5, 0.8], np.float32)
    x = np_unpack(np.asarray(sampling.packed_bernoulli(jax.random.key(1, impl="rbg"), p, m, precision_bits=8)), m)
    q = np.asarray(sampling.quantize(p, 8), np.float64)
    assert np.all(np.abs(x.mean(axis=1) - q) <= Z * np.sqrt(q * (1 - q) / m))


# ----------------------------------------------------------------------------- study outcomes


@pytest.mark.slow
def test_study_outcomes_same_distribution_as_float_sampler():
    """What a learning study measures does not depend on the sampler. With p on the 2^-16 grid
    the float sampler is exact too (its uniform is a multiple of 2^-23, so Pr[u < P 2^-16] =
    P 2^-16), so both arms draw from the same distribution, from independent keys. Per m in the
    grid: P[exact error 0] by a two-proportion z-test and the mean exact error by a two-sample
    z-test, each at |z| <= 5 (family-wise false alarm < 1e-5 over the 8 tests). N = 8192 trials
    per arm: a difference in success rate of >= 0.053 (at rates near 1/2) is caught with
    probability >= 0.95."""
    n, k, N = 16, 3, 8192
    ms = jnp.asarray([16, 64, 256, 1024])
    rule = jt.GrowthRule(max_depth=k, impurity="entropy")

    def trial(key, precision_bits):
        kp, kf, ks = jax.random.split(key, 3)
        p = jt.quantize(jt.smoothed(c=0.1).marginals(kp, n), 16)
        f = jt.random_junta(kf, n, k)
        s = jt.draw(ks, p, f, 1024, precision_bits=precision_bits)  # = ms[-1]
        return jax.lax.map(lambda m: jt.exact_error(jt.grow(jt.prefix(s, m), rule), p, f), ms)

    errors = {}
    for arm, (seed, precision_bits) in {"dyadic": (1, 16), "float": (2, None)}.items():
        keys = jax.random.split(jax.random.key(seed), N)
        run = jax.jit(lambda K, b=precision_bits: jax.lax.map(lambda q: trial(q, b), K, batch_size=256))
        errors[arm] = np.asarray(run(keys), np.float64)  # [N, len(ms)]
    for j in range(len(ms)):
        a, b = errors["dyadic"][:, j], errors["float"][:, j]
        sa, sb = np.mean(a <= 1e-6), np.mean(b <= 1e-6)
        pooled = (sa + sb) / 2
        se = np.sqrt(max(pooled * (1 - pooled), 1e-12) * 2 / N)
        assert abs(sa - sb) <= Z * se, (int(ms[j]), sa, sb)
        se_mean = np.sqrt((a.var() + b.var()) / N)
        assert abs(a.mean() - b.mean()) <= Z * max(se_mean, 1e-12), (int(ms[j]), a.mean(), b.mean())
    assert 0.2 < np.mean(errors["dyadic"][:, -1] <= 1e-6) <= 1.0  # the workload learns something

"""Distribution families, targets (plain and bit-packed evaluation) and packed sampling.

Statistical checks use fixed keys, so they are deterministic; their tolerances are stated where
they are used (5 sigma for means and rates; the 1% critical value 1.63 / sqrt(N) of the
Kolmogorov-Smirnov statistic for distribution shapes).
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import helpers
import jaxtrees as jt
from jaxtrees.core import bits, distributions
from jaxtrees import targets

F32_HALF_ULP = 2.0**-25  # float32 rounding of a value in [0.25, 1): at most 2^-25 ~ 3e-8


def ks_uniform(u):
    """Kolmogorov-Smirnov distance between the empirical law of u and U[0, 1]."""
    u = np.sort(np.asarray(u, np.float64))
    n = u.size
    return max(np.max(np.arange(1, n + 1) / n - u), np.max(u - np.arange(n) / n))


def ks_bound(n):
    return 1.63 / np.sqrt(n)


# ----------------------------------------------------------------------------- families


def test_uniform_marginals():
    p = jt.uniform().marginals(jax.random.key(0), 9)
    assert p.shape == (9,) and p.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(p), 0.5)


def test_product_marginals_are_p():
    p = np.array([0.0, 0.2, 0.5, 0.9, 1.0])
    fam = jt.product(p)
    out = fam.marginals(jax.random.key(0), 5)
    assert out.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(out), p.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(fam.marginals(jax.random.key(1), 5)), np.asarray(out))


@pytest.mark.parametrize("alpha,c", [(0.05, 0.1), (0.0, 0.0), (0.2, 0.25), (0.0, 0.3), (0.3, 0.0)])
def test_alpha_c_marginals_in_range_and_uniform(alpha, c):
    fam = jt.alpha_c(alpha=alpha, c=c)
    p = np.asarray(distributions.marginals(fam, jax.random.key(7), 1000, batch=40), np.float64).ravel()
    d = np.abs(p - 0.5)
    # |p - 1/2| > c and alpha < p < 1 - alpha, up to float32 rounding of 1/2 +- d.
    assert np.all(d > c - F32_HALF_ULP), d.min()
    assert np.all((p > alpha - F32_HALF_ULP) & (p < 1 - alpha + F32_HALF_ULP)), (p.min(), p.max())
    assert np.mean(d > c) > 0.999
    # Drawn as documented: |p - 1/2| ~ U[c, 1/2 - alpha), sign fair (5 sigma).
    assert ks_uniform((d - c) / (0.5 - alpha - c)) < ks_bound(p.size)
    assert abs(np.mean(p > 0.5) - 0.5) < 5 * 0.5 / np.sqrt(p.size)


SMOOTHED = [  # (c, p_hat, delta)
    (0.1, 0.5, 0.0),
    (0.2, 0.35, 0.1),
    (0.05, np.linspace(0.3, 0.7, 50), 0.2),
    (0.0, np.linspace(0.0, 1.0, 50), 0.0),
]


@pytest.mark.parametrize("c,p_hat,delta", SMOOTHED)
def test_smoothed_marginals_in_range(c, p_hat, delta):
    fam = jt.smoothed(c=c, p_hat=p_hat, delta=delta)
    p = np.asarray(distributions.marginals(fam, jax.random.key(3), 50, batch=200), np.float64)
    p_hat = np.broadcast_to(np.asarray(p_hat, np.float64), (50,))
    assert np.all(p >= p_hat - c - 1e-7) and np.all(p <= p_hat + c + 1e-7)
    assert np.all(p >= delta - 1e-7) and np.all(p <= 1 - delta + 1e-7)
    if c == 0:
        np.testing.assert_array_equal(p, np.broadcast_to(p_hat.astype(np.float32), p.shape))


def test_smoothed_delta_distribution():
    """Delta = p - p_hat ~ U[-c, c] i.i.d.: mean 0 and variance c^2/3 (5 sigma), KS to U[-c, c]
    below its 1% critical value, and no correlation between neighbouring coordinates."""
    c, p_hat = 0.15, 0.45
    p = np.asarray(distributions.marginals(jt.smoothed(c=c, p_hat=p_hat), jax.random.key(11), 500, batch=100),
                   np.float64)
    delta = (p - np.float32(p_hat)).ravel()
    N = delta.size
    assert abs(delta.mean()) < 5 * (c / np.sqrt(3)) / np.sqrt(N)
    # Var of the sample variance of U[-c,c]: (mu4 - sigma^4)/N with mu4 = c^4/5, sigma^2 = c^2/3.
    assert abs(delta.var() - c**2 / 3) < 5 * np.sqrt((c**4 / 5 - c**4 / 9) / N)
    assert ks_uniform((delta + c) / (2 * c)) < ks_bound(N)
    rows = p - np.float32(p_hat)
    corr = np.corrcoef(rows[:, :-1].ravel(), rows[:, 1:].ravel())[0, 1]
    assert abs(corr) < 5 / np.sqrt(rows[:, 1:].size)


def test_ks_check_is_not_vacuous():
    """A normal Delta with the same variance fails the KS bound used above."""
    rng = np.random.default_rng(0)
    c, N = 0.15, 50_000
    normal = rng.normal(0, c / np.sqrt(3), N)
    assert ks_uniform(np.clip((normal + c) / (2 * c), 0, 1)) > ks_bound(N)


# ----------------------------------------------------------------------------- targets
# Evaluations are jitted (one small compile per target type, k and shape): eager jax compiles
# every primitive per shape, which is far slower here.


@jax.jit
def plain_and_packed(f, x):
    """f(x) on plain rows x: bool[m, n], and f.bits on the packed columns, raw and unpacked."""
    packed = f.bits(bits.pack(x.T))
    return f(x), packed, bits.unpack(packed, x.shape[0])


evaluate = jax.jit(lambda f, x: f(x))


def random_inputs(seed, m, n):
    return np.random.default_rng(seed).integers(0, 2, (m, n)).astype(bool)


def hand_targets(n=8):
    return [
        jt.junta([3, 0, 5], [0, 1, 1, 0, 1, 0, 0, 1], n=n),
        jt.junta([7], [1, 1], n=n),  # constant 1: its .bits sets the padding bits too
        jt.parity([1, 2, 6], n=n),
        jt.parity([4], n=n),
    ]


def random_targets(n=8):
    """Juntas with k = 1..4 and parities with k = 1..3 on random supports (numpy-drawn tables,
    some degenerate; jaxtrees.random_junta itself is tested below)."""
    rng = np.random.default_rng(21)
    juntas = [jt.junta(rng.choice(n, k, replace=False), rng.integers(0, 2, 2**k), n=n) for k in (1, 2, 3, 4)]
    return juntas + [jt.parity(rng.choice(n, k, replace=False), n=n) for k in (1, 2, 3)]


@pytest.mark.parametrize("m", [1, 100])
def test_bits_agree_with_call(m):
    n = 8
    x = random_inputs(m, m, n)
    for f in hand_targets(n) + random_targets(n):
        plain, packed, unpacked_ = jax.device_get(plain_and_packed(f, x))
        assert plain.dtype == np.int32 and plain.shape == (m,)
        assert packed.dtype == np.uint32 and packed.shape == (helpers.n_words(m),)
        np.testing.assert_array_equal(unpacked_.astype(np.int32), plain, err_msg=repr(f))
        np.testing.assert_array_equal(helpers.np_unpack(packed, m), unpacked_)


def test_addressing_ignores_coordinates_past_its_n():
    """f_{1,2} has n = 4 + 4 = 8 variables; at n = 11 both evaluations agree and ignore x_8..x_10."""
    f, x = jt.addressing(1, 2), random_inputs(5, 100, 11)
    plain, _, unpacked_ = jax.device_get(plain_and_packed(f, x))
    np.testing.assert_array_equal(unpacked_.astype(np.int32), plain)
    np.testing.assert_array_equal(plain, np.asarray(evaluate(f, x[:, :8])))


def test_addressing_oracle_ignores_coordinates_past_its_n():
    """The exact oracle of f_{1,2} (n = 8) under a product distribution on 11 coordinates: mu and
    mu1 of the first 8 as on 8 coordinates, and pinning x_8..x_10 leaves the mean at mu (the
    compare study scores addressing targets on n = 17 > 8 coordinates this way)."""
    f = jt.addressing(1, 2)
    p = jnp.asarray(np.random.default_rng(4).uniform(0.2, 0.8, 11), jnp.float32)
    free = jnp.zeros(11, bool)
    mu, mu1 = jax.jit(f.means)(p, free, free)
    mu8, mu1_8 = jax.jit(f.means)(p[:8], free[:8], free[:8])
    np.testing.assert_allclose(float(mu), float(mu8), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(mu1), np.concatenate([np.asarray(mu1_8), [float(mu8)] * 3]), rtol=1e-5)
    x = np.array(list(itertools.product([0, 1], repeat=8)))[:, ::-1]  # every x on the first 8 coordinates
    weight = np.prod(np.where(x == 1, np.asarray(p[:8]), 1 - np.asarray(p[:8])), axis=1)
    np.testing.assert_allclose(float(mu), float(weight @ np.asarray(evaluate(f, x))), rtol=1e-5)


def test_junta_truth_table_convention():
    """a(x) = sum_t x[support[t]] 2^t: support[0] is the least significant bit."""
    x = np.array(list(itertools.product([0, 1], repeat=3)))
    f = jt.junta([2, 0], [0, 1, 0, 0], n=3)  # 1 iff x2 = 1 and x0 = 0
    np.testing.assert_array_equal(np.asarray(evaluate(f, x)), ((x[:, 2] == 1) & (x[:, 0] == 0)).astype(int))
    g = jt.parity([0, 2], n=3)
    np.testing.assert_array_equal(np.asarray(evaluate(g, x)), (x[:, 0] + x[:, 2]) % 2)


def brute_relevant(f, n):
    """Which support variables change f somewhere, by enumerating {0,1}^n."""
    x = np.array(list(itertools.product([0, 1], repeat=n)))
    flips = np.stack([x ^ (np.arange(n) == j) for j in np.asarray(f.support)])  # [k, 2^n, n]
    y = np.asarray(evaluate(f, np.concatenate([x[None], flips])))
    return np.any(y[1:] != y[0], axis=1)


relevant_jit = jax.jit(lambda f: f.relevant())


def test_relevant_matches_brute_force():
    n = 5
    rng = np.random.default_rng(5)
    n_degenerate = 0
    for i in range(24):
        k = 1 + i % 3
        f = jt.junta(rng.choice(n, k, replace=False), rng.integers(0, 2, 2**k), n=n)
        rel = np.asarray(relevant_jit(f))
        np.testing.assert_array_equal(rel, brute_relevant(f, n))
        n_degenerate += not rel.all()
    assert n_degenerate > 0  # the comparison saw both cases
    p = jt.parity([0, 2, 3], n=n)
    np.testing.assert_array_equal(np.asarray(p.relevant()), brute_relevant(p, n))


@functools.partial(jax.jit, static_argnums=(1, 2))
def random_junta_relevant(key, k, nondegenerate):
    f = jt.random_junta(key, n=10, k=k, nondegenerate=nondegenerate)
    return f, f.relevant()


def key_data(seed, count):
    """``count`` raw keys as a numpy array (indexing it costs no eager jax op)."""
    return np.asarray(jax.random.key_data(jax.random.split(jax.random.key(seed), count)))


def draw_juntas(seed, count, k, nondegenerate):
    out = [random_junta_relevant(jax.random.wrap_key_data(kd), k, nondegenerate) for kd in key_data(seed, count)]
    return [jax.device_get(f) for f, _ in out], np.stack([np.asarray(r) for _, r in out])


@pytest.mark.parametrize("k", [1, 3])
def test_random_junta_nondegenerate_depends_on_all_variables(k):
    fs, rel = draw_juntas(k, 64, k, True)
    assert rel.shape == (64, k) and rel.all()
    for f in fs:
        sup = np.asarray(f.support)
        assert np.all(np.diff(sup) > 0) and sup.min() >= 0 and sup.max() < 10
        assert f.table.shape == (2**k,)
    assert len({tuple(np.asarray(f.table)) for f in fs}) > 1


def test_random_junta_degenerate_allowed_when_asked():
    """nondegenerate=False draws tables uniformly: for k = 3, 38 of the 256 tables ignore some
    variable, so 64 keys give some degenerate ones (and the flag above is not vacuous)."""
    _, rel = draw_juntas(2, 64, 3, False)
    n_degenerate = int(np.sum(~rel.all(axis=1)))
    assert 2 <= n_degenerate <= 25  # expected 9.5, sd 2.8


support_mask_parity = jax.jit(lambda key: jt.support_mask(jt.random_parity(key, n=6, k=2), 6))


def test_random_supports_uniform():
    n, k, trials = 6, 2, 300
    masks = np.stack([np.asarray(support_mask_parity(jax.random.wrap_key_data(kd))) for kd in key_data(9, trials)])
    assert np.all(masks.sum(axis=1) == k)
    freq = masks.mean(axis=0)
    q = k / n
    assert np.all(np.abs(freq - q) < 5 * np.sqrt(q * (1 - q) / trials)), freq


def test_support_mask():
    np.testing.assert_array_equal(np.asarray(jt.support_mask(jt.parity([4, 1], n=6), 6)),
                                  [False, True, False, False, True, False])


# ----------------------------------------------------------------------------- draw

M = 4000  # not a multiple of 32
P = np.array([0.0, 0.03, 0.1, 0.25, 0.4, 0.5, 0.5, 0.6, 0.75, 0.9, 0.97, 1.0], np.float32)
N = P.size

draw_jit = jax.jit(jt.draw, static_argnums=(3,))


def unpacked(sample, m):
    """(x: int[m, n], y: int[m]) of a sample, by the numpy layout."""
    sample = jax.device_get(sample)
    return helpers.np_unpack(sample.X, m).T.astype(np.int32), helpers.np_unpack(sample.y, m).astype(np.int32)


def test_draw_marginals_within_5_sigma():
    s = draw_jit(jax.random.key(0), P, jt.parity([1, 4], n=N), M)
    x, _ = unpacked(s, M)
    emp = x.mean(axis=0)
    p = P.astype(np.float64)
    assert np.all(np.abs(emp - p) <= 5 * np.sqrt(p * (1 - p) / M)), emp  # exact at p = 0 and 1
    # Columns are independent: the empirical correlation of two p = 1/2 columns is ~0.
    assert abs(np.corrcoef(x[:, 5], x[:, 6])[0, 1]) < 5 / np.sqrt(M)


@pytest.mark.parametrize("which", range(4))
def test_draw_noiseless_labels_are_target(which):
    f = hand_targets(N)[which]
    x, y = unpacked(draw_jit(jax.random.key(which), P, f, M), M)
    np.testing.assert_array_equal(y, np.asarray(evaluate(f, x)))


draw_noisy = jax.jit(jax.vmap(lambda key, p, f, eta: jt.draw(key, p, f, M, noise=eta), in_axes=(None, None, None, 0)))
ETAS = np.array([0.0, 0.05, 0.2, 0.5], np.float32)


def test_draw_noise_flips_at_rate_eta():
    """Labels flip with probability eta (5 sigma; exactly never for eta = 0). eta is traced here."""
    f = jt.junta([0, 7], [0, 1, 1, 1], n=N)
    ss = draw_noisy(jax.random.key(1), np.full(N, 0.5, np.float32), f, ETAS)
    for i, eta in enumerate(ETAS.astype(np.float64)):
        x, y = unpacked(jax.tree.map(lambda a: a[i], ss), M)
        rate = np.mean(y != np.asarray(evaluate(f, x)))
        assert abs(rate - eta) <= 5 * np.sqrt(eta * (1 - eta) / M), (eta, rate)


def test_draw_concrete_noise_flips():
    """The same with noise a Python float (concrete when draw traces)."""
    f = jt.parity([3], n=N)
    draw = jax.jit(lambda key, p, f: jt.draw(key, p, f, 320, noise=0.25))
    x, y = unpacked(draw(jax.random.key(2), P, f), 320)
    rate = np.mean(y != x[:, 3])
    assert abs(rate - 0.25) <= 5 * np.sqrt(0.25 * 0.75 / 320)


@pytest.mark.parametrize("m", [1, 32, 33, 100])
def test_draw_padding_bits_are_zero(m):
    p = np.full(N, 0.7, np.float32)
    targets_ = hand_targets(N)[1:3] if m == 33 else hand_targets(N)[1:2]
    for f in targets_:  # the constant-1 junta (its .bits sets every bit) and a parity
        s = jax.device_get(draw_jit(jax.random.key(m), p, f, m))
        W = helpers.n_words(m)
        assert s.X.shape == (N, W) and s.y.shape == (W,) and s.valid.shape == (W,)
        assert s.X.dtype == s.y.dtype == s.valid.dtype == np.uint32
        np.testing.assert_array_equal(s.valid, helpers.np_pack(np.ones(m, bool)))
        assert int(jt.Data(*s).m) == m
        assert not np.any(s.y & ~s.valid), f
        assert not np.any(s.X & ~s.valid[None])
        if isinstance(f, targets.Junta):  # constant 1 on the valid bits only
            np.testing.assert_array_equal(s.y, s.valid)


def test_from_arrays_matches_draw_layout():
    f = hand_targets(N)[2]
    s = jax.device_get(draw_jit(jax.random.key(8), P, f, 33))
    x, y = unpacked(s, 33)
    t = jax.device_get(jt.from_arrays(x, y))
    for a, b in zip(s, t):
        np.testing.assert_array_equal(a, b)

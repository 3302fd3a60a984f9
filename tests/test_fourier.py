"""Fourier transforms and exact spectra (jaxtrees.fourier) against a brute-force numpy oracle over
all 2^n inputs and against boofun (an outside implementation; conventions in DESIGN.md), and the
seed's theorem (001) as executable checks on random and learned trees."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxtrees as jt
from jaxtrees import fourier
from jaxtrees.fourier import spectra, transforms

TOL = 1e-6


# ------------------------------------------------------------------------------ numpy oracle


def np_inputs(n):
    """``int[2^n, n]``: row x holds the bits of x, x_0 least significant."""
    return (np.arange(2**n)[:, None] >> np.arange(n)) & 1


def np_coefficients(values, p=None):
    """Every coefficient E[F chi_S] (uniform) or E_p[F phi_S] by direct summation over 2^n inputs."""
    n = int(np.log2(values.shape[-1]))
    x = np_inputs(n)
    if p is None:
        prob = np.full(2**n, 2.0**-n)
        basis = 1.0 - 2.0 * x  # chi_i
    else:
        p = np.asarray(p, np.float64)
        prob = np.prod(np.where(x == 1, p, 1 - p), axis=1)
        basis = (x - p) / np.sqrt(p * (1 - p))  # phi_i
    S = np_inputs(n)  # S as membership rows
    chars = np.prod(np.where(S[:, None, :] == 1, basis[None], 1.0), axis=-1)  # [2^n (S), 2^n (x)]
    return chars @ (prob * values)


def dense(spec, n):
    """A Spectrum (n <= 32) as the dense coefficient vector indexed by mask."""
    out = np.zeros(2**n)
    masks, values = np.asarray(spec.masks)[:, 0].astype(np.int64), np.asarray(spec.values, np.float64)
    np.add.at(out, masks, values)
    return out


def truth_table(f, n):
    f = f.predict if isinstance(f, jt.Tree) else f
    return np.asarray(f(jnp.asarray(np_inputs(n))), np.float64)


def random_tables(rng, count, n):
    return 1.0 - 2.0 * rng.integers(0, 2, (count, 2**n))


# -------------------------------------------------------------------------------- transforms


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_transforms_equal_direct_summation_and_invert(n):
    rng = np.random.default_rng(n)
    tables = random_tables(rng, 3, n)
    tables[2] = rng.normal(size=2**n)  # any real table, not only +-1
    p = rng.uniform(0.05, 0.95, (3, n))
    uniform = np.asarray(fourier.walsh_hadamard(tables))
    biased = np.asarray(fourier.biased_transform(tables, p))
    for b in range(3):
        np.testing.assert_allclose(uniform[b], np_coefficients(tables[b]), atol=1e-5)
        np.testing.assert_allclose(biased[b], np_coefficients(tables[b], p[b]), atol=1e-5)
    np.testing.assert_allclose(np.asarray(fourier.inverse_walsh_hadamard(uniform)), tables, atol=1e-5)
    np.testing.assert_allclose(np.asarray(fourier.inverse_biased_transform(biased, p)), tables, atol=1e-4)
    # Parseval: sum of squares = E[F^2] under the measure
    np.testing.assert_allclose((uniform**2).sum(-1), (tables**2).mean(-1), rtol=1e-5)
    prob = np.prod(np.where(np_inputs(n)[None] == 1, p[:, None], 1 - p[:, None]), axis=-1)
    np.testing.assert_allclose((biased**2).sum(-1), (prob * tables**2).sum(-1), rtol=1e-4)


def test_biased_at_one_half_flips_the_odd_coefficients():
    rng = np.random.default_rng(0)
    table = random_tables(rng, 1, 6)[0]
    sign = (-1.0) ** np.bitwise_count(np.arange(64))
    np.testing.assert_allclose(np.asarray(fourier.biased_transform(table, np.full(6, 0.5))),
                               sign * np.asarray(fourier.walsh_hadamard(table)), atol=1e-6)


def test_transforms_reject_bad_input():
    with pytest.raises(ValueError, match="values must have a last axis of length 2\\^n"):
        fourier.walsh_hadamard(np.ones(6))
    with pytest.raises(ValueError, match=r"p must lie in \(0, 1\)"):
        fourier.biased_transform(np.ones(4), [0.5, 1.0])
    with pytest.raises(ValueError, match=r"p must lie in \(0, 1\)"):
        fourier.biased_transform(np.ones(4), [np.nan, 0.5])
    with pytest.raises(ValueError, match="p must have a last axis of n = 2"):
        fourier.biased_transform(np.ones(4), [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match=r"labels must be 0 or 1 .*got values \[0.5\]"):
        fourier.signs([0, 1, 0.5])


# ----------------------------------------------------------------------------------- boofun


@pytest.fixture(scope="module")
def boofun():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Numba not installed": pure-Python mode is enough here
        bf = pytest.importorskip("boofun")
        import boofun.analysis.p_biased as p_biased
    return bf, p_biased


@pytest.mark.parametrize("n", [3, 6, 10])
def test_spectrum_summaries_agree_with_boofun(boofun, n):
    """Uniform: coefficients, influences, total influence, degree, noise stability equal boofun's.
    p-biased (one p for all coordinates, boofun's model): coefficients are (-1)^|S| times boofun's
    and boofun's influence is ours / (4 p (1 - p)) (DESIGN.md, Fourier conventions)."""
    bf, p_biased = boofun
    rng = np.random.default_rng(n)
    trials = 4 if n < 10 else 2  # boofun runs in pure Python here: n = 10 costs seconds a function
    for trial in range(trials):
        labels = rng.integers(0, 2, 2**n)
        if trial == 1:  # a function of low degree: a 3-junta
            labels = np.asarray(truth_table(jt.random_junta(jax.random.key(n), n, min(3, n)), n), int)
        f = bf.create(labels)
        spec = fourier.spectrum(_Table(labels), n)
        np.testing.assert_allclose(dense(spec, n), f.fourier(), atol=TOL)
        np.testing.assert_allclose(np.asarray(fourier.influences(spec, n)), f.influences(), atol=TOL)
        np.testing.assert_allclose(float(fourier.total_influence(spec)), f.total_influence(), atol=TOL)
        assert int(fourier.degree(spec)) == f.degree()
        np.testing.assert_allclose(float(fourier.noise_stability(spec, 0.3)), f.noise_stability(0.3), atol=TOL)

        p = float(rng.uniform(0.1, 0.9))
        biased = fourier.spectrum(_Table(labels), n, np.full(n, p))
        theirs = p_biased.p_biased_fourier_coefficients(f, p)
        sign = (-1.0) ** np.bitwise_count(np.arange(2**n))
        want = np.array([theirs.get(s, 0.0) for s in range(2**n)]) * sign
        np.testing.assert_allclose(dense(biased, n), want, atol=TOL)
        ours = np.asarray(fourier.influences(biased, n)) / (4 * p * (1 - p))
        np.testing.assert_allclose(ours, [p_biased.p_biased_influence(f, i, p) for i in range(n)], atol=1e-5)


class _Table:
    """A target given by its truth table only (no support, no tree): the full-table path."""

    def __init__(self, labels):
        self.labels = jnp.asarray(labels, jnp.int32)

    def __call__(self, x):
        x = jnp.asarray(x, jnp.int32)
        return self.labels[jnp.sum(x << jnp.arange(x.shape[-1]), axis=-1)]


# ---------------------------------------------------------------------- exact spectra of trees


def learned_tree(key, n, depth, m=256):
    kp, kf, ks = jax.random.split(key, 3)
    p = jt.smoothed(c=0.2).marginals(kp, n)
    return jt.grow(jt.draw(ks, p, jt.random_junta(kf, n, min(4, n)), m), jt.GrowthRule(max_depth=depth, impurity="gini"))


@pytest.mark.parametrize("kind", ["target tree", "learned tree", "junta", "parity", "addressing"])
def test_exact_spectra_equal_the_transform_of_the_truth_table(kind):
    rng = np.random.default_rng(len(kind))
    n = 7
    for trial in range(3):
        key = jax.random.key(trial)
        f = {"target tree": lambda: jt.random_tree(key, n, 3),
             "learned tree": lambda: learned_tree(key, n, 4),
             "junta": lambda: jt.random_junta(key, n, 4, nondegenerate=False),
             "parity": lambda: jt.random_parity(key, n, 1 + trial * 2),
             "addressing": lambda: jt.addressing(1, 2)}[kind]()
        nf = 8 if kind == "addressing" else n
        values = 1.0 - 2.0 * truth_table(f, nf)
        p = rng.uniform(0.05, 0.95, nf)
        np.testing.assert_allclose(dense(fourier.spectrum(f, nf), nf), np_coefficients(values), atol=2e-6)
        np.testing.assert_allclose(dense(fourier.spectrum(f, nf, p), nf), np_coefficients(values, p), atol=1e-5)


def test_tree_with_a_repeated_variable_and_words_beyond_32_features():
    """A path may test a variable twice (the inner test is constant there); features >= 32 use the
    second mask word."""
    n = 40
    feature = jnp.array([35, 35, 3, -1, -1, -1, -1], jnp.int32)  # root x35; left child tests x35 again
    label = jnp.array([0, 0, 0, 1, 0, 1, 0], jnp.int32)
    weight = jnp.array([1, 1, 1, 1, 1, 1, 1], jnp.float32)
    tree = jt.Tree(feature, label, weight, label.astype(jnp.float32), jnp.zeros(7))
    # the function: x35 = 0 -> (x35 = 0 -> label 1); x35 = 1 -> x3 ? 0 : 1
    x = np_inputs(2)  # (x3, x35) as bits 0, 1 of a 2-variable table
    values = 1.0 - 2.0 * np.where(x[:, 1] == 0, 1, np.where(x[:, 0] == 1, 0, 1))
    p = np.full(n, 0.3)
    p[3], p[35] = 0.2, 0.7
    for marginals, sub in ((None, None), (p, p[[3, 35]])):
        spec = fourier.spectrum(tree, n, marginals)
        want = np_coefficients(values, sub)
        for local, subset in enumerate([(), (3,), (35,), (3, 35)]):
            got = float(fourier.coefficient(spec, list(subset), n))
            assert abs(got - want[local]) < 2e-6, (marginals is None, subset, got, want[local])
        assert int(fourier.sparsity(spec)) == int(np.sum(np.abs(want) > TOL))


def test_batched_spectra_equal_single():
    keys = jax.random.split(jax.random.key(3), 5)
    trees = jax.vmap(lambda k: jt.random_tree(k, 10, 4))(keys)
    p = jax.random.uniform(jax.random.key(4), (5, 10), minval=0.1, maxval=0.9)
    batched = jax.vmap(lambda t, q: fourier.spectra.of_tree(t.as_tree(), 10, q))(trees, p)
    for b in range(5):
        single = fourier.spectrum(jax.tree.map(lambda a: a[b], trees), 10, p[b])
        np.testing.assert_array_equal(np.asarray(batched.masks[b]), np.asarray(single.masks))
        np.testing.assert_allclose(np.asarray(batched.values[b]), np.asarray(single.values), atol=1e-6)


def test_spectrum_rejects_bad_input():
    f = jt.random_junta(jax.random.key(0), 8, 3)
    with pytest.raises(ValueError, match=r"p must lie in \(0, 1\)"):
        fourier.spectrum(f, 8, np.r_[np.full(7, 0.5), 0.0])
    with pytest.raises(ValueError, match="p must have a last axis of n = 8"):
        fourier.spectrum(f, 8, np.full(7, 0.5))
    with pytest.raises(ValueError, match="n must be"):
        fourier.spectrum(f, 0)
    deep = jt.Tree(*(jnp.zeros(2**12 - 1, dt) for dt in (jnp.int32, jnp.int32, jnp.float32, jnp.float32, jnp.float32)))
    with pytest.raises(ValueError, match="tree depth must be <= 10"):
        fourier.spectrum(deep, 8)
    with pytest.raises(ValueError, match=r"\|J\| <= 20"):
        fourier.spectrum(jt.parity(np.arange(21), 30), 30)
    with pytest.raises(ValueError, match="n must be <= 24"):
        fourier.spectrum(_Table(np.zeros(2, int)), 30)
    with pytest.raises(ValueError, match=r"labels must be 0 or 1 \(a Boolean truth table\), got values \[2\]"):
        fourier.spectrum(_Table([0, 1, 2, 1]), 2)
    with pytest.raises(ValueError, match=r"eps must be in \(0, 1\]"):
        fourier.approximate(fourier.spectrum(f, 8), 4, 0.0)


# ------------------------------------------------------------------------------ seed 001 theorem


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), n=st.sampled_from([5, 40]), depth=st.integers(1, 5),
       learned=st.booleans(), eps=st.sampled_from([0.5, 0.2, 0.05]))
def test_tree_spectra_obey_the_seed_theorem(seed, n, depth, learned, eps):
    """For a tree with s leaves and depth D (001): L1 <= s, degree <= D; the truncation + Lambda
    construction gives h of degree <= ceil(log2(s / eps)), at most s^2 / eps terms and
    E[(F - h)^2] <= 2 eps, all computed exactly (uniform measure)."""
    key = jax.random.key(seed)
    depth = min(depth, n)
    tree = learned_tree(key, n, depth) if learned else jt.random_tree(key, n, depth).as_tree()
    s, D = int(jt.n_leaves(tree)), int(jt.depth(tree))
    spec = fourier.spectrum(tree, n)
    assert float(fourier.l1(spec)) <= s + 1e-4
    assert int(fourier.degree(spec)) <= D
    np.testing.assert_allclose(float(jnp.sum(spec.values**2)), 1.0, rtol=1e-5)  # Parseval for +-1 F
    a = fourier.approximate(spec, s, eps)
    assert int(a.max_degree) == int(np.ceil(np.log2(s / eps)))
    assert int(fourier.degree(a.h)) <= int(a.max_degree)
    assert int(a.terms) <= s**2 / eps
    assert float(a.squared_error) <= 2 * eps + 1e-5


def test_approximation_error_is_the_dropped_weight():
    """E[(F - h)^2] equals the weight of the coefficients h leaves out (orthogonality)."""
    tree = jt.random_tree(jax.random.key(7), 12, 5).as_tree()
    spec = fourier.spectrum(tree, 12)
    a = fourier.approximate(spec, int(jt.n_leaves(tree)), 0.9)  # d = 6 > 5: only theta drops terms
    dropped = jnp.where(a.h.values == 0, spec.values, 0.0)
    np.testing.assert_allclose(float(a.squared_error), float(jnp.sum(dropped**2)), atol=1e-6)
    assert 0 < int(a.terms) < int(fourier.sparsity(spec))

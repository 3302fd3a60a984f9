"""The Fourier learners (jaxtrees.learners.fourier) and their hypothesis (Polynomial): estimates
against a plain-numpy reference over the examples, the counting path against the weighted path,
recovery of uniform parities that ID3 cannot see, Pr[h != f] <= E[(F - P)^2] computed exactly,
and bad input. Batching, determinism and degenerate data: tests/test_learner_conformance.py."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees.fourier import spectra
from jaxtrees.hypotheses import polynomial
from jaxtrees.learners.fourier import LowDegree, estimated_marginals

TOL = 1e-5


def np_estimates(X, y, degree, p=None, w=None):
    """Every sample mean sum_t w_t F_t phi_S(x_t) / sum_t w_t, |S| <= degree, in subsets' order."""
    m, n = X.shape
    w = np.ones(m) if w is None else np.asarray(w, np.float64)
    F = 1.0 - 2.0 * y
    basis = 1.0 - 2.0 * X if p is None else (X - p) / np.sqrt(p * (1 - p))
    out = []
    for size in range(degree + 1):
        for S in itertools.combinations(range(n), size):
            out.append(np.sum(w * F * np.prod(basis[:, list(S)], axis=1)) / w.sum())
    return np.array(out)


def sample(seed, n=7, m=53):
    rng = np.random.default_rng(seed)
    X = (rng.random((m, n)) < rng.uniform(0.2, 0.8, n)).astype(int)
    y = (X[:, 0] ^ (X[:, 2] & X[:, 3]) ^ (rng.random(m) < 0.1)).astype(int)
    return X, y


def fit(learner, data):
    return jax.jit(learner.fit)(jax.random.key(0), data)


def test_subsets_lists_every_set_once_by_size():
    sets = polynomial.subsets(5, 3)
    assert sets.shape == (polynomial.n_subsets(5, 3), 3) == (26, 3)
    as_sets = [frozenset(int(i) for i in row if i < 5) for row in sets]
    assert len(set(as_sets)) == 26 and as_sets[0] == frozenset()
    assert [len(s) for s in as_sets] == sorted(len(s) for s in as_sets)


@pytest.mark.parametrize("seed", [0, 1])
def test_counting_estimates_equal_the_numpy_sample_means(seed):
    X, y = sample(seed)
    h = fit(LowDegree(degree=3), jt.from_arrays(X, y))
    np.testing.assert_allclose(np.asarray(h.values), np_estimates(X, y, 3), atol=TOL)
    assert h.p is None


def test_weighted_estimates_equal_the_numpy_weighted_means_and_unit_weights_equal_counting():
    X, y = sample(2)
    w = np.random.default_rng(3).uniform(0, 2, len(y)).astype(np.float32)
    data = jt.from_arrays(X, y)
    weights = np.zeros(data.valid.shape[0] * 32, np.float32)
    weights[:len(y)] = w
    h = fit(LowDegree(degree=2), jt.with_weights(data, weights))
    np.testing.assert_allclose(np.asarray(h.values), np_estimates(X, y, 2, w=w), atol=TOL)
    ones = np.where(np.arange(weights.size) < len(y), 1.0, 0.0).astype(np.float32)
    counted = fit(LowDegree(degree=2), data).values
    np.testing.assert_allclose(np.asarray(fit(LowDegree(degree=2), jt.with_weights(data, ones)).values),
                               np.asarray(counted), atol=TOL)


def test_biased_estimates_use_the_samples_marginals():
    X, y = sample(4, m=70)
    data = jt.from_arrays(X, y)
    p = np.clip(X.mean(0), 0.5 / len(y), 1 - 0.5 / len(y))
    np.testing.assert_allclose(np.asarray(estimated_marginals(data)), p, atol=1e-6)
    h = fit(LowDegree(degree=2, basis="biased"), data)
    np.testing.assert_allclose(np.asarray(h.p), p, atol=1e-6)
    np.testing.assert_allclose(np.asarray(h.values), np_estimates(X, y, 2, p=p), atol=1e-4)
    # the hypothesis evaluates P(x) = sum_S c_S phi_S(x) in the same basis
    basis = (X - p) / np.sqrt(p * (1 - p))
    P = sum(c * np.prod(basis[:, [i for i in S if i < X.shape[1]]], axis=1)
            for c, S in zip(np.asarray(h.values, np.float64), np.asarray(h.sets)))
    np.testing.assert_allclose(np.asarray(h.evaluate(X)), P, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(h.predict(X)), (P < 0).astype(int))


def test_threshold_and_max_terms_keep_the_largest_estimates():
    X, y = sample(5)
    data = jt.from_arrays(X, y)
    full = np.asarray(fit(LowDegree(degree=2), data).values)
    kept = np.asarray(fit(LowDegree(degree=2, threshold=0.3), data).values)
    np.testing.assert_allclose(kept, np.where(np.abs(full) >= 0.3, full, 0.0), atol=TOL)
    top = fit(LowDegree(degree=2, max_terms=3), data)
    assert top.sets.shape == (3, 2)
    np.testing.assert_allclose(np.sort(np.abs(np.asarray(top.values))), np.sort(np.abs(full))[-3:], atol=TOL)


@pytest.mark.parametrize("k", [2, 3])
def test_lmn_recovers_a_uniform_parity_that_id3_does_not_see(k):
    n, m = 12, 1024
    key = jax.random.key(k)
    f = jt.random_parity(key, n, k)
    problem = jt.Synthetic(jnp.full((n,), 0.5), f)
    data = problem.train(key, m)
    h = fit(LowDegree(degree=k, max_terms=8), data)
    assert sorted(np.asarray(h.sets[0]).tolist()) == sorted(np.asarray(f.support).tolist())
    assert float(h.values[0]) == 1.0  # every example agrees with chi_J: exact counting
    test = problem.test(key, m)
    assert float(jt.sample_error(h, test)) == 0.0
    tree = jax.jit(jt.learners.get("id3-entropy").fit)(key, data)
    assert float(tree.exact_error(problem.p, f)) > 0.3  # no single variable correlates with a parity


@pytest.mark.parametrize("basis", ["uniform", "biased"])
def test_estimates_converge_to_the_exact_spectrum_of_a_tree_target(basis):
    n, m = 6, 1 << 16
    key = jax.random.key(11)
    f = jt.random_tree(key, n, 3)
    p = jnp.full((n,), 0.5) if basis == "uniform" else jt.smoothed(c=0.2).marginals(key, n)
    h = fit(LowDegree(degree=n, basis=basis), jt.draw(key, p, f, m))
    exact = spectra.spectrum(f, n, None if basis == "uniform" else p)
    distance = float(spectra.squared_distance(exact, h.spectrum(n)))
    assert distance < 64 * 4.0 / m  # 64 coefficients, each with variance <= Var(F phi_S) / m
    assert float(spectra.l1(h.spectrum(n))) == pytest.approx(float(spectra.l1(exact)), abs=0.3)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sign_error_is_at_most_the_exact_squared_distance(seed):
    """Pr[sign(P) != F] <= E[(F - P)^2] (each disagreement costs (F - P)^2 >= 1), both exact."""
    n = 8
    key = jax.random.key(seed)
    f = jt.random_tree(key, n, 3)
    h = fit(LowDegree(degree=2, threshold=0.05), jt.draw(key, jnp.full((n,), 0.5), f, 200))
    x = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    error = float(np.mean(np.asarray(h.predict(x)) != np.asarray(f(x))))
    distance = float(spectra.squared_distance(spectra.spectrum(f, n), h.spectrum(n)))
    P = np.asarray(h.evaluate(x), np.float64)
    assert distance == pytest.approx(np.mean((1.0 - 2.0 * np.asarray(f(x)) - P) ** 2), rel=1e-4)
    assert error <= distance + 1e-6


def test_predict_bits_matches_predict_across_many_words():
    X, y = sample(6, n=9, m=700)
    h = fit(LowDegree(degree=2), jt.from_arrays(X, y))
    data = jt.from_arrays(X, y)
    packed = np.asarray(jt.bits.unpack(h.predict_bits(data.X), len(y)))
    np.testing.assert_array_equal(packed, np.asarray(h.predict(X)) == 1)


@pytest.mark.parametrize("kwargs, match", [
    (dict(degree=0), r"degree must be in \[1"),
    (dict(degree=1.5), "degree must be an integer"),
    (dict(threshold=1.0), r"threshold must be in \[0"),
    (dict(threshold=-0.1), r"threshold must be in \[0"),
    (dict(max_terms=0), r"max_terms must be in \[1"),
    (dict(basis="chebyshev"), "basis"),
])
def test_bad_configuration_is_refused_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LowDegree(**kwargs)


def test_bad_sizes_are_refused_before_any_work():
    data = jt.from_arrays(np.eye(4, dtype=int), [0, 1, 1, 0])
    with pytest.raises(ValueError, match=r"degree must be in \[1, n\] = \[1, 4\]"):
        LowDegree(degree=5).fit(jax.random.key(0), data)
    with pytest.raises(ValueError, match=r"max_terms must be in \[1, 11\]"):
        LowDegree(degree=2, max_terms=12).fit(jax.random.key(0), data)
    with pytest.raises(ValueError, match="spans 2001001 sets; at most 1048576"):
        polynomial.subsets(2000, 2)

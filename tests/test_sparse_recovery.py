"""Sparse recovery (jaxtrees.learners.fourier.SparseRecovery): its Lasso solution against
scikit-learn's Lasso and against the optimality (KKT) conditions, its moments against numpy, least
squares at l1 = 0, weights as repeated examples, recovery of a parity from fewer examples than
sets where LMN fails, and bad input. Batching, determinism and degenerate data:
tests/test_learner_conformance.py (registered as ``sparse-k``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees.hypotheses import polynomial
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxtrees.learners import fourier, fourier_moments
from jaxtrees.learners.fourier import MAX_GRAM_SETS, LowDegree, SparseRecovery, moments

TOL = 1e-5


def design(X, sets, p=None):
    """The numpy design matrix phi_S(x_t), one column per row of ``sets`` (padded with n)."""
    X = np.asarray(X, np.float64)
    factors = 1.0 - 2.0 * X if p is None else (X - p) / np.sqrt(p * (1.0 - p))
    factors = np.concatenate([factors, np.ones((len(X), 1))], axis=1)
    return np.prod(factors[:, sets], axis=2)


def sample(seed, n=7, m=53):
    rng = np.random.default_rng(seed)
    X = (rng.random((m, n)) < rng.uniform(0.2, 0.8, n)).astype(int)
    y = (X[:, 0] ^ (X[:, 2] & X[:, 3]) ^ (rng.random(m) < 0.1)).astype(int)
    return X, y


def weighted(X, y, w):
    pad = -len(y) % 32
    return jt.with_weights(jt.from_arrays(X, y), np.concatenate([w, np.zeros(pad)]).astype(np.float32))


def fit(learner, data):
    return jax.jit(learner.fit)(jax.random.key(0), data)


@pytest.mark.parametrize("basis", ["uniform", "biased"])
@pytest.mark.parametrize("m", [40, 300])
def test_solution_equals_scikit_learns_lasso_with_an_intercept(basis, m):
    """Our objective is sklearn's Lasso(alpha=l1) on the non-empty characters with the empty set as
    its (unpenalized, weighted-centred) intercept; m = 40 < K = 29 + 1 is the underdetermined case."""
    linear_model = pytest.importorskip("sklearn.linear_model")
    X, y = sample(m, m=m)
    w = np.random.default_rng(m).integers(1, 4, m).astype(np.float64)
    h = fit(SparseRecovery(degree=2, l1=0.02, basis=basis, steps=20000, tol=1e-8), weighted(X, y, w))
    p = None if basis == "uniform" else np.asarray(h.p, np.float64)
    phi = design(X, polynomial.subsets(7, 2), p)
    reference = linear_model.Lasso(alpha=0.02, tol=1e-12, max_iter=100_000).fit(phi[:, 1:], 1 - 2 * y, sample_weight=w)
    np.testing.assert_allclose(np.asarray(h.values), [reference.intercept_, *reference.coef_], atol=TOL)


@pytest.mark.parametrize("basis", ["uniform", "biased"])
def test_moments_equal_the_numpy_means_across_many_words(basis):
    X, y = sample(3, n=6, m=700)  # 22 words: two blocks of 8 and a padded third
    data = jt.from_arrays(X, y)
    p = None if basis == "uniform" else jt.learners.fourier.estimated_marginals(data)
    sets = polynomial.subsets(6, 3)
    gram, correlations = jax.jit(moments)(data, jnp.asarray(sets), p)
    phi = design(X, sets, None if p is None else np.asarray(p, np.float64))
    np.testing.assert_allclose(np.asarray(gram), phi.T @ phi / 700, atol=TOL)
    np.testing.assert_allclose(np.asarray(correlations), phi.T @ (1 - 2 * y) / 700, atol=TOL)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 9), degree=st.integers(1, 3))
def test_symmetric_differences_list_every_pair(n, degree):
    degree = min(degree, n)
    sets = [set(row[row < n].tolist()) for row in polynomial.subsets(n, degree)]
    rows, index = fourier.symmetric_differences(n, degree)
    listed = [frozenset(row[row < n].tolist()) for row in rows]
    assert len(set(listed)) == len(listed)  # distinct
    for a, s_a in enumerate(sets):
        for b, s_b in enumerate(sets):
            assert listed[index[a, b]] == s_a ^ s_b


@pytest.mark.parametrize("n, degree, m", [(6, 3, 700), (16, 3, 1000), (40, 1, 530)])
def test_uniform_gram_equals_the_moments(n, degree, m):
    """From the D character means (22 words at n = 6: a padded second step of 16) the Gram matrix
    and correlations of the numpy design matrix and of the K x K products per example, to 1 ulp
    (integer sums / m: XLA may divide by m as a product with 1 / m)."""
    X, y = sample(n + m, n=n, m=m)
    data = jt.from_arrays(X, y)
    subsets = polynomial.subsets(n, degree)
    phi = design(X, subsets)
    fast = np.asarray(jax.jit(fourier.uniform_gram)(data, *fourier.symmetric_differences(n, degree)))
    np.testing.assert_allclose(fast, phi.T @ phi / m, rtol=0, atol=2**-23)
    counted = np.asarray(jax.jit(fourier_moments.count_uniform)(data, jnp.asarray(subsets)))
    np.testing.assert_allclose(counted, phi.T @ (1 - 2 * y) / m, rtol=0, atol=2**-23)
    gram, correlations = jax.jit(moments)(data, jnp.asarray(subsets))
    np.testing.assert_allclose(fast, np.asarray(gram), rtol=0, atol=2**-23)
    np.testing.assert_allclose(counted, np.asarray(correlations), rtol=0, atol=2**-23)


def test_fit_reads_the_gram_off_character_means_and_solves_the_same_lasso():
    """Unweighted uniform data take the table path; its solution is the Lasso on moments()'s
    Gram matrix (to 1e-6: the two Gram matrices differ by at most 1 ulp). Beyond TABLE_SETS sets
    the table is None (the product path)."""
    X, y = sample(9, n=12, m=400)
    data = jt.from_arrays(X, y)
    learner = SparseRecovery(degree=3, l1=0.03)
    sets = jnp.asarray(polynomial.subsets(12, 3))
    h = fit(learner, data)
    gram, correlations = moments(data, sets)
    penalty = jnp.full(sets.shape[0], 0.03, jnp.float32).at[0].set(0.0)
    values = jax.jit(fourier.lasso, static_argnums=(3, 4))(gram, correlations, penalty, learner.steps, learner.tol)
    np.testing.assert_allclose(np.asarray(h.values), np.asarray(values), rtol=0, atol=1e-6)
    assert fourier.symmetric_differences(64, 2) is None  # K = 2081 > TABLE_SETS


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_default_solver_meets_the_optimality_conditions(seed):
    """KKT of the Lasso at the default steps and tol: with g = G c - b, g_0 = 0 (the unpenalized
    empty set), g_j = -l1 sign(c_j) where c_j != 0, |g_j| <= l1 where c_j = 0."""
    n, l1 = 10, 0.05
    key = jax.random.key(seed)
    f = jt.random_tree(key, n, 3)
    data = jt.draw(key, jt.smoothed(c=0.2).marginals(key, n), f, 150)
    h = fit(SparseRecovery(degree=2, l1=l1), data)
    rows = np.asarray(jt.bits.unpack(jnp.concatenate([data.X, data.y[None]]), 150)).astype(int)
    X, y = rows[:n].T, rows[n]
    phi = design(X, polynomial.subsets(n, 2))
    c = np.asarray(h.values, np.float64)
    g = phi.T @ (phi @ c - (1.0 - 2.0 * y)) / 150
    active = np.abs(c) > 0
    active[0] = False
    assert abs(g[0]) < 1e-4
    np.testing.assert_allclose(g[active], -l1 * np.sign(c[active]), atol=1e-4)
    assert np.all(np.abs(g[~active][1:]) <= l1 + 1e-4)
    assert 1 < active.sum() < len(c) - 1  # the conditions bind on both kinds of coordinate


def test_no_penalty_with_many_examples_is_least_squares():
    X, y = sample(4, m=2000)
    h = fit(SparseRecovery(degree=2, l1=0.0, steps=5000, tol=1e-8), jt.from_arrays(X, y))
    phi = design(X, polynomial.subsets(7, 2))
    solution, *_ = np.linalg.lstsq(phi, 1.0 - 2.0 * y, rcond=None)
    np.testing.assert_allclose(np.asarray(h.values), solution, atol=1e-4)


def test_integer_weights_equal_repeated_examples():
    X, y = sample(5, m=60)
    counts = np.random.default_rng(5).integers(0, 4, 60)
    counts[0] = 1
    repeated = fit(SparseRecovery(degree=2), jt.from_arrays(np.repeat(X, counts, 0), np.repeat(y, counts)))
    weighted_fit = fit(SparseRecovery(degree=2), weighted(X, y, counts.astype(np.float64)))
    np.testing.assert_allclose(np.asarray(weighted_fit.values), np.asarray(repeated.values), atol=TOL)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_a_uniform_parity_from_fewer_examples_than_sets_where_lmn_fails(seed):
    """n = 32, degree 2: K = 529 sets, m = 96 examples. The Lasso finds chi_J exactly (every test
    example right); LMN's 529 separate estimates each carry noise of order m^-1/2 and their sum errs."""
    n, m = 32, 96
    key = jax.random.key(seed)
    f = jt.random_parity(key, n, 2)
    problem = jt.Synthetic(jnp.full((n,), 0.5), f)
    data, test = problem.train(key, m), problem.test(key, 4096)
    h = fit(SparseRecovery(degree=2, max_terms=2), data)
    assert sorted(np.asarray(h.sets[0]).tolist()) == sorted(np.asarray(f.support).tolist())
    assert float(h.values[0]) == pytest.approx(0.95, abs=0.02)  # 1 shrunk by about l1 = 0.05
    assert float(jt.sample_error(h, test)) == 0.0
    assert float(jt.sample_error(fit(LowDegree(degree=2), data), test)) > 0.2


def test_max_terms_keeps_the_largest_coefficients():
    X, y = sample(6)
    data = jt.from_arrays(X, y)
    full = np.asarray(fit(SparseRecovery(degree=2), data).values)
    top = fit(SparseRecovery(degree=2, max_terms=3), data)
    assert top.sets.shape == (3, 2)
    np.testing.assert_allclose(np.sort(np.abs(np.asarray(top.values))), np.sort(np.abs(full))[-3:], atol=TOL)


@pytest.mark.parametrize("kwargs, match", [
    (dict(degree=0), r"degree must be in \[1"),
    (dict(l1=-0.1), r"l1 must be in \[0"),
    (dict(l1=float("nan")), "l1"),
    (dict(max_terms=0), r"max_terms must be in \[1"),
    (dict(basis="chebyshev"), "basis"),
    (dict(steps=0), r"steps must be in \[1"),
    (dict(tol=-1.0), r"tol must be in \[0"),
])
def test_bad_configuration_is_refused_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SparseRecovery(**kwargs)


def test_bad_sizes_are_refused_before_any_work():
    data = jt.from_arrays(np.eye(4, dtype=int), [0, 1, 1, 0])
    with pytest.raises(ValueError, match=r"degree must be in \[1, n\] = \[1, 4\]"):
        SparseRecovery(degree=5).fit(jax.random.key(0), data)
    with pytest.raises(ValueError, match=r"max_terms must be in \[1, 11\]"):
        SparseRecovery(degree=2, max_terms=12).fit(jax.random.key(0), data)
    wide = jt.from_arrays(np.zeros((2, 100), int), [0, 1])
    with pytest.raises(ValueError, match=f"spans 5051 sets; .* at most {MAX_GRAM_SETS} sets"):
        SparseRecovery(degree=2).fit(jax.random.key(0), wide)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 9), degree=st.integers(1, 3))
def test_subset_unions_list_every_pair_and_every_subset(n, degree):
    degree = min(degree, n)
    rows = polynomial.subsets(n, degree)
    sets = [frozenset(row[row < n].tolist()) for row in rows]
    pairs, index, parts = fourier.subset_unions(n, degree)
    unions = [sets[a] | sets[b] for a, b in pairs]
    assert len(set(unions)) == len(unions)  # distinct
    for a, s_a in enumerate(sets):
        for b, s_b in enumerate(sets):
            assert unions[index[a, b]] == s_a | s_b
        for r in range(2**degree):
            slots = [j for j in range(degree) if r >> j & 1]
            if all(rows[a, j] < n for j in slots):
                assert sets[parts[a, r]] == frozenset(rows[a, slots].tolist())


@pytest.mark.parametrize("n, degree, m, low, high, copies", [
    (6, 3, 700, 0.2, 0.8, False),    # 22 words: a padded second step of 16
    (9, 3, 53, 0.01, 0.99, True),    # marginals near 0 and 1, three equal columns
    (10, 3, 3000, 0.001, 0.01, False),  # every marginal near 0 (1 / sigma up to ~30)
    (12, 2, 64, 0.0, 1.0, False),    # constant columns: clipped marginals
    (17, 3, 4000, 0.3, 0.7, False),  # the compare study's n and degree
])
def test_biased_moments_equal_the_float64_design_matrix(n, degree, m, low, high, copies):
    """Counting monomials and changing basis in float32 gives the p-biased Gram matrix and
    correlations of the float64 design matrix to 1e-5 (measured: <= 1.5e-6), also where 1 / sigma
    is large; moments()'s float32 products are no closer."""
    rng = np.random.default_rng(n + m)
    X = (rng.random((m, n)) < rng.uniform(low, high, n)).astype(int)
    if copies:
        X[:, 1] = X[:, 2] = X[:, 0]
    y = (X[:, 0] ^ (X[:, 2] & X[:, 3]) ^ (rng.random(m) < 0.1)).astype(int)
    data = jt.from_arrays(X, y)
    p = fourier.estimated_marginals(data)
    subsets = polynomial.subsets(n, degree)
    gram, correlations = jax.jit(fourier.biased_moments)(data, jnp.asarray(subsets), p, *fourier.subset_unions(n, degree))
    phi = design(X, subsets, np.asarray(p, np.float64))
    np.testing.assert_allclose(np.asarray(gram), phi.T @ phi / m, rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.asarray(correlations), phi.T @ (1 - 2 * y) / m, rtol=0, atol=1e-5)


def test_biased_fit_counts_and_solves_the_lasso_on_the_moments():
    """Unweighted biased data take the counting path; the solution is the Lasso on moments()'s
    Gram matrix to 1e-5; weighted data take moments() itself. Beyond TABLE_SETS sets there is no
    table (the product path)."""
    X, y = sample(4, n=12, m=400)
    data = jt.from_arrays(X, y)
    learner = SparseRecovery(degree=3, l1=0.03, basis="biased")
    sets = jnp.asarray(polynomial.subsets(12, 3))
    h = fit(learner, data)
    gram, correlations = moments(data, sets, fourier.estimated_marginals(data))
    penalty = jnp.full(sets.shape[0], 0.03, jnp.float32).at[0].set(0.0)
    values = jax.jit(fourier.lasso, static_argnums=(3, 4))(gram, correlations, penalty, learner.steps, learner.tol)
    np.testing.assert_allclose(np.asarray(h.values), np.asarray(values), rtol=0, atol=1e-5)
    unit = fit(learner, weighted(X, y, np.ones(400)))  # weights of 1: moments(), the same Lasso
    np.testing.assert_allclose(np.asarray(unit.values), np.asarray(values), rtol=0, atol=1e-5)
    assert fourier.subset_unions(64, 2) is None  # K = 2081 > TABLE_SETS

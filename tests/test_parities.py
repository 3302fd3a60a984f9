"""The exact d-parity weak learner (jaxtrees.learners.parities): its choice against a plain-numpy
exhaustive search over all characters of degree <= d and their negations, agreement with
LowDegree(degree=d, max_terms=1), the same AdaBoost rounds as with LowDegree on real data,
batching, bad input, and (slow) the seed's size d = 3, n = 403, m = 1000 against a chunked
float64 reference."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import datasets
from jaxtrees.hypotheses import polynomial
from jaxtrees.learners import parities
from jaxtrees.learners.boosting import AdaBoost
from jaxtrees.learners.parities import Parities

TOL = 1e-5


def random_data(seed, m=60, n=9, degree=3, noise=0.3, weighted=True):
    """(X, y, w, Data): uniform random bits, labels the parity of ``degree`` random features flipped
    with probability ``noise`` (0.3: the largest |c_S| competes with chance correlations of other
    sets; 0.5: pure noise), and (if weighted) positive weights, else w = 1."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, (m, n))
    y = np.sum(X[:, rng.choice(n, degree, replace=False)], axis=1) % 2 ^ (rng.random(m) < noise)
    w = rng.uniform(0.1, 2.0, m).astype(np.float32) if weighted else np.ones(m, np.float32)
    data = jt.from_arrays(X, y)
    return X, y, w, jt.with_weights(data, w) if weighted else data


def correlation(X, y, w, S):
    """c_S = sum_x w_x F_x chi_S(x) / sum_x w_x in float64."""
    chi = np.prod(1.0 - 2.0 * X[:, list(S)], axis=1)
    return np.sum(w * (1.0 - 2.0 * y) * chi) / np.sum(w, dtype=np.float64)


def chosen(h, n):
    return tuple(int(i) for i in np.asarray(h.sets[0]) if i < n)


def fit(learner, data):
    return jax.jit(learner.fit)(jax.random.key(0), data)


@pytest.fixture(params=[None, 3], ids=["one-step", "steps-of-3-sets"])
def sets_per_step(request, monkeypatch):
    """The default block size (one step at n = 9), or 3 sets of H_b per step: many steps, a padded last one."""
    if request.param is not None:
        monkeypatch.setattr(parities, "SETS_PER_STEP", request.param)
    parities._fit.clear_cache()  # the block size is read when _fit is traced
    yield
    parities._fit.clear_cache()


@pytest.mark.parametrize("degree", [1, 2, 3, 4])
def test_choice_is_the_exhaustive_maximum_over_all_characters_and_negations(degree, sets_per_step):
    X, y, w, data = random_data(degree, degree=degree)
    n = X.shape[1]
    best = max(abs(correlation(X, y, w, S)) for size in range(degree + 1)
               for S in itertools.combinations(range(n), size))
    h = fit(Parities(degree), data)
    S = chosen(h, n)
    assert h.sets.shape == (1, degree) and h.values.shape == (1,) and h.p is None
    assert list(np.asarray(h.sets[0])) == sorted(S) + [n] * (degree - len(S))
    assert abs(abs(correlation(X, y, w, S)) - best) < TOL
    assert abs(float(h.values[0]) - correlation(X, y, w, S)) < TOL
    c, chi = float(h.values[0]), np.prod(1.0 - 2.0 * X[:, list(S)], axis=1)  # h = chi_S or its negation
    np.testing.assert_array_equal(np.asarray(h.predict(X)), (c * chi < 0).astype(int))


@pytest.mark.parametrize("degree", [1, 2, 3])
def test_exact_ties_go_to_the_first_pair_in_scan_order(degree):
    """chi_2 = chi_6 on the sample (feature 6 copies feature 2): S2 = {2} (d = 1), S1 = {2} (d >= 2,
    with S2 = {}) comes before S2 = {6} or S1 = {6}."""
    rng = np.random.default_rng(5)
    X, w = rng.integers(0, 2, (80, 9)), rng.uniform(0.1, 2.0, 80).astype(np.float32)
    X[:, 6] = X[:, 2]
    y = X[:, 2] ^ (rng.random(80) < 0.1)
    h = fit(Parities(degree), jt.with_weights(jt.from_arrays(X, y), w))
    assert np.asarray(h.sets[0]).tolist() == [2] + [9] * (degree - 1)
    assert abs(float(h.values[0]) - correlation(X, y, w, [2])) < TOL


@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("degree", [1, 2, 3])
def test_value_equals_low_degree_with_one_term(degree, weighted):
    X, y, w, data = random_data(10 + degree, m=75, n=11, degree=degree, weighted=weighted)
    ours, theirs = fit(Parities(degree), data), fit(jt.LowDegree(degree=degree, max_terms=1), data)
    assert abs(abs(float(ours.values[0])) - abs(float(theirs.values[0]))) < TOL


def test_adaboost_rounds_equal_those_with_low_degree_on_heart():
    d = datasets.load("heart")
    key = jax.random.key(3)
    train = d.problem().train(key, d.train_size)
    ours = fit(AdaBoost(Parities(2), rounds=20), train)
    theirs = fit(AdaBoost(jt.LowDegree(degree=2, max_terms=1), rounds=20), train)
    np.testing.assert_allclose(np.asarray(ours.rounds.gamma), np.asarray(theirs.rounds.gamma), atol=1e-4)


def test_vmap_equals_a_loop_of_fits():
    batch = [random_data(20 + b, m=70, n=10)[3] for b in range(4)]
    data = jax.tree.map(lambda *a: np.stack(a), *batch)
    keys = jax.random.split(jax.random.key(1), 4)
    learner = Parities(3)
    batched = jax.jit(jax.vmap(learner.fit))(keys, data)
    for b, single in enumerate(batch):
        h = jax.jit(learner.fit)(keys[b], single)
        np.testing.assert_array_equal(np.asarray(batched.sets[b]), np.asarray(h.sets))
        np.testing.assert_allclose(np.asarray(batched.values[b]), np.asarray(h.values), rtol=1e-5, atol=1e-6)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match=r"degree must be in \[1"):
        Parities(0)
    with pytest.raises(ValueError, match="degree must be an integer"):
        Parities(2.0)
    data = random_data(0, m=20, n=4)[3]
    with pytest.raises(ValueError, match=r"degree must be in \[1, n\] = \[1, 4\]"):
        Parities(5).fit(jax.random.key(0), data)
    wide = jt.from_arrays(np.eye(2, 1500, dtype=int), [0, 1])  # C(1500, 2) sets of size <= 2: too many
    with pytest.raises(ValueError, match=f"at most {polynomial.MAX_SETS}"):
        Parities(3).fit(jax.random.key(0), wide)


def reference_top(X, y, w):
    """max |c_S| over |S| <= 3 in float64, by the pairs {j, k} (j < k) chunked over j: the
    products chi_j chi_k against every chi_i (i in {j, k} gives the singletons) and the empty set."""
    F = (1.0 - 2.0 * y) * w / np.sum(w, dtype=np.float64)
    chi = 1.0 - 2.0 * X.astype(np.float64)
    best = max(abs(F.sum()), np.abs(F @ chi).max())
    for j in range(X.shape[1] - 1):
        pairs = F[:, None] * chi[:, j:j + 1] * chi[:, j + 1:]  # [m, n - j - 1]
        best = max(best, np.abs(pairs.sum(0)).max(), np.abs(chi.T @ pairs).max())
    return best


@pytest.mark.slow
def test_degree_3_at_the_seeds_size_equals_a_float64_reference():
    X, y, w, data = random_data(7, m=1000, n=403, noise=0.5)
    h = fit(Parities(3), data)
    S = chosen(h, 403)
    best = reference_top(X, y, w)
    assert abs(abs(correlation(X, y, w, S)) - best) < TOL
    assert abs(float(h.values[0]) - correlation(X, y, w, S)) < TOL

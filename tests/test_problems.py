"""Problems and scores (:mod:`jaxtrees.problems`): a Score says whether its error is exact and on how many test
points it was estimated; every exact path is taken (a tree's oracle, every input when 2^n is small, label noise)."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import learners, problems
from jaxtrees.core import prng

KEY = jax.random.key(3)
LMN = learners.LowDegree(degree=2, threshold=0.1)


def synthetic(n, noise=0.0):
    kp, kf = jax.random.split(KEY)
    return jt.Synthetic(jt.smoothed(c=0.2).marginals(kp, n), jt.random_junta(kf, n, 3), noise)


def test_an_estimated_error_says_its_test_points_and_is_todays_estimate():
    problem = synthetic(14)  # 2^14 inputs > TEST_SIZE: a polynomial is scored on a test sample
    score = problems.fit_and_evaluate(KEY, LMN, problem, m=64)
    assert not bool(score.exact) and int(score.test_points) == problems.TEST_SIZE
    data_key, fit_key = prng.split(KEY)  # the estimate of the default: TEST_SIZE fresh points, as before
    h = LMN.fit(fit_key, problem.train(data_key, 64))
    assert float(score.error) == float(jt.sample_error(h, problem.test(data_key, 64)))
    small = problems.fit_and_evaluate(KEY, LMN, problem, m=64, test_size=100)
    assert not bool(small.exact) and int(small.test_points) == 100
    assert float(small.error) == float(jt.sample_error(h, problem.test(data_key, 64, size=100)))
    with pytest.raises(ValueError, match="test_size"):
        problems.fit_and_evaluate(KEY, LMN, problem, m=64, test_size=0)


def test_every_input_scores_a_polynomial_exactly_when_2_to_the_n_fits_the_test_size():
    n = 6
    problem = synthetic(n)
    score = problems.fit_and_evaluate(KEY, LMN, problem, m=64, test_size=64)  # 2^6 inputs: no more than 64 points
    assert bool(score.exact) and int(score.test_points) == 0
    data_key, fit_key = prng.split(KEY)
    h = LMN.fit(fit_key, problem.train(data_key, 64))
    x = np.asarray(list(itertools.product([0, 1], repeat=n)))
    p = np.asarray(problem.p, np.float64)
    prob = np.prod(np.where(x == 1, p, 1 - p), axis=1)
    wrong = np.asarray(h.predict(x)) != np.asarray(problem.target(x))
    assert float(score.error) == pytest.approx(prob[wrong].sum(), abs=1e-6)
    assert not bool(problems.fit_and_evaluate(KEY, LMN, problem, m=64, test_size=63).exact)
    assert bool(problems.evaluate(h, problem).exact)  # no test data needed where an exact path exists
    with pytest.raises(ValueError, match="pass test"):
        problems.evaluate(h, synthetic(14))


def test_label_noise_is_scored_exactly():
    eta = 0.1
    noisy, clean = synthetic(8, eta), synthetic(8)
    tree = learners.get("id3-entropy").fit(KEY, noisy.train(KEY, 512))
    score = problems.evaluate(tree, noisy)
    assert bool(score.exact) and int(score.test_points) == 0
    err = float(tree.exact_error(clean.p, clean.target))
    assert float(score.error) == pytest.approx(eta + (1 - 2 * eta) * err, abs=1e-6)
    sampled = float(jt.sample_error(tree, noisy.test(KEY, 1, size=200_000)))  # sd <= 0.0012
    assert abs(float(score.error) - sampled) < 0.006
    # a traced noise of 0 gives the noiseless error bit for bit
    traced = jax.jit(lambda e: problems.evaluate(tree, clean._replace(noise=e)).error)(jnp.float32(0.0))
    assert float(traced) == float(problems.evaluate(tree, clean).error)
    with pytest.raises(ValueError, match="noise"):
        noisy.population()


def test_a_data_set_is_scored_on_the_rest_of_its_data():
    rng = np.random.default_rng(0)
    ds = problems.data_set(rng.integers(0, 2, (100, 5)), rng.integers(0, 2, 100))
    score = problems.fit_and_evaluate(KEY, learners.get("stump-error"), ds, m=60)
    assert not bool(score.exact) and int(score.test_points) == 40
    with pytest.raises(ValueError, match="test_size must be None for a DataSet"):
        problems.fit_and_evaluate(KEY, learners.get("stump-error"), ds, m=60, test_size=10)


def test_a_score_vmaps_and_unpacks():
    problem = jt.Synthetic(jnp.full((14,), 0.5), jt.parity([0, 1], 14))
    keys = jax.random.split(KEY, 3)
    scores = jax.jit(jax.vmap(lambda k: problems.fit_and_evaluate(k, LMN, problem, m=64, test_size=256)))(keys)
    error, exact, points = scores
    assert error.shape == exact.shape == points.shape == (3,) and points.tolist() == [256] * 3
    assert problems.Score(jnp.float32(0.0), jnp.asarray(True)).test_points == 0

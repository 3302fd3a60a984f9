"""The learner conformance suite: every registered learner (``jaxtrees.learners.names()``) passes
these checks, with no per-learner code here; registering a learner adds it.

- ``jax.vmap(learner.fit)`` over a batch equals a loop of single fits;
- the same key gives the same hypothesis; a batch fitted in chunks of any size equals one batch;
- degenerate data (m = 1, all labels equal, all weight on one example, n = 1; for population
  learners, marginals at 0 and 1 and a constant target; for query learners, a constant target
  and n = 1) gives a valid hypothesis;
- bad input (wrong shapes, negative or NaN weights, m = 0, marginals outside [0, 1]) raises a
  ValueError naming the parameter;
- the hypothesis predicts packed and plain inputs alike, and an exact error, where the
  hypothesis has one, lies in [0, 1] and matches its error on a large test sample.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import learners
from jaxtrees.core import sampling

NAMES = learners.names()
N, M, B = 8, 96, 4


def problem(key, n=N):
    kp, kf = jax.random.split(key)
    return jt.Synthetic(jt.smoothed(c=0.2).marginals(kp, n), jt.random_junta(kf, n, 3))


def data_for(learner, key, n=N, m=M):
    return jt.problems.data_for(learner, problem(key, n), jax.random.fold_in(key, 7), m)


@functools.lru_cache(maxsize=None)
def compiled(name):
    """``(jit(fit), jit(vmap(fit)))`` of the learner ``name``, made once per process: a new ``jax.jit``
    of ``learner.fit`` compiles again, so every test that fits the same shapes shares these."""
    learner = learners.get(name)
    return jax.jit(learner.fit), jax.jit(jax.vmap(learner.fit))


@functools.lru_cache(maxsize=None)
def fitted(name):
    """(learner, keys, batched data, jit(vmap(fit)) output, loop of single fits)."""
    learner = learners.get(name)
    keys = jax.random.split(jax.random.key(0), B)
    data = jax.vmap(lambda k: data_for(learner, k))(keys)
    fit, run = compiled(name)
    batched = jax.device_get(run(keys, data))
    singles = [jax.device_get(fit(keys[b], jax.tree.map(lambda a: a[b], data))) for b in range(B)]
    return learner, keys, data, batched, singles


def assert_same(a, b, where):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        if np.issubdtype(x.dtype, np.floating):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, err_msg=where)  # vmap may reassociate sums
        else:
            np.testing.assert_array_equal(x, y, err_msg=where)


def assert_valid(h, n, m=M):
    """Predictions are bits, packed and plain agree, and an exact error is a probability."""
    x = jax.random.bernoulli(jax.random.key(9), 0.5, (m, n))
    plain = np.asarray(h.predict(x))
    assert plain.shape == (m,) and set(np.unique(plain)) <= {0, 1}
    packed = jt.bits.pack(x.T)
    np.testing.assert_array_equal(np.asarray(jt.bits.unpack(h.predict_bits(packed), m)), plain == 1)
    if h.exact:
        p = jnp.full((n,), 0.5)
        error = float(h.exact_error(p, jt.parity([0], n)))
        assert 0.0 <= error <= 1.0 + 1e-6


def test_registry_lists_the_ported_learners():
    assert {"id3-entropy", "id3-gini", "id3-kearns_mansour", "population-entropy", "sgd", "stump-error"} <= set(NAMES)
    for name in NAMES:
        learner = learners.get(name)
        assert isinstance(learner, learners.Learner) and learner.access in learners.ACCESS
        assert hash(learner) == hash(learners.get(name)) and learner == learners.get(name)


@pytest.mark.parametrize("name", NAMES)
def test_vmap_equals_loop_of_single_fits(name):
    _, _, _, batched, singles = fitted(name)
    for b, single in enumerate(singles):
        assert_same(jax.tree.map(lambda a: a[b], batched), single, f"{name}: member {b}")


@pytest.mark.parametrize("name", NAMES)
def test_same_key_same_hypothesis_and_chunking_does_not_matter(name):
    learner, keys, data, batched, _ = fitted(name)
    run = compiled(name)[1]  # the program that fitted the batch: run again on the same keys
    again = jax.device_get(run(keys, data))
    assert_same(again, batched, f"{name}: refit")
    halves = [jax.device_get(run(keys[s], jax.tree.map(lambda a: a[s], data))) for s in (slice(0, 2), slice(2, 4))]
    chunked = jax.tree.map(lambda *parts: np.concatenate(parts), *halves)
    assert_same(chunked, batched, f"{name}: chunks of 2")


@pytest.mark.parametrize("name", NAMES)
def test_hypothesis_is_valid_and_exact_error_matches_a_test_sample(name):
    learner, keys, data, batched, singles = fitted(name)
    h = singles[0]
    assert isinstance(h, jt.Hypothesis)
    assert_valid(h, N)
    if h.exact:
        prob = problem(keys[0])
        exact = float(jt.evaluate(h, prob).error)
        test = prob.test(jax.random.key(5), M, size=50_000)  # sd of the estimate <= 0.0023
        sampled = float(jt.sample_error(h, test))
        assert abs(exact - sampled) < 0.01, (exact, sampled)


def degenerate_cases(learner):
    """The degenerate cases, each ``(data, n)``. Those over n = N coordinates have the shapes of the
    batch's members (``data_for``: M examples, a 3-junta target), so they share the compiled
    ``jit(fit)`` of :func:`compiled` with :func:`fitted` and with each other."""
    key = jax.random.key(1)
    if learner.access == "population":
        f = jt.random_junta(key, N, 3)
        p_edges = jnp.asarray(np.r_[np.zeros(N // 2), np.ones(N // 2)], jnp.float32)
        constant = jt.junta([0, 1, 2], np.zeros(8, int), N)
        return {"p at 0 and 1": (jt.problems.Population(p_edges, f), N),
                "constant target": (jt.problems.Population(jnp.full((N,), 0.5), constant), N),
                "n = 1": (jt.problems.Population(jnp.full((1,), 0.3), jt.parity([0], 1)), 1)}
    if learner.access == "query":
        return {"constant target": (jt.problems.Queries(jt.junta([0, 1, 2], np.ones(8, int), N), N), N),
                "n = 1": (jt.problems.Queries(jt.parity([0], 1), 1), 1)}
    rng = np.random.default_rng(0)
    X, y = rng.integers(0, 2, (M, N)), rng.integers(0, 2, M)
    one = np.arange(M) == 0  # m = 1: the first example, in M slots (the rest zero and not valid)
    return {"m = 1": (sampling.prefix(jt.from_arrays(X * one[:, None], y * one), 1), N),
            "all labels equal": (jt.from_arrays(X, np.ones(M, int)), N),
            "all weight on one example": (jt.with_weights(jt.from_arrays(X, y), np.eye(M)[7].astype(np.float32)), N),
            "n = 1": (jt.from_arrays(X[:, :1], y), 1)}


@pytest.mark.parametrize("name", NAMES)
def test_degenerate_data_gives_a_valid_hypothesis(name):
    learner = learners.get(name)
    fit = compiled(name)[0]
    for case, (data, n) in degenerate_cases(learner).items():
        sized = fit if n == N else jax.jit(learners.get(name, learners.Size(n=n)).fit)  # degrees <= n
        h = sized(jax.random.key(2), data)
        assert_valid(h, n)
        if case == "m = 1":
            assert int(data.m) == 1 and data.X.shape == (N, M // jt.bits.WORD_BITS)
        if h.exact and learner.access == "sample" and case == "all labels equal":
            assert int(jt.bits.count(h.predict_bits(data.X) & data.valid)) == M, case


@pytest.mark.parametrize("name", NAMES)
def test_bad_input_raises_a_clear_error(name):
    learner = learners.get(name)
    key = jax.random.key(0)
    if learner.access == "population":
        f = jt.parity([0], N)
        for p, match in ((jnp.full((N,), 1.5), r"p\["), (jnp.full((N,), jnp.nan), r"p\["), (jnp.full((2, N), 0.5), "p")):
            with pytest.raises(ValueError, match=match):
                learner.fit(key, jt.problems.Population(p, f))
        return
    if learner.access == "query":  # queries of the wrong kind; a Queries with n < 1 cannot be built
        with pytest.raises(ValueError, match="membership queries"):
            learner.fit(key, jt.from_arrays(np.eye(N, dtype=int)[:5], [0, 1, 0, 1, 1]))
        with pytest.raises(ValueError, match="n must be"):
            jt.problems.Queries(jt.parity([0], N), 0)
        return
    good = jt.from_arrays(np.eye(N, dtype=int)[:5], [0, 1, 0, 1, 1])
    bad = {
        "data.X": good._replace(X=good.X[0]),
        "data.y": good._replace(y=jnp.zeros((3,), jnp.uint32)),
        "m >= 1": good._replace(valid=jnp.zeros_like(good.valid), y=jnp.zeros_like(good.y)),
        r"data.weight\[1\]": good._replace(weight=jnp.asarray(np.r_[1.0, -1.0, np.zeros(30)], jnp.float32)),
        r"data.weight\[2\]": good._replace(weight=jnp.asarray(np.r_[1.0, 1.0, np.nan, np.zeros(29)], jnp.float32)),
        "data.weight must have": good._replace(weight=jnp.ones((5,), jnp.float32)),
    }
    for match, data in bad.items():
        with pytest.raises(ValueError, match=match):
            learner.fit(key, data)

"""Kushilevitz-Mansour (jaxtrees.learners.kushilevitz_mansour) and query access: one fit against a
plain-numpy reference on the same query points, every heavy coefficient of random sparse targets
found (exact spectra as the oracle) with a failure rate within the stated delta, the budget
arithmetic, uniform parities that ID3 cannot see, and bad input. Batching, determinism and
degenerate data: tests/test_learner_conformance.py."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import problems
from jaxtrees.fourier import spectra
from jaxtrees.learners.kushilevitz_mansour import KushilevitzMansour


def np_bits(words, n):
    """Plain bits bool[..., n] of packed uint32[..., w] (little-endian within a word)."""
    words = np.asarray(words, np.uint64)
    out = (words[..., :, None] >> np.arange(32, dtype=np.uint64)) & 1
    return out.reshape(words.shape[:-1] + (-1,))[..., :n].astype(bool)


def np_km(key, f, n, learner):
    """KM level by level in numpy with the same random triples as the JAX program (drawn from the
    same keys), candidates scored one by one; returns {S: coefficient} of the survivors."""
    samples, width = learner.samples(n), learner.frontier
    keys = jax.random.split(key, n + 1)
    words = -(-n // 32)
    F = lambda points: 1.0 - 2.0 * np.asarray(f(jnp.asarray(points)), np.float64)
    frontier = [(frozenset(), True)] + [(frozenset(), False)] * (width - 1)
    def draw(key, shape):  # the first `samples` rows of the chunks fold_in(key, c), c = 0, 1, ...
        chunk = learner.chunk()
        parts = [np.asarray(jax.random.bits(jax.random.fold_in(key, c), shape(chunk), jnp.uint32))
                 for c in range(-(-samples // chunk))]
        return np.concatenate(parts, axis=-2)[..., :samples, :]

    for j in range(n):
        x, y, z = (np_bits(a, n) for a in draw(keys[j], lambda b: (3, b, words)))
        u, v = np.where(np.arange(n) <= j, y, x), np.where(np.arange(n) <= j, z, x)
        G = F(u) * F(v)
        children = [c for c in frontier] + [(S | {j}, alive) for S, alive in frontier]
        scored = []
        for S, alive in children:
            chi = 1.0 - 2.0 * (np.sum((y ^ z)[:, sorted(S)], axis=1) % 2)
            weight = np.mean(G * chi)
            keep = alive and weight >= learner.theta**2 / 2
            scored.append((weight if keep else -np.inf, S, keep))
        order = sorted(range(len(scored)), key=lambda i: -scored[i][0])[:width]  # stable: lower index first
        frontier = [(scored[i][1], scored[i][2]) for i in order]
    x = np_bits(draw(keys[n], lambda b: (b, words)), n)
    Fx = F(x)
    return {S: float(np.mean(Fx * (1.0 - 2.0 * (np.sum(x[:, sorted(S)], axis=1) % 2)))) for S, alive in frontier if alive}


def found(h, n):
    """{S: coefficient} of the rows with a nonzero coefficient."""
    sets, values = np.asarray(h.sets), np.asarray(h.values)
    return {frozenset(int(i) for i in row if i < n): float(v) for row, v in zip(sets, values) if v != 0.0}


def heavy(f, n, theta):
    """{S: f^(S)} with |f^(S)| >= theta, from the exact spectrum."""
    spec = spectra.spectrum(f, n)
    members = np.asarray(spectra.members(spec, n))
    return {frozenset(np.flatnonzero(row).tolist()): float(v) for row, v in zip(members, np.asarray(spec.values))
            if abs(v) >= theta - 1e-6}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_fit_equals_the_numpy_reference_on_the_same_queries(seed):
    n, key = 9, jax.random.key(seed)
    f = jt.random_junta(jax.random.fold_in(key, 1), n, 3)
    learner = KushilevitzMansour(theta=0.45, budget=(2 * n + 1) * 300)
    h = jax.jit(learner.fit)(key, problems.Queries(f, n))
    reference = np_km(key, f, n, learner)
    assert set(found(h, n)) == {S for S, c in reference.items() if c != 0.0}
    for S, c in found(h, n).items():
        assert abs(c - reference[S]) < 1e-5, S


@pytest.mark.parametrize("family", ["junta", "tree", "addressing"])
def test_a_large_budget_finds_exactly_the_heavy_coefficients(family):
    n, theta = 10, 0.2
    key = jax.random.key(3)
    f = {"junta": lambda: jt.random_junta(key, n, 4), "tree": lambda: jt.random_tree(key, n, 3),
         "addressing": lambda: jt.addressing(1, 2)}[family]()  # 4 address + 4 memory bits
    h = jax.jit(KushilevitzMansour(theta=theta, budget=(2 * n + 1) * 40_000).fit)(key, problems.Queries(f, n))
    truth, got = heavy(f, n, theta), found(h, n)
    assert set(truth) <= set(got)
    for S, c in got.items():  # survivors carry accurate coefficients; the lighter ones are near theta or below
        exact = float(spectra.coefficient(spectra.spectrum(f, n), sorted(S), n))
        assert abs(c - exact) < 0.02, (S, c, exact)
        assert abs(exact) >= theta / 2 - 0.02, (S, exact)


def test_failure_rate_is_within_delta_on_random_sparse_targets():
    """Default (Hoeffding) budget: every |f^(S)| >= theta found in >= 1 - delta of the trials; a
    budget 300x smaller fails visibly, so the check can fail."""
    n, theta, delta, trials = 8, 0.5, 0.1, 120
    keys = jax.random.split(jax.random.key(4), trials)
    f = jax.vmap(lambda k: jt.random_junta(k, n, 3))(keys)  # coefficients multiples of 1/4; 1/2 on the boundary
    truths = [heavy(jax.tree.map(lambda a: a[t], f), n, theta) for t in range(trials)]
    assert sum(len(t) for t in truths) >= trials  # the check has heavy coefficients to find

    def failures(learner):
        h = jax.jit(jax.vmap(learner.fit))(keys, jax.vmap(lambda g: problems.Queries(g, n))(f))
        return sum(not set(truths[t]) <= set(found(jax.tree.map(lambda a: a[t], h), n)) for t in range(trials))

    learner = KushilevitzMansour(theta=theta, delta=delta)
    assert learner.frontier == 16 and learner.samples(n) == math.ceil(32 * math.log(4 * n * 16 / delta) / theta**4)
    rate = failures(learner) / trials
    assert rate <= delta, rate
    starved = failures(KushilevitzMansour(theta=theta, budget=(2 * n + 1) * 12))
    assert starved > 0


def test_budget_arithmetic_and_queries_used():
    km = KushilevitzMansour(theta=0.5, budget=1000)
    assert km.samples(8) == 1000 // 17 and km.queries(8) == 17 * 58 <= 1000
    assert KushilevitzMansour(theta=0.25).frontier == 64
    assert KushilevitzMansour(theta=0.25, width=5).frontier == 5


def test_km_learns_uniform_parities_that_id3_does_not():
    n, key = 16, jax.random.key(5)
    problem = jt.Synthetic(jt.uniform().marginals(key, n), jt.random_parity(key, n, 3))
    km = KushilevitzMansour(theta=0.5, budget=(2 * n + 1) * 256)
    assert float(jt.problems.fit_and_evaluate(key, km, problem, m=1).error) == 0.0
    id3 = jt.learners.get("id3-entropy")  # depth 3, 4096 examples: no coordinate has a gain
    assert float(jt.problems.fit_and_evaluate(key, id3, problem, m=4096).error) > 0.3


def test_bad_input_raises_a_clear_error():
    for kwargs, match in (({"theta": 0.0}, "theta"), ({"theta": 1.0}, "theta"), ({"theta": float("nan")}, "theta"),
                          ({"delta": 0.0}, "delta"), ({"budget": 2}, "budget"), ({"width": 0}, "width"),
                          ({"budget": 2.5}, "budget")):
        with pytest.raises(ValueError, match=match):
            KushilevitzMansour(**kwargs)
    f = jt.parity([0], 8)
    with pytest.raises(ValueError, match=r"budget must be >= 2 n \+ 1 = 17"):
        KushilevitzMansour(budget=16).fit(jax.random.key(0), problems.Queries(f, 8))
    with pytest.raises(ValueError, match="membership queries"):
        KushilevitzMansour().fit(jax.random.key(0), jt.from_arrays([[0, 1]], [1]))
    with pytest.raises(ValueError, match="n must be"):
        problems.Queries(f, 0)
    with pytest.raises(ValueError, match=r"\{0,1\}\[\.\.\., n = 8\]"):
        problems.Queries(f, 8)(jnp.zeros((3, 5), bool))
    data_set = problems.data_set(np.eye(4, dtype=int), [0, 1, 0, 1])
    with pytest.raises(ValueError, match="cannot answer membership queries"):
        problems.data_for(KushilevitzMansour(), data_set, jax.random.key(0), 2)


def test_a_traced_budget_gives_the_fits_of_the_shorter_budgets():
    """fit_triples(s), s traced in one program, equals the fit of the learner whose budget is (2n + 1) s:
    the shorter budget's triples are the first ones of the longer's."""
    n, key = 9, jax.random.key(6)
    f = problems.Queries(jt.random_junta(jax.random.fold_in(key, 1), n, 3), n)
    big = KushilevitzMansour(theta=0.45, budget=(2 * n + 1) * 700)
    fit = jax.jit(lambda s: big.fit_triples(key, f, s))
    for s in (1, 255, 256, 300, 700):
        small = jax.jit(KushilevitzMansour(theta=0.45, budget=(2 * n + 1) * s).fit)(key, f)
        got = fit(s)
        np.testing.assert_array_equal(np.asarray(got.sets), np.asarray(small.sets))
        np.testing.assert_array_equal(np.asarray(got.values), np.asarray(small.values))


def test_memory_does_not_grow_with_the_budget_and_impossible_settings_are_refused():
    """Issue 35 case 8: the estimates stream over chunks of triples, so a small theta with a large budget
    runs in the frontier's memory; a frontier or a budget that cannot run is refused before any work,
    naming theta and the memory or queries it would need."""
    small = KushilevitzMansour(theta=0.02, budget=17 * 10**6)  # width 10,000: 1e6 triples per level
    assert small.working_set(8) < 2**28
    assert KushilevitzMansour(theta=0.45, budget=17 * 10**7).working_set(8) == \
        KushilevitzMansour(theta=0.45, budget=17 * 10).working_set(8)
    f = problems.Queries(jt.parity([0, 3], 8), 8)
    with pytest.raises(ValueError, match=r"theta = 1e-05 keeps a frontier of width = 3999999999\d prefixes.*1788.1 GiB per fit"):
        KushilevitzMansour(theta=1e-5, budget=17 * 100).fit(jax.random.key(0), f)
    with pytest.raises(ValueError, match=r"at most 2147483647 query triples per level.*theta = 0.01"):
        KushilevitzMansour(theta=0.01, width=4).fit(jax.random.key(0), f)
    with pytest.raises(ValueError, match=r"samples must be in \[1, 58\]"):
        KushilevitzMansour(theta=0.5, budget=1000).fit_triples(jax.random.key(0), f, 59)

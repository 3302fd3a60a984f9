"""Targets from a truth table or a Python function (``targets.from_table``, ``random_function``, ``truth_table``), and
``junta`` under jit: traced-safe, equal to the eager result, against numpy references."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import targets

N = 16


def majority(bits):
    return bits.sum(-1) >= 3


def _table_reference(support, table, X):
    """numpy: table[sum_t X[:, support[t]] 2^t]."""
    index = (np.asarray(X)[:, support].astype(np.int64) << np.arange(len(support))).sum(-1)
    return np.asarray(table, np.int32)[index]


def _same(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert jax.tree.structure(a) == jax.tree.structure(b)


def test_exported_from_targets_and_the_facade():
    for name in ("from_table", "random_function"):
        assert getattr(jt, name) is getattr(targets, name)
    assert targets.truth_table is targets.juntas.truth_table


def test_from_table_agrees_with_the_table_on_random_inputs():
    rng = np.random.default_rng(0)
    support = np.array([7, 2, 11, 0])
    table = rng.integers(0, 2, 16)
    X = rng.integers(0, 2, (500, N))
    f = targets.from_table(support, table)
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(X))), _table_reference(support, table, X))
    # The packed labels (what draw uses) agree too.
    data = jt.from_arrays(X, np.zeros(len(X), int))
    labels = np.unpackbits(np.asarray(f.bits(data.X)).view(np.uint8), bitorder="little")[: len(X)]
    np.testing.assert_array_equal(labels, _table_reference(support, table, X))


def test_from_table_under_jit_and_vmap_equals_eager():
    supports = jnp.array([[3, 1, 9], [0, 15, 4]])
    tables = jnp.array([[0, 1, 1, 0, 1, 0, 0, 1], [1, 1, 0, 0, 0, 0, 1, 1]])
    eager = [targets.from_table(s, t) for s, t in zip(supports, tables)]
    jitted = jax.jit(targets.from_table)(supports[0], tables[0])
    _same(jitted, eager[0])
    batched = jax.jit(jax.vmap(targets.from_table))(supports, tables)
    for i, one in enumerate(eager):
        _same(jax.tree.map(lambda a: a[i], batched), one)
    X = jnp.asarray(np.random.default_rng(1).integers(0, 2, (64, N)))
    ys = jax.jit(jax.vmap(lambda s, t: targets.from_table(s, t)(X)))(supports, tables)
    for i in range(2):
        np.testing.assert_array_equal(np.asarray(ys[i]), _table_reference(np.asarray(supports[i]), tables[i], X))


def test_junta_works_under_jit():
    support, table = jnp.array([5, 2]), jnp.array([0, 1, 1, 1])
    _same(jax.jit(lambda s, t: targets.junta(s, t, N))(support, table), targets.junta([5, 2], [0, 1, 1, 1], N))
    # A jitted trial that builds its target from traced arrays and draws from it.
    def trial(key, s, t):
        return jt.draw(key, jnp.full(N, 0.5), targets.junta(s, t, N), m=64).y
    np.testing.assert_array_equal(np.asarray(jax.jit(trial)(jax.random.key(0), support, table)),
                                  np.asarray(trial(jax.random.key(0), support, table)))


def test_random_function_is_majority_on_a_random_support():
    f = targets.random_function(jax.random.key(4), n=N, fn=majority, k=5)
    support = np.asarray(f.support)
    assert len(set(support.tolist())) == 5 and support.min() >= 0 and support.max() < N
    np.testing.assert_array_equal(support, np.asarray(jt.random_junta(jax.random.key(4), N, 5).support))
    X = np.random.default_rng(2).integers(0, 2, (400, N))
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(X))), (X[:, support].sum(1) >= 3).astype(np.int32))


def _means_reference(support, p, fixed, values):
    """numpy: E[maj(x_S)] under the product p with the fixed coordinates set, and E[f | x_i = 1] for every i."""
    q = np.where(fixed, values, p).astype(np.float64)

    def mean(q):
        total = 0.0
        for a in itertools.product((0, 1), repeat=len(support)):
            weight = np.prod([q[j] if bit else 1 - q[j] for j, bit in zip(support, a)])
            total += weight * (sum(a) >= 3)
        return total
    mu1 = [mean(np.where(np.arange(len(q)) == i, 1.0, q)) for i in range(len(q))]
    return mean(q), np.array(mu1)


def test_majority_means_against_numpy():
    f = targets.random_function(jax.random.key(5), n=N, fn=majority, k=5)
    support = np.asarray(f.support).tolist()
    p = np.asarray(jt.smoothed(c=0.2).marginals(jax.random.key(6), N))
    fixed = np.zeros(N, bool)
    fixed[[support[0], (set(range(N)) - set(support)).pop()]] = True
    values = np.zeros(N, bool)
    values[support[0]] = True
    for fx in (np.zeros(N, bool), fixed):
        mu, mu1 = f.means(jnp.asarray(p), jnp.asarray(fx), jnp.asarray(values))
        want_mu, want_mu1 = _means_reference(support, p, fx, values)
        np.testing.assert_allclose(float(mu), want_mu, atol=1e-6)
        np.testing.assert_allclose(np.asarray(mu1), want_mu1, atol=1e-6)
    # Uniform marginals: majority of 5 is 1/2 on average and 11/16 given one of its bits.
    mu, mu1 = f.means(jnp.full(N, 0.5), jnp.zeros(N, bool), jnp.zeros(N, bool))
    assert float(mu) == pytest.approx(0.5) and np.asarray(mu1)[support] == pytest.approx(11 / 16)


def test_random_function_under_jit_and_vmap_equals_eager():
    keys = jax.random.split(jax.random.key(7), 4)

    def build(key):
        return targets.random_function(key, n=N, fn=lambda bits: jnp.sum(bits, -1) >= 3, k=5)
    eager = [build(key) for key in keys]
    _same(jax.jit(build)(keys[0]), eager[0])
    batched = jax.jit(jax.vmap(build))(keys)
    for i, one in enumerate(eager):
        _same(jax.tree.map(lambda a: a[i], batched), one)


def test_truth_table_conventions():
    """Row a holds a's bits, least significant first; numpy, jax.numpy and a vmapped one-vector function agree."""
    np.testing.assert_array_equal(np.asarray(targets.truth_table(lambda b: b[:, 0] == 1, 3)), np.arange(8) % 2 == 1)
    np.testing.assert_array_equal(np.asarray(targets.truth_table(lambda b: b[:, 2], 3)), np.arange(8) >= 4)
    by_rows = targets.truth_table(majority, 5)
    np.testing.assert_array_equal(np.asarray(targets.truth_table(jax.vmap(lambda x: jnp.sum(x) >= 3), 5)), by_rows)
    np.testing.assert_array_equal(np.asarray(by_rows), np.bitwise_count(np.arange(32)) >= 3)


@pytest.mark.parametrize("call, message", [
    (lambda: targets.from_table([0, 1], [0, 1, 1]), "table must have 2^k = 4 entries for k = 2"),
    (lambda: targets.from_table([0, 1], [0, 1, 2, 1]), "table must be binary"),
    (lambda: targets.from_table([3, 3], [0, 1, 1, 0]), "support indices must be distinct"),
    (lambda: targets.from_table([-1, 3], [0, 1, 1, 0]), "support indices must be in [0, inf)"),
    (lambda: targets.from_table([1, 20], [0, 1, 1, 0], n=16), "support indices must be in [0, 15] for n = 16"),
    (lambda: targets.from_table([[1, 2]], [0, 1, 1, 0]), "support must be a 1-d array of integer indices"),
    (lambda: targets.from_table([], [0]), "k = len(support) must be in [1, inf]"),
    (lambda: targets.junta([0, 1, 2], [0, 1, 1, 0], 2), "k = len(support) must be in [1, 2]"),
    (lambda: jax.jit(targets.from_table)(jnp.array([0, 1]), jnp.zeros(3)), "table must have 2^k = 4 entries"),
    (lambda: jax.jit(targets.from_table)(jnp.array([0.0, 1.0]), jnp.zeros(4)), "support must be a 1-d array"),
    (lambda: targets.random_function(jax.random.key(0), 4, majority, 5), "k must be in [1, 4], got 5"),
    (lambda: targets.random_function(jax.random.key(0), 30, majority, 21), "k must be in [1, 20], got 21"),
    (lambda: targets.random_function(jax.random.key(0), 8, lambda b: b.sum(-1), 3), "fn must return bool or 0/1"),
    (lambda: targets.random_function(jax.random.key(0), 8, lambda b: b, 3), "fn must return one value per row"),
    (lambda: targets.random_function(jax.random.key(0), 8, "majority", 3), "fn must be a callable"),
    (lambda: jax.jit(lambda k: targets.random_function(jax.random.key(0), 8, majority, k))(3), "k must be a plain"),
])
def test_bad_input_names_the_parameter(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert message in str(error.value)

"""Gradient descent on juntas (jaxtrees.learners.sgd): batching, gradients, learning a parity, errors.

Sizes are small and few shapes are compiled, so the file runs in well under a minute on 2 cores.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxtrees.core import distributions, sampling
from jaxtrees.learners import sgd
from jaxtrees import targets

N = 12
SMALL = dict(steps=20, batch_size=8, eval_every=10)


def _members(B=3, n=N, k=2):
    keys = jax.random.split(jax.random.key(7), B)
    p = distributions.marginals(distributions.smoothed(c=0.2), jax.random.key(1), n, batch=B)
    f = jax.vmap(lambda kk: targets.random_parity(kk, n, k))(jax.random.split(jax.random.key(2), B))
    lr = jnp.array([0.05, 0.1, 0.2, 0.3][:B], jnp.float32)
    return keys, p, f, lr


@functools.lru_cache(maxsize=None)
def _single(cfg):
    """The jitted single training, one per config (so tests with the same shapes share a compile)."""
    return jax.jit(lambda key, p, f, lr: sgd.train(key, p, f, cfg, learning_rate=lr))


def _assert_results_close(batched, singles):
    # The vmapped program batches the matmuls, which may reorder float32 sums: 1e-5 relative.
    for b, single in enumerate(singles):
        member = jax.tree.map(lambda x: x[b], batched)
        for got, want in zip(jax.tree.leaves(member), jax.tree.leaves(single)):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


ONLINE = sgd.TrainConfig(sgd.mlp(16), **SMALL)  # online, exact test error (n <= 13)


@pytest.mark.parametrize("cfg", [
    ONLINE,
    sgd.TrainConfig(sgd.mlp(8, activation="tanh"), loss="logistic", optimizer=optax.adamw,
                   mode="fixed", m=24, encoding="01", exact_max_n=0, test_size=300, **SMALL),
    sgd.TrainConfig(sgd.mlp(16), precision_bits=8, **SMALL),
    sgd.TrainConfig(sgd.mlp(8), mode="fixed", m=24, exact_max_n=0, test_size=300, precision_bits=3, **SMALL),
], ids=["online-sgd-exact", "fixed-adamw-sampled", "online-packed-inputs", "fixed-packed-inputs"])
def test_batched_equals_loop_of_single_trainings(cfg):
    keys, p, f, lr = _members()
    batched = sgd.train_many(keys, p, f, cfg, learning_rate=lr)
    single = _single(cfg)
    singles = [single(keys[b], p[b], jax.tree.map(lambda x: x[b], f), lr[b]) for b in range(len(keys))]
    _assert_results_close(batched, singles)
    assert batched.trace.test_error.shape == (3, 2)
    # The members really differ (different keys, p, targets and learning rates).
    assert not np.allclose(batched.params[0].w[0], batched.params[0].w[1])


SHARDED_CHECK = """
import jax, numpy as np, test_gd
from jaxtrees.learners import sgd
assert jax.local_device_count() == 2
keys, p, f, lr = test_gd._members(B=4)
cfg = test_gd.ONLINE
single = test_gd._single(cfg)
for group in (None, 1):  # 2 members per device: one vmap, and groups of 1
    batched = sgd.train_many(keys, p, f, cfg, group=group, learning_rate=lr)
    assert len(batched.params[0].w.sharding.device_set) == 2
    batched = jax.device_get(batched)  # compared on the host: no collective programs slicing the shards
    test_gd._assert_results_close(batched, [single(keys[b], p[b], jax.tree.map(lambda x: x[b], f), lr[b]) for b in range(4)])
print("ok")
"""


# Geometric records, the early stop and the row norms: one training of 160 steps on a 2-parity.
LONG = dict(steps=160, batch_size=16, eval_every=8)
EVERY_K = sgd.TrainConfig(sgd.mlp(16), **LONG)
OBSERVED = sgd.TrainConfig(sgd.mlp(16), records_per_doubling=2, stop_at_eps=True, record_row_norms=True, **LONG)


def test_record_schedule_is_geometric_and_a_subset_of_every_k():
    steps = OBSERVED.record_steps
    assert steps.tolist() == [8, 16, 24, 32, 40, 56, 72, 96, 128, 160]
    assert set(steps) <= set(EVERY_K.record_steps) and steps[-1] == 160
    gaps = np.diff(steps)
    assert np.all(gaps % 8 == 0) and np.all(gaps[:-1] <= np.ceil(steps[:-2] * (2**0.5 - 1) / 8) * 8 + 8)
    long = sgd.TrainConfig(sgd.mlp(4), steps=2**20, eval_every=8, records_per_doubling=16).record_steps
    assert long.size < 300 and np.all(np.diff(long) >= 8)  # instead of 131072 records every 8 steps
    ratios = long[1:] / long[:-1]
    assert np.all(ratios[long[:-1] > 8 * 64] <= 2 ** (1 / 16) + 1e-9)  # ~4.4% resolution once gaps exceed K


def test_geometric_records_early_stop_and_row_norms_change_no_number():
    """The same training recorded every K steps and on the geometric schedule with an early stop:
    at every common record before the stop, equal numbers; steps_to_eps is the first geometric
    record with error 0; records after the stop are NaN; the row norms are those of W1."""
    keys, p, f, lr = _members(B=4, k=2)
    lr = jnp.full((4,), 0.3)
    dense = sgd.train_many(keys, p, f, EVERY_K, learning_rate=lr)
    sparse = sgd.train_many(keys, p, f, OBSERVED, learning_rate=lr)
    at = np.searchsorted(EVERY_K.record_steps, OBSERVED.record_steps)
    for b in range(4):
        made = ~np.isnan(np.asarray(sparse.trace.test_error[b]))
        np.testing.assert_allclose(np.asarray(sparse.trace.test_error[b])[made],
                                   np.asarray(dense.trace.test_error[b])[at][made], rtol=0, atol=1e-6)
        np.testing.assert_allclose(np.asarray(sparse.trace.drift[b])[made], np.asarray(dense.trace.drift[b])[at][made],
                                   rtol=1e-5)
        hit = np.asarray(dense.trace.test_error[b])[at] == 0
        want = OBSERVED.record_steps[np.argmax(hit)] if hit.any() else -1
        assert int(sparse.steps_to_eps[b]) == want
        if want > 0:  # stopped there: nothing recorded later, and the final weights are those of the stop
            assert made.sum() == np.argmax(hit) + 1 and not made[np.argmax(hit) + 1:].any()
            norms = np.asarray(sparse.trace.row_norms[b])[made.sum() - 1]
            np.testing.assert_allclose(norms, np.linalg.norm(np.asarray(sparse.params[0].w[b]), axis=-1), rtol=1e-5)
        assert sparse.trace.row_norms.shape == (4, OBSERVED.record_steps.size, N)
    assert (np.asarray(sparse.steps_to_eps) > 0).sum() >= 2, "the test needs trainings that stop early"
    single = _single(OBSERVED)
    one = single(keys[1], p[1], jax.tree.map(lambda x: x[1], f), lr[1])  # vmap with a batched stop == single
    for got, want in zip(jax.tree.leaves(jax.tree.map(lambda x: x[1], sparse)), jax.tree.leaves(one)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6, equal_nan=True)


def test_a_traced_budget_gives_the_training_compiled_for_that_budget():
    """train(budget=B) on the 160-step geometric schedule equals a training of B steps (B = 88 is not
    a record of the 160-step schedule, 160 is): the same records, the rest NaN; one program serves both."""
    keys, p, f, lr = _members(B=2, k=2)
    dense = dict(records_per_doubling=2, record_row_norms=True, **LONG)
    full = sgd.TrainConfig(sgd.mlp(16), **dense)
    by_budget = jax.jit(lambda key, p, f, budget: sgd.train(key, p, f, full, budget=budget, learning_rate=0.3))
    for budget in (88, 160):
        short = sgd.TrainConfig(sgd.mlp(16), **{**dense, "steps": budget})
        want = jax.jit(lambda key, p, f, cfg=short: sgd.train(key, p, f, cfg, learning_rate=0.3))(keys[0], p[0], jax.tree.map(lambda x: x[0], f))
        got = by_budget(keys[0], p[0], jax.tree.map(lambda x: x[0], f), jnp.int32(budget))
        E = short.record_steps.size
        assert sgd.record_steps(full, budget)[:E].tolist() == short.record_steps.tolist()
        for a, b in zip(jax.tree.leaves((got.params, got.steps_to_eps)), jax.tree.leaves((want.params, want.steps_to_eps))):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
        for a, b in zip(got.trace, want.trace):
            np.testing.assert_allclose(np.asarray(a)[:E], np.asarray(b), rtol=1e-6, atol=1e-7, equal_nan=True)
            assert np.isnan(np.asarray(a)[E:]).all()
    assert by_budget._cache_size() == 1
    with pytest.raises(ValueError, match="budget must be a multiple of eval_every = 8"):
        sgd.record_steps(full, 90)
    with pytest.raises(ValueError, match=r"budget must be in \[8, 160\]"):
        sgd.record_steps(full, 320)


def test_init_and_trainable_replace_the_initialization_and_freeze_leaves():
    """init= replaces the model's init; a leaf marked False in trainable keeps its initial value."""
    keys, p, f, lr = _members(B=1, k=2)
    model = sgd.mlp(16)
    half = lambda key, n: tuple(sgd.Dense(l.w * 0.5, l.b) for l in model.init(key, n))  # noqa: E731
    run = jax.jit(lambda key, p, f, out_bias: sgd.train(
        key, p, f, ONLINE, init=half, learning_rate=0.1,
        trainable=(sgd.Dense(True, True), sgd.Dense(True, out_bias))))
    f0 = jax.tree.map(lambda x: x[0], f)
    frozen, free = run(keys[0], p[0], f0, False), run(keys[0], p[0], f0, True)
    assert float(jnp.abs(frozen.params[1].b).max()) == 0.0 and float(jnp.abs(free.params[1].b).max()) > 0
    assert float(jnp.abs(frozen.params[0].w - free.params[0].w).max()) > 0  # the bias changed the training
    zero_steps = sgd.TrainConfig(sgd.mlp(16), steps=10, batch_size=8, eval_every=10, optimizer=optax.sgd)
    start = jax.jit(lambda key: sgd.train(key, p[0], f0, zero_steps, init=half, learning_rate=1e-12).params)(keys[0])
    want = half(jax.random.split(keys[0], 3)[0], N)
    np.testing.assert_allclose(np.asarray(start[1].w), np.asarray(want[1].w), rtol=1e-5, atol=1e-6)


def test_members_sharded_over_two_cpu_devices_equal_single_trainings():
    """With 2 local devices and B = 4, train_many shards the members (2 per device); each equals
    its single training."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2",
           "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", SHARDED_CHECK], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.parametrize("group", [None, 2])
def test_batched_with_shared_p_target_data_and_scalar_hyperparameter(group):
    # One p, one target, one data key for all members (common random numbers): vmap draws the
    # inputs once; the result still equals the loop, also in lax.map groups of 2 (and a rest of 1).
    keys = jax.random.split(jax.random.key(7), 3)
    p = distributions.smoothed(c=0.2).marginals(jax.random.key(1), N)
    f = targets.parity([0, 3], n=N)
    data_key = jax.random.key(11)
    batched = sgd.train_many(keys, p, f, ONLINE, data_key=data_key, group=group, learning_rate=0.1)
    single = jax.jit(lambda key: sgd.train(key, p, f, ONLINE, data_key=data_key, learning_rate=0.1))
    _assert_results_close(batched, [single(keys[b]) for b in range(3)])


def test_groups_divide_the_members_where_they_can():
    assert sgd._balanced(48, 16) == 16 and sgd._balanced(50, 16) == 10  # 5 groups of 10, no remainder
    assert sgd._balanced(53, 16) == 16  # no divisor in [8, 16]: 3 groups of 16 and a remainder of 5
    assert sgd._balanced(10, 16) is None and sgd._balanced(7, 1) == 1


def test_members_in_groups_equal_single_trainings():
    """group=2 on B = 3 independent members (lax.map over a group of 2 and a rest of 1)."""
    keys, p, f, lr = _members()
    batched = sgd.train_many(keys, p, f, ONLINE, group=2, learning_rate=lr)
    single = _single(ONLINE)
    _assert_results_close(batched, [single(keys[b], p[b], jax.tree.map(lambda x: x[b], f), lr[b]) for b in range(3)])
    with pytest.raises(ValueError, match="group must be"):
        sgd.train_many(keys, p, f, ONLINE, group=0, learning_rate=lr)


def _fd_check(loss_name, activation):
    """Directional derivatives of the mean loss of an MLP vs central differences, in float64."""
    rng = np.random.default_rng(0)
    model = sgd.mlp((6, 5), activation=activation)
    shapes = [(4, 6), (6,), (6, 5), (5,), (5, 1), (1,)]
    flat0 = rng.standard_normal(sum(int(np.prod(s)) for s in shapes)) * 0.7
    x = 2.0 * rng.integers(0, 2, (16, 4)) - 1.0
    y = rng.integers(0, 2, 16)
    loss = sgd.loss_fn(loss_name)
    with jax.enable_x64(True):
        def unravel(flat):
            out, i = [], 0
            for s in shapes:
                out.append(flat[i:i + int(np.prod(s))].reshape(s))
                i += int(np.prod(s))
            return tuple(sgd.Dense(out[j], out[j + 1]) for j in range(0, len(out), 2))

        objective = jax.jit(lambda flat: jnp.mean(loss(model.apply(unravel(flat), x), y)))
        flat = jnp.asarray(flat0, jnp.float64)
        g = np.asarray(jax.jit(jax.grad(objective))(flat))
        assert g.dtype == np.float64
        h = 1e-6
        for _ in range(5):
            v = rng.standard_normal(flat0.shape)
            fd = (float(objective(flat + h * v)) - float(objective(flat - h * v))) / (2 * h)
            # Central differences in float64: error O(h^2) + O(1e-16 / h); 1e-6 relative.
            np.testing.assert_allclose(g @ v, fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("loss_name,activation", list(itertools.product(sgd.LOSSES, ["relu", "tanh"])))
def test_gradients_match_finite_differences(loss_name, activation):
    _fd_check(loss_name, activation)


def test_losses_are_margin_losses_of_pm1_labels():
    logits = jnp.array([2.0, -0.5, 0.25])
    y = jnp.array([1, 1, 0])
    z = np.array([2.0, -0.5, -0.25])
    np.testing.assert_allclose(sgd.loss_fn("hinge")(logits, y), np.maximum(0, 1 - z))
    np.testing.assert_allclose(sgd.loss_fn("logistic")(logits, y), np.log1p(np.exp(-z)), rtol=1e-6)
    np.testing.assert_allclose(sgd.loss_fn("square")(logits, y), (1 - z) ** 2)


def test_two_parity_on_n10_learned_to_zero_exact_error_online():
    n = 10
    cfg = sgd.TrainConfig(sgd.mlp(100), loss="hinge", steps=400, batch_size=32, eval_every=100)
    f = targets.parity([2, 7], n=n)
    out = jax.jit(lambda key: sgd.train(key, jnp.full((n,), 0.5), f, cfg, learning_rate=0.1))(jax.random.key(0))
    err = np.asarray(out.trace.test_error)
    assert err[-1] == 0.0  # exact over all 2^10 inputs
    assert 0 < int(out.steps_to_eps) <= cfg.steps and err[int(out.steps_to_eps) // 100 - 1] == 0.0
    # Hidden progress: the weights moved, and the first layer's mass on the support grew
    # (train splits its key as (init, data, test)).
    assert float(out.trace.drift[-1]) > 0
    w0 = cfg.model.init(jax.random.split(jax.random.key(0), 3)[0], n)[0].w
    share0 = float(jnp.sum(jnp.abs(w0[jnp.array([2, 7])])) / jnp.sum(jnp.abs(w0)))
    assert float(out.trace.support_share[-1]) > share0


def test_exact_test_error_matches_weighted_enumeration():
    n = 6
    cfg = sgd.TrainConfig(sgd.mlp(4), steps=1, eval_every=1)
    model = cfg.model
    params = model.init(jax.random.key(9), n)
    p = jnp.array([0.1, 0.3, 0.5, 0.6, 0.8, 0.95], jnp.float32)
    f = targets.junta([1, 4], [0, 1, 1, 1], n=n)
    score = sgd._scorer(*sgd._test_set(jax.random.key(0), p, f, cfg), cfg)
    want = 0.0
    for bits in itertools.product([0, 1], repeat=n):
        x = np.array(bits)
        pred = float(model.apply(params, 2.0 * x - 1.0)) > 0
        prob = np.prod(np.where(x == 1, np.asarray(p), 1 - np.asarray(p)))
        want += prob * (pred != bool(f(jnp.asarray(x))))
    np.testing.assert_allclose(float(score(params)), want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("rows, n", [(1, 1), (5, 3), (32, 30), (33, 7), (100, 30)])
def test_inputs_are_the_row_major_uniform_draw(rows, n):
    """``inputs`` (drawn feature-major and packed on a CPU) is bit for bit ``uniform(key, (rows, n)) < p``,
    eager, jitted and vmapped over keys and marginals."""
    key = jax.random.key(rows * 31 + n)
    p = jax.random.uniform(jax.random.key(n), (n,))
    want = jax.random.uniform(key, (rows, n)) < p
    np.testing.assert_array_equal(sgd.inputs(key, p, rows), want)
    np.testing.assert_array_equal(jax.jit(sgd.inputs, static_argnums=2)(key, p, rows), want)
    keys = jax.random.split(key, 3)
    ps = jnp.stack([p, 1.0 - p, jnp.full_like(p, 0.5)])
    got = jax.jit(jax.vmap(lambda k, q: sgd.inputs(k, q, rows)))(keys, ps)
    np.testing.assert_array_equal(got, jax.vmap(lambda k, q: jax.random.uniform(k, (rows, n)) < q)(keys, ps))


def test_matmul_gradients_equal_plain_autodiff():
    """``sgd.matmul``'s custom weight gradient (x^T materialized) equals autodiff of ``x @ w``
    for inputs of rank 1, 2 and 3, and under vmap."""
    k = jax.random.split(jax.random.key(0), 2)
    w = jax.random.normal(k[1], (5, 3))
    loss = lambda mm: lambda x, w: jnp.sum(jnp.sin(mm(x, w)))  # noqa: E731
    for shape in [(5,), (4, 5), (2, 4, 5)]:
        x = jax.random.normal(k[0], shape)
        got = jax.grad(loss(sgd.matmul), (0, 1))(x, w)
        want = jax.grad(loss(jnp.matmul), (0, 1))(x, w)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    xs, ws = jax.random.normal(k[0], (3, 4, 5)), jax.random.normal(k[1], (3, 5, 2))
    got = jax.vmap(jax.grad(loss(sgd.matmul), 1))(xs, ws)
    np.testing.assert_allclose(got, jax.vmap(jax.grad(loss(jnp.matmul), 1))(xs, ws), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("precision_bits", [1, 3, 8])
def test_packed_inputs_follow_the_quantized_marginals_exactly(precision_bits):
    """``inputs(..., precision_bits=b)`` draws x_i ~ Bernoulli(quantize(p, b)_i) independently: each
    coordinate's count and each pair's joint count within 5 standard deviations of the binomial
    mean over 2^18 rows (dyadic p are their own quantization: exact), and b = 1 gives fair bits."""
    rows = 2**18
    p = jnp.array([0.0, 0.125, 0.25, 0.5, 0.75, 1.0, 0.3, 0.61], jnp.float32)
    q = np.asarray(sampling.quantize(p, precision_bits), np.float64)
    x = np.asarray(jax.jit(sgd.inputs, static_argnums=(2, 3))(jax.random.key(11), p, rows, precision_bits))
    assert x.shape == (rows, p.size) and x.dtype == bool
    if precision_bits >= 3:
        np.testing.assert_array_equal(q[:6], np.asarray(p)[:6])  # dyadic: no rounding
    assert np.all(np.abs(q - np.asarray(p)) <= 2.0 ** -(precision_bits + 1))
    counts = x.sum(axis=0)
    sd = np.sqrt(rows * q * (1 - q))
    assert np.all(np.abs(counts - rows * q) <= 5 * sd + 1e-9), (counts / rows, q)
    i, j = 3, 4  # pairwise independence of two non-degenerate coordinates
    joint = np.sum(x[:, i] & x[:, j])
    pij = q[i] * q[j]
    assert abs(joint - rows * pij) <= 5 * np.sqrt(rows * pij * (1 - pij))


def test_packed_inputs_weigh_the_exact_test_error_by_the_quantized_marginals():
    n = 6
    cfg = sgd.TrainConfig(sgd.mlp(4), steps=1, eval_every=1, precision_bits=2)
    p = jnp.array([0.1, 0.3, 0.5, 0.6, 0.8, 0.95], jnp.float32)
    X, _, w = sgd._test_set(jax.random.key(0), p, targets.parity([0, 1], n=n), cfg)
    q = np.array([0.0, 0.25, 0.5, 0.5, 0.75, 1.0])
    want = np.prod(np.where(np.asarray(X), q, 1 - q), axis=1)
    np.testing.assert_allclose(np.asarray(w), want, atol=1e-7)


def test_mlp_initialization_scales():
    params = sgd.mlp(2000, activation="relu").init(jax.random.key(0), 500)
    np.testing.assert_allclose(float(jnp.var(params[0].w)), 2 / 500, rtol=0.02)  # He
    np.testing.assert_allclose(float(jnp.var(params[1].w)), 1 / 2000, rtol=0.1)  # LeCun output
    params = sgd.mlp(2000, activation="tanh").init(jax.random.key(0), 500)
    np.testing.assert_allclose(float(jnp.var(params[0].w)), 1 / 500, rtol=0.02)  # LeCun
    params = sgd.mlp(2000, init="glorot").init(jax.random.key(0), 500)
    np.testing.assert_allclose(float(jnp.var(params[0].w)), 2 / 2500, rtol=0.02)
    assert [l.w.shape for l in sgd.mlp(()).init(jax.random.key(0), 7)] == [(7, 1)]  # linear model


@pytest.mark.parametrize("build,match", [
    (lambda: sgd.mlp(0), r"widths\[0\] must be in \[1, inf\]"),
    (lambda: sgd.mlp((10, -2)), r"widths\[1\]"),
    (lambda: sgd.mlp(10, activation="sigmoid"), "activation must be one of"),
    (lambda: sgd.mlp(10, init="xavier"), "init must be one of"),
    (lambda: sgd.mlp((10,), depth=2), "depth is only used"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), loss="mse"), "loss must be one of"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), encoding="standardized"), "encoding must be one of"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), mode="offline"), "mode must be one of"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), steps=100, eval_every=30), "eval_every must divide steps = 100"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), steps=0), r"steps must be in \[1, inf\]"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), batch_size=0), "batch_size"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), mode="fixed"), "m .* is required"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), mode="fixed", m=8, batch_size=32), r"m must be in \[32, inf\]"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), m=64), "m must be None with mode='online'"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), exact_max_n=40), "exact_max_n"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), eps=-0.1), "eps"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), precision_bits=0), r"precision_bits must be in \[1, 31\]"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), precision_bits=32), r"precision_bits must be in \[1, 31\]"),
    (lambda: sgd.TrainConfig("mlp"), "model must be"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), records_per_doubling=0), r"records_per_doubling must be in \[1, "),
    (lambda: sgd.TrainConfig(sgd.mlp(4), stop_at_eps=1), "stop_at_eps must be True or False"),
    (lambda: sgd.TrainConfig(sgd.mlp(4), record_row_norms="yes"), "record_row_norms must be True or False"),
])
def test_bad_configurations(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize("optimizer,hyper,match", [
    (optax.sgd, dict(learning_rate=-0.1), r"learning_rate must be in \(0, inf\], got -0.1"),
    (optax.sgd, dict(learning_rate=0.0), "learning_rate must be in"),
    (optax.sgd, dict(learning_rate=float("nan")), "learning_rate must be finite"),
    (optax.sgd, dict(learning_rate=0.1, momentum=1.5), "momentum must be in"),
    (optax.sgd, dict(lr=0.1), "bad hyperparameters .*'lr'.* for optimizer sgd"),
    (optax.adamw, dict(learning_rate=1e-3, weight_decay=-1.0), "weight_decay"),
    (optax.sgd(0.1), dict(learning_rate=0.1), "takes no hyperparameters"),
])
def test_bad_hyperparameters(optimizer, hyper, match):
    cfg = sgd.TrainConfig(sgd.mlp(4), optimizer=optimizer, steps=2, eval_every=1)
    p = jnp.full((5,), 0.5)
    f = targets.parity([0], n=5)
    with pytest.raises(ValueError, match=match):
        sgd.train(jax.random.key(0), p, f, cfg, **hyper)


def test_bad_batched_arguments():
    cfg = sgd.TrainConfig(sgd.mlp(4), steps=2, eval_every=1)
    keys, p, f, _ = _members(n=5)
    with pytest.raises(ValueError, match=r"learning_rate must be in \(0, inf\]; learning_rate\[1\] = -0.2"):
        sgd.train_many(keys, p, f, cfg, learning_rate=jnp.array([0.1, -0.2, 0.3]))
    with pytest.raises(ValueError, match=r"learning_rate must be a scalar or have shape \(3,\)"):
        sgd.train_many(keys, p, f, cfg, learning_rate=jnp.array([0.1, 0.2]))
    with pytest.raises(ValueError, match=r"p must have shape \(n,\) or \(B, n\)"):
        sgd.train_many(keys, p[:2], f, cfg, learning_rate=0.1)
    with pytest.raises(ValueError, match=r"p must lie in \[0, 1\]"):
        sgd.train(keys[0], jnp.full((5,), 1.5), targets.parity([0], n=5), cfg, learning_rate=0.1)

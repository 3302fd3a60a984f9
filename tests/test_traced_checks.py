"""Traced bad values never give a plausible result (issue 64 item 8).

Under ``jax.jit`` / ``jax.vmap`` a bad p (outside [0, 1], NaN), a bad k of a padded junta (k > k_max or k < 1) and
negative or non-finite weights cannot raise: the sample is the poison (no valid example, m = 0) and the tree grown on
it has NaN float fields, so every float output (the tree's weight, mean, gain; sample_error on any data;
exact_error) is NaN. Shapes are static: a y, valid or weight of the wrong length is refused at trace time too, naming
both shapes. Eager calls raise the ValueErrors naming the parameter; valid values give bitwise the eager outputs.
Few programs: each trial is compiled once, jitted over a vmapped batch of good and bad values (the hypothesis test
reuses the p batch's program).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import jaxtrees as jt

N, M = 8, 64
KEY = jax.random.key(0)
F = jt.random_parity(jax.random.key(1), N, 2)
HALF = jnp.full(N, 0.5)
RULE = jt.GrowthRule(max_depth=2)
TEST = jt.draw(jax.random.key(2), HALF, F, M)  # good data: a poisoned tree scores NaN on it too
X6 = np.random.default_rng(0).integers(0, 2, (M, 6))
D6 = jt.from_arrays(X6, X6[:, 0] ^ X6[:, 1])


def scores(tree, p=HALF, f=F):
    """Every float output of a grown tree: its float fields, its error on good data, its exact error."""
    return tree.weight, tree.mean, tree.gain, jt.sample_error(tree, TEST), jt.exact_error(tree, p, f)


def nan(outputs) -> bool:
    return all(np.isnan(np.asarray(a)).all() for a in jax.tree.leaves(outputs))


def finite(outputs) -> bool:
    return all(np.isfinite(np.asarray(a)).all() for a in jax.tree.leaves(outputs))


def row(batch, i):
    return jax.tree.map(lambda a: a[i], batch)


def same_bits(a, b) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# ---------------------------------------------------------------- p


@jax.jit
@jax.vmap
def p_trials(p):
    """Per row of p: sample, grow, score (m, float outputs, the error on its own sample)."""
    sample = jt.draw(KEY, p, F, M)
    tree = jt.grow(sample, RULE)
    return sample.m, scores(tree) + (jt.sample_error(tree, sample),)


BAD_P = [1.7, -0.1, float("nan"), float("inf")]


def test_a_traced_bad_p_gives_nan_under_jit_and_vmap():
    m, out = p_trials(jnp.repeat(jnp.array([[0.5]] + [[q] for q in BAD_P], jnp.float32), N, axis=1))
    assert int(m[0]) == M and finite(row(out, 0))
    for i in range(1, len(BAD_P) + 1):
        assert int(m[i]) == 0 and nan(row(out, i)), BAD_P[i - 1]  # before: every bit 1, a plausible tree's errors


def test_a_traced_bad_p_gives_nan_product_marginals():
    product = jax.jit(jax.vmap(lambda q: jt.product(jnp.full(N, q)).marginals(KEY, N)))
    marginals = product(jnp.array([0.25, 1.5, jnp.nan]))
    assert finite(marginals[0]) and nan(marginals[1:])


@pytest.mark.parametrize("q", [1.7, float("nan")])
def test_an_eager_bad_p_raises_naming_p(q):
    with pytest.raises(ValueError, match=r"^p must lie in \[0, 1\]; p\[0\] = "):
        jt.draw(KEY, jnp.full(N, q), F, M)
    with pytest.raises(ValueError, match=r"^p must lie in \[0, 1\]; p\[0\] = "):
        jt.product(jnp.full(N, q))


@settings(deadline=None, max_examples=25, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(arrays(np.float32, (5, N), elements=st.floats(0.0, 1.0, width=32)))
def test_any_valid_p_gives_finite_outputs(p):
    m, out = p_trials(jnp.asarray(p))
    assert (np.asarray(m) == M).all() and finite(out)


# ---------------------------------------------------------------- k


@jax.jit
@jax.vmap
def k_trials(k):
    """Per traced k: a junta padded to K_MAX, grown on: (in_range, m, float outputs); a padded parity's flag."""
    junta = jt.random_junta(KEY, n=N, k=k, k_max=K_MAX)
    sample = jt.draw(KEY, HALF, junta, M)
    return (junta.in_range(), sample.m, scores(jt.grow(sample, RULE), HALF, junta),
            jt.random_parity(KEY, N, k, k_max=K_MAX).in_range())


K_MAX = 3


def test_a_traced_bad_k_gives_nan_under_jit_and_vmap():
    ok, m, floats, parity_ok = k_trials(jnp.array([2, 10, 0, -1]))  # 10 > n = 8 > k_max
    assert bool(ok[0]) and bool(parity_ok[0]) and int(m[0]) == M and finite(row(floats, 0))
    assert not np.asarray(ok[1:]).any() and not np.asarray(parity_ok[1:]).any() and not np.asarray(m[1:]).any()
    assert all(nan(row(floats, i)) for i in (1, 2, 3))  # before: a plausible k_max-junta's tree and errors


@pytest.mark.parametrize("call", [
    lambda: jt.random_junta(KEY, n=N, k=10),
    lambda: jt.random_junta(KEY, n=N, k=10, k_max=N),
    lambda: jt.random_junta(KEY, n=N, k=0, k_max=N),
    lambda: jt.random_parity(KEY, N, 12, k_max=N),
])
def test_an_eager_bad_k_raises_naming_k(call):
    with pytest.raises(ValueError, match=r"^k must be in \[1, 8\]"):
        call()


# ---------------------------------------------------------------- weights


def in_place(w):
    """D6 with weights w put in place directly (with_weights flags bad ones itself: test_reliability_round4)."""
    return D6._replace(weight=jnp.pad(w, (0, D6.valid.shape[-1] * 32 - w.shape[0])))


def floats(tree):
    return tree.weight, tree.mean, tree.gain, jt.sample_error(tree, D6), jt.sample_error(tree, TEST)


ONES = np.ones(M, np.float32)
BAD_W = {"negative": -ONES, "one negative": np.r_[-1.0, ONES[1:]], "one nan": np.r_[np.nan, ONES[1:]],
         "one inf": np.r_[np.inf, ONES[1:]], "all zero": 0 * ONES}
W_BATCH = jnp.asarray(np.stack([ONES * 0.5] + list(BAD_W.values())), jnp.float32)


@pytest.mark.parametrize("exact", [False, True])
def test_traced_bad_float_weights_give_nan_under_jit_and_vmap(exact):
    rule = jt.GrowthRule(max_depth=2, exact_weights=exact)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the flags add no warning
        out = jax.jit(jax.vmap(lambda w: floats(jt.grow(in_place(w), rule))))(W_BATCH)
    assert finite(row(out, 0))
    for i, name in enumerate(BAD_W, 1):
        assert nan(row(out, i)), name  # before (weights in place): a plausible tree, the negative ones left out


def test_traced_negative_integer_weights_give_nan():
    counts = jnp.asarray(np.stack([np.ones(M), np.r_[-1, np.ones(M - 1)], np.zeros(M)]), jnp.int32)
    out = jax.jit(jax.vmap(lambda w: floats(jt.grow(in_place(w), RULE))))(counts)
    assert finite(row(out, 0)) and nan(row(out, 1)) and nan(row(out, 2))


@pytest.mark.parametrize("name", ["negative", "one nan", "one inf"])
def test_eager_bad_weights_raise_naming_weight(name):
    with pytest.raises(ValueError, match=r"^weight must be finite and >= 0; weight\[0\] = "):
        jt.with_weights(D6, BAD_W[name])
    with pytest.raises(ValueError, match=r"^data\.weight must be finite and >= 0; data\.weight\[0\] = "):
        jt.grow(in_place(jnp.asarray(BAD_W[name])), RULE)


def test_eager_growth_on_no_examples_is_refused():
    with pytest.raises(ValueError, match="data must hold m >= 1 examples"):
        jt.grow(D6._replace(valid=jnp.zeros_like(D6.valid)), RULE)
    with pytest.raises(ValueError, match="data.weight must give some valid example a positive weight"):
        jt.grow(in_place(jnp.zeros(M)), RULE)


# ---------------------------------------------------------------- static shapes


WIDE = jt.from_arrays(np.resize(X6, (100, 6)), np.resize(X6[:, 0], 100))  # W = 4 words


@pytest.mark.parametrize("field, value, match", [
    ("y", WIDE.y[:1], r"data\.y must be uint32\[4\] to match data\.X's W = 4 words \(data\.X is uint32\[6, 4\]\), "
                      r"got uint32\[1\]"),
    ("valid", WIDE.valid[:2], r"data\.valid must be uint32\[4\] .*got uint32\[2\]"),
    ("weight", jnp.ones(64), r"data\.weight must have one entry per bit slot, shape \(128,\) for data\.X's W = 4 "
                             r"words \(data\.X is uint32\[6, 4\].*got \(64,\)"),
])
def test_mismatched_shapes_are_refused_eagerly_and_at_trace_time(field, value, match):
    data = WIDE._replace(**{field: value})
    batched = jax.tree.map(lambda a: a[None], data)
    for call in (lambda: jt.grow(data, RULE), lambda: jax.jit(lambda d: jt.grow(d, RULE))(data),
                 lambda: jax.vmap(lambda d: jt.grow(d, RULE))(batched),
                 lambda: jax.jit(jt.GreedyTree(RULE).fit)(KEY, data)):
        with pytest.raises(ValueError, match=match):  # before (grow, y of one word): a full tree, labels broadcast
            call()


# ---------------------------------------------------------------- valid values: bitwise the eager outputs


def test_valid_values_give_bitwise_the_eager_outputs():
    p = jnp.linspace(0.2, 0.9, N)
    grow = jax.jit(lambda d, rule: jt.grow(d, rule), static_argnums=1)
    same_bits(jax.jit(lambda p: jt.draw(KEY, p, F, M))(p), jt.draw(KEY, p, F, M))
    same_bits(grow(TEST, RULE), jt.grow(TEST, RULE))
    weighted, exact = in_place(jnp.asarray(np.random.default_rng(1).uniform(0.1, 3.0, M), jnp.float32)), \
        jt.GrowthRule(max_depth=2, exact_weights=True)
    same_bits(grow(weighted, exact), jt.grow(weighted, exact))


def test_exact_error_of_a_good_tree_under_traced_bad_marginals_is_nan():
    """exact_error and error_by_depth called directly with a traced p outside [0, 1] (or NaN): NaN, not an error
    computed from impossible probabilities; valid p bitwise the eager value."""
    tree = jt.grow(jt.draw(KEY, HALF, F, M), RULE)
    ps = jnp.stack([HALF, HALF.at[0].set(1.7), HALF.at[3].set(-0.1), HALF.at[5].set(jnp.nan)])
    errors = jax.jit(jax.vmap(lambda p: jt.exact_error(tree, p, F)))(ps)
    by_depth = jax.jit(jax.vmap(lambda p: jt.error_by_depth(tree, p, F)))(ps)
    assert errors[0] == jt.exact_error(tree, HALF, F) and np.isnan(errors[1:]).all()
    assert np.array_equal(by_depth[0], jt.error_by_depth(tree, HALF, F)) and np.isnan(by_depth[1:]).all()


def test_random_subset_refuses_a_concrete_k_outside_0_to_n():
    for k in (N + 1, -1):
        with pytest.raises(ValueError, match=f"k must be in \\[0, {N}\\], got {k}"):
            jt.targets.random_subset(KEY, N, k)
    assert int(jt.targets.random_subset(KEY, N, jnp.int32(3)).sum()) == 3

"""The m-grid in sample widths (``experiments.trials.prefix_widths`` / ``on_prefixes``): the runs
partition the grid, and fitting each run on its first ``width`` examples gives what fitting every
m on the whole sample gives."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxtrees.experiments.study import trials
from jaxtrees.experiments.studies import compare

PARAMS = {**compare.SHARED, "learner": "id3-entropy", "family": "junta", "k": 2, "n": 6, "c": 0.2, "test_m": 256,
          "m_max": 512}


@settings(max_examples=200, deadline=None)
@given(low=st.integers(0, 12), span=st.integers(0, 14), split=st.integers(0, 20))
def test_runs_partition_the_grid_and_bound_the_cost(low, span, split):
    grid = [2 ** (low + i) for i in range(span + 1)]
    runs = trials.prefix_widths(grid, split_width=2**split)
    assert [m for _, ms in runs for m in ms] == grid  # every m once, ascending
    assert len(runs) <= 3 and runs[-1][0] == grid[-1]
    for width, ms in runs:
        assert max(ms) <= width and width & (width - 1) == 0
        assert width == grid[-1] or width >= 2**split  # no cut below split_width
    cost = sum(width * len(ms) for width, ms in runs) / grid[-1]  # in fits at m_max
    assert cost <= min(len(grid), 2.5 + (len(grid) - 4) / 16) if len(runs) == 3 else cost <= len(grid)


def test_cuts_are_made_only_where_a_fit_is_not_cheap():
    assert len(trials.prefix_widths(trials.sample_sizes({"m_min": 16, "m_max": 8192}))) == 1
    assert trials.prefix_widths(trials.sample_sizes({"m_min": 16, "m_max": 65536})) == [
        (4096, [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]), (16384, [8192, 16384]), (65536, [32768, 65536])]


@pytest.mark.parametrize("learner", ["id3-entropy", "adaboost-stumps"])
def test_runs_of_widths_give_the_single_width_results(monkeypatch, learner):
    """The compare trial with the grid cut into three widths (16, 32 at 32; 64, 128 at 128; 256,
    512 at 512) against one width: trees (integer counts) identical, boosting (float weights) to 1e-6."""
    params = {**PARAMS, "learner": learner, "rounds": 8}
    keys = jax.random.split(jax.random.key(5), 4)
    one_width = jax.jit(jax.vmap(lambda k: compare._trial(k, params)))(keys)
    monkeypatch.setattr(trials, "SPLIT_WIDTH", 32)  # prefix_widths lives there
    assert len(trials.prefix_widths(trials.sample_sizes(params))) == 3
    three = jax.jit(jax.vmap(lambda k: compare._trial(k, params)))(keys)
    np.testing.assert_array_equal(np.asarray(three["examples"]), np.asarray(one_width["examples"]))
    np.testing.assert_array_equal(np.asarray(three["success"]), np.asarray(one_width["success"]))
    np.testing.assert_allclose(np.asarray(three["error"]), np.asarray(one_width["error"]), rtol=0, atol=1e-6)
    if learner == "id3-entropy":
        np.testing.assert_array_equal(np.asarray(three["error"]), np.asarray(one_width["error"]))


def test_growth_on_a_prefix_counts_only_its_words(monkeypatch):
    """On a sample of >= bits.PREFIX_MIN_WORDS words, growth on ``prefix(sample, m)`` counts only the words the
    prefix holds (``count_and``'s ``words``): the trees equal those counted over every word, and those grown on
    the prefix cut out (``head``), for m below, at and past a step of the loop, under vmap with m traced."""
    import jax.numpy as jnp

    import jaxtrees as jt
    from jaxtrees.core import bits, sampling

    n, m_max = 8, 32 * bits.PREFIX_MIN_WORDS
    rule = jt.GrowthRule(max_depth=4, impurity="entropy")

    def sample(key):
        kp, kf, ks = jax.random.split(key, 3)
        return jt.draw(ks, jt.smoothed(c=0.2).marginals(kp, n), jt.random_junta(kf, n, 3), m_max)

    data = jax.jit(jax.vmap(sample))(jax.random.split(jax.random.key(3), 6))
    ms = [100, 32 * 32 * bits.PREFIX_BLOCKS_PER_STEP, 32 * 32 * bits.PREFIX_BLOCKS_PER_STEP + 1, m_max // 2 + 7, m_max]

    def grown(d, m):
        return jt.grow(sampling.prefix(d, m), rule).feature

    def fits():
        return jax.jit(jax.vmap(lambda d: jax.lax.map(lambda m: grown(d, m), jnp.asarray(ms))))(data)

    prefix_counted = np.asarray(fits())
    monkeypatch.setattr(bits, "PREFIX_MIN_WORDS", 10**9)  # every word counted
    np.testing.assert_array_equal(prefix_counted, np.asarray(fits()))
    for j, m in enumerate(ms):
        cut = jax.jit(jax.vmap(lambda d, m=m: jt.grow(sampling.head(d, -(-m // 32) * 32), rule).feature))(
            jax.vmap(lambda d, m=m: sampling.prefix(d, m))(data))
        np.testing.assert_array_equal(prefix_counted[:, j], np.asarray(cut), err_msg=f"m = {m}")


def test_findmin_on_a_prefix_counts_only_its_words():
    """FINDMIN on ``prefix(sample, m)`` of a >= bits.PREFIX_MIN_WORDS-word sample (its counts bounded by the prefix's
    words) finds the trees, ranks and calls of the prefix cut out, for m below and past a step of the count's loop."""
    import jax.numpy as jnp

    import jaxtrees as jt
    from jaxtrees.core import bits, sampling

    n, m_max = 6, 32 * bits.PREFIX_MIN_WORDS
    learner = jt.FindMin(max_rank=2)
    data = jax.jit(jax.vmap(lambda k: jt.draw(k, jnp.full((n,), 0.5), jt.random_rank_tree(k, n, 2, 2), m_max)))(
        jax.random.split(jax.random.key(4), 3))
    for m in (40, 32 * 32 * bits.PREFIX_BLOCKS_PER_STEP + 1):
        on_prefix = jax.jit(jax.vmap(lambda d, m=m: learner.search(sampling.prefix(d, m))))(data)
        cut = jax.jit(jax.vmap(lambda d, m=m: learner.search(sampling.head(sampling.prefix(d, m), -(-m // 32) * 32))))(
            data)
        for a, b in zip(jax.tree.leaves(on_prefix), jax.tree.leaves(cut)):  # the tree (capacity 43 both), rank, calls
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"m = {m}")

"""The level loop (growth.level_loop): the same trees as the unrolled levels, for every chunk size,
traced depth and impurity, weighted data and stop rule; and who gets it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import helpers
import jaxtrees as jt
from jaxtrees.experiments import runner
from jaxtrees.learners import growth


def batch(seed, count, m, n, weighted=False):
    rng = np.random.default_rng(seed)
    data = []
    for X, y in helpers.datasets(rng, n, helpers.n_words(m), count):
        d = helpers.np_sample(X, y)
        if weighted:
            d = jt.with_weights(d, rng.poisson(1.0, len(y)).astype(np.float32))
        data.append(d)
    return helpers.stack(data)


def grown(data, rule, chunk, depth=None, impurity=None):
    def one(d):
        return jt.grow(d, rule, depth=depth, impurity=impurity)

    with growth.level_loop(chunk):
        return jax.jit(jax.vmap(one))(data)


def assert_same(a: jt.Tree, b: jt.Tree, where=""):
    for name, x, y in zip(jt.Tree._fields, a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=f"{name} {where}")


@pytest.mark.parametrize("depth,m,n", [(3, 40, 5), (5, 100, 9), (8, 300, 12)])
def test_every_chunk_grows_the_unrolled_tree(depth, m, n):
    data = batch(depth, 12, m, n)
    rule = jt.GrowthRule(max_depth=depth, impurity="gini")
    unrolled = grown(data, rule, None)
    for chunk in (1, 2, 4, 2 ** (depth - 1), 2**depth * 4):
        assert_same(grown(data, rule, chunk), unrolled, f"chunk {chunk}")


@pytest.mark.parametrize("stop", [0, 1, 3, 5, 6])
def test_a_traced_depth_and_impurity_grow_the_unrolled_tree(stop):
    data = batch(10 + stop, 10, 120, 8)
    rule = jt.GrowthRule(max_depth=6, impurity="entropy")
    for impurity in (None, jnp.int32(1)):
        unrolled = grown(data, rule, None, depth=jnp.int32(stop), impurity=impurity)
        assert_same(grown(data, rule, 2, depth=jnp.int32(stop), impurity=impurity), unrolled, f"stop {stop}")
    # depth d stops the growth there: the nodes below it are empty, as in the rule of depth d
    shallow = grown(data, jt.GrowthRule(max_depth=max(stop, 1), impurity="entropy"), None)
    looped = grown(data, rule, 2, depth=jnp.int32(stop))
    if stop >= 1:
        size = 2 ** (stop + 1) - 1
        np.testing.assert_array_equal(np.asarray(looped.feature)[:, :size], np.asarray(shallow.feature))
    assert np.all(np.asarray(looped.feature)[:, 2**stop - 1:] == -1)


def test_weighted_data_and_stop_rules_grow_the_unrolled_tree():
    data = batch(3, 10, 200, 10, weighted=True)
    for rule in (jt.GrowthRule(max_depth=5, impurity="gini", min_samples_leaf=3, min_samples_split=8),
                 jt.GrowthRule(max_depth=4, impurity="kearns_mansour", min_gain=0.01)):
        assert_same(grown(data, rule, 4), grown(data, rule, None), str(rule))


def test_who_gets_the_loop():
    deterministic = jt.GrowthRule(max_depth=4)
    assert growth.loop_chunk(deterministic) is None  # outside the context: unrolled
    with growth.level_loop(8):
        assert growth.loop_chunk(deterministic) == 8
        assert growth.loop_chunk(jt.GrowthRule(max_depth=2)) is None  # too shallow to gain
        assert growth.loop_chunk(jt.GrowthRule(max_depth=4, tie_break="random")) is None  # draws per level
        assert growth.loop_chunk(jt.GrowthRule(max_depth=4, max_features="sqrt")) is None
        with growth.level_loop(None):
            assert growth.loop_chunk(deterministic) is None
        assert growth.loop_chunk(deterministic) == 8
    assert growth.loop_chunk(deterministic) is None
    for bad in (0, 3, 6):
        with pytest.raises(ValueError, match="chunk"):
            with growth.level_loop(bad):
                pass


def test_the_runner_loops_only_for_few_trials_and_the_rows_agree(tmp_path, monkeypatch):
    from jaxtrees import cli

    args = ["run", "juntas", "--quick", "--set", "n=8", "--set", "k=3", "--set", "c=0.2", "--set", "m_min=16",
            "--set", "m_max=128", "--set", "replicates=6", "--no-progress"]
    seen = []
    level_loop = growth.level_loop

    def spy(chunk=growth.LOOP_CHUNK):
        seen.append(chunk)
        return level_loop(chunk)

    monkeypatch.setattr(growth, "level_loop", spy)
    rows = {}
    for limit in (0, runner.LOOP_MAX_TRIALS):
        monkeypatch.setattr(runner, "LOOP_MAX_TRIALS", limit)
        out = tmp_path / str(limit)
        assert cli.main([*args, "--out", str(out)]) == 0
        rows[limit] = (out / "juntas" / "results.csv").read_text()
    assert seen == [None, growth.LOOP_CHUNK]
    assert rows[0] == rows[runner.LOOP_MAX_TRIALS]

"""The level loop (growth.level_loop): the same trees as the unrolled levels, for every chunk size,
traced depth and impurity, weighted data and stop rule; and who gets it. (The slow marker holds the
larger and repeated cases: ``pytest -m slow tests/test_level_loop.py``.)"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import helpers
import jaxtrees as jt
from jaxtrees.experiments.run import compiled, runner
from jaxtrees.learners import growth


@pytest.fixture(autouse=True)
def every_depth_loops(monkeypatch):
    """The loop for every depth here (by default only deep rules get it), so that shallow trees test it too."""
    monkeypatch.setattr(growth, "LOOP_MIN_DEPTH", 1)


def batch(seed, count, m, n, weighted=False):
    rng = np.random.default_rng(seed)
    data = []
    for X, y in helpers.datasets(rng, n, helpers.n_words(m), count):
        d = helpers.np_sample(X, y)
        if weighted:
            d = jt.with_weights(d, rng.poisson(1.0, len(y)).astype(np.float32))
        data.append(d)
    return helpers.stack(data)


def grown(data, rule, chunk, depth=None, impurity=None, keys=None):
    def one(d, key):
        return jt.grow(d, rule, key, depth=depth, impurity=impurity)

    keys = jax.random.split(jax.random.key(5), data.X.shape[0]) if keys is None else keys
    with growth.level_loop(chunk):
        return jax.jit(jax.vmap(one))(data, keys)


def assert_same(a: jt.Tree, b: jt.Tree, where=""):
    for name, x, y in zip(jt.Tree._fields, a, b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=f"{name} {where}")


@pytest.mark.parametrize("depth,m,n", [(3, 40, 5), pytest.param(7, 300, 12, marks=pytest.mark.slow)])
def test_every_chunk_grows_the_unrolled_tree(depth, m, n):
    data = batch(depth, 12, m, n)
    rule = jt.GrowthRule(max_depth=depth, impurity="gini")
    unrolled = grown(data, rule, None)
    for chunk in (1, 4, 2**depth * 4):
        assert_same(grown(data, rule, chunk), unrolled, f"chunk {chunk}")


@pytest.mark.parametrize("stop", [pytest.param(0, marks=pytest.mark.slow), 3, pytest.param(6, marks=pytest.mark.slow)])
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


@pytest.mark.parametrize("rule", [
    pytest.param(jt.GrowthRule(max_depth=6, impurity="gini", max_features="sqrt"), marks=pytest.mark.slow),
    jt.GrowthRule(max_depth=5, impurity="entropy", tie_break="random", max_features=3),  # both draws: in the suite
    pytest.param(jt.GrowthRule(max_depth=5, impurity="gini", tie_break="random"), marks=pytest.mark.slow)])
def test_random_rules_draw_the_same_words_and_grow_the_same_trees(rule):
    """Feature bagging and random tie-breaks: each chunk computes its rows of the level's draw."""
    data = batch(21, 12, 250, 16)
    unrolled = grown(data, rule, None)
    for chunk in (1, 4):
        assert_same(grown(data, rule, chunk), unrolled, f"chunk {chunk}")
    other = grown(data, rule, 4, keys=jax.random.split(jax.random.key(6), 12))  # the key matters
    assert not np.array_equal(np.asarray(other.feature), np.asarray(unrolled.feature))


def test_a_key_of_another_kind_keeps_random_rules_unrolled():
    data = batch(22, 4, 100, 8)
    rule = jt.GrowthRule(max_depth=4, impurity="gini", max_features=3)
    keys = jax.random.split(jax.random.key(1, impl="rbg"), 4)
    assert_same(grown(data, rule, 2, keys=keys), grown(data, rule, None, keys=keys))


def test_who_gets_the_loop():
    deterministic = jt.GrowthRule(max_depth=growth.LOOP_MIN_DEPTH)
    assert growth.loop_chunk(deterministic) is None  # outside the context: unrolled
    with growth.level_loop(8):
        assert growth.loop_chunk(deterministic) == 8
        assert growth.loop_chunk(jt.GrowthRule(max_depth=growth.LOOP_MIN_DEPTH - 1)) is None  # too shallow to gain
        assert growth.loop_chunk(jt.GrowthRule(max_depth=9, tie_break="random")) == 8
        with growth.level_loop(None):
            assert growth.loop_chunk(deterministic) is None
        assert growth.loop_chunk(deterministic) == 8
    assert growth.loop_chunk(deterministic) is None
    for bad in (0, 3, 6):
        with pytest.raises(ValueError, match="chunk"):
            with growth.level_loop(bad):
                pass


def test_the_loop_is_set_per_thread():
    """The runner traces programs on background threads: one thread's context leaves another's alone."""
    import threading

    rule = jt.GrowthRule(max_depth=growth.LOOP_MIN_DEPTH)
    seen = []
    with growth.level_loop(8):
        thread = threading.Thread(target=lambda: seen.append(growth.loop_chunk(rule)))
        thread.start()
        thread.join()
        assert growth.loop_chunk(rule) == 8
    assert seen == [None]


def test_the_runner_loops_only_for_few_trials_and_the_rows_agree(tmp_path, monkeypatch):
    from jaxtrees import cli

    args = ["run", "juntas", "--quick", "--set", "n=8", "--set", "k=3", "--set", "c=0.2", "--set", "impurity=entropy",
            "--set", "m_min=16", "--set", "m_max=128", "--set", "replicates=6", "--no-progress"]
    seen = []
    level_loop = growth.level_loop

    def spy(chunk=growth.LOOP_CHUNK):
        seen.append(chunk)
        return level_loop(chunk)

    monkeypatch.setattr(growth, "level_loop", spy)
    rows = {}
    for limit in (0, runner.LOOP_MAX_TRIALS):
        monkeypatch.setattr(compiled, "LOOP_MAX_TRIALS", limit)  # read by compiled.loop_max_trials
        out = tmp_path / str(limit)
        assert cli.main([*args, "--out", str(out)]) == 0
        table = runner.read_results(str(out / "juntas"))
        rows[limit] = {name: table[name].tolist() for name in table.names}
    assert seen == [None, growth.LOOP_CHUNK]
    assert rows[0] == rows[runner.LOOP_MAX_TRIALS]

"""Censored outputs: ``jt.Censored`` flattened to NAME and NAME_censored by the runner, and SGD's steps to eps as one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import targets
from jaxtrees.core import censored
from jaxtrees.learners import sgd


def test_flatten_writes_a_value_and_a_flag_and_refuses_a_taken_name():
    out = censored.flatten({"t": jt.Censored(jnp.arange(3), jnp.array([False, True, False])), "e": 1.0})
    assert list(out) == ["t", "t_censored", "e"]
    np.testing.assert_array_equal(out["t_censored"], [False, True, False])
    with pytest.raises(ValueError, match="both a censored output 't' and an output 't_censored'"):
        censored.flatten({"t": jt.Censored(1, True), "t_censored": 0})
    assert censored.censored_names(["t", "t_censored", "e"]) == ["t"]


def _trial(key, params):
    """Waiting times: an exponential of rate r, censored at a budget of 2."""
    t = jax.random.exponential(key) / params["r"]
    return {"t": jt.Censored(jnp.minimum(t, 2.0), t > 2.0)}


def test_a_trial_s_censored_output_is_written_as_two_columns(tmp_path):
    study = jt.Study("waits", _trial, grid={"r": [0.5, 2.0]}, replicates=64)
    rows = jt.run(study, out=str(tmp_path), progress=False)
    t, flag, r = (np.asarray(rows[name]) for name in ("t", "t_censored", "r"))
    assert set(np.unique(flag).tolist()) == {0, 1} and t.max() <= 2.0  # a flag column (bools as int8)
    flag = flag.astype(bool)
    assert np.all(t[flag] == 2.0) and np.all(t[~flag] < 2.0)
    assert flag[r == 0.5].mean() > flag[r == 2.0].mean()  # e^-1 against e^-4 censored


def test_sgd_steps_are_censored_at_the_budget():
    n = 10
    cfg = sgd.TrainConfig(sgd.mlp(16), loss="hinge", steps=200, batch_size=32, eval_every=100)
    train = jax.jit(jax.vmap(lambda key, lr: sgd.train(key, jnp.full((n,), 0.5), targets.parity([2, 7], n=n), cfg,
                                                       learning_rate=lr)))
    result = train(jax.random.split(jax.random.key(0), 2), jnp.array([1e-6, 0.1]))
    steps = result.steps
    reached = np.asarray(result.steps_to_eps) >= 0
    np.testing.assert_array_equal(np.asarray(steps.censored), ~reached)
    np.testing.assert_array_equal(np.asarray(steps.value), np.where(reached, result.steps_to_eps, cfg.steps))
    assert not reached[0]  # a learning rate of 1e-6 learns nothing in 200 steps


def test_a_declared_censored_output_s_sentinel_marks_the_censored_trials(tmp_path):
    """Study(censored=("steps",)): the trial returns a step count or -1 (as jt.train's steps_to_eps); the rows get
    steps_censored where it is -1, and the generic report shows the censored share and a median, never a mean."""
    def trial(key, params):
        """Steps to succeed: a geometric count, -1 past a budget of 8."""
        steps = jnp.ceil(jax.random.exponential(key) / params["r"]).astype(jnp.int32)
        return {"steps": jnp.where(steps > 8, -1, steps)}

    study = jt.Study("budget", trial, grid={"r": [0.2, 1.0]}, replicates=64, censored=("steps",))
    rows = jt.run(study, out=str(tmp_path), progress=False)
    steps, flag = np.asarray(rows["steps"]), np.asarray(rows["steps_censored"]).astype(bool)
    np.testing.assert_array_equal(flag, steps < 0)
    assert flag.any() and not flag.all()
    report = (tmp_path / "budget" / "report.md").read_text()
    assert "censored" in report and "median" in report.lower() and "mean steps" not in report.lower()

"""The public trial building blocks (jaxtrees.experiments.study.trials): named keys, the m-grid, learning on the
prefixes of one sample (label noise, an impurity argument) and the grid's checks."""

from __future__ import annotations

import functools
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees.experiments.study import trials

N, K = 12, 3
PARAMS = {"m_min": 16, "m_max": 128}
#: Trials per run: one batch size, so that each configuration below compiles once.
TRIALS = 32


def _problem(key):
    keys = trials.trial_keys(key, "distribution", "target", "sample")
    p = jt.quantize(jt.smoothed(c=0.2).marginals(keys["distribution"], N), trials.PRECISION_BITS)
    return p, jt.random_junta(keys["target"], n=N, k=K), keys["sample"]


@functools.cache
def _program(noise="none", impurity=None, params=tuple(PARAMS.items())):
    """``learn_on_prefixes`` vmapped over trials and jitted, ``noise``: "none" (noise=None), "zero" (a concrete
    0.0) or "traced" (the program's second argument)."""
    params = dict(params)

    def one(key, rate):
        p, f, ks = _problem(key)
        eta = {"none": None, "zero": 0.0, "traced": rate}[noise]
        return trials.learn_on_prefixes(ks, p, f, N, K, params, noise=eta, impurity=impurity)
    return jax.jit(jax.vmap(one, in_axes=(0, None)))


def _learn(noise="none", rate=0.0, impurity=None, params=None):
    """Errors and features used of the ``TRIALS`` trials; ``params``: entries added to :data:`PARAMS`."""
    program = _program(noise, impurity, tuple({**PARAMS, **(params or {})}.items()))
    return [np.asarray(a) for a in program(jax.random.split(jax.random.key(3), TRIALS), jnp.float32(rate))]


def test_facade_loads_the_building_blocks_lazily():
    code = ("import sys, jaxtrees as jt; before = 'jaxtrees.experiments' in sys.modules; f = jt.learn_on_prefixes; "
            "from jaxtrees.experiments.study import trials; "
            "print(before, f is trials.learn_on_prefixes, jt.trial_keys is trials.trial_keys, "
            "jt.sample_sizes is trials.sample_sizes, jt.check_sample_grid is trials.check_sample_grid)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "True", "True", "True"]


def test_trial_keys_are_the_split_named():
    key = jax.random.key(7)
    keys = trials.trial_keys(key, "distribution", "target", "sample")
    assert list(keys) == ["distribution", "target", "sample"]
    split = jax.random.split(key, 3)
    for got, want in zip(keys.values(), split):
        np.testing.assert_array_equal(jax.random.key_data(got), jax.random.key_data(want))
    assert trials.trial_keys(key) == {}


def test_sample_sizes():
    assert trials.sample_sizes({"m_min": 16, "m_max": 128}) == [16, 32, 64, 128]
    assert trials.sample_sizes({"m_min": 64, "m_max": 64}) == [64]
    assert trials.sample_sizes({"m_min": 1, "m_max": 4, "other": 0}) == [1, 2, 4]
    assert trials.sample_sizes({"m_min": 3, "m_max": 24}) == [3, 6, 12, 24]
    with pytest.raises(ValueError, match="m_max must be m_min times a power of two .* got m_min = 16 and m_max = 1000"):
        trials.sample_sizes({"m_min": 16, "m_max": 1000})  # before: [16, ..., 512], m_max = 1000 recorded


def test_noise_zero_is_no_noise():
    error, used = _learn()
    assert error.shape == (TRIALS, 4) and used.shape == (TRIALS, 4, N)
    for noise in ("zero", "traced"):  # a concrete 0.0, a traced rate 0
        error0, used0 = _learn(noise)
        np.testing.assert_array_equal(error0, error)
        np.testing.assert_array_equal(used0, used)


def test_noise_changes_the_trees_and_half_noise_learns_nothing():
    clean, clean_used = _learn()
    noisy, noisy_used = _learn("traced", 0.2)
    assert not np.array_equal(noisy_used, clean_used) and not np.array_equal(noisy, clean)
    # The exact error is against the clean f: the clean trees learn at m = 128 ...
    assert np.mean(clean[:, -1] <= trials.SUCCESS_TOL) >= 0.5
    # ... and labels that are coin flips (eta = 1/2) carry nothing about f: exact learning at m = 64 is rare.
    coin, _ = _learn("traced", 0.5)
    assert np.mean(coin[:, 2] <= trials.SUCCESS_TOL) <= 0.1
    assert np.all(np.isfinite(coin)) and np.all(coin > 0.0)


def test_noise_is_checked():
    p, f = jnp.full(N, 0.5), jt.parity([0, 1], n=N)
    for noise in (1.5, np.float32(-0.5)):
        with pytest.raises(ValueError, match=r"noise must be in \[0, 1\]"):
            trials.learn_on_prefixes(jax.random.key(0), p, f, N, K, PARAMS, noise=noise)
    with pytest.raises(ValueError, match="noise must be a scalar rate"):
        trials.learn_on_prefixes(jax.random.key(0), p, f, N, K, PARAMS, noise=np.zeros(2))


def test_impurity_argument_replaces_the_parameter():
    gini = _learn(impurity="gini")
    by_params = _learn(params={"impurity": "gini"})
    overridden = _learn(impurity="gini", params={"impurity": "error"})
    for a, b in ((gini, by_params), (gini, overridden)):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="impurity must be one of"):
        _learn(impurity="no-such-impurity")


def test_impurity_of():
    assert trials.impurity_of({}) == ("entropy", None)
    assert trials.impurity_of({"impurity": "gini"}) == ("gini", None)
    assert trials.impurity_of({"impurity": 0, "impurity_choices": ("error",)}) == ("error", None)
    name, selected = trials.impurity_of({"impurity": jnp.int32(1), "impurity_choices": ("entropy", "gini")})
    assert name == "entropy" and selected is not None


@pytest.mark.parametrize("params, n, message", [
    ({"m_min": 16, "m_max": 1000}, 8, "m_max must be one of the powers of two 1, 2, 4, ..., 2^24, got m_max = 1000"),
    ({"m_min": 12, "m_max": 1024}, 8, "m_min must be one of the powers of two 1, 2, 4, ..., 2^24, got m_min = 12"),
    ({"m_min": 1024, "m_max": 64}, 8, "m_min must be <= m_max, got m_min = 1024 and m_max = 64"),
    ({"m_min": 0, "m_max": 64}, 8, "m_min must be in [1, inf], got 0"),
    ({"m_min": 16, "m_max": 2**25}, 8, "m_max must be in [1, 16777216], got 33554432"),
    ({"m_min": 16, "m_max": 2**24}, 256, "m_max must be <= 2^31 / n = 8388608 for n = 256"),
    ({"m_min": 16, "m_max": 64, "impurity": "bogus"}, 8, "impurity must be one of"),
    ({"m_max": 64}, 8, "params must hold m_min and m_max (the m-grid: powers of two, 1 <= m_min <= m_max <= 2^24), "
                       "missing m_min"),
])
def test_check_sample_grid_names_the_parameter_and_its_range(params, n, message):
    with pytest.raises(ValueError) as error:
        trials.check_sample_grid(params, n)
    assert message in str(error.value)


def test_check_sample_grid_passes_without_an_impurity():
    assert trials.check_sample_grid({"m_min": 16, "m_max": 2**24}, 128) is None
    assert trials.check_sample_grid({"m_min": 1, "m_max": 1, "impurity": "gini"}, 1) is None

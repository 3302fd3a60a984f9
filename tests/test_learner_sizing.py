"""The registry's sizing (``learners.Size`` and the factories): the defaults leave every learner something to learn
on the compare study's target families at n = 8, k = 2, and a sizing that may leave a learner nothing warns,
naming the field (``learners.SizingWarning``)."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees import learners, problems, targets
from jaxtrees.core import bits
from jaxtrees.learners import Size, SizingWarning

N, K, M = 8, 2, 1024
#: The compare study's five target families at n = 8, k = 2 (experiments/studies/compare.py: ``target``).
FAMILIES = {"parity": lambda key: targets.as_junta(targets.random_parity(key, N, K)),
            "junta": lambda key: targets.random_junta(key, N, K),
            "tree": lambda key: targets.random_tree(key, N, K),
            "rank": lambda key: targets.random_rank_tree(key, N, K, 2),
            "addressing": lambda key: targets.addressing(1, K)}
#: The learners whose factories read the fields a sizing can starve (theta, l1, max_rank).
SIZED = ("findmin", "km", "lmn-k", "lmn-k-biased", "sparse-k")


def quiet_get(name, size):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SizingWarning)
        return learners.get(name, size)


def test_no_registered_learner_warns_at_the_default_sizes_or_compares():
    for name in learners.names():
        quiet_get(name, Size())
        quiet_get(name, Size(n=N, k=K, m=M))
        quiet_get(name, Size(n=17, k=3, m=16384, depth=6, rounds=100, max_rank=4, max_calls=2**18, theta=0.1))


@pytest.mark.parametrize("name", SIZED)
def test_the_defaults_leave_something_to_learn_on_every_family(name):
    learner = quiet_get(name, Size(n=N, k=K, m=M))
    x = bits.assignments(N)
    for family, make in FAMILIES.items():
        key = jax.random.key(1)
        kp, kf, kd = jax.random.split(key, 3)
        problem = jt.Synthetic(jt.smoothed(c=0.2).marginals(kp, N), make(kf))
        h = learner.fit(kd, problems.data_for(learner, problem, kd, M))
        labels = np.asarray(h.predict(x))
        assert labels.min() != labels.max(), f"{name} on a {family}: a constant hypothesis"


def test_majority_of_5_keeps_coefficients_at_the_default_theta_and_warns_at_one_half():
    f = targets.junta(np.arange(5), ((np.arange(32)[:, None] >> np.arange(5)) & 1).sum(1) >= 3, N)  # majority of x_0..x_4
    problem = jt.Synthetic(np.full(N, 0.5, np.float32), f)
    lmn = quiet_get("lmn-k", Size(n=N, k=5, m=M))
    assert float(problems.fit_and_evaluate(jax.random.key(0), lmn, problem, M).error) < 0.1
    with pytest.warns(SizingWarning, match=r"'lmn-k': Size theta = 0.5 is above 2\^\(-k/2\) = 0.177 for k = 5"):
        starved = learners.get("lmn-k", Size(n=N, k=5, m=M, theta=0.5))
    assert float(problems.fit_and_evaluate(jax.random.key(0), starved, problem, M).error) == 0.5  # |f^(S)| <= 0.375


@pytest.mark.parametrize("name, size, field", [
    ("id3-entropy", Size(depth=0), "depth = 0"), ("best-first-gini", Size(depth=0), "depth = 0"),
    ("km", Size(k=4, theta=0.3), "theta = 0.3"), ("lmn-k-biased", Size(k=2, theta=0.6), "theta = 0.6"),
    ("sparse-k", Size(k=2, l1=0.75), "l1 = 0.75"), ("findmin", Size(k=3, max_rank=2), "max_rank = 2"),
])
def test_a_sizing_that_may_leave_nothing_warns_naming_the_field(name, size, field):
    with pytest.warns(SizingWarning, match=f"'{name}': Size {field}") as record:
        learners.get(name, size)
    assert record[0].filename == __file__  # the warning points at the call of get

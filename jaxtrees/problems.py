"""Problems: where a learner's examples come from, and how its hypothesis is scored.

:class:`Synthetic` (p, f) is a product distribution and a target, optionally with label noise:
it samples, answers membership queries and offers the exact oracle. :class:`DataSet` (X, y) is a
fixed binary data set with its split protocol. Every problem is a pytree (vmap over a batch)
offering the access a learner asks for (:func:`data_for`); :func:`fit_and_evaluate` is the one
path from a key, a learner and a problem to a score, and :func:`evaluate` scores a hypothesis
exactly where both it and the problem allow, else on test data (the :class:`Score` says which).

>>> import jax
>>> from jaxtrees import learners, targets
>>> from jaxtrees.core import distributions
>>> key = jax.random.key(0)
>>> problem = Synthetic(distributions.smoothed(c=0.2).marginals(key, 12), targets.random_junta(key, 12, 3))
>>> score = fit_and_evaluate(key, learners.get("id3-entropy"), problem, m=2048)
>>> float(score.error), bool(score.exact)
(0.0, True)
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import bits, checks, prng, sampling
from jaxtrees.hypotheses.base import sample_error

#: What a learner may ask a problem for: a sample (a Data set), the population itself, or
#: membership queries (:class:`Queries`).
ACCESS = ("sample", "population", "query")
#: Default size of a fresh test sample (hypotheses without an exact error, synthetic problems).
TEST_SIZE = 8192


class Population(NamedTuple):
    """Population access: the distribution and the target themselves (exact oracle ``target.means``,
    fresh examples on demand). What ``access = "population"`` learners fit."""

    p: jax.Array  # float32[n]
    target: object


@dataclasses.dataclass(frozen=True)
class Queries:
    """Membership-query access: ``queries(x) = f(x)`` for any plain inputs ``x: {0,1}[..., n]`` the
    learner chooses (no distribution, no noise). What ``access = "query"`` learners fit; a pytree
    whose leaves are the target's and whose ``n`` is static."""

    target: object
    n: int

    def __post_init__(self):
        checks.integer("n", self.n, low=1)

    def __call__(self, x):
        x = jnp.asarray(x)
        if x.shape[-1:] != (self.n,):
            raise ValueError(f"membership queries must be inputs {{0,1}}[..., n = {self.n}], got shape {x.shape}")
        return self.target(x)


jax.tree_util.register_dataclass(Queries, data_fields=["target"], meta_fields=["n"])


class Score(NamedTuple):
    """A hypothesis' error and whether it is exact (True) or measured on test data (False)."""

    error: jax.Array  # float32
    exact: jax.Array  # bool


class Synthetic(NamedTuple):
    """Examples x ~ prod_i Bernoulli(p_i), labels f(x) XOR Bernoulli(noise)."""

    p: jax.Array  # float32[n]
    target: object
    noise: float = 0.0

    @property
    def exact(self) -> bool:
        """Exact scoring needs noiseless labels (the oracle is f's)."""
        return checks.is_concrete(self.noise) and float(self.noise) == 0.0

    def train(self, key, m: int, *, precision_bits: int | None = None) -> sampling.Data:
        """m fresh examples (see :func:`jaxtrees.core.sampling.draw`)."""
        return sampling.draw(key, self.p, self.target, m, self.noise, precision_bits=precision_bits)

    def test(self, key, m: int, size: int = TEST_SIZE) -> sampling.Data:
        """``size`` fresh examples, independent of ``train(key, m)``."""
        del m
        return sampling.draw(jax.random.fold_in(key, 1), self.p, self.target, size, self.noise)

    def population(self) -> Population:
        if not self.exact:
            raise ValueError("population access needs noise = 0 (the exact oracle is the target's)")
        return Population(jnp.asarray(self.p, jnp.float32), self.target)

    def queries(self) -> Queries:
        """Membership-query access to f (noiseless: label noise belongs to the examples)."""
        return Queries(self.target, self.p.shape[-1])


class DataSet(NamedTuple):
    """A fixed data set ``X: bool[M, n]``, ``y: bool[M]``; build it with :func:`data_set`.

    Split protocol: the split key orders the M examples by a random permutation; ``train(key, m)``
    is the first m, ``test(key, m)`` the other M - m (so "1000 train, rest test, split s" is
    ``train(jax.random.key(s), 1000)`` and ``test(jax.random.key(s), 1000)``).
    """

    X: jax.Array  # bool[M, n]
    y: jax.Array  # bool[M]

    exact = False

    def train(self, key, m: int) -> sampling.Data:
        return self._rows(self._order(key, m)[:m])

    def test(self, key, m: int) -> sampling.Data:
        return self._rows(self._order(key, m)[m:])

    def population(self) -> Population:
        raise ValueError("a DataSet offers sample access only (its distribution is unknown)")

    def queries(self) -> Queries:
        raise ValueError("a DataSet cannot answer membership queries (its target is unknown off the data)")

    def _order(self, key, m):
        size = self.y.shape[-1]
        checks.integer("m", m, low=1, high=size - 1)
        return jax.random.permutation(key, size)

    def _rows(self, rows):
        X, y = self.X[rows], self.y[rows]
        return sampling.Data(bits.pack(X.T), bits.pack(y), bits.valid_mask(rows.shape[0]))


def data_set(X, y) -> DataSet:
    """A :class:`DataSet` from binary ``X: {0,1}[M, n]`` and ``y: {0,1}[M]`` (checked), M >= 2."""
    X, y = np.asarray(X), np.asarray(y)
    if X.ndim != 2 or X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"X must be a 2-d array of shape (M, n) with M >= 2, n >= 1, got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape (M,) = ({X.shape[0]},) to match X, got {y.shape}")
    for name, a in (("X", X), ("y", y)):
        if not np.isin(a, (0, 1)).all():
            raise ValueError(f"{name} must be binary: every entry 0 or 1 (bool or numeric)")
    return DataSet(jnp.asarray(X, bool), jnp.asarray(y, bool))


def data_for(learner, problem, key, m: int):
    """The access ``learner.access`` asks for: ``problem.train(key, m)``, ``problem.population()``
    or ``problem.queries()`` (m is the sample size; query learners carry their own budget)."""
    checks.choice("learner.access", learner.access, ACCESS)
    if learner.access == "population":
        return problem.population()
    return problem.queries() if learner.access == "query" else problem.train(key, m)


def evaluate(hypothesis, problem, test=None) -> Score:
    """``hypothesis``'s error on ``problem``: exact when the hypothesis has an exact error and the
    problem an exact oracle, else the (weighted) error on ``test`` data."""
    if hypothesis.exact and problem.exact:
        return Score(hypothesis.exact_error(problem.p, problem.target), jnp.asarray(True))
    if test is None:
        raise ValueError(f"{type(hypothesis).__name__} on {type(problem).__name__} is scored on test data: pass test")
    return Score(sample_error(hypothesis, test), jnp.asarray(False))


def fit_and_evaluate(key, learner, problem, m: int) -> Score:
    """One trial: data from ``problem`` (the learner's access), ``learner.fit``, :func:`evaluate`.

    Keys: ``data_key, fit_key = split(key)``; the test data (when needed) is ``problem.test(data_key, m)``.
    """
    data_key, fit_key = prng.split(key)
    hypothesis = learner.fit(fit_key, data_for(learner, problem, data_key, m))
    test = None if (hypothesis.exact and problem.exact) else problem.test(data_key, m)
    return evaluate(hypothesis, problem, test)

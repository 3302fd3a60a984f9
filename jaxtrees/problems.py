"""Problems: where a learner's examples come from, and how its hypothesis is scored.

:class:`Synthetic` (p, f) is a product distribution and a target, optionally with label noise:
it samples, answers membership queries and offers the exact oracle. :class:`DataSet` (X, y) is a
fixed binary data set with its split protocol. Every problem is a pytree (vmap over a batch)
offering the access a learner asks for (:func:`data_for`); :func:`fit_and_evaluate` is the one
path from a key, a learner and a problem to a score, and :func:`evaluate` scores a hypothesis
exactly wherever a path exists (:func:`exact_error`), else on test data: the :class:`Score` says
which, and on how many test points.

>>> import jax
>>> from jaxtrees import learners, targets
>>> from jaxtrees.core import distributions
>>> key = jax.random.key(0)
>>> problem = Synthetic(distributions.smoothed(c=0.2).marginals(key, 12), targets.random_junta(key, 12, 3))
>>> score = fit_and_evaluate(key, learners.get("id3-entropy"), problem, m=2048)
>>> float(score.error), bool(score.exact), int(score.test_points)
(0.0, True, 0)
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
    """A hypothesis' error, whether it is exact (True) or measured on test data (False), and on how
    many test points (``test_points``: int32, 0 when exact)."""

    error: jax.Array  # float32
    exact: jax.Array  # bool
    test_points: jax.Array | int = 0  # int32: the test examples an estimated error was measured on


class Synthetic(NamedTuple):
    """Examples x ~ prod_i Bernoulli(p_i), labels f(x) XOR Bernoulli(noise)."""

    p: jax.Array  # float32[n]
    target: object
    noise: float = 0.0

    #: Exact scoring: the target's oracle (label noise eta adds eta + (1 - 2 eta) Pr[h != f]: :func:`exact_error`).
    exact = True

    @property
    def noiseless(self) -> bool:
        """Whether the labels are f's (noise a concrete 0): what population access needs."""
        return checks.is_concrete(self.noise) and float(self.noise) == 0.0

    def train(self, key, m: int, *, precision_bits: int | None = None) -> sampling.Data:
        """m fresh examples (see :func:`jaxtrees.core.sampling.draw`)."""
        return sampling.draw(key, self.p, self.target, m, self.noise, precision_bits=precision_bits)

    def test(self, key, m: int, size: int = TEST_SIZE) -> sampling.Data:
        """``size`` fresh examples, independent of ``train(key, m)``."""
        del m
        return sampling.draw(jax.random.fold_in(key, 1), self.p, self.target, size, self.noise)

    def population(self) -> Population:
        if not self.noiseless:
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


def exact_error(hypothesis, problem, max_inputs: int = TEST_SIZE):
    """``Pr[h(x) != y]`` exactly, or None where ``problem`` has no exact oracle (a :class:`DataSet`).

    Exact paths: the hypothesis' own ``exact_error`` (trees, stumps: ``hypothesis.exact``); else, when
    2^n <= ``max_inputs`` (no more work than that many test points), its labels on every input of {0,1}^n
    weighted by their probability under p. Label noise eta makes it eta + (1 - 2 eta) Pr[h(x) != f(x)]
    (the error against noisy labels that a test sample estimates).
    """
    if not has_exact_error(hypothesis, problem, max_inputs):
        return None
    if hypothesis.exact:
        error = hypothesis.exact_error(problem.p, problem.target)
    else:
        error = sample_error(hypothesis, every_input(problem.p, problem.target))
    noise = getattr(problem, "noise", 0.0)
    if checks.is_concrete(noise) and float(noise) == 0.0:
        return error
    return noise + (1 - 2 * jnp.asarray(noise, jnp.float32)) * error


def has_exact_error(hypothesis, problem, max_inputs: int = TEST_SIZE) -> bool:
    """Whether :func:`exact_error` has a path for ``hypothesis`` on ``problem`` (static: known when tracing)."""
    if not getattr(problem, "exact", False):
        return False
    return bool(hypothesis.exact) or 2 ** jnp.shape(problem.p)[-1] <= max_inputs


def every_input(p, target) -> sampling.Data:
    """All 2^n inputs, labelled by ``target`` and weighted by their probability under ``p``: the data set
    on which a hypothesis' weighted error is its exact error."""
    n = jnp.shape(p)[-1]
    x = bits.assignments(n)  # bool[2^n, n]
    X = bits.pack(x.T)
    p = jnp.asarray(p, jnp.float32)
    weight = jnp.prod(jnp.where(x, p, 1 - p), axis=-1)
    weight = jnp.zeros((X.shape[-1] * bits.WORD_BITS,), jnp.float32).at[: 2**n].set(weight)
    return sampling.Data(X, target.bits(X), bits.valid_mask(2**n), weight)


def evaluate(hypothesis, problem, test=None, *, max_inputs: int | None = None) -> Score:
    """``hypothesis``'s error on ``problem``: exact wherever :func:`exact_error` has a path (listing every
    input only when 2^n <= ``max_inputs``; default: ``test``'s example slots, else :data:`TEST_SIZE`), else
    the (weighted) error on ``test`` data, with ``test_points`` its examples."""
    if max_inputs is None:
        max_inputs = TEST_SIZE if test is None else jnp.shape(test.y)[-1] * bits.WORD_BITS
    error = exact_error(hypothesis, problem, max_inputs)
    if error is not None:
        return Score(error, jnp.asarray(True), jnp.asarray(0, jnp.int32))
    if test is None:
        raise ValueError(f"{type(hypothesis).__name__} on {type(problem).__name__} is scored on test data: pass test")
    return Score(sample_error(hypothesis, test), jnp.asarray(False), jnp.asarray(test.m, jnp.int32))


def fit_and_evaluate(key, learner, problem, m: int, *, test_size: int | None = None) -> Score:
    """One trial: data from ``problem`` (the learner's access), ``learner.fit``, :func:`evaluate`.

    ``test_size``: the fresh test examples of a :class:`Synthetic` where no exact path exists (default
    :data:`TEST_SIZE`; every input is listed instead when 2^n <= test_size); a :class:`DataSet` tests on the
    rest of its data (leave it None). Keys: ``data_key, fit_key = split(key)``; the test data (when needed) is
    ``problem.test(data_key, m, size=test_size)`` (a DataSet's ``problem.test(data_key, m)``).
    """
    if test_size is not None:
        checks.integer("test_size", test_size, low=1, high=sampling.MAX_EXAMPLES)
        if isinstance(problem, DataSet):
            raise ValueError("test_size must be None for a DataSet: it tests on the rest of its data (M - m examples)")
    data_key, fit_key = prng.split(key)
    hypothesis = learner.fit(fit_key, data_for(learner, problem, data_key, m))
    max_inputs = TEST_SIZE if test_size is None else test_size
    test = None
    if not has_exact_error(hypothesis, problem, max_inputs):
        test = problem.test(data_key, m) if test_size is None else problem.test(data_key, m, size=test_size)
    return evaluate(hypothesis, problem, test, max_inputs=max_inputs)

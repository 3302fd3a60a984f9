"""Fourier learners from random examples: the low-degree algorithm of Linial, Mansour and Nisan,
and sparse recovery by L1-regularized regression.

LMN (seed 001, :class:`LowDegree`) estimates every coefficient f^(S), |S| <= d, by its sample mean and predicts by the
sign of the polynomial of the large ones; on unweighted data in the uniform basis each estimate is exact XOR + popcount
counting. Sparse recovery (001, "compressed sensing"; :class:`SparseRecovery`) fits all the degree <= d coefficients at
once by the Lasso, so a spectrum with few nonzero coefficients is found from far fewer examples than the
K = sum_{j <= d} C(n, j) that LMN's separate estimates need.

>>> import jax
>>> from jaxtrees import targets
>>> from jaxtrees.core import distributions, sampling
>>> key = jax.random.key(0)
>>> f = targets.parity([2, 5], n=8)                    # a uniform 2-parity: ID3 sees no gain
>>> data = sampling.draw(key, distributions.uniform().marginals(key, 8), f, m=256)
>>> h = jax.jit(LowDegree(degree=2, max_terms=4).fit)(key, data)
>>> h.sets[0].tolist(), round(float(h.values[0]), 3)   # the largest estimate: S = {2, 5}, f^(S) = 1
([2, 5], 1.0)
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax

from jaxtrees.core import checks
from jaxtrees.core.sampling import Data
from jaxtrees.hypotheses.polynomial import Polynomial, subsets
from jaxtrees.learners.base import check_data
from jaxtrees.learners.fourier_moments import (biased_moments, count_uniform, estimated_marginals, moments,
                                               subset_unions, symmetric_differences, uniform_gram, weighted_means)
from jaxtrees.learners.lasso import lasso

# re-exported: public path (jaxtrees.learners.fourier.<name>, as before the split of issue 69)
from jaxtrees.learners.fourier_moments import (GRAM_WORDS_PER_STEP, TABLE_DIFFERENCES, TABLE_SETS,  # noqa: F401
                                               WORDS_PER_STEP, example_weights)
from jaxtrees.learners.lasso import POWER_ITERATIONS  # noqa: F401

#: Bases of :class:`LowDegree`: the uniform chi_S, or the p-biased phi_S for the sample's marginals.
BASES = ("uniform", "biased")


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class LowDegree:
    """The LMN learner: ``fit(key, data) -> Polynomial`` over the sets of size <= ``degree``.

    - ``degree``: d >= 1 (and <= n, checked at fit);
    - ``threshold``: keep |f~(S)| >= threshold, in [0, 1) (0 keeps every estimate);
    - ``max_terms``: keep only the T largest |f~(S)| (the hypothesis then has K = T rows, which
      makes predicting cheap); None keeps all sum_{j <= d} C(n, j);
    - ``basis``: ``"uniform"`` (chi_S) or ``"biased"`` (phi_S for the marginals p^_i of the
      sample, clipped into [1 / 2m, 1 - 1 / 2m]).

    The key is not read: the estimates are a deterministic function of the sample.

    LMN (seed 001, "the LMN algorithm"): for every S with |S| <= d, estimate f^(S) = E[F phi_S]
    (F = 1 - 2y) by its sample mean, keep the estimates with |f~(S)| >= ``threshold`` (the
    ``max_terms`` largest, if set), and predict h(x) = 1[sum_S f~(S) phi_S(x) < 0]
    (:class:`~jaxtrees.hypotheses.polynomial.Polynomial`). If f has all but eps of its Fourier
    weight on degree <= d, m = O(n^d log(n^d / delta) / eps) examples give error O(eps).

    Counting (unweighted data, uniform basis): chi_S(x) = (-1)^(XOR_{i in S} x_i), so with the
    packed rows of the sample, m f~(S) = m - 2 popcount(valid & (y XOR X_{i1} XOR ... XOR X_{id})):
    each estimate is exact integer counting, n^d sets x W words of XOR + popcount. Weighted data
    (AdaBoost's weights, bootstrap counts) and the p-biased basis (marginals estimated from the same
    sample) take weighted sums over the unpacked examples, 32 at a time; sparse recovery on
    unweighted data counts in both bases (:func:`uniform_gram`, :func:`biased_moments`).
    """

    degree: int = 2
    threshold: float = 0.0
    max_terms: int | None = None
    basis: str = "uniform"
    access = "sample"

    def __post_init__(self):
        checks.integer("degree", self.degree, low=1)
        checks.real("threshold", self.threshold, low=0.0, high=1.0, high_open=True)
        if self.max_terms is not None:
            checks.integer("max_terms", self.max_terms, low=1)
        checks.choice("basis", self.basis, BASES)

    def fit(self, key, data: Data) -> Polynomial:
        del key
        check_data(data)
        n = data.X.shape[-2]
        return _fit(data, jnp.asarray(_sets(n, self.degree, self.max_terms)), self)


def _sets(n: int, degree: int, max_terms: int | None, most: int | None = None):
    """The sets of size <= ``degree`` over n coordinates, after checking them against n, ``max_terms``
    and the ``most`` sets a learner handles."""
    if degree > n:
        raise ValueError(f"degree must be in [1, n] = [1, {n}] (sets of at most n features), got {degree}")
    sets = subsets(n, degree)
    if most is not None and len(sets) > most:
        raise ValueError(f"degree <= {degree} over n = {n} coordinates spans {len(sets)} sets; sparse recovery "
                         f"solves over their {len(sets)} x {len(sets)} Gram matrix and handles at most {most} sets "
                         f"(lower the degree or n)")
    if max_terms is not None and max_terms > len(sets):
        raise ValueError(f"max_terms must be in [1, {len(sets)}] (the sets of degree <= {degree} over "
                         f"n = {n}), got {max_terms}")
    return sets


def _largest(sets, values, max_terms: int | None):
    """The ``max_terms`` rows with the largest |values| (all rows if None)."""
    if max_terms is None:
        return sets, values
    _, top = lax.top_k(jnp.abs(values), max_terms)
    return sets[top], values[top]


@functools.partial(jax.jit, static_argnames="learner")
def _fit(data: Data, sets, learner: LowDegree) -> Polynomial:
    # the counting paths need unweighted data and sets = subsets(n, degree) (see LowDegree.fit)
    table = subset_unions(data.X.shape[-2], sets.shape[-1]) if learner.basis == "biased" else None
    if learner.basis == "uniform" and data.weight is None:
        p, values = None, count_uniform(data, sets)
    elif data.weight is None and table is not None:
        p = estimated_marginals(data)
        _, values = biased_moments(data, sets, p, *table, gram=False)
    else:
        p = estimated_marginals(data) if learner.basis == "biased" else None
        values = weighted_means(data, sets, p)
    values = jnp.where(jnp.abs(values) >= learner.threshold, values, 0.0)
    return Polynomial(*_largest(sets, values, learner.max_terms), p)


#: Most sets :class:`SparseRecovery` solves over: it holds their K x K Gram matrix (64 MiB at K = 4096).
MAX_GRAM_SETS = 4096


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class SparseRecovery:
    """Sparse recovery: ``fit(key, data) -> Polynomial`` whose coefficients c minimize the Lasso

        1 / (2 sum_t w_t) sum_t w_t (F_t - sum_S c_S phi_S(x_t))^2 + l1 sum_{S != {}} |c_S|

    over the sets S of size <= ``degree`` (F = 1 - 2y; w_t = 1 unweighted). This is scikit-learn's
    ``Lasso(alpha=l1)`` objective with the empty set's coefficient (the mean of F) as an unpenalized
    intercept. The solver is FISTA with adaptive restart on the Gram matrix
    G = sum_t w_t phi(x_t) phi(x_t)^T / sum_t w_t and the correlations b = sum_t w_t F_t phi(x_t) / sum_t w_t
    (computed 256 examples at a time): each step is one K x K product, so fitting costs m K^2 + steps K^2.
    Unweighted data (up to ``TABLE_SETS`` sets) count instead: in the uniform basis G is read off
    the D distinct character means (chi_S chi_T = chi_{S xor T}, :func:`uniform_gram`), the same G
    to 1 ulp (n = 16, degree 3: D = 14,893 against K^2 = 485,809; 23 ms instead of 830 ms for 32
    fits at m = 4096 on a 2-core CPU); in the biased basis G = M^T Z M from the means of the
    monomials z_{V | W} (:func:`biased_moments`; n = 17, degree 3, 64 fits on the 2-core CPU:
    0.39 / 0.42 / 0.57 s at m = 1024 / 4096 / 16384 instead of 1.2 / 4.3 / 10.2 s).
    It stops when no coefficient moves more than ``tol`` in a step, or after ``steps`` steps.

    - ``degree``: d >= 1 (and <= n, checked at fit, with K = sum_{j <= d} C(n, j) <= 4096);
    - ``l1``: the penalty, >= 0 (0: least squares, which needs m >= K to be unique);
    - ``max_terms``: keep only the T largest |c_S| (the hypothesis then has T rows); None keeps K;
    - ``basis``: ``"uniform"`` or ``"biased"`` (the sample's marginals, as :class:`LowDegree`);
    - ``steps``, ``tol``: the most FISTA steps and the stopping tolerance.

    The key is not read: the solution is a deterministic function of the sample.

    >>> import jax
    >>> from jaxtrees import targets
    >>> from jaxtrees.core import distributions, sampling
    >>> key = jax.random.key(0)
    >>> f = targets.parity([3, 17], n=24)          # K = 301 sets of degree <= 2: more than m
    >>> data = sampling.draw(key, distributions.uniform().marginals(key, 24), f, m=128)
    >>> h = jax.jit(SparseRecovery(degree=2, l1=0.05, max_terms=2).fit)(key, data)
    >>> h.sets[0].tolist(), round(float(h.values[0]), 2)  # chi_{3,17}, shrunk by about l1
    ([3, 17], 0.95)
    """

    degree: int = 2
    l1: float = 0.05
    max_terms: int | None = None
    basis: str = "uniform"
    steps: int = 500
    tol: float = 1e-6
    access = "sample"

    def __post_init__(self):
        checks.integer("degree", self.degree, low=1)
        checks.real("l1", self.l1, low=0.0)
        if self.max_terms is not None:
            checks.integer("max_terms", self.max_terms, low=1)
        checks.choice("basis", self.basis, BASES)
        checks.integer("steps", self.steps, low=1)
        checks.real("tol", self.tol, low=0.0)

    def fit(self, key, data: Data) -> Polynomial:
        del key
        check_data(data)
        sets = _sets(data.X.shape[-2], self.degree, self.max_terms, most=MAX_GRAM_SETS)
        return _fit_sparse(data, jnp.asarray(sets), self)


@functools.partial(jax.jit, static_argnames="learner")
def _fit_sparse(data: Data, sets, learner: SparseRecovery) -> Polynomial:
    n, biased = data.X.shape[-2], learner.basis == "biased"
    p = estimated_marginals(data) if biased else None
    # the counting paths need unweighted data and sets = subsets(n, degree) (see SparseRecovery.fit)
    table = None if data.weight is not None else (subset_unions if biased else symmetric_differences)(n, learner.degree)
    if table is None:
        gram, correlations = moments(data, sets, p)
    elif biased:
        gram, correlations = biased_moments(data, sets, p, *table)
    else:
        gram, correlations = uniform_gram(data, *table), count_uniform(data, sets)
    penalty = jnp.full(sets.shape[0], learner.l1, jnp.float32).at[0].set(0.0)  # row 0: the empty set
    values = lasso(gram, correlations, penalty, learner.steps, learner.tol)
    return Polynomial(*_largest(sets, values, learner.max_terms), p)


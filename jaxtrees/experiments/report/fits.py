"""Scaling laws from censored trials: a Tobit fit of log(steps) against log(size), with a bootstrap.

A trial stopped at a budget T is right-censored there; dropping such trials biases an exponent
downwards, so :func:`censored_fit` fits every trial by maximum likelihood (Tobit), :func:`bootstrap_fit`
adds percentile intervals, and :func:`median_fit` / :func:`local_slopes` are the usual alternatives
on the cells' medians.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = np.repeat(np.log([8.0, 16, 32, 64]), 64)
>>> y = 2.0 * x + 1.0 + 0.5 * rng.standard_normal(x.size)   # log steps, exponent 2
>>> cap = np.log(1500.0)                                    # the budget censors the slowest
>>> fit = censored_fit(x, np.minimum(y, cap), y >= cap)
>>> bool(abs(fit.slope - 2.0) < 0.2), bool(fit.converged)   # least squares on the uncensored: ~1.7
(True, True)
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from jaxtrees.core import checks


#: Newton iterations of a fit (the concave problem converges in well under 20 from the LS start).
NEWTON_STEPS = 40
#: Step sizes tried along each Newton direction (the best finite one is taken).
STEP_SIZES = (1.0, 0.5, 0.25, 0.125, 0.0625)
#: A fit whose final gradient norm exceeds this (relative to the number of trials) has not converged.
GRADIENT_TOL = 1e-3


class Fit(NamedTuple):
    """log y ~ slope x + intercept + sigma N(0, 1), fitted with right censoring."""

    slope: float
    intercept: float
    sigma: float
    converged: bool


class BootstrapFit(NamedTuple):
    """A :class:`Fit` of all trials, with a percentile interval for the slope."""

    fit: Fit
    low: float  # the (1 - level) / 2 quantile of the bootstrap slopes
    high: float  # the (1 + level) / 2 quantile
    replicates: int  # bootstrap fits that converged (the interval is theirs)


def censored_fit(x, y, censored, weights=None) -> Fit:
    """The Tobit fit of ``y`` on ``x``.

    ``x, y: float[N]``; ``censored: bool[N]`` marks trials whose true value is >= y (y is then
    the censoring point, e.g. log of the budget); ``weights``: optional multiplicities (>= 0).

    A study that stops each trial at a budget T records, per trial, either the steps it took (y) or
    "not within T" (right-censored at T). Dropping the censored trials biases a fitted exponent
    downwards (the slow trials are the ones missing), and fitting only the cells' medians throws
    away every cell whose median is censored. :func:`censored_fit` fits the *Tobit* (censored normal
    regression) model on every trial:

        log y = a x + b + s e,  e ~ N(0, 1),  observed: min(log y, log T) and whether log y >= log T,

    by maximum likelihood: an uncensored trial contributes the normal density, a censored one
    Pr[log y >= log T] = Phi((a x + b - log T) / s). In Olsen's parametrization
    (alpha, beta, gamma) = (a / s, b / s, 1 / s) the log-likelihood

        sum_uncensored [log gamma - (gamma log y - alpha x - beta)^2 / 2] + sum_censored log Phi(alpha x + beta - gamma log T)

    is concave (Olsen 1978), so a damped Newton iteration from the least-squares start finds the
    maximum. With x = log n the slope a is the exponent of n in the median number of steps
    (exp(a log n + b) is the median of a log-normal y). :func:`bootstrap_fit` adds a percentile
    interval: trials are resampled within each x (the cells), and the fit repeated.

    For comparison, :func:`median_fit` is the usual alternative: least squares of the cells' median
    log y on x over the cells whose median is not censored (at most half of the trials censored), and
    :func:`local_slopes` gives the slope between the medians of consecutive x (a bend that one
    exponent hides).

    Where the data cannot pin the slope (fewer than two x with an uncensored trial, or a censored
    cell that lets the likelihood grow without bound) the fit reports ``converged = False``.
    """
    x, y, censored, weights = _inputs(x, y, censored, weights)
    if not _identified(x, censored, weights):
        return Fit(np.nan, np.nan, np.nan, False)
    theta, ok = _fit_one(*map(jnp.asarray, _padded(x, y, censored, weights)))
    return _as_fit(np.asarray(theta), bool(ok))


def bootstrap_fit(x, y, censored, *, replicates: int = 1000, level: float = 0.95, seed: int = 0) -> BootstrapFit:
    """:func:`censored_fit` and a percentile bootstrap interval of its slope: trials are resampled
    with replacement within each distinct ``x`` (stratified: every cell keeps its size), the
    resamples are fitted in one vmapped program, and the interval is taken over the fits that
    converged. Deterministic for a given ``seed``.

    >>> x = np.repeat(np.log([10.0, 20, 40]), 32)
    >>> y = 3.0 * x + np.random.default_rng(1).normal(0, 0.3, x.size)
    >>> out = bootstrap_fit(x, y, np.zeros(x.size, bool), replicates=200)
    >>> out.low < 3.0 < out.high, out.replicates
    (True, 200)
    """
    replicates = checks.integer("replicates", replicates, low=1, high=100_000)
    level = checks.real("level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    x, y, censored, _ = _inputs(x, y, censored, None)
    key = (x.tobytes(), y.tobytes(), censored.tobytes(), replicates, level, seed)
    if key not in _BOOTSTRAPS:  # a study's figure and report fit the same trials: once
        while _BOOTSTRAPS and len(_BOOTSTRAPS) >= BOOTSTRAPS_KEPT:
            _BOOTSTRAPS.pop(next(iter(_BOOTSTRAPS)))
        _BOOTSTRAPS[key] = _bootstrap_fit(x, y, censored, replicates, level, seed)
    return _BOOTSTRAPS[key]


#: Bootstrap fits kept by their inputs (:func:`bootstrap_fit` is a function of them), the oldest dropped first.
BOOTSTRAPS_KEPT = 256
_BOOTSTRAPS: dict = {}


def _bootstrap_fit(x, y, censored, replicates, level, seed) -> BootstrapFit:
    fit = censored_fit(x, y, censored)
    if not fit.converged:
        return BootstrapFit(fit, np.nan, np.nan, 0)
    rng = np.random.default_rng(seed)
    weights = np.zeros((replicates, x.size), np.float32)
    for value in np.unique(x):
        members = np.flatnonzero(x == value)
        picks = rng.integers(0, members.size, (replicates, members.size))
        np.add.at(weights, (np.arange(replicates)[:, None], members[picks]), 1.0)
    identified = _identified_rows(x, censored, weights)
    thetas, ok = _fit_many(*map(jnp.asarray, _padded(x, y, censored, weights)))
    slopes = np.asarray(thetas[:, 0] / thetas[:, 2])
    good = identified & np.asarray(ok) & np.isfinite(slopes)
    if not good.any():
        return BootstrapFit(fit, np.nan, np.nan, 0)
    low, high = np.quantile(slopes[good], [(1 - level) / 2, (1 + level) / 2])
    return BootstrapFit(fit, float(low), float(high), int(good.sum()))


class MedianFit(NamedTuple):
    """Least squares of the cells' median log y on x (:func:`median_fit`)."""

    slope: float
    intercept: float
    xs: tuple  # the x whose medians entered (uncensored medians), ascending
    converged: bool  # at least two such x


def cell_medians(x, y, censored) -> tuple[np.ndarray, np.ndarray]:
    """``(xs, medians)``: the distinct x ascending and the median of y over each x's trials, a
    censored trial counting as +inf: the lower median (NumPy's ``inverted_cdf``: the ceil(N / 2)-th
    smallest of N), finite iff at most half of the cell is censored; +inf otherwise.

    >>> cell_medians([1, 1, 1, 2, 2], [5.0, 3.0, 9.0, 4.0, 7.0], [False, False, True, True, True])
    (array([1., 2.], dtype=float32), array([ 5., inf], dtype=float32))
    """
    x, y, censored, _ = _inputs(x, y, censored, None)
    xs = np.unique(x)
    values = np.where(censored, np.inf, y)
    medians = np.asarray([np.quantile(values[x == v], 0.5, method="inverted_cdf") for v in xs], np.float32)
    return xs, medians


def median_fit(x, y, censored) -> MedianFit:
    """Least squares of the median y (:func:`cell_medians`) on x over the x whose median is finite;
    ``converged = False`` with fewer than two. Without censoring and with equal spread in every cell
    it estimates the slope that :func:`censored_fit` does.

    >>> fit = median_fit([1, 1, 2, 2, 3, 3], [1.0, 2.0, 3.0, 4.0, 9.0, 0.0], [False] * 5 + [True])
    >>> round(fit.slope, 6), fit.xs
    (4.0, (1.0, 2.0, 3.0))
    """
    xs, medians = cell_medians(x, y, censored)
    finite = np.isfinite(medians)
    if finite.sum() < 2:
        return MedianFit(np.nan, np.nan, tuple(float(v) for v in xs[finite]), False)
    slope, intercept = np.polyfit(xs[finite].astype(np.float64), medians[finite].astype(np.float64), 1)
    return MedianFit(float(slope), float(intercept), tuple(float(v) for v in xs[finite]), True)


def local_slopes(x, y, censored) -> list[tuple[float, float, float]]:
    """``[(x0, x1, slope)]`` for consecutive distinct x: (median y at x1 - median y at x0) / (x1 - x0),
    NaN where either median is censored (:func:`cell_medians`).

    >>> local_slopes([0, 0, 1, 1, 3, 3], [1.0, 1.0, 2.0, 2.0, 8.0, 8.0], [False] * 6)
    [(0.0, 1.0, 1.0), (1.0, 3.0, 3.0)]
    """
    xs, medians = cell_medians(x, y, censored)
    out = []
    for (x0, m0), (x1, m1) in zip(zip(xs, medians), zip(xs[1:], medians[1:])):
        slope = float(m1 - m0) / float(x1 - x0) if np.isfinite(m0) and np.isfinite(m1) else np.nan
        out.append((float(x0), float(x1), slope))
    return out


def _padded(*arrays):
    """The arrays padded with zeros to the next power of two (padding gets weight 0), so that fits
    of similar sizes share one compiled program."""
    size = 1 << max(0, int(arrays[0].size - 1).bit_length())
    return [np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, size - a.shape[-1])]) for a in arrays]


def _inputs(x, y, censored, weights):
    x = np.asarray(x, np.float32).reshape(-1)
    y = np.asarray(y, np.float32).reshape(-1)
    censored = np.asarray(censored, bool).reshape(-1)
    if not (x.size == y.size == censored.size):
        raise ValueError(f"x, y and censored must have the same length, got {x.size}, {y.size}, {censored.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("x and y must be finite (give a censored trial its censoring point as y)")
    weights = np.ones(x.size, np.float32) if weights is None else np.asarray(weights, np.float32).reshape(-1)
    if weights.size != x.size or np.any(weights < 0) or not np.all(np.isfinite(weights)):
        raise ValueError(f"weights must be {x.size} finite values >= 0")
    return x, y, censored, weights


def _identified(x, censored, weights) -> bool:
    """At least two distinct x carry an uncensored trial of positive weight."""
    return np.unique(x[(~censored) & (weights > 0)]).size >= 2


def _identified_rows(x, censored, weights) -> np.ndarray:
    """:func:`_identified` for each row of ``weights`` (a resample's), at once."""
    distinct, codes = np.unique(x, return_inverse=True)
    kept = (weights > 0) & ~censored
    carried = np.stack([kept[:, codes == i].any(axis=1) for i in range(distinct.size)], axis=1)
    return carried.sum(axis=1) >= 2


def _as_fit(theta, ok) -> Fit:
    alpha, beta, gamma = (float(v) for v in theta)
    if not ok or not gamma > 0:
        return Fit(np.nan, np.nan, np.nan, False)
    return Fit(alpha / gamma, beta / gamma, 1.0 / gamma, True)


def _loglik(theta, x, y, censored, weights):
    alpha, beta, gamma = theta
    gamma = jnp.maximum(gamma, 1e-12)
    z = gamma * y - alpha * x - beta
    ll = jnp.where(censored, log_ndtr(-z), jnp.log(gamma) - 0.5 * z * z)
    return jnp.sum(weights * ll)


def _derivatives(theta, x, y, censored, weights):
    """Gradient and Hessian of :func:`_loglik` in closed form (cheaper to compile than autodiff's).

    Uncensored, z = gamma y - alpha x - beta: d/d(alpha, beta, gamma) = (z x, z, 1 / gamma - z y),
    Hessian -v v^T - e_3 e_3^T / gamma^2 with v = (x, 1, -y). Censored, u = alpha x + beta - gamma y:
    d/dtheta = lambda v, Hessian -lambda (u + lambda) v v^T, with lambda = phi(u) / Phi(u)."""
    alpha, beta, gamma = theta
    gamma = jnp.maximum(gamma, 1e-12)
    z = gamma * y - alpha * x - beta
    mills = jnp.exp(-0.5 * z * z - 0.5 * jnp.log(2.0 * jnp.pi) - log_ndtr(-z))  # phi(u) / Phi(u), u = -z
    v = jnp.stack([x, jnp.ones_like(x), -y])  # [3, N]
    slope = jnp.where(censored, mills, z)  # d ll / d u along v, u = -z (uncensored: ll = -u^2 / 2 + log gamma)
    curvature = jnp.where(censored, mills * (-z + mills), 1.0)  # minus the second derivative along v
    dot = functools.partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)  # no TF32 rounding on a GPU
    g = dot(v, weights * slope) + jnp.asarray([0.0, 0.0, 1.0]) * jnp.sum(jnp.where(censored, 0.0, weights)) / gamma
    h = -dot(v * (weights * curvature), v.T)
    h = h.at[2, 2].add(-jnp.sum(jnp.where(censored, 0.0, weights)) / gamma**2)
    return g, h


def _fit(x, y, censored, weights):
    """Newton's method on the concave Olsen log-likelihood; ``(theta, converged)``."""
    w = weights / jnp.maximum(jnp.sum(weights), 1.0)  # the mean log-likelihood: scale-free tolerances
    # Start: least squares on every trial (censored ones at their censoring point).
    xm, ym = jnp.sum(w * x), jnp.sum(w * y)
    var_x = jnp.sum(w * (x - xm) ** 2)
    a = jnp.where(var_x > 0, jnp.sum(w * (x - xm) * (y - ym)) / jnp.maximum(var_x, 1e-12), 0.0)
    b = ym - a * xm
    s = jnp.sqrt(jnp.maximum(jnp.sum(w * (y - a * x - b) ** 2), 1e-4))
    theta0 = jnp.stack([a / s, b / s, 1.0 / s])
    objective = lambda t: _loglik(t, x, y, censored, w)  # noqa: E731
    sizes = jnp.asarray(STEP_SIZES, jnp.float32)

    def newton(theta, _):
        g, h = _derivatives(theta, x, y, censored, w)
        direction = -jnp.linalg.solve(h - 1e-9 * jnp.eye(3), g)
        candidates = theta[None] + sizes[:, None] * direction[None]
        values = jax.vmap(objective)(candidates)
        values = jnp.where(jnp.isfinite(values) & (candidates[:, 2] > 0), values, -jnp.inf)
        best = jnp.argmax(values)
        better = values[best] > objective(theta)
        return jnp.where(better, candidates[best], theta), None

    theta, _ = jax.lax.scan(newton, theta0, None, length=NEWTON_STEPS)
    g, _ = _derivatives(theta, x, y, censored, w)
    ok = jnp.all(jnp.isfinite(theta)) & (jnp.linalg.norm(g) < GRADIENT_TOL) & (theta[2] > 0)
    return theta, ok


_fit_one = jax.jit(_fit)
_fit_many = jax.jit(jax.vmap(_fit, in_axes=(None, None, None, 0)))  # one fit per row of weights

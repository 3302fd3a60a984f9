"""Scaling laws from censored trials: a Tobit fit of log(steps) against log(size), with a bootstrap.

A trial stopped at a budget T is right-censored there; dropping such trials biases an exponent
downwards, so :func:`censored_fit` fits every trial by maximum likelihood (Tobit), :func:`bootstrap_fit`
adds percentile intervals, and :func:`median_fit` / :func:`local_slopes` are the usual alternatives
on the cells' medians. The gd studies' row statistics (medians, quartiles, shares) live here too.

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
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from jaxtrees.core import checks
from jaxtrees.experiments import table as tables

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


# ----------------------------------------------------------------------------- steps of result rows
# ``rows`` is a :class:`~jaxtrees.experiments.table.Table` of results; a step count < 0 means "not
# within the budget" (censored) and counts as +infinity in medians and quantiles.


def censored_steps(rows, column: str = "steps") -> np.ndarray:
    """The column as floats, censored values (< 0) as +inf.

    >>> censored_steps(tables.Table({"steps": [40, -1]})).tolist()
    [40.0, inf]
    """
    v = np.asarray(rows[column], float)
    return np.where(v < 0, np.inf, v)


def quartiles(s) -> np.ndarray:
    """The quartiles of ``s`` (inverted CDF: observed values, +inf where censored)."""
    return np.quantile(s, [0.25, 0.5, 0.75], method="inverted_cdf")


def group_quartiles(rows, by, column: str = "steps") -> tuple[list[tuple], np.ndarray]:
    """``(keys, q)``: per group of ``by``, the :func:`quartiles` of the censored steps, ``q[g] = (Q1, Q2, Q3)``."""
    return tables.group_quantiles(rows, by, censored_steps(rows, column), (0.25, 0.5, 0.75))


def group_first(rows, by, column: str) -> list:
    """Per group of ``by`` (sorted as :func:`~jaxtrees.experiments.table.groups`), the column's value in the
    group's first row (a per-cell constant such as ``max_steps``)."""
    codes, size = tables.group_codes(rows, by)
    first = np.full(size, -1, np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    return np.asarray(rows[column])[first].tolist()


def median(s):
    """The median of ``s`` (inverted CDF: an observed value, +inf where more than half are censored)."""
    return np.quantile(s, 0.5, method="inverted_cdf")


def count_text(v, budget) -> str:
    """``1,234``, or ``> budget`` for a censored (infinite) value."""
    return f"> {budget:,}" if not np.isfinite(v) else f"{int(v):,}"


def median_iqr(s, budget) -> str:
    """``median [Q1, Q3]`` of the steps ``s``, censored values as ``> budget``.

    >>> median_iqr(np.array([10.0, 20.0, 30.0, np.inf]), 100)
    '20 [10, 30]'
    """
    q1, q2, q3 = quartiles(s)
    return f"{count_text(q2, budget)} [{count_text(q1, budget)}, {count_text(q3, budget)}]"


def median_count(rows, column: str) -> str:
    """The median of a step column as ``1,234``; ``-`` where it is censored."""
    m = median(censored_steps(rows, column))
    return f"{int(m):,}" if np.isfinite(m) else "-"


def share_within(rows, column: str, m) -> tuple[int, int]:
    """(successes, trials) of ``0 <= column <= m``."""
    v = np.asarray(rows[column]).astype(np.int64)
    return int(((v >= 0) & (v <= m)).sum()), len(v)


def log_steps(rows, column: str = "steps"):
    """``(log n, log steps, censored)`` of the trials ``rows``: a censored trial at log of its budget."""
    s = censored_steps(rows, column)
    censored = ~np.isfinite(s)
    budget = np.asarray(rows["max_steps"], float)
    return np.log(np.asarray(rows["n"], float)), np.log(np.where(censored, budget, s)), censored


def median_exponents(rows, by, column: str = "steps") -> dict:
    """Per group of ``by``: the slope a of log(median steps) ~ a log(n) + b over the n whose median
    is not censored (:func:`median_fit`), and those n."""
    out = {}
    for key, sel in tables.split(rows, by).items():
        s = censored_steps(sel, column)
        x = np.log(np.asarray(sel["n"], float))
        fit = median_fit(x, np.log(np.where(np.isfinite(s), s, 1.0)), ~np.isfinite(s))
        if fit.converged:
            out[key] = (fit.slope, [round(math.exp(v)) for v in fit.xs])
    return out


# ----------------------------------------------------------------------------- thresholds and bootstrap intervals
# A statement with unknown constants is tested by its form: a slope fitted to the measurements, with a percentile
# bootstrap interval (trials resampled within each cell), against the statement's own slope.


class Interval(NamedTuple):
    """A statistic and its percentile bootstrap interval."""

    estimate: float
    low: float
    high: float
    replicates: int  # resamples where the statistic was defined (the interval is theirs)


def thresholds(rates, level: float = 0.9) -> np.ndarray:
    """Per row of ``rates`` ``[..., M]`` (over an ascending grid): the index of the smallest grid point from which the
    rate stays >= ``level`` (as :func:`~jaxtrees.experiments.report.summary.threshold`); -1 where there is none.

    >>> thresholds(np.array([[0.5, 0.95, 0.8, 0.9, 1.0], [0.1, 0.2, 0.3, 0.4, 0.5]])).tolist()
    [3, -1]
    """
    ok = np.asarray(rates) >= level
    stays = np.flip(np.logical_and.accumulate(np.flip(ok, -1), axis=-1), -1)
    return np.where(stays.any(-1), np.argmax(stays, axis=-1), -1)


def row_slopes(x, y) -> np.ndarray:
    """Per row of ``x, y`` ``[B, C]``: the least-squares slope of y on x over the entries where both are finite; NaN
    where fewer than two distinct x remain.

    >>> row_slopes(np.array([[0.0, 1, 2], [0.0, 1, 1]]), np.array([[1.0, 3, np.nan], [5.0, np.nan, 2]])).tolist()
    [2.0, -3.0]
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    n = ok.sum(-1)
    x0, y0 = np.where(ok, x, 0.0), np.where(ok, y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        xm, ym = x0.sum(-1) / n, y0.sum(-1) / n
        dx = np.where(ok, x0 - xm[..., None], 0.0)
        sxx = (dx * dx).sum(-1)
        slope = (dx * np.where(ok, y0 - ym[..., None], 0.0)).sum(-1) / sxx
    return np.where((n >= 2) & (sxx > 1e-12), slope, np.nan)


def percentile_interval(estimate: float, draws, level: float = 0.95) -> Interval:
    """:class:`Interval` of ``estimate`` from the finite ``draws`` of its bootstrap (NaN bounds with none)."""
    draws = np.asarray(draws, np.float64)
    good = draws[np.isfinite(draws)]
    if not good.size or not np.isfinite(estimate):
        return Interval(float(estimate), np.nan, np.nan, int(good.size))
    low, high = np.quantile(good, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(estimate), float(low), float(high), int(good.size))


def threshold_slope(success, x, m, *, level: float = 0.9, replicates: int = 1000, conf: float = 0.95,
                    seed: int = 0) -> Interval:
    """The exponent of x in the m from which a cell's success rate stays >= ``level`` (m90 at 0.9): the
    least-squares slope of log m90 on log x over the cells that reach it, with a percentile bootstrap interval
    (trials resampled with replacement within each cell, m90 and x recomputed, cells that do not reach ``level`` in
    a resample left out of it; each resample drawn as counts, :func:`resampled_rates`).

    ``success``: per cell, ``bool[trials, M]`` over the ascending grid ``m``; ``x``: per cell, ``float[trials]``,
    the cell's x being their median (a per-trial value such as 1/eps*, or a constant repeated).

    >>> m = 2.0 ** np.arange(4, 12)
    >>> need = {2.0: 64, 4.0: 256, 8.0: 1024}                       # m90 = 16 x^2: exponent 2
    >>> success = [np.broadcast_to(m >= need[v], (50, m.size)) for v in need]
    >>> out = threshold_slope(success, [np.full(50, v) for v in need], m, replicates=50)
    >>> round(out.estimate, 6), round(out.low, 6), round(out.high, 6)
    (2.0, 2.0, 2.0)
    """
    log_m = np.log(np.asarray(m, np.float64))

    def fit(rates, xs):  # rates [B, C, M], xs [B, C]
        index = thresholds(rates, level)
        with np.errstate(divide="ignore"):
            return row_slopes(np.log(xs), np.where(index >= 0, log_m[np.maximum(index, 0)], np.nan))

    success = [np.asarray(s, bool) for s in success]
    x = [np.asarray(v, np.float64) for v in x]
    estimate = fit(np.stack([s.mean(0) for s in success])[None], np.array([[np.median(v) for v in x]]))[0]
    rng = np.random.default_rng(seed)
    rates, xs = zip(*(resampled_rates(s, v, replicates, rng) for s, v in zip(success, x)))
    return percentile_interval(estimate, fit(np.stack(rates, 1), np.stack(xs, 1)), conf)


def resampled_rates(success, x, replicates: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``(rates, medians)`` of ``replicates`` bootstrap resamples of one cell's trials (rows of ``success``
    ``bool[T, M]``, with their ``x``; T drawn with replacement): each resample's success rate at each m
    ``float[replicates, M]`` and its median x (as :func:`numpy.median`; NaN where it holds a NaN x).

    Drawn as counts, with the law of index resampling: the median's position among the trials sorted by x and the
    draws below and at it (:func:`_median_draws`), then the draws left and right of it as multinomial counts of
    those trials' success patterns (given their number, such draws are uniform over those trials); where every x is
    the same, one multinomial. A resample costs O(log T + distinct patterns) operations, not O(T)."""
    size = len(x)
    if size == 0:
        return np.full((replicates, success.shape[1]), np.nan), np.full(replicates, np.nan)
    if np.all(x == x[0]):  # one x (a per-cell constant): the median is it, the counts one multinomial
        codes, patterns = _row_codes(success)
        counts = rng.multinomial(size, np.bincount(codes) / size, size=replicates)
        return counts @ patterns / size, np.full(replicates, x[0])
    order = np.argsort(x, kind="stable")  # NaN last
    x = x[order]
    codes, patterns = _row_codes(np.concatenate([success[order], np.isnan(x)[:, None]], axis=1))
    below = _prefix_counts(codes, patterns.shape[0])
    (j1, left, at1), (j2, at2, right) = _median_draws(rng, size, replicates)
    above = below(np.full(1, size)) - below(j2 + 1)
    counts = (rng.multinomial(left, below(j1) / np.maximum(j1, 1)[:, None])
              + rng.multinomial(right, above / np.maximum(size - j2 - 1, 1)[:, None]))
    counts[np.arange(replicates), codes[j1]] += at1
    counts[np.arange(replicates), codes[j2]] += at2
    medians = np.where(j1 == j2, x[j1], (x[j1] + x[j2]) / 2)
    return counts @ patterns[:, :-1] / size, np.where(counts @ patterns[:, -1] > 0, np.nan, medians)


def _prefix_counts(codes, size: int):
    """``below(j)``: per position ``j[r]``, the count of each code among ``codes[:j[r]]``, ``int[R, size]``."""
    keys = np.sort(codes * len(codes) + np.arange(len(codes)))  # positions grouped by code, ascending
    starts = np.searchsorted(keys, np.arange(size) * len(codes))
    return lambda j: np.searchsorted(keys, np.arange(size) * len(codes) + np.asarray(j)[:, None]) - starts


def _median_draws(rng, size: int, replicates: int):
    """Per resample of ``size`` draws over ``size`` sorted positions: ``(j1, below j1, at j1)`` of the lower middle
    draw and ``(j2, at j2 if j2 > j1 else 0, above j2)`` of the upper (as :func:`numpy.median` takes them: the same
    position unless ``size`` is even and the lower is the last draw at j1)."""
    total = np.full(replicates, size, np.int64)
    j1, left, at1 = _order_statistic(rng, np.zeros(replicates, np.int64), total, total, (size - 1) // 2)
    more = left + at1 <= size // 2  # the upper middle draw lies right of j1
    j2, _, at2 = _order_statistic(rng, np.minimum(j1 + 1, size - 1), total, np.where(more, size - left - at1, 0), 0)
    j2, at2 = np.where(more, j2, j1), np.where(more, at2, 0)
    return (j1, left, at1), (j2, at2, size - left - at1 - at2)


def _order_statistic(rng, lo, hi, draws, rank) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(j, below, at)`` per resample: of ``draws`` uniform draws over the positions ``[lo, hi)``, the position of
    the ``rank``-th smallest (0-based) and the draws below it and at it, by bisection: the draws in a half of the
    range are binomial; ``ceil(log2(hi - lo))`` vectorised steps."""
    lo, hi, n = lo.copy(), hi.copy(), np.asarray(draws, np.int64).copy()
    rank, below = np.full(lo.shape, rank, np.int64), np.zeros(lo.shape, np.int64)
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        left = rng.binomial(n, (mid - lo) / np.maximum(hi - lo, 1))
        here = rank < left
        below, rank = below + np.where(here, 0, left), rank - np.where(here, 0, left)
        n, lo, hi = np.where(here, left, n - left), np.where(here, lo, mid), np.where(here, mid, hi)
    return lo, below, n


def _row_codes(bits) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, distinct)``: the distinct rows of ``bits`` ``bool[T, K]`` and each row's index among them."""
    packed = np.packbits(bits, axis=1, bitorder="little")
    order = np.lexsort(packed.T)
    ordered = packed[order]
    new = np.r_[True, np.any(ordered[1:] != ordered[:-1], axis=1)]
    codes = np.empty(len(bits), np.int64)
    codes[order] = np.cumsum(new) - 1
    return codes, bits[order[new]]


def bootstrap_statistic(statistic, strata, *, replicates: int = 1000, conf: float = 0.95, seed: int = 0) -> Interval:
    """``statistic(index)`` (a float; NaN where undefined) on all units and on ``replicates`` resamples, each the
    units of every stratum (``strata``: an int per unit, e.g. its cell) drawn with replacement within it; the
    percentile interval of the resamples'.

    >>> values = np.array([1.0, 2.0, 3.0, 10.0, 20.0, 30.0])
    >>> out = bootstrap_statistic(lambda i: values[i].mean(), [0, 0, 0, 1, 1, 1], replicates=200)
    >>> out.estimate, bool(2.0 < out.low < out.estimate < out.high < 20.0)
    (11.0, True)
    """
    strata = np.asarray(strata, np.int64)
    members = [np.flatnonzero(strata == s) for s in np.unique(strata)]
    rng = np.random.default_rng(seed)
    draws = [statistic(np.concatenate([g[rng.integers(0, g.size, g.size)] for g in members]))
             for _ in range(replicates)]
    return percentile_interval(statistic(np.arange(strata.size)), draws, conf)

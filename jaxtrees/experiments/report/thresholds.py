"""Thresholds of success rates and percentile bootstrap intervals.

A statement with unknown constants is tested by its form: a slope fitted to the measurements, with a percentile
bootstrap interval (trials resampled within each cell), against the statement's own slope: :func:`threshold_slope`
(the exponent of the m from which a rate stays >= a level), :func:`bootstrap_statistic` (any statistic of units
resampled within strata), on :func:`thresholds`, :func:`row_slopes` and :func:`resampled_rates`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


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

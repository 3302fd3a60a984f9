"""Censored outputs: the Kaplan-Meier product-limit estimate, its quantiles and the median's 95% interval.

A censored output (a step count whose budget may run out) is a time with a flag: the trial ended at that value, or
(censored) was still running there. :func:`kaplan_meier` estimates the share still running past each event time
(right censoring, Greenwood's variance), :func:`quantile` inverts it with the averaged inverse convention (without
censoring: :func:`numpy.quantile` ``method="averaged_inverted_cdf"``, so the median is :func:`numpy.median`) and
:func:`median_interval` bounds the median by the log-transformed Greenwood band (Brookmeyer-Crowley, as R's
``survfit``). Kaplan & Meier 1958, https://doi.org/10.1080/01621459.1958.10501452.

>>> round(quantile(kaplan_meier([1.0, 2.0, 3.0, 4.0], [False, False, False, False]), 0.5), 6)
2.5
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: Survival within this of a quantile's level counts as at it (the averaged convention: the midpoint).
TOLERANCE = 1e-9


class Curve(NamedTuple):
    """The product-limit curve at its event times (ascending), and the censoring."""

    times: np.ndarray  # the distinct times at which trials ended (uncensored)
    survival: np.ndarray  # the estimated share still running just after each of them
    log_variance: np.ndarray  # Greenwood's variance of log survival there (sum d / (n (n - d)))
    censored: int  # censored trials
    last_censored: float  # the largest censoring time but sentinels (NaN: none censored; inf: only sentinels)


def censoring_times(values, censored) -> np.ndarray:
    """The values as times: a censored trial's value NaN, infinite or negative (a sentinel, not the budget) becomes
    +inf (censored after every event, which is what any budget at least as large as every event time gives)."""
    values = np.asarray(values, np.float64)
    censored = np.asarray(censored, bool)
    sentinel = censored & ~(np.isfinite(values) & (values >= 0))
    return np.where(sentinel, np.inf, values)


def kaplan_meier(values, censored) -> Curve:
    """The product-limit estimate of the trials ``values`` (uncensored: the time each ended; censored: the time it
    was last seen running, or a sentinel, :func:`censoring_times`); at tied times events come before censoring."""
    times = censoring_times(values, censored)
    censored = np.asarray(censored, bool)
    ended = np.sort(times[~censored])
    distinct, deaths = np.unique(ended, return_counts=True)
    # at risk at t: every trial whose time is >= t (censored at t still at risk: events first)
    at_risk = times.size - np.searchsorted(np.sort(times), distinct, side="left")
    with np.errstate(divide="ignore", invalid="ignore"):
        survival = np.cumprod(1.0 - deaths / at_risk)
        terms = np.where(at_risk > deaths, deaths / (at_risk * (at_risk - deaths)), np.inf)
    known = times[censored & np.isfinite(times)]
    last = float(known.max()) if known.size else np.inf if censored.any() else np.nan
    return Curve(distinct, survival, np.cumsum(terms), int(censored.sum()), last)


def quantile(curve: Curve, q: float) -> float:
    """The time by which a share ``q`` of the trials ended: the first event time where survival falls below
    ``1 - q``, the midpoint to the next event time where it sits at ``1 - q``; inf where the censoring leaves it
    unknown (survival never reaches ``1 - q``); NaN for no trials."""
    if curve.times.size == 0:
        return np.inf if curve.censored else np.nan
    level = 1.0 - q
    at = np.flatnonzero(np.abs(curve.survival - level) < TOLERANCE)
    if at.size:
        i = at[0]
        return float((curve.times[i] + curve.times[i + 1]) / 2) if i + 1 < curve.times.size else float(curve.times[i])
    below = np.flatnonzero(curve.survival < level)
    return float(curve.times[below[0]]) if below.size else np.inf


def median_interval(curve: Curve, z: float = 1.96) -> tuple[float, float]:
    """The median's interval: the event times where the band ``S exp(+- z sqrt(var log S))`` first reaches 1/2
    (the lower bound where the band's bottom does, the upper where its top does; inf where it never does)."""
    if curve.times.size == 0:
        return (np.inf, np.inf) if curve.censored else (np.nan, np.nan)
    spread = z * np.sqrt(curve.log_variance)
    with np.errstate(invalid="ignore", over="ignore"):
        top, bottom = curve.survival * np.exp(spread), curve.survival * np.exp(-spread)
    top = np.where(curve.survival > 0, top, 0.0)
    bottom = np.where(np.isfinite(bottom), bottom, 0.0)
    return tuple(float(curve.times[i[0]]) if i.size else np.inf
                 for i in (np.flatnonzero(bottom <= 0.5 + TOLERANCE), np.flatnonzero(top <= 0.5 + TOLERANCE)))


class Summary(NamedTuple):
    """A censored output per group (arrays over the groups): the censoring and the product-limit quantiles."""

    count: np.ndarray  # trials (with a number or a sentinel; NaN values of uncensored trials left out)
    censored: np.ndarray  # censored trials
    median: np.ndarray  # inf: not reached (the censoring leaves it unknown)
    low: np.ndarray  # the median's 95% interval
    high: np.ndarray
    q1: np.ndarray  # the quartiles
    q3: np.ndarray
    budget: np.ndarray  # the largest censoring time (NaN: none censored, inf: only sentinels)
    missing: int = 0  # NaN values of uncensored trials, left out


def summarized(codes, size: int, values, censored) -> Summary:
    """:class:`Summary` per group of ``codes`` (one pass: the rows sorted by group, one curve per group)."""
    values, censored = np.asarray(values, np.float64), np.asarray(censored).astype(bool)
    keep = censored | ~np.isnan(values)
    codes, values, censored = np.asarray(codes)[keep], values[keep], censored[keep]
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=size))
    out = np.full((8, size), np.nan)
    for g, (start, end) in enumerate(zip(ends - np.diff(np.r_[0, ends]), ends)):
        part = order[start:end]
        curve = kaplan_meier(values[part], censored[part])
        out[:, g] = (part.size, curve.censored, quantile(curve, 0.5), *median_interval(curve), quantile(curve, 0.25),
                     quantile(curve, 0.75), curve.last_censored)
    return Summary(out[0].astype(np.int64), out[1].astype(np.int64), *out[2:], int(keep.size - keep.sum()))

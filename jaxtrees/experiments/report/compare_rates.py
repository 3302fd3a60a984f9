"""Comparing success rates: differences with Newcombe's interval, and where along m a rate reaches a level.

:func:`difference` is the difference of two independent proportions with Newcombe's hybrid score interval (his method
10: the two Wilson intervals combined; Newcombe 1998, https://doi.org/10.1002/(SICI)1097-0258(19980430)17:8<873::AID-SIM779>3.0.CO;2-I);
:func:`threshold_interval` is the smallest grid value from which a rate stays >= a level, with a percentile interval
from a parametric bootstrap (each point's successes redrawn binomially; :func:`~.thresholds.thresholds` on each draw).

>>> [round(v, 4) for v in difference(56, 70, 48, 80)]
[0.2, 0.0524, 0.3339]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxtrees.experiments.report.thresholds import thresholds
from jaxtrees.experiments.table import wilson


def difference(k1, n1, k2, n2, z: float = 1.96) -> tuple[float, float, float]:
    """``(p1 - p2, low, high)``: the difference of the rates k1/n1 and k2/n2 with Newcombe's hybrid score interval
    (``low = d - sqrt((p1 - l1)^2 + (u2 - p2)^2)``, ``high = d + sqrt((u1 - p1)^2 + (p2 - l2)^2)``, from the Wilson
    intervals ``(l, u)`` of each rate); NaN where a rate has no trials."""
    if n1 <= 0 or n2 <= 0:
        return np.nan, np.nan, np.nan
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = wilson(k1, n1, z), wilson(k2, n2, z)
    d = p1 - p2
    return float(d), float(d - np.hypot(p1 - l1, u2 - p2)), float(d + np.hypot(u1 - p1, p2 - l2))


class Threshold(NamedTuple):
    """The smallest grid value from which a rate stays >= the level, and its 95% percentile bootstrap interval."""

    estimate: float  # inf: not reached on the grid
    low: float  # inf: not reached in most resamples
    high: float  # inf: not reached in over 2.5% of the resamples (the grid is too short to bound it)


def threshold_interval(successes, trials, grid, level: float = 0.9, *, replicates: int = 2000, seed: int = 0,
                       conf: float = 0.95) -> Threshold:
    """:class:`Threshold` of the rates ``successes / trials`` over the ascending ``grid``: the estimate as
    :func:`~.thresholds.thresholds`, the interval the percentiles of the same on ``replicates`` parametric bootstrap
    draws (each point's successes binomial with its observed rate; a draw that never stays >= ``level`` counts as
    inf, so a bound may be inf: not reached within the grid).

    >>> threshold_interval([5, 19, 20], [20, 20, 20], [16, 32, 64], replicates=200)
    Threshold(estimate=32.0, low=32.0, high=64.0)
    """
    successes, trials = np.asarray(successes, np.int64), np.asarray(trials, np.int64)
    grid = np.append(np.asarray(grid, np.float64), np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = successes / trials
    estimate = grid[thresholds(rates, level)]  # -1 (none) picks the appended inf
    rng = np.random.default_rng(seed)
    draws = rng.binomial(trials, np.nan_to_num(rates), size=(replicates, trials.size)) / np.maximum(trials, 1)
    found = np.sort(grid[thresholds(draws, level)])
    tail = (1 - conf) / 2
    low = found[int(np.floor(tail * (replicates - 1)))]
    high = found[int(np.ceil((1 - tail) * (replicates - 1)))]
    return Threshold(float(estimate), float(low), float(high))

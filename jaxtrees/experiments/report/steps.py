"""Step counts of result rows: medians, quartiles and shares of trials, censored ones included.

``rows`` is a :class:`~jaxtrees.experiments.table.Table` of results; a step count < 0 means "not within the budget"
(censored) and counts as +infinity in medians and quantiles. :func:`median_iqr` and :func:`count_text` write them
(``> budget`` where censored); :func:`median_exponents` fits the growth of a group's median
(:func:`~jaxtrees.experiments.report.fits.median_fit`).
"""

from __future__ import annotations

import math

import numpy as np

from jaxtrees.experiments import table as tables
from jaxtrees.experiments.report import fits



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
    is not censored (:func:`~jaxtrees.experiments.report.fits.median_fit`), and those n."""
    out = {}
    for key, sel in tables.split(rows, by).items():
        s = censored_steps(sel, column)
        x = np.log(np.asarray(sel["n"], float))
        fit = fits.median_fit(x, np.log(np.where(np.isfinite(s), s, 1.0)), ~np.isfinite(s))
        if fit.converged:
            out[key] = (fit.slope, [round(math.exp(v)) for v in fit.xs])
    return out

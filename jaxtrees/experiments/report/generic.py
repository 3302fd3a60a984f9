"""The groups behind a generic figure and report: a study's rows summarized from its declared outputs alone.

``spec`` (JSON; a results directory's metadata.json keeps it, so these work where the study's code no longer
imports) names the study's axis, grid parameters and outputs ("bool", "int" or "float"; an output ``NAME`` with a
bool ``NAME_censored`` is censored, :func:`output_kinds`). :func:`prepared` gives the :class:`Layout` (x: the axis,
else the first numeric grid parameter that varies; one series per combination of the other parameters that vary) and
the :class:`Groups` with each output's :class:`Stats` (a censored one's :class:`~.survival.Summary`); the statistics
are a few NumPy passes over the columns (:func:`jaxtrees.experiments.table.groups`, ``np.bincount``).
:mod:`~jaxtrees.experiments.report.generic_figure` draws them, :mod:`~jaxtrees.experiments.report.generic_report`
tabulates them.
"""

from __future__ import annotations

import json
import re
import textwrap
import weakref
from typing import NamedTuple

import numpy as np

from jaxtrees.experiments import table as tables
from jaxtrees.experiments.report import survival

#: z of the 95% intervals (Wilson's for rates, the normal approximation for means).
Z = 1.96
#: Resamples of the percentile bootstrap interval of a mean of values within [0, 1] (an error).
RESAMPLES = 1000
#: Columns that label the errors rather than being outputs (``problems.Score``): exact or on test points.
LABELS = ("exact", "test_points")
#: The suffix of the bool column that marks an output's censored trials.
CENSORED = "_censored"
#: Integer outputs whose groups x distinct values fit this many counters get their medians by counting, not sorting.
COUNTING_CELLS = 2**22
#: Up to this many groups the bootstrap intervals are drawn for every group at once (one seeded stream); past it each
#: group's on its first use (a stream per group), so a grid of 10^6 cells pays for the groups it shows, not for all.
EAGER_BOOTSTRAP = 4096


class Layout(NamedTuple):
    """Where the grid parameters go: x, the series (one line per combination of their values), the title."""

    x: str | None  # the column along x; None where nothing varies (one point: all the rows)
    numeric: bool  # x numeric (else categorical: one position per value)
    series: list  # the other grid parameters that vary in the rows
    constant: dict  # grid parameters with one value in the rows -> that value


class Stats(NamedTuple):
    """One output per group (one combination of the series' values and one x value), arrays over the groups."""

    count: np.ndarray  # values behind each group's statistics (NaN and inf left out)
    centre: np.ndarray  # the rate (bool) or the mean
    low: np.ndarray  # the 95% interval (Wilson's for a rate); NaN where one value gives none
    high: np.ndarray
    median: np.ndarray | None  # numeric outputs only
    missing: int  # NaN values left out
    infinite: int = 0  # inf values left out
    left_out: np.ndarray | None = None  # per group the NaN and inf values left out
    bounded: bool = False  # every value within [0, 1]: the mean's interval a percentile bootstrap's


class Groups(NamedTuple):
    """The rows' groups, their sizes and each output's :class:`Stats`."""

    keys: list  # per group: (*series values, x value), or the series values only where x is None
    sizes: np.ndarray  # rows per group
    stats: dict  # output name -> Stats (a censored output: survival.Summary)
    kinds: dict = {}  # output name -> its kind (output_kinds)


def as_table(rows) -> tables.Table:
    """The rows as a :class:`~jaxtrees.experiments.table.Table` (a list of row dicts becomes one)."""
    return rows if isinstance(rows, tables.Table) else tables.Table.from_rows(rows)


def prepared(rows, spec: dict) -> tuple[Layout, Groups]:
    """:func:`_layout` and :func:`_groups` of the rows, computed once per table and spec (a study's figure and
    report summarize the same rows alike)."""
    rows = as_table(rows)
    key = json.dumps(spec, sort_keys=True, default=str)
    known = _PREPARED.setdefault(rows, {})
    if key not in known:
        layout = _layout(rows, spec)
        known.clear()
        known[key] = layout, _groups(rows, spec, layout)
    return known[key]


#: Table -> {spec as JSON: (layout, groups)} (the last spec per table; forgotten with the table).
_PREPARED = weakref.WeakKeyDictionary()


def _layout(rows, spec: dict) -> Layout:
    """x, the series and the constant parameters of ``rows`` (checked against ``spec``)."""
    _check(rows, spec)
    axis = spec.get("axis")
    names = [p for p in spec.get("parameters", []) if p in rows and p != axis]
    values = {p: rows.unique(p) for p in names}
    varying = [p for p in names if len(values[p]) > 1]
    constant = {p: values[p][0] for p in names if len(values[p]) == 1}
    if axis:
        x, numeric = axis, _numeric(rows.unique(axis))
    else:
        numbers = [p for p in varying if _numeric(values[p])]
        x, numeric = (numbers or varying or [None])[0], bool(numbers)
    return Layout(x, numeric, [p for p in varying if p != x], constant)


def _check(rows, spec: dict):
    """ValueError for no rows or no outputs, KeyError for an output (or the axis) the rows lack."""
    if len(rows) == 0:
        raise ValueError(f"{spec.get('name', 'study')}: no rows to plot or report")
    if not spec.get("outputs"):
        raise ValueError(f"{spec.get('name', 'study')}: the spec declares no outputs")
    for name in [*spec["outputs"], *([spec["axis"]] if spec.get("axis") else [])]:
        if name not in rows:
            raise KeyError(f"{name!r} (named in {spec.get('name', 'the study')}'s spec) is not a column of the rows; "
                           f"they have {', '.join(rows.names)}")


def _numeric(values) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _groups(rows, spec: dict, layout: Layout) -> Groups:
    """Group the rows by the series and x (one pass), then each output's statistics per group."""
    by = [*layout.series, *([layout.x] if layout.x else [])]
    codes, keys = tables.groups(rows, by)
    kinds, stats = output_kinds(spec), {}
    for name, kind in kinds.items():
        if kind == "censored":
            stats[name] = survival.summarized(codes, len(keys), rows[name], rows[name + CENSORED])
        else:
            stats[name] = (_rates if kind in ("bool", "share") else _means)(codes, len(keys), rows[name])
    return Groups(keys, np.bincount(codes, minlength=len(keys)), stats, kinds)


def output_kinds(spec: dict) -> dict:
    """Output name -> kind: the spec's ("bool", "int", "float"), but "censored" for ``NAME`` where the outputs hold a
    bool ``NAME_censored`` too (that one "share": the censored share), and without :data:`LABELS`."""
    outputs = spec["outputs"]
    kinds = {}
    for name, kind in outputs.items():
        if name in LABELS:
            continue
        if outputs.get(name + CENSORED) == "bool" and kind != "bool":
            kind = "censored"
        elif name.endswith(CENSORED) and kind == "bool" and outputs.get(name[:-len(CENSORED)], "bool") != "bool":
            kind = "share"
        kinds[name] = kind
    return kinds


def _present(codes, values):
    """``(codes, values, nan, inf)`` without the NaN and inf values (float columns only: nothing copied otherwise),
    and those per group (None where there are none)."""
    values = np.asarray(values)
    if values.dtype.kind != "f":
        return codes, values, 0, 0
    bad = ~np.isfinite(values)
    if not bad.any():
        return codes, values, 0, 0
    nan = int(np.count_nonzero(np.isnan(values)))
    return codes[~bad], values[~bad], nan, int(np.count_nonzero(bad)) - nan, codes[bad]


def _left_out(size: int, present) -> tuple[int, int, np.ndarray | None]:
    """``(nan, inf, per group)`` of :func:`_present`'s answer."""
    return (present[2], present[3], np.bincount(present[4], minlength=size)) if len(present) > 4 else (0, 0, None)


def _rates(codes, size: int, values) -> Stats:
    """The share of 1s per group with its 95% Wilson interval."""
    present = _present(codes, values)
    codes, values = present[:2]
    count = np.bincount(codes, minlength=size)
    successes = np.bincount(codes, values.astype(np.float64, copy=False), minlength=size)
    low, high = (np.atleast_1d(bound) for bound in tables.wilson(successes, count, Z))
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(count > 0, successes / count, np.nan)
    nan, inf, left_out = _left_out(size, present)
    return Stats(count, rate, low, high, None, nan, inf, left_out)


def _means(codes, size: int, values) -> Stats:
    """The mean per group with its 95% interval (mean +- z sd / sqrt(count); :func:`_bootstrap` where every value lies
    in [0, 1]), and the median."""
    present = _present(codes, values)
    codes, values = present[:2]
    x = values.astype(np.float64, copy=False)
    count = np.bincount(codes, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, np.bincount(codes, x, minlength=size) / count, np.nan)
        squares = np.bincount(codes, (x - mean[codes]) ** 2, minlength=size)
        half = Z * np.sqrt(squares / (count - 1)) / np.sqrt(count)
    half = np.where(count > 1, half, np.nan)
    low, high = mean - half, mean + half
    bounded = bool(x.size) and 0 <= x.min() and x.max() <= 1
    if bounded and size <= EAGER_BOOTSTRAP:
        low, high = _bootstrap(codes, x, count)
    elif bounded:
        low, high = Bootstrapped(codes, x, count).bounds()
    nan, inf, left_out = _left_out(size, present)
    return Stats(count, mean, low, high, _medians(codes, values, count), nan, inf, left_out, bounded)


def _bootstrap(codes, x: np.ndarray, count: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group the 95% percentile bootstrap interval of the mean (:data:`RESAMPLES` resamples, each drawn as counts
    of the group's distinct values; seeded): within the values' range, so never outside [0, 1]; NaN for one value."""
    rng = np.random.default_rng(0)
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(count)
    bounds = np.full((2, len(count)), np.nan)
    for g, (start, end) in enumerate(zip(ends - count, ends)):
        if end - start > 1:
            distinct, times = np.unique(x[order[start:end]], return_counts=True)
            means = rng.multinomial(end - start, times / (end - start), size=RESAMPLES) @ distinct / (end - start)
            bounds[:, g] = np.quantile(means, [0.025, 0.975])
    return bounds[0], bounds[1]


class Bootstrapped:
    """:func:`_bootstrap`'s intervals per group, each drawn on its first use (its own seeded stream: the same whichever
    groups are used, and in whatever order); :meth:`bounds` gives ``(low, high)``, indexable like arrays."""

    def __init__(self, codes, x: np.ndarray, count: np.ndarray):
        self.codes, self.x, self.count, self.order = codes, x, count, None
        self.values = np.full((2, len(count)), np.nan)
        self.done = count <= 1  # one value or none: no interval

    def bounds(self) -> tuple:
        return _Bound(self, 0), _Bound(self, 1)

    def need(self, index) -> None:
        """Draw the intervals of the groups ``index`` (an index of the groups' arrays) not drawn yet."""
        wanted = np.unique(np.arange(len(self.count))[index] if isinstance(index, slice) else np.asarray(index))
        todo = wanted[~self.done[wanted]]
        if not todo.size:
            return
        if self.order is None:
            self.order = np.argsort(self.codes, kind="stable")
        ends = np.cumsum(self.count)
        for g in todo.tolist():
            members = self.x[self.order[ends[g] - self.count[g]:ends[g]]]
            distinct, times = np.unique(members, return_counts=True)
            means = np.random.default_rng([0, g]).multinomial(members.size, times / members.size, size=RESAMPLES) \
                @ distinct / members.size
            self.values[:, g] = np.quantile(means, [0.025, 0.975])
        self.done[todo] = True


class _Bound:
    """One side of :class:`Bootstrapped`'s intervals: ``bound[index]`` draws what it reads."""

    def __init__(self, source: Bootstrapped, side: int):
        self.source, self.side = source, side

    def __getitem__(self, index):
        self.source.need(index)
        return self.source.values[self.side][index]

    def __len__(self) -> int:
        return len(self.source.count)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self[:], dtype)


def _medians(codes, values: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Per group np.median's median of ``values`` (NaN for an empty group): integers of a small range by counting,
    other values by one sort of the rows by group and value, then the middle one or two of each group."""
    if values.dtype.kind in "biu" and values.size:
        low, high = int(values.min()), int(values.max())
        if (high - low + 1) * len(count) <= COUNTING_CELLS:
            return _counted_medians(codes, values, count, low, high - low + 1)
    by_value = np.argsort(values, kind="stable")  # then by group, stably: the groups in turn, each sorted
    ordered = values.astype(np.float64, copy=False)[by_value[np.argsort(codes[by_value], kind="stable")]]
    starts = np.cumsum(count) - count
    lower, upper = (ordered[np.minimum(starts + rank, max(len(ordered) - 1, 0))] if len(ordered) else
                    np.zeros(len(count)) for rank in ((count - 1) // 2, count // 2))
    return np.where(count > 0, (lower + upper) / 2, np.nan)


def _counted_medians(codes, values: np.ndarray, count: np.ndarray, low: int, span: int) -> np.ndarray:
    """:func:`_medians` of integers in [low, low + span) from one histogram per group (one pass, no sort)."""
    cells = codes.astype(np.int64) * span + (values.astype(np.int64) - low)
    below = np.cumsum(np.bincount(cells, minlength=len(count) * span).reshape(len(count), span), axis=1)
    middle = [(below <= rank[:, None]).sum(axis=1) for rank in ((count - 1) // 2, count // 2)]  # the ranks' values
    return np.where(count > 0, low + (middle[0] + middle[1]) / 2, np.nan)


def series_groups(keys: list, layout: Layout, stats: Stats) -> list[tuple[str, list[int]]]:
    """``(label, groups)`` per combination of the series' values, its groups (with values) in x order."""
    out = {}
    width = len(layout.series)
    for g, key in enumerate(keys):
        if stats.count[g]:
            out.setdefault(tuple(key[:width]), []).append(g)
    return [(assignment_text(layout.series, combination), members) for combination, members in out.items()]


def is_bool(spec: dict, name: str) -> bool:
    return output_kinds(spec).get(name, spec["outputs"].get(name)) in ("bool", "share")


class Exactness(NamedTuple):
    """How the rows' errors were measured (``problems.Score``'s ``exact`` and ``test_points`` columns)."""

    rows: int
    exact: int | None  # rows whose error is exact (None: no exact column)
    points: tuple | None  # (fewest, most) test points of the estimated errors (None: no test_points column)


def exactness(rows) -> Exactness | None:
    """:class:`Exactness` of the rows, None where they carry neither ``exact`` nor ``test_points``."""
    if not any(name in rows for name in LABELS):
        return None
    exact = np.asarray(rows["exact"]).astype(bool) if "exact" in rows else np.zeros(len(rows), bool)
    points = np.asarray(rows["test_points"])[~exact] if "test_points" in rows else np.zeros(0)
    return Exactness(len(rows), int(exact.sum()) if "exact" in rows else None,
                     (int(points.min()), int(points.max())) if points.size else None)


def exactness_text(label: Exactness | None) -> str:
    """"exact", "estimated on N test points" (or "N-M"), or both with the rows of each; "" where not labelled."""
    if label is None:
        return ""
    points = "" if label.points is None else \
        f"{label.points[0]:,}" if label.points[0] == label.points[1] else f"{label.points[0]:,}-{label.points[1]:,}"
    estimated = f"estimated on {points} test points" if points else "estimated (not exact)"
    if label.exact == label.rows:
        return "exact"
    if not label.exact:
        return estimated
    return f"exact in {label.exact:,} of {label.rows:,} rows, {estimated} in the rest"


def named(name: str, spec: dict) -> str:
    """``name: short meaning`` (the meaning's head, before its first ':', ';' or ' ('), or the name alone."""
    meaning = spec.get("meanings", {}).get(name)
    if not meaning:
        return name
    head = re.split(r":|;| \(", meaning, maxsplit=1)[0].strip()
    return f"{name}: {textwrap.shorten(head, 40, placeholder='...')}" if head and head != name else name


def assignment_text(names: list, values) -> str:
    return ", ".join(f"{n} = {value_text(v)}" for n, v in zip(names, values))


def value_text(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)

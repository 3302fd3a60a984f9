"""Figures and a report for any study, from its rows and its declared outputs alone.

``spec`` (JSON; a results directory's metadata.json keeps it, so these work where the study's code no longer
imports) names the study's axis, grid parameters and outputs ("bool", "int" or "float"). :func:`plot` draws one
panel per output against x (the axis, else the first numeric grid parameter that varies), one line per combination
of the other parameters that vary; :func:`report` tabulates the same groups. Every statistic is a few NumPy passes
over the columns (:func:`jaxtrees.experiments.table.groups`, ``np.bincount``): nothing per row.
"""

from __future__ import annotations

import json
import re
import textwrap
import weakref
from typing import NamedTuple

import numpy as np

from jaxtrees.experiments.report import saving, summary
from jaxtrees.experiments import table as tables

#: z of the 95% intervals (Wilson's for rates, the normal approximation for means).
Z = 1.96
#: The rate a sample size must reach in the report's "m for 90%".
LEVEL = 0.9
#: An x axis of at most this many values gets a tick at each.
MAX_TICKS = 12
#: Integer outputs whose groups x distinct values fit this many counters get their medians by counting, not sorting.
COUNTING_CELLS = 2**22
#: At most this many of those ticks are labelled (every other one, or every third, ... beyond).
LABELLED_TICKS = 6
#: Width (in x positions) shared by the series' points at one value of a categorical x.
DODGE = 0.6


class Layout(NamedTuple):
    """Where the grid parameters go: x, the series (one line per combination of their values), the title."""

    x: str | None  # the column along x; None where nothing varies (one point: all the rows)
    numeric: bool  # x numeric (else categorical: one position per value)
    series: list  # the other grid parameters that vary in the rows
    constant: dict  # grid parameters with one value in the rows -> that value


class Stats(NamedTuple):
    """One output per group (one combination of the series' values and one x value), arrays over the groups."""

    count: np.ndarray  # values behind each group's statistics (NaN left out)
    centre: np.ndarray  # the rate (bool) or the mean
    low: np.ndarray  # the 95% interval (Wilson's for a rate); NaN where one value gives none
    high: np.ndarray
    median: np.ndarray | None  # numeric outputs only
    missing: int  # NaN values left out


class Groups(NamedTuple):
    """The rows' groups, their sizes and each output's :class:`Stats`."""

    keys: list  # per group: (*series values, x value), or the series values only where x is None
    sizes: np.ndarray  # rows per group
    stats: dict  # output name -> Stats


# ----------------------------------------------------------------------------- public


@summary.styled
def plot(rows, stem: str, spec: dict) -> list[str]:
    """Write ``stem``.png and ``stem``.svg: one panel per output of ``spec`` against x; returns the paths."""
    return saving.save(_figure(rows, spec), stem)


def report(rows, spec: dict) -> str:
    """Markdown: per output a table of its rate (or mean and median) per group, and where x is a sample size the
    smallest m with a 90% rate per combination of the other varying parameters."""
    rows = _table(rows)
    layout, groups = _prepared(rows, spec)
    parts = [_opening(rows, spec, layout, groups)]
    for name, stats in groups.stats.items():
        parts.append(_output_section(name, stats, groups.keys, spec, layout))
        if _is_bool(spec, name) and layout.numeric and _sample_size(spec, layout.x):
            parts.append(_m90_section(name, stats, groups.keys, layout))
    return "\n".join(parts)


# ----------------------------------------------------------------------------- layout and statistics


def _table(rows) -> tables.Table:
    """The rows as a :class:`~jaxtrees.experiments.table.Table` (a list of row dicts becomes one)."""
    return rows if isinstance(rows, tables.Table) else tables.Table.from_rows(rows)


def _prepared(rows, spec: dict) -> tuple[Layout, Groups]:
    """:func:`_layout` and :func:`_groups` of the rows, computed once per table and spec (a study's figure and
    report summarize the same rows alike)."""
    rows = _table(rows)
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
    stats = {name: (_rates if kind == "bool" else _means)(codes, len(keys), rows[name])
             for name, kind in spec["outputs"].items()}
    return Groups(keys, np.bincount(codes, minlength=len(keys)), stats)


def _present(codes, values):
    """``(codes, values, missing)`` without the NaN values (float columns only: nothing copied otherwise)."""
    values = np.asarray(values)
    if values.dtype.kind != "f":
        return codes, values, 0
    nan = np.isnan(values)
    missing = int(np.count_nonzero(nan))
    return (codes[~nan], values[~nan], missing) if missing else (codes, values, 0)


def _rates(codes, size: int, values) -> Stats:
    """The share of 1s per group with its 95% Wilson interval."""
    codes, values, missing = _present(codes, values)
    count = np.bincount(codes, minlength=size)
    successes = np.bincount(codes, values.astype(np.float64, copy=False), minlength=size)
    low, high = (np.atleast_1d(bound) for bound in tables.wilson(successes, count, Z))
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(count > 0, successes / count, np.nan)
    return Stats(count, rate, low, high, None, missing)


def _means(codes, size: int, values) -> Stats:
    """The mean per group with its 95% interval (mean +- z sd / sqrt(count)), and the median."""
    codes, values, missing = _present(codes, values)
    x = values.astype(np.float64, copy=False)
    count = np.bincount(codes, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, np.bincount(codes, x, minlength=size) / count, np.nan)
        squares = np.bincount(codes, (x - mean[codes]) ** 2, minlength=size)
        half = Z * np.sqrt(squares / (count - 1)) / np.sqrt(count)
    half = np.where(count > 1, half, np.nan)
    return Stats(count, mean, mean - half, mean + half, _medians(codes, values, count), missing)


def _medians(codes, values: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Per group np.median's median of ``values`` (NaN for an empty group): integers of a small range by counting,
    other values by one sort of the rows by group (no sort by value)."""
    if values.dtype.kind in "biu" and values.size:
        low, high = int(values.min()), int(values.max())
        if (high - low + 1) * len(count) <= COUNTING_CELLS:
            return _counted_medians(codes, values, count, low, high - low + 1)
    order = np.argsort(codes.astype(np.uint16) if len(count) <= 2**16 else codes, kind="stable")  # 16 bits: radix
    ordered = values[order].astype(np.float64, copy=False)  # the groups one after the other, then one partition each
    ends = np.cumsum(count)
    return np.array([np.median(ordered[start:end]) if end > start else np.nan
                     for start, end in zip(ends - count, ends)], np.float64)


def _counted_medians(codes, values: np.ndarray, count: np.ndarray, low: int, span: int) -> np.ndarray:
    """:func:`_medians` of integers in [low, low + span) from one histogram per group (one pass, no sort)."""
    cells = codes.astype(np.int64) * span + (values.astype(np.int64) - low)
    below = np.cumsum(np.bincount(cells, minlength=len(count) * span).reshape(len(count), span), axis=1)
    middle = [(below <= rank[:, None]).sum(axis=1) for rank in ((count - 1) // 2, count // 2)]  # the ranks' values
    return np.where(count > 0, low + (middle[0] + middle[1]) / 2, np.nan)


def _series(keys: list, layout: Layout, stats: Stats) -> list[tuple[str, list[int]]]:
    """``(label, groups)`` per combination of the series' values, its groups (with values) in x order."""
    out = {}
    width = len(layout.series)
    for g, key in enumerate(keys):
        if stats.count[g]:
            out.setdefault(tuple(key[:width]), []).append(g)
    return [(_label(layout.series, combination), members) for combination, members in out.items()]


# ----------------------------------------------------------------------------- the figure


def _figure(rows, spec: dict):
    """The figure :func:`plot` saves (a matplotlib Figure): one panel per output, in reading order."""
    rows = _table(rows)
    layout, groups = _prepared(rows, spec)
    xs, ticks = _positions(groups.keys, layout)
    fig, axes = summary.figure(len(groups.stats))
    for ax, (name, stats) in zip(axes, groups.stats.items()):
        series = _series(groups.keys, layout, stats)
        draw = _rate_series if _is_bool(spec, name) else _mean_series
        for i, (label, members) in enumerate(series):
            at = [xs[g] for g in members]
            draw(ax, at if layout.numeric else _dodged(at, i, len(series)), stats, members, label, _style(i),
                 len(series), layout.numeric)
        _dress(ax, name, spec, layout, ticks)
    if layout.series:
        summary.legend(fig, axes)
    summary.suptitle(fig, _title(spec, layout, groups.sizes))
    return fig


def _positions(keys: list, layout: Layout) -> tuple[list[float], dict]:
    """Per group its x position, and the ticks (position -> label): a numeric x at its values, a categorical one
    at 0, 1, ... in the values' natural order (no x: one position, all the rows)."""
    if layout.x is None:
        return [0.0] * len(keys), {0.0: "all rows"}
    if layout.numeric:
        return [float(key[-1]) for key in keys], {float(v): f"{v:g}" for v in sorted({key[-1] for key in keys})}
    values = sorted({key[-1] for key in keys}, key=summary.natural_key)
    index = {v: float(i) for i, v in enumerate(values)}
    return [index[key[-1]] for key in keys], {index[v]: _text(v) for v in values}


def _style(i: int) -> dict:
    """Series i's colour and marker: :func:`summary.series_style`'s 20 colours, the markers shifted by one in each
    further round of 20, so that no two of 200 series look alike."""
    from matplotlib import colormaps

    tab20 = colormaps["tab20"].colors
    return {"color": (tab20[0::2] + tab20[1::2])[i % 20], "marker": summary.MARKERS[(i + i // 20) % 10]}


def _dodged(xs: list, i: int, n: int) -> list:
    """Series i of n's positions at a categorical x: side by side around each value."""
    shift = 0.0 if n == 1 else DODGE * (i / (n - 1) - 0.5)
    return [x + shift for x in xs]


def _rate_series(ax, xs, stats: Stats, members, label, style, n, numeric):
    """A rate with its Wilson band (numeric x: :func:`summary.rate_curve`; categorical: points with error bars)."""
    if not numeric:
        _error_bars(ax, xs, stats, members, label, style)
        return
    points = [{"x": x, "rate": stats.centre[g], "low": stats.low[g], "high": stats.high[g]}
              for x, g in zip(xs, members)]
    summary.rate_curve(ax, points, "x", label, band_alpha=_alpha(n), **style)


def _mean_series(ax, xs, stats: Stats, members, label, style, n, numeric):
    """A mean with its 95% band and the median dashed in the same colour (categorical x: error bars and an x)."""
    if not numeric:
        _error_bars(ax, xs, stats, members, label, style)
        ax.plot(xs, stats.median[members], ls="none", marker="x", ms=8, mew=1.5, color=style["color"], label="_median")
        return
    line, = ax.plot(xs, stats.centre[members], ls="-", ms=5, label=label, **style)
    ax.fill_between(xs, stats.low[members], stats.high[members], color=line.get_color(), alpha=_alpha(n))
    ax.plot(xs, stats.median[members], ls="--", lw=1.2, color=line.get_color(), label="_median")


def _alpha(n: int) -> float:
    """The bands' opacity: lighter where many series overlap."""
    return 0.2 if n <= 4 else 0.1


def _error_bars(ax, xs, stats: Stats, members, label, style):
    """Points with their 95% intervals as error bars (a categorical x)."""
    centre, low, high = stats.centre[members], stats.low[members], stats.high[members]
    yerr = np.nan_to_num(np.stack([centre - low, high - centre]))
    ax.errorbar(xs, centre, yerr=yerr, ls="none", ms=6, capsize=3, label=label, **style)


def _dress(ax, name: str, spec: dict, layout: Layout, ticks: dict):
    """Title, labels, scales and ticks of an output's panel."""
    rate = _is_bool(spec, name)
    log = layout.numeric and _log_x(list(ticks))
    summary.panel(ax, textwrap.fill(_named(name, spec), 44), _named(layout.x, spec) if layout.x else "",
                  xbase=2 if log else None, ylim=summary.RATE_LIMITS if rate else None)
    ax.set_ylabel(f"P[{name}]\n(95% Wilson band)" if rate else f"{name}: mean (95% band)\n"
                  f"median {'dashed' if layout.numeric else 'as x'}")
    if not layout.numeric:
        labels = list(ticks.values())
        tilt = {"rotation": 30, "ha": "right"} if max(map(len, labels)) > 8 else {}
        ax.set_xticks(list(ticks), labels, **tilt)
        ax.set_xlim(-0.5, len(ticks) - 0.5)
    elif len(ticks) <= MAX_TICKS:
        step = -(-len(ticks) // LABELLED_TICKS)  # a tick at every value, a label at every step-th
        ax.set_xticks(list(ticks), [text if i % step == 0 else "" for i, text in enumerate(ticks.values())])
        ax.set_xticks([], minor=True)


def _log_x(xs: list) -> bool:
    """A log2 x axis: a positive power-of-two grid, or positive values spanning more than a decade."""
    v = np.asarray(xs, np.float64)
    if v.size < 2 or v.min() <= 0:
        return False
    return bool(np.all(np.log2(v) == np.round(np.log2(v))) or v.max() / v.min() > 10)


def _title(spec: dict, layout: Layout, sizes) -> str:
    constant = f"; {_label(list(layout.constant), list(layout.constant.values()))}" if layout.constant else ""
    return f"{spec.get('name', 'study')}: {spec.get('description', '')}{constant} " \
           f"({summary.trials_text(sizes[sizes > 0].tolist())})"


# ----------------------------------------------------------------------------- the report


def _opening(rows, spec: dict, layout: Layout, groups: Groups) -> str:
    """The report's first sentence, the constant parameters and the NaN values left out."""
    outputs = [f"the rate of {name}" if _is_bool(spec, name) else f"the mean and median of {name}"
               for name in spec["outputs"]]
    against = f"against {_named(layout.x, spec)}" if layout.x else "over all rows (no parameter varies)"
    per = f", per combination of {_and(layout.series)}" if layout.series else ""
    lines = [f"{_and(outputs)[0].upper()}{_and(outputs)[1:]} {against}{per}, from {len(rows):,} rows "
             f"(95% intervals: Wilson's for rates, mean +- {Z} sd / sqrt(count) for means)."]
    if layout.constant:
        lines.append(f"Constant over the rows: {_label(list(layout.constant), list(layout.constant.values()))}.")
    for name, stats in groups.stats.items():
        if stats.missing:
            lines.append(f"{name}: {stats.missing:,} NaN values of {len(rows):,} left out of its "
                         f"{'rates' if _is_bool(spec, name) else 'means and medians'}.")
    return "\n\n".join(lines) + "\n"


def _output_section(name: str, stats: Stats, keys: list, spec: dict, layout: Layout) -> str:
    """An output's table: per group its rate and Wilson interval and trials, or mean [interval], median, count."""
    columns = [*layout.series, *([layout.x] if layout.x else [])]
    order = _table_order(keys, layout)
    if _is_bool(spec, name):
        header = [*columns, "rate [95% Wilson]", "trials"]
        table = [[*map(_text, keys[g]), _rate(stats, g), int(stats.count[g])] for g in order if stats.count[g]]
        text = f"Rate of {name} per group with its 95% Wilson interval."
    else:
        header = [*columns, "mean [95% interval]", "median", "count"]
        table = [[*map(_text, keys[g]), _mean(stats, g), _number(stats.median[g]), int(stats.count[g])]
                 for g in order if stats.count[g]]
        text = f"Mean of {name} per group with its 95% interval (normal approximation), its median and count."
    meaning = spec.get("meanings", {}).get(name)
    return summary.section(name, f"{name}: {meaning}\n\n{text}" if meaning else text, header, table)


def _m90_section(name: str, stats: Stats, keys: list, layout: Layout) -> str:
    """Per combination of the series: the smallest x from which the rate of ``name`` stays >= 90%."""
    x, table = layout.x, []
    for _, members in _series(keys, layout, stats):
        points = [(keys[g][-1], stats.centre[g]) for g in members]
        reached = summary.threshold(points, LEVEL)
        line = list(map(_text, keys[members[0]][:-1]))
        if reached is None:
            best = max(members, key=lambda g: (stats.centre[g], -keys[g][-1]))
            top = members[-1]
            text = f"not reached (max rate {stats.centre[best]:.2f} at {x} = {_text(keys[best][-1])})"
            if stats.centre[best] >= LEVEL:
                text = f"not held (rate {stats.centre[best]:.2f} at {x} = {_text(keys[best][-1])}, " \
                       f"{stats.centre[top]:.2f} at {x} = {_text(keys[top][-1])})"
            table.append([*line, text, "—"])
        else:
            g = next(g for g in members if keys[g][-1] == reached)
            table.append([*line, _text(reached), f"{stats.low[g]:.2f}"])
    text = f"Per combination: the smallest {x} from which the rate of {name} stays >= {LEVEL:g} at every larger {x} " \
           f"of the grid, and the lower bound of the rate's 95% Wilson interval at that {x}."
    return summary.section(f"{name}: {x} for {LEVEL:.0%}", text,
                           [*layout.series, f"{x} for {LEVEL:.0%}", f"Wilson lower bound at that {x}"], table)


def _table_order(keys: list, layout: Layout) -> list[int]:
    """The groups in table order: the series' values, then x (categorical x in natural order)."""
    if layout.x is None or layout.numeric:
        return list(range(len(keys)))
    return sorted(range(len(keys)), key=lambda g: (keys[g][:-1], summary.natural_key(keys[g][-1])))


def _sample_size(spec: dict, x: str | None) -> bool:
    """Whether x is a sample size: m, or a meaning that says so."""
    meaning = spec.get("meanings", {}).get(x, "") if x else ""
    return x == "m" or meaning.lower().startswith("training examples") or "sample size" in meaning.lower()


# ----------------------------------------------------------------------------- text


def _is_bool(spec: dict, name: str) -> bool:
    return spec["outputs"][name] == "bool"


def _named(name: str, spec: dict) -> str:
    """``name: short meaning`` (the meaning's head, before its first ':', ';' or ' ('), or the name alone."""
    meaning = spec.get("meanings", {}).get(name)
    if not meaning:
        return name
    head = re.split(r":|;| \(", meaning, maxsplit=1)[0].strip()
    return f"{name}: {textwrap.shorten(head, 40, placeholder='...')}" if head and head != name else name


def _label(names: list, values) -> str:
    return ", ".join(f"{n} = {_text(v)}" for n, v in zip(names, values))


def _and(items: list) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _text(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _number(value) -> str:
    return "—" if not np.isfinite(value) else f"{value:.4g}"


def _rate(stats: Stats, g: int) -> str:
    return f"{stats.centre[g]:.2f} [{stats.low[g]:.2f}, {stats.high[g]:.2f}]"


def _mean(stats: Stats, g: int) -> str:
    interval = f"[{_number(stats.low[g])}, {_number(stats.high[g])}]" if np.isfinite(stats.low[g]) else "[one value]"
    return f"{_number(stats.centre[g])} {interval}"

"""The generic figure of a study: one panel per declared output against x, one line per series.

:func:`plot` writes it (PNG and SVG) from the rows and the spec alone (:mod:`~jaxtrees.experiments.report.generic`
groups them): a rate with its Wilson band, a mean with its 95% band and its median dashed; a categorical x gets
points side by side with error bars.
"""

from __future__ import annotations

import textwrap

import numpy as np

from jaxtrees.experiments.report import generic, saving, summary

#: An x axis of at most this many values gets a tick at each.
MAX_TICKS = 12
#: At most this many of those ticks are labelled (every other one, or every third, ... beyond).
LABELLED_TICKS = 6
#: Width (in x positions) shared by the series' points at one value of a categorical x.
DODGE = 0.6


@summary.styled
def plot(rows, stem: str, spec: dict) -> list[str]:
    """Write ``stem``.png and ``stem``.svg: one panel per output of ``spec`` against x; returns the paths."""
    return saving.save(_figure(rows, spec), stem)


def _figure(rows, spec: dict):
    """The figure :func:`plot` saves (a matplotlib Figure): one panel per output, in reading order."""
    rows = generic.as_table(rows)
    layout, groups = generic.prepared(rows, spec)
    xs, ticks = _positions(groups.keys, layout)
    fig, axes = summary.figure(len(groups.stats))
    for ax, (name, stats) in zip(axes, groups.stats.items()):
        series = generic.series_groups(groups.keys, layout, stats)
        draw = _rate_series if generic.is_bool(spec, name) else _mean_series
        for i, (label, members) in enumerate(series):
            at = [xs[g] for g in members]
            draw(ax, at if layout.numeric else _dodged(at, i, len(series)), stats, members, label, _style(i),
                 len(series), layout.numeric)
        _dress(ax, name, spec, layout, ticks)
    if layout.series:
        summary.legend(fig, axes)
    summary.suptitle(fig, _title(spec, layout, groups.sizes))
    return fig


def _positions(keys: list, layout: generic.Layout) -> tuple[list[float], dict]:
    """Per group its x position, and the ticks (position -> label): a numeric x at its values, a categorical one
    at 0, 1, ... in the values' natural order (no x: one position, all the rows)."""
    if layout.x is None:
        return [0.0] * len(keys), {0.0: "all rows"}
    if layout.numeric:
        return [float(key[-1]) for key in keys], {float(v): f"{v:g}" for v in sorted({key[-1] for key in keys})}
    values = sorted({key[-1] for key in keys}, key=summary.natural_key)
    index = {v: float(i) for i, v in enumerate(values)}
    return [index[key[-1]] for key in keys], {index[v]: generic.value_text(v) for v in values}


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


def _rate_series(ax, xs, stats: generic.Stats, members, label, style, n, numeric):
    """A rate with its Wilson band (numeric x: :func:`summary.rate_curve`; categorical: points with error bars)."""
    if not numeric:
        _error_bars(ax, xs, stats, members, label, style)
        return
    points = [{"x": x, "rate": stats.centre[g], "low": stats.low[g], "high": stats.high[g]}
              for x, g in zip(xs, members)]
    summary.rate_curve(ax, points, "x", label, band_alpha=_alpha(n), **style)


def _mean_series(ax, xs, stats: generic.Stats, members, label, style, n, numeric):
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


def _error_bars(ax, xs, stats: generic.Stats, members, label, style):
    """Points with their 95% intervals as error bars (a categorical x)."""
    centre, low, high = stats.centre[members], stats.low[members], stats.high[members]
    yerr = np.nan_to_num(np.stack([centre - low, high - centre]))
    ax.errorbar(xs, centre, yerr=yerr, ls="none", ms=6, capsize=3, label=label, **style)


def _dress(ax, name: str, spec: dict, layout: generic.Layout, ticks: dict):
    """Title, labels, scales and ticks of an output's panel."""
    rate = generic.is_bool(spec, name)
    log = layout.numeric and _log_x(list(ticks))
    summary.panel(ax, textwrap.fill(generic.named(name, spec), 44), generic.named(layout.x, spec) if layout.x else "",
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


def _title(spec: dict, layout: generic.Layout, sizes) -> str:
    constant = generic.assignment_text(list(layout.constant), list(layout.constant.values()))
    constant = f"; {constant}" if layout.constant else ""
    return f"{spec.get('name', 'study')}: {spec.get('description', '')}{constant} " \
           f"({summary.trials_text(sizes[sizes > 0].tolist())})"

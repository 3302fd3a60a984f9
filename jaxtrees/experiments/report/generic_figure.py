"""The generic figure of a study: panels of each declared output against x, one line per series.

:func:`plot` writes it (PNG and SVG) from the rows and the spec alone (:mod:`~jaxtrees.experiments.report.generic`
groups them): a rate with its Wilson band, a mean with its 95% band and its median dashed, a censored output's
product-limit median with its band (and its censored share in a panel of its own); a categorical x gets points side
by side with error bars. Where a panel would hold more than 6 lines, small multiples (:mod:`.figure_spec`); past 16
of them, one panel of each line's median over the parameters pooled, their range as a band (bounded work at any grid).
"""

from __future__ import annotations

import textwrap

import numpy as np

from jaxtrees.experiments.report import figure_spec, generic, saving, summary

#: An x axis of at most this many values gets a tick at each.
MAX_TICKS = 12
#: At most this many of those ticks are labelled (every other one, or every third, ... beyond).
LABELLED_TICKS = 6
#: Width (in x positions) shared by the series' points at one value of a categorical x.
DODGE = 0.6


@summary.styled
def plot(rows, stem: str, spec: dict, *, figure: figure_spec.FigureSpec | None = None) -> list[str]:
    """Write ``stem``.png and ``stem``.svg: the outputs of ``spec`` against x, laid out by ``figure`` (else
    :func:`~.figure_spec.arranged`'s choice); returns the paths."""
    return saving.save(_figure(rows, spec, figure), stem)


def _figure(rows, spec: dict, figure: figure_spec.FigureSpec | None = None):
    """The figure :func:`plot` saves (a matplotlib Figure): a row of panels per output (one panel per value of the
    small multiples' parameters; one panel per output, wrapped, where there are none)."""
    rows = generic.as_table(rows)
    if figure is not None and figure.x:
        spec = {**spec, "axis": figure.x}
    layout, groups = generic.prepared(rows, spec)
    names = [n for n in (figure.outputs if figure and figure.outputs else groups.stats) if n in groups.stats]
    values = {p: sorted({key[i] for key in groups.keys}, key=summary.natural_key) for i, p in enumerate(layout.series)}
    hue, col, pool = figure_spec.pooled(*figure_spec.arranged(layout.series, values, figure), values)
    picks = [[layout.series.index(p) for p in names_] for names_ in (hue, col)]
    hues = sorted({tuple(k[i] for i in picks[0]) for k in groups.keys}, key=lambda v: [summary.natural_key(x) for x in v])
    panels = sorted({tuple(k[i] for i in picks[1]) for k in groups.keys},
                    key=lambda v: [summary.natural_key(x) for x in v])
    xs, ticks = _positions(groups.keys, layout)
    fig, grid = _panels(len(names), len(panels))
    label = generic.exactness_text(generic.exactness(rows))
    lines = _lines(groups.keys, picks) if pool else None
    for row, name in zip(grid, names):
        stats, kind = groups.stats[name], groups.kinds[name]
        draw = _DRAW.get(kind, _mean_series)
        if pool:
            _pooled_row(row, panels, hues, groups.stats[name], kind, lines, xs, layout, hue)
            for j, (ax, panel) in enumerate(zip(row, panels)):
                where = "; ".join(filter(None, [generic.assignment_text(col, panel), _pool_text(pool, values)]))
                _dress(ax, name, kind, spec, layout, ticks, where, label if "error" in name.lower() else "", j == 0)
                if j == 0:
                    what = {"bool": f"P[{name}]", "share": f"P[{name}]", "censored": f"{name}: median"}
                    ax.set_ylabel(f"{what.get(kind, f'{name}: mean')} per combination\n(median; band: range)")
            continue
        for j, (ax, panel) in enumerate(zip(row, panels)):
            lines = {}
            for g, key in enumerate(groups.keys):
                if tuple(key[i] for i in picks[1]) == panel and stats.count[g]:
                    lines.setdefault(tuple(key[i] for i in picks[0]), []).append(g)
            for h, members in sorted(lines.items(), key=lambda item: hues.index(item[0])):
                i = hues.index(h)
                at = [xs[g] for g in members]
                draw(ax, at if layout.numeric else _dodged(at, i, len(hues)), stats, members,
                     generic.assignment_text(hue, h) or "all", figure_spec.style(i), len(lines), layout.numeric)
            where = generic.assignment_text(col, panel)
            _dress(ax, name, kind, spec, layout, ticks, where, label if "error" in name.lower() else "", j == 0)
    axes = [ax for row in grid for ax in row]
    if hue:
        summary.legend(fig, axes)
    summary.suptitle(fig, _title(spec, layout, groups.sizes))
    return fig


def _lines(keys: list, picks: list) -> tuple[np.ndarray, dict]:
    """Per group the index of its line (its panel's and its hue's values), and those lines: (panel, hue) -> index."""
    lines: dict = {}
    return np.array([lines.setdefault((tuple(key[i] for i in picks[1]), tuple(key[i] for i in picks[0])), len(lines))
                     for key in keys], np.int64), lines


def _pooled_row(row, panels: list, hues: list, stats, kind: str, lines: tuple, xs: list, layout: generic.Layout,
                hue: list):
    """An output's panels where parameters are pooled: per line (hue) of each panel the median over the pooled
    combinations of each group's value (a rate, a mean, a product-limit median) at each x, their range as a band."""
    value = np.asarray(stats.median if kind == "censored" else stats.centre, np.float64)
    shown = np.flatnonzero((np.asarray(stats.count) > 0) & np.isfinite(value))
    line, lines = lines[0][shown], lines[1]
    at = np.asarray(xs, np.float64)[shown]
    positions, x_index = np.unique(at, return_inverse=True)
    code = line * len(positions) + x_index
    order = np.lexsort((value[shown], code))
    code, ordered = code[order], value[shown][order]
    starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]]) if code.size else np.zeros(0, np.int64)
    count = np.diff(np.r_[starts, code.size])
    median = (ordered[starts + (count - 1) // 2] + ordered[starts + count // 2]) / 2
    low, high = ordered[starts], ordered[starts + count - 1]
    which = code[starts] // len(positions) if code.size else code
    for (panel, h), index in lines.items():
        ax, i = row[panels.index(panel)], hues.index(h)
        mine = which == index
        x = positions[code[starts][mine] % len(positions)]
        style = figure_spec.style(i)
        label = generic.assignment_text(hue, h) or "all"
        if layout.numeric:
            drawn, = ax.plot(x, median[mine], ls="-", ms=4 if x.size <= MAX_TICKS * 4 else 0, label=label, **style)
            ax.fill_between(x, low[mine], high[mine], color=drawn.get_color(), alpha=_alpha(len(hues)))
        else:
            x = _dodged(list(x), i, len(hues))
            yerr = np.stack([median[mine] - low[mine], high[mine] - median[mine]])
            ax.errorbar(x, median[mine], yerr=yerr, ls="none", ms=6, capsize=3, label=label, **style)


def _pool_text(pool: list, values: dict) -> str:
    """What a pooled panel shows: the median over the pooled parameters' combinations, their range as the band."""
    combinations = int(np.prod([len(values[p]) for p in pool]))
    return f"median over {combinations:,} combinations of {', '.join(pool)} (band: their range)"


def _panels(outputs: int, panels: int):
    """``(fig, grid)``: a row of ``panels`` panels per output, sharing x and, per output, y; without small multiples
    (one panel each) :func:`summary.figure`'s wrapped rows."""
    if panels == 1:
        fig, axes = summary.figure(outputs)
        return fig, [[ax] for ax in axes]
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * panels, 3.6 * outputs), layout="constrained")
    grid = fig.subplots(outputs, panels, squeeze=False, sharex=True, sharey="row")
    return fig, [list(row) for row in grid]


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


def _censored_series(ax, xs, stats, members, label, style, n, numeric):
    """A censored output's product-limit median with its 95% band (cut at the budget where unbounded); a median the
    censoring leaves unknown drawn as an open triangle at the budget."""
    members = np.asarray(members)
    budget = np.where(np.isfinite(stats.budget[members]), stats.budget[members], np.nan)
    median, high = stats.median[members], np.where(np.isinf(stats.high[members]), budget, stats.high[members])
    known = np.isfinite(median)
    xs = np.asarray(xs, np.float64)
    line, = ax.plot(xs[known], median[known], ls="-" if numeric else "none", ms=5, label=label, **style)
    low = np.where(np.isinf(stats.low[members]), budget, stats.low[members])
    if numeric:
        ax.fill_between(xs, low, high, color=line.get_color(), alpha=_alpha(n))
    else:
        ax.vlines(xs, low, high, color=line.get_color())
    if (~known).any():
        ax.plot(xs[~known], budget[~known], ls="none", marker="^", mfc="none", ms=8, color=line.get_color(),
                label="_not reached")


def _alpha(n: int) -> float:
    """The bands' opacity: lighter where many series overlap."""
    return 0.2 if n <= 4 else 0.1


def _error_bars(ax, xs, stats: generic.Stats, members, label, style):
    """Points with their 95% intervals as error bars (a categorical x)."""
    centre, low, high = stats.centre[members], stats.low[members], stats.high[members]
    yerr = np.nan_to_num(np.stack([centre - low, high - centre]))
    ax.errorbar(xs, centre, yerr=yerr, ls="none", ms=6, capsize=3, label=label, **style)


def _dress(ax, name: str, kind: str, spec: dict, layout: generic.Layout, ticks: dict, where: str = "",
           label: str = "", first: bool = True):
    """Title, labels, scales and ticks of an output's panel (``where``: its small multiple's values; ``label``:
    the errors' exactness; ``first``: the first panel of its output's row, which carries the y label)."""
    rate = kind in ("bool", "share")
    log = layout.numeric and _log_x(list(ticks))
    title = textwrap.fill(generic.named(name, spec) + (f" ({label})" if label else ""), 44) + \
        (f"\n{where}" if where else "")
    summary.panel(ax, title, generic.named(layout.x, spec) if layout.x else "",
                  xbase=2 if log else None, ylim=summary.RATE_LIMITS if rate else None)
    if first:
        ax.set_ylabel(_ylabel(name, kind, layout))
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


def _ylabel(name: str, kind: str, layout: generic.Layout) -> str:
    if kind == "share":
        return f"P[{name}]: censored share\n(95% Wilson band)"
    if kind == "bool":
        return f"P[{name}]\n(95% Wilson band)"
    if kind == "censored":
        return f"{name}: median (Kaplan-Meier, 95% band:\nan open end drawn at the budget; \u25b3 not reached)"
    return f"{name}: mean (95% band)\nmedian {'dashed' if layout.numeric else 'as x'}"


def _title(spec: dict, layout: generic.Layout, sizes) -> str:
    """One line: the study's name, its constant parameters and the trials per point (the description goes to the
    report)."""
    constant = generic.assignment_text(list(layout.constant), list(layout.constant.values()))
    constant = f"; {textwrap.shorten(constant, 80, placeholder='...')}" if layout.constant else ""
    return f"{spec.get('name', 'study')}{constant} ({summary.trials_text(sizes[sizes > 0].tolist())})"


#: How each kind of output is drawn (the rest as means).
_DRAW = {"bool": _rate_series, "share": _rate_series, "censored": _censored_series}

"""The parts of study figures and reports: panels, series styles, rate and step curves, legends, tables, sections.

Figures are plain :class:`matplotlib.figure.Figure` objects (:func:`figure`), drawn in :func:`styled` and finished by
:func:`finish` (written by :mod:`~jaxtrees.experiments.report.saving`); the group-bys they draw
(:func:`~jaxtrees.experiments.table.rates`, ``means``, ``split``) are :mod:`jaxtrees.experiments.table`'s.

>>> threshold([(64, 0.5), (128, 0.95), (256, 0.9)])
128
"""

from __future__ import annotations

import functools

import numpy as np

from jaxtrees.experiments.report import saving, steps
from jaxtrees.experiments.table import wilson


def natural_key(value):
    """Sort key for a value: numbers by value, before (and apart from) other strings."""
    if isinstance(value, (int, float, np.number)):
        return (0, float(value), "")
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, 0.0, value)


def threshold(points, level: float = 0.9):
    """Smallest x whose rate is >= ``level`` and stays so for every larger x; None if none.

    ``points``: (x, rate) pairs.
    """
    best = None
    for x, rate in sorted(points, reverse=True):
        if rate < level:
            break
        best = x
    return best


def markdown_table(header, rows) -> str:
    """A GitHub-markdown table; a ``|`` inside a cell (e.g. ``|A^free|``) is escaped.

    >>> print(markdown_table(["k", "|A|"], [[3, 4]]))
    | k | \\|A\\| |
    |---|---|
    | 3 | 4 |
    """
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *map(line, rows)])


#: Panels per row of a figure; more panels wrap onto further rows.
PANELS_PER_ROW = 4


#: Font sizes of study figures (applied by :func:`styled`, never to the user's global rcParams).
STYLE = {"font.size": 12, "axes.titlesize": 13, "axes.labelsize": 12, "legend.fontsize": 10}


def styled(plot):
    """Decorate a study's ``plot(rows, stem)``: it draws with :data:`STYLE` in a
    ``matplotlib.rc_context``, so the caller's rcParams are untouched."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context(STYLE):
            return plot(*args, **kwargs)

    return wrapper


def figure(n_panels: int, width: float = 5.2, height: float = 4.2):
    """Panels sized for a projector, ``PANELS_PER_ROW`` to a row, constrained layout.

    A plain :class:`matplotlib.figure.Figure`: no pyplot, so the caller's backend (a notebook's
    inline one, a GUI) is left as it was, and nothing accumulates in pyplot's figure list.
    Returns the figure and its ``n_panels`` axes in reading order;
    :func:`~jaxtrees.experiments.report.saving.save` repeats the y label of ``axes[0]`` on the first panel of every
    further row."""
    from matplotlib.figure import Figure

    cols = min(n_panels, PANELS_PER_ROW)
    rows = -(-n_panels // cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


#: Series styles: 20 distinct colours (tab20's dark shades, then its light ones) and 10 markers;
#: series i of a panel gets colour i and marker i (mod their counts), so no two of 20 look alike.
MARKERS = "osD^vPX*h<"


def series_style(ax) -> dict:
    """Colour and marker of the next labelled series on ``ax``: ``ax.plot(..., **series_style(ax))``."""
    from matplotlib import colormaps

    i = sum(1 for line in ax.get_lines() if not line.get_label().startswith("_"))
    tab20 = colormaps["tab20"].colors
    return {"color": (tab20[0::2] + tab20[1::2])[i % 20], "marker": MARKERS[i % len(MARKERS)]}


def rate_curve(ax, groups, x: str, label: str, band_alpha: float = 0.2, **style):
    """Plot a success-rate curve with its Wilson band from :func:`~jaxtrees.experiments.table.rates` output (one
    series); ``style`` overrides the line's (e.g. ``ls="--"``, ``ms=4``)."""
    groups = sorted(groups, key=lambda g: float(g[x]))
    xs = [float(g[x]) for g in groups]
    line, = ax.plot(xs, [g["rate"] for g in groups], label=label, **{"ls": "-", "ms": 5, **series_style(ax), **style})
    ax.fill_between(xs, [g["low"] for g in groups], [g["high"] for g in groups], color=line.get_color(),
                    alpha=band_alpha)


def legend(fig, axes):
    """One legend for the figure, below the panels, with every distinct series label of ``axes``
    once (in as many columns as fit the figure's width); per-panel legends are removed."""
    entries = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    column = 0.9 + 0.6 * _points("legend.fontsize") / 72 * max(map(len, entries), default=0)  # inches
    columns = max(1, min(len(entries), int(fig.get_figwidth() // column)))
    rows = -(-len(entries) // columns)
    fig.set_figheight(fig.get_figheight() + 1.45 * _points("legend.fontsize") / 72 * rows)  # room for it below the panels
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncols=columns)


def suptitle(fig, text: str):
    """The figure's title, wrapped to the figure's width (a long title is never cut off)."""
    import textwrap

    width = max(20, int(fig.get_figwidth() * 72 / (0.6 * _points("figure.titlesize"))))
    fig.suptitle("\n".join(textwrap.wrap(" ".join(text.split()), width)))


def _points(rc_key: str) -> float:
    """The font size of an rcParams entry (a number or a name like "large") in points."""
    import matplotlib

    return matplotlib.font_manager.FontProperties(size=matplotlib.rcParams[rc_key]).get_size_in_points()


def trials_text(counts) -> str:
    """"N trials per point" (or "N-M trials per point") from the trial counts behind the points."""
    lo, hi = min(counts), max(counts)
    return f"{lo} trials per point" if lo == hi else f"{lo}-{hi} trials per point"


# ----------------------------------------------------------------------------- steps to learn
# Figures of step counts (a value < 0: censored, not within the budget; see
# :func:`jaxtrees.experiments.report.steps.censored_steps`) and of success rates.


def median_curve(ax, rows, x: str, label: str, column: str = "steps"):
    """Median of ``column`` vs ``x`` on log-log axes with the interquartile band; censored medians are
    not drawn, and a censored upper quartile is drawn at the budget (``max_steps``)."""
    keys, q = steps.group_quartiles(rows, [x], column)
    budget = np.asarray(steps.group_first(rows, [x], "max_steps"), float)
    points = [(xv, q1, q2, q3, b) for (xv,), (q1, q2, q3), b in zip(keys, q, budget)]
    xs = [p[0] for p in points]
    med = [p[2] if np.isfinite(p[2]) else np.nan for p in points]
    line, = ax.plot(xs, med, "-", ms=4, label=label, **series_style(ax))
    lo = [min(p[1], p[4]) for p in points]
    hi = [min(p[3], p[4]) for p in points]
    ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax.set_xticks([], minor=True)
    ax.grid(alpha=0.3, which="both")


def rate_line(ax, points, label: str, colour=None, style: str = "-"):
    """A success rate with its Wilson band from ``points``: (x, (successes, trials)) pairs; ``colour``
    None takes the next :func:`series_style`."""
    xs = [m for m, _ in points]
    rate = [k / t for _, (k, t) in points]
    bands = [wilson(k, t) for _, (k, t) in points]
    look = series_style(ax) if colour is None else {"color": colour, "marker": "o"}
    line, = ax.plot(xs, rate, style, label=label, ms=3, **look)
    ax.fill_between(xs, [b[0] for b in bands], [b[1] for b in bands], color=line.get_color(), alpha=0.12)


def learned_curve(ax, rows, column: str, label: str, scale: float = 1):
    """P[learned by step t] (``0 <= column <= t``) over the recorded steps t of the rows
    (``eval_every``, ..., ``max_steps``; at most 80 on a geometric grid), x = t * scale, Wilson bands."""
    every, budget = rows[0]["eval_every"], rows[0]["max_steps"]
    ts = np.arange(every, budget + 1, every)
    if ts.size > 80:
        ts = np.unique(np.geomspace(every, budget, 80).astype(int) // every * every)
    rate_line(ax, [(t * scale, steps.share_within(rows, column, t)) for t in ts], label)
    ax.set_xscale("log")
    ax.set_ylim(*RATE_LIMITS)
    ax.grid(alpha=0.3)


def section(title: str, text: str, header, table, after: str = "") -> str:
    """A report's section: ``## title``, its text, a :func:`markdown_table`, then ``after``.

    >>> print(section("Rates", "One row per cell.", ["m", "rate"], [[64, 0.5]]))
    ## Rates
    <BLANKLINE>
    One row per cell.
    <BLANKLINE>
    | m | rate |
    |---|---|
    | 64 | 0.5 |
    <BLANKLINE>
    """
    return f"## {title}\n\n{text}\n\n{markdown_table(header, table)}{after}\n"


def panel(ax, title: str, xlabel: str, *, xbase: int | None = 2, ylim=None):
    """Label one panel: its title, its x label, a log x axis (``xbase``; None: linear), ``ylim``, a light grid."""
    if xbase is not None:
        ax.set_xscale("log", base=xbase)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)


#: The y range of a panel of success rates (0 and 1 kept clear of the frame).
RATE_LIMITS = (-0.03, 1.03)


def finish(fig, axes, stem: str, ylabel: str, title: str, counts) -> list[str]:
    """Finish a study figure: ``ylabel`` on the first panel, one legend, ``title`` with the trials per
    point (``counts``: the trials behind each point), saved as ``stem``.png / .svg; returns the paths."""
    axes[0].set_ylabel(ylabel)
    legend(fig, axes)
    suptitle(fig, f"{title} ({trials_text(counts)})")
    return saving.save(fig, stem)

"""From a study's results (a :class:`~jaxtrees.experiments.table.Table`) to tables and figures.

The group-bys (:func:`split`, :func:`rates`, :func:`means`, :func:`wilson`) are
:mod:`jaxtrees.experiments.table`'s, vectorized over columns; this module adds thresholds, markdown
and the figures' common parts (no state beyond its arguments).

>>> t = Table({"c": [0.1, 0.1], "m": [64, 64], "success": [1, 0]})
>>> [(g["c"], g["m"], g["rate"], round(g["low"], 3)) for g in rates(t, ["c", "m"], "success")]
[(0.1, 64, 0.5, 0.095)]
"""

from __future__ import annotations

import functools
import math
import os

import numpy as np

from jaxtrees.experiments.report import steps
from jaxtrees.experiments.table import Table, cells, groups, means, rates, split, wilson  # noqa: F401 (re-exported)


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
    Returns the figure and its ``n_panels`` axes in reading order; :func:`save` repeats the y label
    of ``axes[0]`` on the first panel of every further row."""
    from matplotlib.figure import Figure

    cols = min(n_panels, PANELS_PER_ROW)
    rows = -(-n_panels // cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


def save(fig, stem: str) -> list[str]:
    """Write ``stem.png`` and ``stem.svg``; return the paths."""
    first, *others = fig.axes
    for ax in others:
        spec = ax.get_subplotspec()
        if spec is not None and spec.is_first_col() and ax.get_visible() and not ax.get_ylabel():
            ax.set_ylabel(first.get_ylabel())
    paths = [f"{stem}.png", f"{stem}.svg"]
    _plain_log_labels(fig)
    engine = fig.get_layout_engine()
    if engine is not None:  # lay the figure out once (at the PNG's dpi), not once per file: half its text measuring
        fig.set_dpi(130)
        engine.execute(fig)
        fig.set_layout_engine("none")
    child = _forked(_write, fig, paths[1], {})  # the SVG drawn beside the PNG, on another core where there is one
    try:
        _write(fig, paths[0], {"dpi": 130})
    except BaseException:
        if child is not None:
            _stop(child)
        raise
    if child is None:
        _write(fig, paths[1], {})
    else:
        _joined(child, lambda: _write(fig, paths[1], {}))
    return paths


def _write(fig, path: str, options: dict):
    tmp = f"{path}.{os.getpid()}.tmp"  # written whole, then renamed: a failed write keeps the previous figure
    try:
        fig.savefig(tmp, format=path.rsplit(".", 1)[1], **options)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


#: Seconds a forked figure writer may take before it is stopped and its file written in this process.
FORK_TIMEOUT = 600.0


def _forked(work, *args):
    """``work(*args)`` in a forked child (Linux, two or more cores, ``JAXTREES_FIGURE_FORK`` not "0"): returns
    ``(pid, pipe)`` for :func:`_joined`, or None where it is not forked. The child only draws and writes (numpy and
    matplotlib, no JAX); its result (JSON) or its error comes back through the pipe."""
    import json
    import sys
    import warnings

    if sys.platform != "linux" or (os.cpu_count() or 1) < 2 or os.environ.get("JAXTREES_FIGURE_FORK") == "0":
        return None
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX's at-fork warning concerns a child that calls JAX; this one does not
        pid = os.fork()
    if pid:
        os.close(write)
        return pid, read
    code = 1
    try:
        os.close(read)
        message = {"result": work(*args)}
        code = 0
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        message = {"errno": getattr(e, "errno", None), "strerror": getattr(e, "strerror", None),
                   "filename": getattr(e, "filename", None), "message": f"{type(e).__name__}: {e}"}
    finally:
        try:
            data = json.dumps(message).encode()
            while data:
                data = data[os.write(write, data):]
        finally:
            os._exit(code)


def _stop(child):
    """Kill and reap a :func:`_forked` child."""
    import signal

    pid, read = child
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.close(read)
    os.waitpid(pid, 0)


def _joined(child, fallback):
    """Wait for a :func:`_forked` child and return its result; raise its error (an OSError as such), or return
    ``fallback()`` if it is still running after :data:`FORK_TIMEOUT` seconds (then stopped) or ended without a word."""
    import json
    import select
    import signal

    pid, read = child
    try:
        chunks = []
        while select.select([read], [], [], FORK_TIMEOUT)[0]:
            chunk = os.read(read, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
    except BaseException:
        _stop(child)
        raise
    os.close(read)
    _, status = os.waitpid(pid, 0)
    try:
        message = json.loads(b"".join(chunks))
    except ValueError:  # killed (the timeout, a signal) before its word: the work is done here instead
        return fallback()
    if os.waitstatus_to_exitcode(status) == 0 and "result" in message:
        return message["result"]
    if "result" in message:
        return fallback()
    if message["errno"] is not None:
        raise OSError(message["errno"], message["strerror"], message["filename"])
    raise RuntimeError(f"drawing a figure failed: {message['message']}")


#: The enclosing :class:`while_drawing` contexts, innermost last.
_MEANWHILE: list = []


class while_drawing:
    """``with while_drawing(work) as done:`` runs ``work()`` in :func:`side_by_side` once its own figure is drawn,
    while its forked children draw theirs (``done()``: its result, then, or ``work()`` called there where no child
    was forked); so a run's report is written while its figures are drawn."""

    def __init__(self, work):
        self.work, self.called, self.result = work, False, None

    def __enter__(self):
        _MEANWHILE.append(self)
        return self.done

    def __exit__(self, *exc):
        _MEANWHILE.remove(self)

    def run(self):
        self.called, self.result = True, self.work()

    def done(self):
        if not self.called:
            self.run()
        return self.result


def side_by_side(*draws) -> list[str]:
    """Each ``draw()`` (drawing and saving a figure: returns its paths) in a forked child beside the first, which
    runs here (one after the other where children are not forked, see :func:`_forked`); their paths in order. Then,
    before the children are joined, the work of an enclosing :class:`while_drawing`."""
    children = [_forked(draw) for draw in draws[1:]]
    try:
        paths = list(draws[0]())
        if _MEANWHILE and not _MEANWHILE[-1].called and any(child is not None for child in children):
            _MEANWHILE[-1].run()
    except BaseException:
        for child in children:
            if child is not None:
                _stop(child)
        raise
    for draw, child in zip(draws[1:], children):
        paths += draw() if child is None else _joined(child, draw)
    return paths


def _plain_log_labels(fig):
    """Log and symlog axes' default tick labels as plain text ("1024", "1e-05", "-32"): matplotlib's superscripts are
    mathtext, a quarter of a figure's drawing time; over two decades or more, minor ticks at 2 and 5 only (each tick
    is laid out and drawn: 8 a decade were a fifth of a figure's time)."""
    from matplotlib import ticker

    class Plain(ticker.LogFormatter):
        def _num_to_string(self, x, vmin, vmax):
            return f"{x:g}" if 1e-4 <= abs(x) < 1e6 or x == 0 else f"{x:.0e}"

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() not in ("log", "symlog"):
                continue
            replaced = False
            for get, put in ((axis.get_major_formatter, axis.set_major_formatter),
                             (axis.get_minor_formatter, axis.set_minor_formatter)):
                old = get()
                if type(old) is ticker.LogFormatterSciNotation:
                    put(Plain(base=old._base, labelOnlyBase=old.labelOnlyBase, minor_thresholds=old.minor_thresholds,
                              linthresh=old._linthresh))
                    replaced = True
            minor = axis.get_minor_locator()
            low, high = sorted(np.abs(axis.get_view_interval()))
            if (axis.get_scale() == "log" and type(minor) is ticker.LogLocator and minor._base == 10 and low > 0
                    and high / low >= 100):  # two decades or more: minor ticks at 2 and 5 only
                axis.set_minor_locator(ticker.LogLocator(base=10, subs=(2.0, 5.0), numticks=minor.numticks))
            locator = axis.get_major_locator()
            if replaced and axis is ax.xaxis and type(locator) is ticker.LogLocator:  # "1e-08" is wider than 10^-8
                axis.set_major_locator(ticker.LogLocator(base=locator._base, numticks=6))
            elif replaced and axis is ax.xaxis and type(locator) is ticker.SymmetricalLogLocator:
                scale = axis.get_transform()  # more than 8 powers: every other one ("5121024" otherwise)
                powers = math.log(max(high, scale.linthresh) / scale.linthresh, scale.base)
                if powers > 8:
                    axis.set_major_locator(ticker.SymmetricalLogLocator(
                        linthresh=scale.linthresh, base=scale.base ** math.ceil(powers / 8)))


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
    """Plot a success-rate curve with its Wilson band from :func:`rates` output (one series);
    ``style`` overrides the line's (e.g. ``ls="--"``, ``ms=4``)."""
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
    return save(fig, stem)

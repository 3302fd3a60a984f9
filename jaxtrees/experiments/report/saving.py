"""Writing figures to files: :func:`save` writes a figure's PNG and SVG (the SVG in a forked child, beside the PNG).

:func:`side_by_side` draws several figures at once, each in a forked child where there are cores, and
:class:`while_drawing` runs a report's work while the children draw; a file is written whole, then renamed, so a
failed write keeps the previous figure. Log axes get plain tick labels (:func:`save` does it): mathtext is slow.
"""

from __future__ import annotations

import math
import os

import numpy as np

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

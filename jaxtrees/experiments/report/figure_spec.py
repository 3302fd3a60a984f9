"""How a generic figure is laid out: x, the lines' colour (hue) and small multiples (a panel per col value).

:func:`figure` declares it in one line (``jt.figure(x="m", hue="c", col="n")``, a frozen :class:`FigureSpec`); what
it leaves out :func:`arranged` chooses: where a panel would hold more than :data:`MAX_LINES` lines, the parameters
with the fewest values that bring it within go to small multiples (one panel per value, shared axes). The lines get
the Okabe-Ito colour-blind-safe palette and a marker each (:func:`style`); past :data:`MAX_PANELS` panels the rest are
pooled into one summary line each (:func:`pooled`).

>>> figure(x="m", hue="c", col="n")
FigureSpec(x='m', hue=('c',), col=('n',), outputs=None)
"""

from __future__ import annotations

import dataclasses
import math

#: At most this many lines in a panel before :func:`arranged` splits it into small multiples.
MAX_LINES = 6
#: At most this many small multiples per output; past it :func:`pooled` summarizes them in one panel.
MAX_PANELS = 16
#: Okabe & Ito's colour-blind-safe palette (https://jfly.uni-koeln.de/color/), yellow last (faint on white).
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
#: A distinct marker per line (shifted by one in each further round of colours).
MARKERS = "osD^vPX*h<"


@dataclasses.dataclass(frozen=True)
class FigureSpec:
    """A generic figure's layout: None or () leaves a choice to :func:`arranged`."""

    x: str | None = None  # the parameter along x (default: the study's axis, else its first numeric parameter)
    hue: tuple = ()  # the parameters whose combinations are the lines of a panel
    col: tuple = ()  # the parameters whose combinations get a panel each (per output)
    outputs: tuple | None = None  # the outputs drawn, in order (default: all)


def figure(x: str | None = None, hue=(), col=(), outputs=None) -> FigureSpec:
    """A :class:`FigureSpec` (a name or a sequence of names for ``hue``, ``col`` and ``outputs``)."""
    def names(value):
        return () if value is None else (value,) if isinstance(value, str) else tuple(value)

    return FigureSpec(x, names(hue), names(col), None if outputs is None else names(outputs))


def arranged(series: list, values: dict, spec: FigureSpec | None = None) -> tuple[list, list]:
    """``(hue, col)``: the varying parameters other than x (``series``, each with its ``values``) split into the
    lines of a panel and the panels. Declared ones are kept (a declared hue is never moved to panels); the rest go to
    the lines while they fit within :data:`MAX_LINES`, then to panels, fewest panels first."""
    spec = spec or FigureSpec()
    col = [p for p in spec.col if p in series]
    hue = [p for p in spec.hue if p in series and p not in col]
    free = [p for p in series if p not in hue and p not in col]
    if spec.col:  # panels declared: every other parameter colours the lines
        return hue + free, col
    lines = hue + free
    while _count(lines, values) > MAX_LINES and any(p not in hue for p in lines):
        movable = [p for p in lines if p not in hue]
        fits = [p for p in movable if _count([q for q in lines if q != p], values) <= MAX_LINES]
        chosen = min(fits, key=lambda p: len(values[p])) if fits else max(movable, key=lambda p: len(values[p]))
        lines.remove(chosen)
        col.append(chosen)
    return lines, [p for p in series if p in col]


def pooled(hue: list, col: list, values: dict) -> tuple[list, list, list]:
    """``(hue, col, pooled)``: :func:`arranged`'s choice, but where it gives more than :data:`MAX_PANELS` panels (or
    more than ``MAX_PANELS`` lines) their parameters pooled: a line per remaining combination, its median over the
    pooled ones with their range as a band, so that a figure's work is bounded whatever the grid."""
    hue, col, pool = list(hue), list(col), []
    for names in (col, hue):
        while _count(names, values) > MAX_PANELS:  # the parameter of the most values first
            pool.append(max(names, key=lambda p: len(values[p])))
            names.remove(pool[-1])
    return hue, col, pool


def _count(names: list, values: dict) -> int:
    return math.prod(len(values[p]) for p in names)


def style(i: int) -> dict:
    """Line i's colour and marker: Okabe-Ito's 8 colours, a marker each, shifted in each further round of 8."""
    return {"color": OKABE_ITO[i % len(OKABE_ITO)], "marker": MARKERS[(i + i // len(OKABE_ITO)) % len(MARKERS)]}

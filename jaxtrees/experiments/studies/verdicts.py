"""The kinds of a report's "Theory" lines and their verdicts: how a seed's statement is set against the measurements.

A bound checked against measurements becomes a :class:`Check` (:func:`check`): how many points respect it and how
close the closest comes (a ``[test]``), or, where every point holds by more than 10x, its ratio range (``[vacuous]``);
a statement with unknown constants becomes a :class:`Form` (fitted :class:`Slope` s with bootstrap intervals against
the statement's); :func:`identity` and :func:`outside` write the other two kinds. :func:`section` writes a report's
"Theory" section from them, every line beginning with its kind (:data:`KINDS`); :func:`unkinded` finds the lines
that do not. The bounds themselves: :mod:`~jaxtrees.experiments.studies.theory`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np


# Every line of a report's "Theory" section begins with its kind (issue 65), so that a reader knows whether the
# measurement could have contradicted it:
#   [test]      a bound the measured points could violate at this size: the count and the closest bound / measured;
#   [form]      a statement with unknown constants, tested by a fitted exponent or slope and its bootstrap interval;
#   [vacuous]   true at every point by more than VACUOUS_FACTOR: the ratio range, no count;
#   [identity]  true for every instance by construction (its check lives in the tests, named in the line);
#   [outside]   the cells do not meet the statement's hypotheses: which.

#: The kinds a theory line begins with, in brackets.
KINDS = ("test", "form", "vacuous", "identity", "outside")

#: A bound farther than this factor from every measured point is ``[vacuous]``, not a ``[test]``.
VACUOUS_FACTOR = 10.0


class Check(NamedTuple):
    """One bound against its measurements: ``respected`` of ``points`` respect it; ``ratio`` the median of bound /
    measurement over the points where both are finite and the measurement nonzero, ``closest`` and ``farthest``
    the ratios nearest to and farthest from a violation (the smallest and largest for an upper bound, the largest
    and smallest for a lower one; NaN if none)."""

    source: str       # "002 Thm 10"
    formula: str      # "error >= delta / 6"
    respected: int
    points: int
    ratio: float
    unit: str = "points"
    note: str = ""
    closest: float = float("nan")
    farthest: float = float("nan")
    side: str = "upper"

    @property
    def margin(self) -> float:
        """How far the closest point is from the bound, as a factor >= 1 where it holds (< 1: violated)."""
        return self.closest if self.side == "upper" else 1 / self.closest

    @property
    def kind(self) -> str:
        """``test``, or ``vacuous`` where every point holds by more than :data:`VACUOUS_FACTOR`."""
        held = self.respected == self.points and self.points > 0
        return "vacuous" if held and self.margin > VACUOUS_FACTOR else "test"


def check(source: str, formula: str, bound, measured, kind: str, unit: str = "points", note: str = "",
          tol: float = 1e-6) -> Check:
    """A :class:`Check` of ``measured <= bound`` (``kind="upper"``) or ``measured >= bound`` (``"lower"``: the
    bound's side, not the line's kind, which :attr:`Check.kind` reads from the margin) over the finite pairs of the
    arrays, within ``tol`` (float32 sums)."""
    bound, measured = np.broadcast_arrays(np.asarray(bound, np.float64), np.asarray(measured, np.float64))
    known = np.isfinite(bound) & ~np.isnan(measured)
    b, v = bound[known], measured[known]
    ok = v <= b + tol if kind == "upper" else v >= b - tol
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.abs(b / v)  # a zero measurement: inf (0 / 0: left out)
    r = r[~np.isnan(r)]
    finite = r[np.isfinite(r) & (r > 0)]
    ratio = float(np.median(finite)) if finite.size else float("nan")
    low, high = (float(r.min()), float(r.max())) if r.size else (float("nan"), float("nan"))
    closest, farthest = (low, high) if kind == "upper" else (high, low)
    return Check(source, formula, int(ok.sum()), int(known.sum()), ratio, unit, note, closest, farthest, kind)


class Slope(NamedTuple):
    """A fitted exponent or slope with its bootstrap interval against a statement's ``claim``. ``side``: ``upper``
    (the claim is the most the slope may be: contradicted if the interval lies wholly above it), ``lower`` (wholly
    below), ``equal`` (wholly on either side) or ``positive`` (the claim is 0: contradicted if wholly <= 0)."""

    label: str
    estimate: float
    low: float
    high: float
    claim: float
    side: str = "upper"
    resamples: int = 0  # bootstrap resamples where the slope was defined (0: not told)
    replicates: int = 0  # of this many

    @property
    def verdict(self) -> str:
        """``CONTRADICTED`` (the interval lies wholly beyond the claim), ``consistent`` or ``no interval``."""
        if not (np.isfinite(self.low) and np.isfinite(self.high)):
            return "no interval"
        above, below = self.low > self.claim, self.high < self.claim
        wrong = {"upper": above, "lower": below, "equal": above or below, "positive": self.high <= self.claim}
        return "CONTRADICTED" if wrong[self.side] else "consistent"


class Form(NamedTuple):
    """A statement with unknown constants tested by its form: one :class:`Slope` per group of cells."""

    source: str
    statement: str
    fitted: str
    slopes: tuple
    note: str = ""


def slope_text(s: Slope) -> str:
    """``label: 2.01 [1.62, 2.4] against <= 24: consistent`` (the estimate, its interval, the statement's side and
    value, the verdict)."""
    side = {"upper": "<=", "lower": ">=", "equal": "=", "positive": ">"}[s.side]
    interval = "no interval" if not np.isfinite(s.low) else f"[{s.low:.3g}, {s.high:.3g}]"
    head = f"{s.label}: " if s.label else ""
    if not np.isfinite(s.estimate):
        return f"{head}no fit (fewer than two usable points with distinct x)"
    some = f", from {s.resamples:,} of {s.replicates:,} resamples" if 0 < s.replicates and s.resamples < s.replicates \
        else ""
    return f"{head}{s.estimate:.3g} {interval}{some} against {side} {s.claim:.3g}: {s.verdict}"


def identity(source: str, statement: str, note: str = "", where: str = "tests/test_theory.py") -> str:
    """An ``[identity]`` line: true for every instance by construction (``where``: the test that checks it)."""
    return f"- [identity] {source}: {statement}: true by construction ({where}).{' ' + note if note else ''}"


def outside(source: str, statement: str, why: str) -> str:
    """An ``[outside]`` line: the cells do not meet the statement's hypotheses (``why``: which)."""
    return f"- [outside] {source}: {statement}: {why}."


def line(c) -> str:
    """A :class:`Check` or :class:`Form` as one markdown bullet beginning with its kind (a string: itself)."""
    if isinstance(c, str):
        return c
    note = f" {c.note}" if c.note else ""
    if isinstance(c, Form):
        return (f"- [form] {c.source}: {c.statement}; {c.fitted} (bootstrap 95%): "
                + "; ".join(slope_text(s) for s in c.slopes) + f".{note}")
    if not c.points:
        return f"- [outside] {c.source}: {c.formula}: no measured point meets its hypotheses.{note}"
    if c.kind == "vacuous":
        return (f"- [vacuous] {c.source}: {c.formula}: bound / measured {_extent(c)} over {c.points:,} {c.unit}: "
                f"vacuous at this size.{note}")
    closest = f"; closest bound/measured {c.closest:.3g}" if not np.isnan(c.closest) else ""
    return f"- [test] {c.source}: {c.formula}: holds in {c.respected:,} of {c.points:,} {c.unit}{closest}.{note}"


def _extent(c: Check) -> str:
    low, high = sorted((c.closest, c.farthest))
    return f"{low:.3g} to {high:.3g}" if high > low else f"{low:.3g}"


def section(checks, text: str = "") -> str:
    """A report's "Theory" section: one line per :class:`Check` or :class:`Form` (or a string line, which must
    begin with its kind)."""
    body = "\n\n".join(part for part in (text, "\n".join(line(c) for c in checks)) if part)
    return "## Theory\n\n" + body + "\n"


#: A theory bullet's kind, and a [test] bullet's closest margin.
KIND_PATTERN = re.compile(r"^- \[(" + "|".join(KINDS) + r")\] ")
COUNT_PATTERN = re.compile(r"holds in ([0-9,]+) of ([0-9,]+) ")
CLOSEST_PATTERN = re.compile(r"closest bound/measured ([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?|inf|nan)")


def theory_bullets(report: str) -> list[str]:
    """The bullets of every "## Theory" section of a markdown report (a bullet's continuation lines joined)."""
    out = []
    for part in re.split(r"^## Theory\n", report, flags=re.M)[1:]:
        body = re.split(r"^#{1,3} ", part, maxsplit=1, flags=re.M)[0]
        for item in re.split(r"^(?=- )", body, flags=re.M):
            if item.startswith("- "):
                out.append(" ".join(item.split()))
    return out


def unkinded(report: str) -> list[str]:
    """The Theory bullets of ``report`` that do not begin with a kind, or are a ``[test]`` without a closest
    bound/measured R <= :data:`VACUOUS_FACTOR` (any R where a point violates the bound)."""
    bad = []
    for bullet in theory_bullets(report):
        kind = KIND_PATTERN.match(bullet)
        if not kind:
            bad.append(bullet)
        elif kind.group(1) == "test":
            closest, count = CLOSEST_PATTERN.search(bullet), COUNT_PATTERN.search(bullet)
            violated = count is not None and count.group(1) != count.group(2)
            if not (closest and (float(closest.group(1)) <= VACUOUS_FACTOR or violated)):
                bad.append(bullet)
    return bad

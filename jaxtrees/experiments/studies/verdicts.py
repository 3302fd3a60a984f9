"""The kinds of a report's "Theory" lines and their verdicts: how a seed's statement is set against the measurements.

A bound checked against measurements becomes a :class:`Check` (:func:`check`): how many points respect it and how
close the closest comes (a ``[test]``), or, where every point holds by more than 10x, its ratio range (``[vacuous]``);
a statement with unknown constants becomes a :class:`Form` (fitted :class:`Slope` s with bootstrap intervals against
the statement's, ``[vacuous]`` where the claim lies beyond what the grid can measure: :func:`slope_reach`); a bound on
the m from which a rate reaches 1 - delta, per cell: :func:`sample_size_check`. :func:`decide` decides every kind from
these quantities; :func:`identity` and :func:`outside` write the other two. :func:`section` writes a report's "Theory"
section, every line beginning with its kind (:data:`KINDS`); :func:`unkinded` finds the lines that do not.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from jaxtrees.experiments.report.compare_rates import threshold_interval


# Every line of a report's "Theory" section begins with its kind (issue 65), so that a reader knows whether the
# measurement could have contradicted it:
#   [test]      a bound the measured points could violate at this size: the count and the closest bound / measured;
#   [form]      a statement with unknown constants, tested by a fitted exponent or slope and its bootstrap interval,
#               its claim inside the range of slopes the grid can show;
#   [vacuous]   true at every point by more than VACUOUS_FACTOR, or a claim no measurement on this grid could
#               contradict (a [form]'s beyond the grid's reach): the ratio range or the reach, no count;
#   [identity]  true for every instance by construction (its check lives in the tests, named in the line);
#   [outside]   the cells do not meet the statement's hypotheses: which.

#: The kinds a theory line begins with, in brackets.
KINDS = ("test", "form", "vacuous", "identity", "outside")

#: A bound farther than this factor from every measured point is ``[vacuous]``, not a ``[test]``.
VACUOUS_FACTOR = 10.0


def decide(measure: str = "test", *, hypotheses: bool = True, by_construction: bool = False, can_fail: bool = True,
           margin: float = 1.0) -> str:
    """The kind of a Theory line from what decides it: ``outside`` where the cells do not meet the statement's
    ``hypotheses``; ``identity`` where it holds for every instance ``by_construction``; ``vacuous`` where no input the
    grid can produce could contradict it (``can_fail`` False: a [form]'s claim beyond :func:`slope_reach`, a bound
    below every measurable value) or, for a ``test``, where the closest point holds by a ``margin`` (bound /
    measured, >= 1 where it holds, < 1 violated) above :data:`VACUOUS_FACTOR`; else ``measure`` (``test`` or
    ``form``).

    >>> decide("form", can_fail=False), decide(margin=12.0), decide(margin=0.5), decide(hypotheses=False)
    ('vacuous', 'vacuous', 'test', 'outside')
    """
    if not hypotheses:
        return "outside"
    if by_construction:
        return "identity"
    if not can_fail or (measure == "test" and margin > VACUOUS_FACTOR):
        return "vacuous"
    return measure


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
        """:func:`decide`'s: ``outside`` with no point, ``vacuous`` where every point holds by more than
        :data:`VACUOUS_FACTOR`, else ``test``."""
        held = self.respected == self.points
        return decide("test", hypotheses=self.points > 0, margin=self.margin if held else 0.0)


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
    below), ``equal`` (wholly on either side) or ``positive`` (the claim is 0: contradicted if wholly <= 0).
    ``reach``: the smallest and largest slope the grid can show (:func:`slope_reach`; unbounded: not told)."""

    label: str
    estimate: float
    low: float
    high: float
    claim: float
    side: str = "upper"
    resamples: int = 0  # bootstrap resamples where the slope was defined (0: not told)
    replicates: int = 0  # of this many
    reach: tuple = (-np.inf, np.inf)

    @property
    def can_fail(self) -> bool:
        """Whether a slope within :attr:`reach` could contradict the claim (an upper claim below the largest, a lower
        one above the smallest; a two-sided claim always; an unknown reach, NaN, as unbounded)."""
        low, high = (-np.inf if np.isnan(self.reach[0]) else self.reach[0]), (np.inf if np.isnan(self.reach[1])
                                                                              else self.reach[1])
        return {"upper": self.claim < high, "lower": self.claim > low, "positive": low < self.claim}.get(self.side,
                                                                                                         True)

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

    @property
    def kind(self) -> str:
        """:func:`decide`'s: ``form`` where some slope's claim lies within its grid's reach, else ``vacuous``."""
        return decide("form", can_fail=any(s.can_fail for s in self.slopes))


def slope_reach(x, y_low, y_high) -> tuple[float, float]:
    """The smallest and largest least-squares slope of y on ``x`` (the fitted cells' x, in the fit's units, e.g. log
    1/c) when each y may lie anywhere in [``y_low``, ``y_high``] (e.g. log m_min, log m_max; per cell where the fit
    subtracts an offset): the largest puts y at its top where x is above its mean and at its bottom below (two x and
    one span: the span over the x span); (nan, nan) with fewer than two distinct x.

    >>> [round(v, 6) for v in slope_reach(np.log([1 / 0.2, 1 / 0.1]), np.log(16), np.log(8192))]   # log 512 / log 2
    [-9.0, 9.0]
    """
    x, y_low, y_high = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (x, y_low, y_high)))
    keep = np.isfinite(x)
    x, y_low, y_high = x[keep], y_low[keep], y_high[keep]
    if np.unique(x).size < 2:
        return float("nan"), float("nan")
    d = x - x.mean()
    scale = (d**2).sum()
    return (float((d * np.where(d > 0, y_low, y_high)).sum() / scale),
            float((d * np.where(d > 0, y_high, y_low)).sum() / scale))


def sample_size_check(source: str, formula: str, cells, level: float, unit: str, note: str = "") -> Check:
    """A bound on the sample size from which a success rate reaches ``level`` = 1 - delta, in the units where it can
    fail: per cell ``(bound_m, groups)`` (``groups``: the cell's rates over its ascending m grid, dicts with ``m``,
    ``successes``, ``trials``), the measured m from which the rate stays >= ``level`` (with its parametric-bootstrap
    95% interval, :func:`~jaxtrees.experiments.report.compare_rates.threshold_interval`) against the bound's m
    (upper: measured <= bound). The grid knows that m only to a step: a cell violates the bound where its rate lies
    below ``level`` at a grid m >= the bound (never reaching it where the bound lies in the grid included), and one
    whose step holds the bound counts at the bound (ratio 1). A cell that never reaches ``level`` in a grid ending
    before the bound's m is left out. The note gives the bound / measured range over the cells' intervals."""
    bounds, measured, estimates, lows, highs, beyond, step = [], [], [], [], [], 0, 0
    for bound, groups in cells:
        groups = sorted(groups, key=lambda g: g["m"])
        grid = [g["m"] for g in groups]
        est = threshold_interval([g["successes"] for g in groups], [g["trials"] for g in groups], grid, level)
        if not np.isfinite(est.estimate) and bound > grid[-1]:
            beyond += 1
            continue
        below = [m for m in grid if m < est.estimate]  # grid points where the rate is (or dips) below the level
        value = est.estimate
        if value > bound and not (below and below[-1] >= bound):
            step += 1
            value = bound
        bounds.append(bound)
        measured.append(value)
        estimates.append(est.estimate)
        lows.append(est.low)
        highs.append(est.high)
    extra = [note] if note else []
    if bounds:
        with np.errstate(divide="ignore"):
            r = np.asarray(bounds) / np.asarray(highs), np.asarray(bounds) / np.asarray(lows)
        extra.append(f"Measured: the m from which the rate stays >= {level:g}, {_span(estimates)}; bound / measured over "
                     f"the cells' bootstrap 95% intervals {float(np.min(r[0])):.3g} to {float(np.max(r[1])):.3g}.")
    if step:
        extra.append(f"{step} cell{'s' if step > 1 else ''} reach {level:g} within one grid step past the bound's m "
                     "(the grid cannot tell which side): counted at the bound.")
    if beyond:
        extra.append(f"{beyond} cell{'s' if beyond > 1 else ''} reach {level:g} nowhere in a grid that ends before "
                     "the bound's m (left out).")
    return check(source, formula, bounds, measured, "upper", unit=unit, note=" ".join(extra))


def _span(values) -> str:
    values = np.asarray(values, np.float64)
    never = int(np.isinf(values).sum())
    values = values[np.isfinite(values)]
    if not values.size:
        return f"never within the grid in {never} cell{'s' if never > 1 else ''}"
    low, high = float(values.min()), float(values.max())
    if never:
        return f"m = {low:,.0f}" + (f" to {high:,.0f}" if high > low else "") + f", never within the grid in {never}"
    return f"m = {low:,.0f}" + (f" to {high:,.0f}" if high > low else "")


def slope_text(s: Slope) -> str:
    """``label: 2.01 [1.62, 2.4] against <= 24: consistent`` (the estimate, its interval, the statement's side and
    value, the verdict)."""
    side = {"upper": "<=", "lower": ">=", "equal": "=", "positive": ">"}[s.side]
    interval = "no interval" if not np.isfinite(s.low) else f"[{s.low:.3g}, {s.high:.3g}]"
    low, high = s.reach
    head = f"{s.label}: " if s.label else ""
    if not np.isfinite(s.estimate):
        return f"{head}no fit (fewer than two usable points with distinct x)"
    some = f", from {s.resamples:,} of {s.replicates:,} resamples" if 0 < s.replicates and s.resamples < s.replicates \
        else ""
    if not s.can_fail:
        reach = f"its largest {high:.3g}" if s.side == "upper" else f"its smallest {low:.3g}"
        return (f"{head}{s.estimate:.3g} {interval}{some} against {side} {s.claim:.3g}: beyond the slopes the grid can "
                f"show ({reach}), so no measurement here could contradict it")
    within = f" (the grid can show {low:.3g} to {high:.3g})" if np.isfinite(high) else ""
    return f"{head}{s.estimate:.3g} {interval}{some} against {side} {s.claim:.3g}{within}: {s.verdict}"


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
        testable = tuple(s for s in c.slopes if s.can_fail)
        if testable and len(testable) < len(c.slopes):  # a [form] line and a [vacuous] one
            rest = tuple(s for s in c.slopes if not s.can_fail)
            return line(c._replace(slopes=testable)) + "\n" + line(c._replace(slopes=rest, note=""))
        return (f"- [{c.kind}] {c.source}: {c.statement}; {c.fitted} (bootstrap 95%): "
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

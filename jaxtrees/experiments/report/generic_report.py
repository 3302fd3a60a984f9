"""The generic report of a study: per declared output a table of its rate (or mean and median) per group.

:func:`report` writes it in markdown from the rows and the spec alone (:mod:`~jaxtrees.experiments.report.generic`
groups them): a censored output's censored share and product-limit quartiles (:mod:`.survival`), never its mean;
NaN and inf values counted; errors labelled exact or estimated; where x is a sample size the smallest m with a 90%
rate (with a bootstrap interval) per combination of the other varying parameters; and each rate's difference from
the condition's first value (Newcombe's interval, :mod:`.compare_rates`).
"""

from __future__ import annotations

import math

import numpy as np

from jaxtrees.experiments import table as tables
from jaxtrees.experiments.report import compare_rates, generic, summary

#: The rate a sample size must reach in the report's "m for 90%".
LEVEL = 0.9
#: At most this many lines in a table (the first, in table order); the statements about all of them (the comparison's
#: tally, the NaN counts) still count every group, so a report of 10^6 cells costs what it shows.
MAX_ROWS = 1000
#: At most this many of a condition's values get a column (and a verdict line) in its comparison; the rest are tallied.
MAX_COLUMNS = 16


def report(rows, spec: dict, *, condition: str | None = None) -> str:
    """Markdown: per output a table of its rate (or mean and median; a censored output's quartiles) per group, where
    x is a sample size the smallest m with a 90% rate per combination of the other varying parameters, and each
    rate's difference from the first value of ``condition`` (default: the first varying parameter other than x)."""
    rows = generic.as_table(rows)
    layout, groups = generic.prepared(rows, spec)
    label = generic.exactness(rows)
    parts = [_opening(rows, spec, layout, groups, label)]
    if condition is not None and condition in layout.constant:  # e.g. a --quick grid of one value of it
        parts.append(f"The condition {condition} takes one value in these rows ({condition} = "
                     f"{generic.value_text(layout.constant[condition])}): no comparison of its values.\n")
        condition = None
    else:
        condition = _condition(layout, condition)
    for name, stats in groups.stats.items():
        kind = groups.kinds[name]
        if kind == "share":
            continue
        if kind == "censored":
            parts.append(_censored_section(name, stats, groups.keys, spec, layout))
            continue
        parts.append(_output_section(name, stats, groups.keys, spec, layout, label))
        if kind == "bool" and layout.numeric and _sample_size(spec, layout.x):
            parts.append(_m90_section(name, stats, groups.keys, layout))
        if kind == "bool" and condition:
            parts.append(_comparison(name, stats, groups.keys, layout, condition))
    return "\n".join(parts)


def _condition(layout: generic.Layout, condition: str | None) -> str | None:
    """The parameter whose values are compared: ``condition`` if it varies, else the first series parameter."""
    if condition is not None:
        if condition not in layout.series and condition != layout.x:
            raise ValueError(f"the condition {condition!r} is not a grid parameter that varies in the rows (those: "
                             f"{', '.join(filter(None, [layout.x, *layout.series])) or 'none'})")
        return condition
    return layout.series[0] if layout.series else None


#: What each kind of output is reported by.
REPORTED = {"bool": "the rate of {}", "censored": "the censored share and product-limit quartiles of {}"}


def _opening(rows, spec: dict, layout: generic.Layout, groups: generic.Groups, label) -> str:
    """The report's first sentence, the constant parameters, the NaN and inf values left out, the errors' exactness."""
    outputs = [REPORTED.get(kind, "the mean and median of {}").format(name) for name, kind in groups.kinds.items()
               if kind != "share"]
    against = f"against {generic.named(layout.x, spec)}" if layout.x else "over all rows (no parameter varies)"
    per = f", per combination of {_and(layout.series)}" if layout.series else ""
    bounded = any(getattr(stats, "bounded", False) for stats in groups.stats.values())
    means = f"mean +- {generic.Z} sd / sqrt(count) for means" + (
        f", the percentile bootstrap's ({generic.RESAMPLES} resamples) for an output within [0, 1], which keeps it "
        f"within its range" if bounded else "")
    lines = [f"{_and(outputs)[0].upper()}{_and(outputs)[1:]} {against}{per}, from {len(rows):,} rows "
             f"(95% intervals: Wilson's for rates, {means})."]
    if layout.constant:
        constant = generic.assignment_text(list(layout.constant), list(layout.constant.values()))
        lines.append(f"Constant over the rows: {constant}.")
    for name, stats in groups.stats.items():
        if getattr(stats, "missing", 0) or getattr(stats, "infinite", 0):
            found = ((stats.missing, "NaN"), (getattr(stats, "infinite", 0), "inf"))
            counts = _and([f"{n:,} {what}" for n, what in found if n])
            if groups.kinds[name] == "censored":
                lines.append(f"{name}: {counts} values of uncensored trials of {len(rows):,} left out of its "
                             f"product-limit quartiles and its trials' counts.")
                continue
            lines.append(f"{name}: {counts} values of {len(rows):,} left out of its "
                         f"{'rates' if generic.is_bool(spec, name) else 'means and medians'} (counted per group "
                         f"under NaN/inf).")
    if label is not None:
        lines.append(_exactness_note(spec, groups, label))
    return "\n\n".join(lines) + "\n"


def _exactness_note(spec: dict, groups: generic.Groups, label: generic.Exactness) -> str:
    """Whether the errors are exact; where they are estimated, the success-like outputs flagged."""
    text = f"Errors: {generic.exactness_text(label)}."
    if label.exact == label.rows:
        return text
    flagged = [name for name, kind in groups.kinds.items() if kind == "bool" and _success_like(name, spec)]
    size = label.points[0] if label.points else 0
    points = f"{size:,}" if size else "N"
    spread = (f"about +/-{math.sqrt(math.log(2 / 0.05) / (2 * size)):.2g} (95%, Hoeffding; below 3/{points} = "
              f"{3 / size:.2g} where no test point was missed)") if size else "a sampling error"
    if flagged:
        text += (f" Where an error is estimated, a success computed from it ({_and(flagged)}) is decided on the "
                 f"{points} test points, not the distribution: the true error lies within {spread} of the "
                 f"estimate, on either side of a threshold; an estimate, never exact success.")
    return text


def _success_like(name: str, spec: dict) -> bool:
    words = f"{name} {spec.get('meanings', {}).get(name, '')}".lower()
    return any(w in words for w in ("success", "exact", "correct", "error", "mistake", "perfect"))


def _output_section(name: str, stats: generic.Stats, keys: list, spec: dict, layout: generic.Layout, label) -> str:
    """An output's table: per group its rate and Wilson interval and trials, or mean [interval], median, count; the
    NaN and inf values a group left out in a column of their own where there are any."""
    columns = [*layout.series, *([layout.x] if layout.x else [])]
    left = stats.left_out if stats.left_out is not None else np.zeros_like(stats.count)
    order, more = _shown(_table_order(keys, layout), (np.asarray(stats.count) > 0) | (np.asarray(left) > 0))
    extra = ["NaN/inf"] if stats.left_out is not None else []
    if generic.is_bool(spec, name):
        header = [*columns, "rate [95% Wilson]", "trials", *extra]
        table = [[*map(generic.value_text, keys[g]), _rate(stats, g), int(stats.count[g])] for g in order]
        text = f"Rate of {name} per group with its 95% Wilson interval."
    else:
        header = [*columns, "mean [95% interval]", "median", "count", *extra]
        table = [[*map(generic.value_text, keys[g]), _mean(stats, g), _number(stats.median[g]),
                  int(stats.count[g])] for g in order]
        how = f"percentile bootstrap, {generic.RESAMPLES} resamples: the values lie in [0, 1]" if stats.bounded \
            else "normal approximation"
        text = f"Mean of {name} per group with its 95% interval ({how}), its median and count."
        if label is not None and "error" in f"{name} {spec.get('meanings', {}).get(name, '')}".lower():
            text += f" The errors are {generic.exactness_text(label)}."
    for line, g in zip(table, order):
        line.extend([int(left[g])] if extra else [])
    text += more
    meaning = spec.get("meanings", {}).get(name)
    return summary.section(name, f"{name}: {meaning}\n\n{text}" if meaning else text, header, table)


def _shown(order: list, present: np.ndarray, what: str = "groups") -> tuple[list, str]:
    """The first :data:`MAX_ROWS` of ``order`` where ``present``, and a sentence saying how many were left out ("" where
    none were)."""
    order = np.asarray(order, np.int64)
    order = order[present[order]] if order.size else order
    if order.size <= MAX_ROWS:
        return order.tolist(), ""
    return order[:MAX_ROWS].tolist(), (f" The table shows the first {MAX_ROWS:,} of its {order.size:,} {what} (every "
                                       f"row: `jaxtrees export`).")


def _censored_section(name: str, stats, keys: list, spec: dict, layout: generic.Layout) -> str:
    """A censored output's table: per group its censored share, product-limit median [95%] and quartiles."""
    columns = [*layout.series, *([layout.x] if layout.x else [])]
    order, more = _shown(_table_order(keys, layout), np.asarray(stats.count) > 0)
    table = [[*map(generic.value_text, keys[g]), f"{stats.censored[g]:,} of {stats.count[g]:,} "
              f"({stats.censored[g] / stats.count[g]:.0%})", _censored_value(stats.median[g], stats, g),
              f"[{_censored_value(stats.low[g], stats, g)}, {_censored_value(stats.high[g], stats, g)}]",
              f"{_censored_value(stats.q1[g], stats, g)} – {_censored_value(stats.q3[g], stats, g)}"]
             for g in order]
    text = (f"{name} is censored ({name}{generic.CENSORED}: the budget ran out), so it has no mean. Per group: the "
            f"censored trials, and the Kaplan-Meier (product-limit) median with its 95% interval (Greenwood's, log "
            f"scale) and quartiles; \"> B\" where the censoring at budget B leaves the value unknown, \"not reached\" "
            f"where no budget is known.{more}")
    meaning = spec.get("meanings", {}).get(name)
    header = [*columns, "censored", "median", "95% interval", "quartiles"]
    return summary.section(name, f"{name}: {meaning}\n\n{text}" if meaning else text, header, table)


def _censored_value(value: float, stats, g: int) -> str:
    if np.isfinite(value):
        return f"{value:.4g}"
    if np.isnan(value):
        return "—"
    return f"> {stats.budget[g]:.4g}" if np.isfinite(stats.budget[g]) else "not reached"


def _m90_section(name: str, stats: generic.Stats, keys: list, layout: generic.Layout) -> str:
    """Per combination of the series: the smallest x from which the rate of ``name`` stays >= 90%."""
    x, table = layout.x, []
    series = generic.series_groups(keys, layout, stats)
    for _, members in series[:MAX_ROWS]:
        points = [(keys[g][-1], stats.centre[g]) for g in members]
        reached = summary.threshold(points, LEVEL)
        line = list(map(generic.value_text, keys[members[0]][:-1]))
        found = compare_rates.threshold_interval(np.rint(stats.centre[members] * stats.count[members]),
                                                 stats.count[members], [keys[g][-1] for g in members], LEVEL)
        top = f"> {generic.value_text(keys[members[-1]][-1])}"
        interval = f"[{_finite(found.low, top)}, {_finite(found.high, top)}]"
        if reached is None:
            best = max(members, key=lambda g: (stats.centre[g], -keys[g][-1]))
            top = members[-1]
            text = f"not reached (max rate {stats.centre[best]:.2f} at {x} = {generic.value_text(keys[best][-1])})"
            if stats.centre[best] >= LEVEL:
                text = f"not held (rate {stats.centre[best]:.2f} at {x} = {generic.value_text(keys[best][-1])}, " \
                       f"{stats.centre[top]:.2f} at {x} = {generic.value_text(keys[top][-1])})"
            table.append([*line, text, interval, "—"])
        else:
            g = next(g for g in members if keys[g][-1] == reached)
            table.append([*line, generic.value_text(reached), interval, f"{stats.low[g]:.2f}"])
    text = f"Per combination: the smallest {x} from which the rate of {name} stays >= {LEVEL:g} at every larger {x} " \
           f"of the grid, its 95% interval (percentile bootstrap, each point's successes redrawn binomially; \"> " \
           f"largest {x}\": not reached within the grid in that share of the resamples), and the lower bound of the " \
           f"rate's 95% Wilson interval at that {x}." + (f" The table shows the first {MAX_ROWS:,} of the "
                                                         f"{len(series):,} combinations." if len(series) > MAX_ROWS else "")
    return summary.section(f"{name}: {x} for {LEVEL:.0%}", text,
                           [*layout.series, f"{x} for {LEVEL:.0%}", "95% interval", f"Wilson lower bound at that {x}"],
                           table)


def _finite(value: float, otherwise: str) -> str:
    return generic.value_text(value if not float(value).is_integer() else int(value)) if np.isfinite(value) \
        else otherwise


def _comparison(name: str, stats: generic.Stats, keys: list, layout: generic.Layout, condition: str) -> str:
    """The rate of ``name`` at each value of ``condition`` minus its rate at the first, per cell of the other
    parameters (Newcombe's 95% interval), and a count of the cells where the interval lies above or below 0."""
    by = [*layout.series, *([layout.x] if layout.x else [])]
    at = by.index(condition)
    values = sorted({key[at] for key in keys}, key=summary.natural_key)
    cells = {}
    for g, key in enumerate(keys):
        cells.setdefault(key[:at] + key[at + 1:], {})[key[at]] = g
    others = by[:at] + by[at + 1:]
    order = sorted(cells, key=lambda cell: [summary.natural_key(v) for v in cell])
    first, table, tally = values[0], [], {}
    firsts = _index([cells[cell].get(first) for cell in order])
    counts, centres = np.append(np.asarray(stats.count), 0), np.append(np.asarray(stats.centre, np.float64), 0.0)
    differences = {v: _differences(counts, centres, _index([cells[cell].get(v) for cell in order]), firsts)
                   for v in values[1:]}
    for v, (d, low, high) in differences.items():
        known = np.isfinite(d)
        up, down = int(np.count_nonzero(known & (low > 0))), int(np.count_nonzero(known & (high < 0)))
        tally[v] = [up, down, int(np.count_nonzero(known)) - up - down]
    shown = values[1:MAX_COLUMNS + 1]
    for i, cell in enumerate(order[:MAX_ROWS]):
        line = list(map(generic.value_text, cell))
        for d, low, high in (differences[v] for v in shown):
            line.append("—" if not np.isfinite(d[i]) else f"{d[i]:+.2f} [{low[i]:+.2f}, {high[i]:+.2f}]")
        table.append(line)
    verdicts = [f"{condition} = {generic.value_text(v)}: higher in {up} and lower in {down} of {up + down + none} cells "
                f"(95% interval above or below 0), undecided in {none}" for v, (up, down, none) in tally.items()
                if v in shown]
    if len(values) - 1 > len(shown):
        up, down, none = (sum(tally[v][i] for v in values[len(shown) + 1:]) for i in range(3))
        verdicts.append(f"the other {len(values) - 1 - len(shown):,} values of {condition} (no column): higher in {up:,} "
                        f"and lower in {down:,} of {up + down + none:,} comparisons, undecided in {none:,}")
    text = (f"Does {condition} change the rate of {name}? Per cell of {_and(others) if others else 'the rows'}: the rate "
            f"at each {condition} minus the rate at {condition} = {generic.value_text(first)}, with Newcombe's 95% "
            f"interval (hybrid score, from the two Wilson intervals).\n\n" + ";\n".join(verdicts) + "." +
            (f" The table shows the first {MAX_ROWS:,} of the {len(order):,} cells." if len(order) > MAX_ROWS else ""))
    header = [*others, *(f"{condition} = {generic.value_text(v)} − {generic.value_text(first)}" for v in shown)]
    return summary.section(f"{name}: by {condition}", text, header, table)


def _index(groups: list) -> np.ndarray:
    """The groups as an index array, a missing one (None) as -1 (:func:`_differences`' last entry: no trials)."""
    return np.array([-1 if g is None else g for g in groups], np.int64)


def _differences(count: np.ndarray, centre: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple:
    """``(d, low, high)`` arrays: :func:`~.compare_rates.difference` of the rates of groups ``a`` and ``b`` pairwise
    (the same numbers, elementwise), from the groups' ``count`` and ``centre`` with a last entry of no trials (index
    -1: a missing group); NaN where either has no trials."""
    n1, n2 = count[a], count[b]
    k1, k2 = np.rint(centre[a] * n1), np.rint(centre[b] * n2)
    present = (n1 > 0) & (n2 > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p1, p2 = k1 / n1, k2 / n2
        (l1, u1), (l2, u2) = tables.wilson(k1, n1, generic.Z), tables.wilson(k2, n2, generic.Z)
        d = p1 - p2
        low, high = d - np.hypot(p1 - l1, u2 - p2), d + np.hypot(u1 - p1, p2 - l2)
    return tuple(np.where(present, v, np.nan) for v in (d, low, high))


def _table_order(keys: list, layout: generic.Layout) -> list[int]:
    """The groups in table order: the series' values, then x (categorical x in natural order)."""
    if layout.x is None or layout.numeric:
        return list(range(len(keys)))
    return sorted(range(len(keys)), key=lambda g: (keys[g][:-1], summary.natural_key(keys[g][-1])))


def _sample_size(spec: dict, x: str | None) -> bool:
    """Whether x is a sample size: m, or a meaning that says so."""
    meaning = spec.get("meanings", {}).get(x, "") if x else ""
    return x == "m" or meaning.lower().startswith("training examples") or "sample size" in meaning.lower()


def _and(items: list) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _number(value) -> str:
    return "—" if not np.isfinite(value) else f"{value:.4g}"


def _rate(stats: generic.Stats, g: int) -> str:
    return f"{stats.centre[g]:.2f} [{stats.low[g]:.2f}, {stats.high[g]:.2f}]"


def _mean(stats: generic.Stats, g: int) -> str:
    if not stats.count[g]:
        return "—"
    interval = f"[{_number(stats.low[g])}, {_number(stats.high[g])}]" if np.isfinite(stats.low[g]) else "[one value]"
    return f"{_number(stats.centre[g])} {interval}"

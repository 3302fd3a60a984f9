"""The generic report of a study: per declared output a table of its rate (or mean and median) per group.

:func:`report` writes it in markdown from the rows and the spec alone (:mod:`~jaxtrees.experiments.report.generic`
groups them), and where x is a sample size the smallest m with a 90% rate per combination of the other varying
parameters.
"""

from __future__ import annotations

import numpy as np

from jaxtrees.experiments.report import generic, summary

#: The rate a sample size must reach in the report's "m for 90%".
LEVEL = 0.9


def report(rows, spec: dict) -> str:
    """Markdown: per output a table of its rate (or mean and median) per group, and where x is a sample size the
    smallest m with a 90% rate per combination of the other varying parameters."""
    rows = generic.as_table(rows)
    layout, groups = generic.prepared(rows, spec)
    parts = [_opening(rows, spec, layout, groups)]
    for name, stats in groups.stats.items():
        parts.append(_output_section(name, stats, groups.keys, spec, layout))
        if generic.is_bool(spec, name) and layout.numeric and _sample_size(spec, layout.x):
            parts.append(_m90_section(name, stats, groups.keys, layout))
    return "\n".join(parts)


def _opening(rows, spec: dict, layout: generic.Layout, groups: generic.Groups) -> str:
    """The report's first sentence, the constant parameters and the NaN values left out."""
    outputs = [f"the rate of {name}" if generic.is_bool(spec, name) else f"the mean and median of {name}"
               for name in spec["outputs"]]
    against = f"against {generic.named(layout.x, spec)}" if layout.x else "over all rows (no parameter varies)"
    per = f", per combination of {_and(layout.series)}" if layout.series else ""
    lines = [f"{_and(outputs)[0].upper()}{_and(outputs)[1:]} {against}{per}, from {len(rows):,} rows "
             f"(95% intervals: Wilson's for rates, mean +- {generic.Z} sd / sqrt(count) for means)."]
    if layout.constant:
        constant = generic.assignment_text(list(layout.constant), list(layout.constant.values()))
        lines.append(f"Constant over the rows: {constant}.")
    for name, stats in groups.stats.items():
        if stats.missing:
            lines.append(f"{name}: {stats.missing:,} NaN values of {len(rows):,} left out of its "
                         f"{'rates' if generic.is_bool(spec, name) else 'means and medians'}.")
    return "\n\n".join(lines) + "\n"


def _output_section(name: str, stats: generic.Stats, keys: list, spec: dict, layout: generic.Layout) -> str:
    """An output's table: per group its rate and Wilson interval and trials, or mean [interval], median, count."""
    columns = [*layout.series, *([layout.x] if layout.x else [])]
    order = _table_order(keys, layout)
    if generic.is_bool(spec, name):
        header = [*columns, "rate [95% Wilson]", "trials"]
        table = [[*map(generic.value_text, keys[g]), _rate(stats, g), int(stats.count[g])]
                 for g in order if stats.count[g]]
        text = f"Rate of {name} per group with its 95% Wilson interval."
    else:
        header = [*columns, "mean [95% interval]", "median", "count"]
        table = [[*map(generic.value_text, keys[g]), _mean(stats, g), _number(stats.median[g]),
                  int(stats.count[g])] for g in order if stats.count[g]]
        text = f"Mean of {name} per group with its 95% interval (normal approximation), its median and count."
    meaning = spec.get("meanings", {}).get(name)
    return summary.section(name, f"{name}: {meaning}\n\n{text}" if meaning else text, header, table)


def _m90_section(name: str, stats: generic.Stats, keys: list, layout: generic.Layout) -> str:
    """Per combination of the series: the smallest x from which the rate of ``name`` stays >= 90%."""
    x, table = layout.x, []
    for _, members in generic.series_groups(keys, layout, stats):
        points = [(keys[g][-1], stats.centre[g]) for g in members]
        reached = summary.threshold(points, LEVEL)
        line = list(map(generic.value_text, keys[members[0]][:-1]))
        if reached is None:
            best = max(members, key=lambda g: (stats.centre[g], -keys[g][-1]))
            top = members[-1]
            text = f"not reached (max rate {stats.centre[best]:.2f} at {x} = {generic.value_text(keys[best][-1])})"
            if stats.centre[best] >= LEVEL:
                text = f"not held (rate {stats.centre[best]:.2f} at {x} = {generic.value_text(keys[best][-1])}, " \
                       f"{stats.centre[top]:.2f} at {x} = {generic.value_text(keys[top][-1])})"
            table.append([*line, text, "—"])
        else:
            g = next(g for g in members if keys[g][-1] == reached)
            table.append([*line, generic.value_text(reached), f"{stats.low[g]:.2f}"])
    text = f"Per combination: the smallest {x} from which the rate of {name} stays >= {LEVEL:g} at every larger {x} " \
           f"of the grid, and the lower bound of the rate's 95% Wilson interval at that {x}."
    return summary.section(f"{name}: {x} for {LEVEL:.0%}", text,
                           [*layout.series, f"{x} for {LEVEL:.0%}", f"Wilson lower bound at that {x}"], table)


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
    interval = f"[{_number(stats.low[g])}, {_number(stats.high[g])}]" if np.isfinite(stats.low[g]) else "[one value]"
    return f"{_number(stats.centre[g])} {interval}"

"""What the built-in studies share: choices, memory and compile settings, and small group-bys of result tables.

The trial building blocks (trial keys, the sample-size grid, learning on its prefixes) live in
:mod:`jaxtrees.experiments.study.trials`. Studies use these helpers and never each other's private ones.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxtrees.experiments import table as tables

__all__ = ["CPU_OPT_LEVEL", "a_row_of_each", "at_max", "bytes_per_trial", "chosen", "group_max", "group_sums", "keyed",
           "trial_codes", "trials_by_cell"]

#: LLVM level for the learning studies' CPU programs: level 2 compiled the juntas programs in 0.55-0.85x the
#: time of XLA's default 3 and ran their long-row counting 2.3x faster (docs/benchmarks.md).
CPU_OPT_LEVEL = 2


def chosen(params, name: str, build):
    """``build(value)`` for the cell's value of the choices parameter ``name``: built from the Python
    value where the program serves one value, else ``lax.switch`` on its traced index over the
    program's values (``params[name + "_choices"]``; every build must give the same pytree
    structure and shapes, e.g. the values of one :attr:`~jaxtrees.experiments.study.Study.buckets`
    bucket). A uniform parameter's index is the same for a vmapped group, so one branch runs."""
    value = params[name]
    if isinstance(value, str):
        return build(value)
    options = params[f"{name}_choices"]
    if len(options) == 1:
        return build(options[0])
    return jax.lax.switch(value, [lambda option=option: build(option) for option in options])


def bytes_per_trial(n):
    """Peak memory of one trial: the packed sample (n feature rows, labels, valid mask: (n + 2)
    m_max / 32 words), twice (the random words are made inside the sampler's loop, node bitsets
    and counts are smaller). Compiled temporaries measured 4.0 MiB per trial at n = 64,
    m_max = 2^18, where this gives 4.1 MiB."""
    return lambda params: 2 * 4 * (n(params) + 2) * params["m_max"] // 32


# ----------------------------------------------------------------------------- result tables
# Small group-bys the studies' plots and reports share, over a
# :class:`~jaxtrees.experiments.table.Table` (vectorized: no Python object per row).


def keyed(groups, by) -> dict:
    """The dicts of :func:`~jaxtrees.experiments.table.rates` / ``means`` by their ``by`` values (a tuple)."""
    return {tuple(g[name] for name in by): g for g in groups}


def _values(rows, values) -> np.ndarray:
    return np.asarray(rows[values] if isinstance(values, str) else values)


def at_max(rows, by, column: str):
    """The rows whose ``column`` equals its largest value in their group of ``by`` (e.g. each
    cell's rows at its largest m), as a :class:`~jaxtrees.experiments.table.Table`.

    >>> t = tables.Table({"c": [0, 0, 1, 1], "m": [16, 32, 16, 64]})
    >>> at_max(t, ["c"], "m")["m"].tolist()
    [32, 64]
    """
    v = _values(rows, column)
    codes, top = _maxima(rows, by, v)
    return rows.take(v == top[codes])


def group_max(rows, by, values) -> dict:
    """Per group of ``by``: the largest of ``values`` (a column name, or an array over the rows) as a
    Python value, groups sorted."""
    _, top = _maxima(rows, by, _values(rows, values))
    return dict(zip(tables.groups(rows, by)[1] if len(top) else [], top.tolist()))


def _maxima(rows, by, v: np.ndarray):
    """``(codes, top)``: :func:`~jaxtrees.experiments.table.group_codes` and each group's largest value."""
    codes, size = tables.group_codes(rows, by)
    if not len(v):
        return codes, v[:0]
    top = np.empty(size, v.dtype)
    top[codes] = v  # a value of each group, then the largest (NaN where the group has one)
    np.maximum.at(top, codes, v)
    return codes, top


def group_sums(rows, by, values) -> dict:
    """Per group of ``by``: ``(sum, count)`` of ``values`` (a column name, or an array over the rows)
    as float64, summed in row order (as Python's ``sum`` over the rows), groups sorted."""
    codes, keys = tables.groups(rows, by)
    v = np.asarray(_values(rows, values), np.float64)
    sums = np.bincount(codes, v, minlength=len(keys)).tolist()
    counts = np.bincount(codes, minlength=len(keys)).tolist()
    return {key: (s, n) for key, s, n in zip(keys, sums, counts) if n}


def trials_by_cell(rows, by, columns=(), matrix: str = "success") -> tuple[dict, np.ndarray]:
    """``(cells, m)``: per cell of ``by`` (a tuple of its values), ``(values, per_trial)``: ``float[trials, M]`` of
    the column ``matrix`` over the ascending m grid ``m``, and each of ``columns`` per trial (at its largest m).
    Trials are told apart by the ``cell`` and ``replicate`` columns (cells sorted, a cell's trials by cell and
    replicate), else by the rows' m order (cells in their first trial's order)."""
    column, m = _grid(rows, "m")
    codes, size = trial_codes(rows)
    values = np.full((size, m.size), np.nan)
    values[codes, column] = np.asarray(rows[matrix], np.float64)
    last = a_row_of_each(codes, size)  # (a trial's per-trial values are on each of its rows)
    cell_codes, keys = tables.groups(rows, by)
    cell = cell_codes[last]  # each trial's cell
    count = np.bincount(cell, minlength=len(keys))
    ends, order = np.cumsum(count), np.argsort(cell, kind="stable")  # a cell's trials by (cell, replicate)
    if "cell" in rows or "replicate" in rows:
        ranked = np.flatnonzero(count)  # cells sorted
    else:  # cells in their first trial's order
        first = np.full(len(keys), size)
        np.minimum.at(first, cell, np.arange(size))
        ranked = np.argsort(first, kind="stable")[:np.count_nonzero(count)]
    per_trial = {name: np.asarray(rows[name], np.float64)[last] for name in columns}  # each column read once
    out = {}
    for g in ranked:
        members = order[ends[g] - count[g]:ends[g]]
        out[keys[g]] = (values[members], {name: v[members] for name, v in per_trial.items()})
    return out, m


def _grid(rows, name) -> tuple[np.ndarray, np.ndarray]:
    """``(index, grid)``: a column's distinct values ascending (float64) and each row's index in them, from its
    codes (:func:`~jaxtrees.experiments.table.factorize`: no sort of the rows)."""
    codes, uniques = tables.factorize(rows, name)
    present = np.bincount(codes, minlength=len(uniques)) > 0
    if present.all():
        return codes, np.asarray(uniques, np.float64)
    return (np.cumsum(present) - 1)[codes], np.asarray(uniques, np.float64)[present]  # a subset's rows


def a_row_of_each(codes, size: int) -> np.ndarray:
    """Per group of ``codes`` (``size`` groups), the index of one of its rows."""
    row = np.zeros(size, np.int64)
    row[codes] = np.arange(len(codes))
    return row


def trial_codes(rows) -> tuple[np.ndarray, int]:
    """``(codes, trials)``: each row's trial, told apart by the ``cell`` and ``replicate`` columns (a cell fixes the
    parameters), else by the rows' m order (a trial's rows consecutive, one per m)."""
    trial = [name for name in ("cell", "replicate") if name in rows]
    if trial:
        return tables.group_codes(rows, trial)
    starts = np.r_[True, np.diff(np.asarray(rows["m"], np.float64)) <= 0]
    return np.cumsum(starts) - 1, int(np.count_nonzero(starts))

"""The checks of a :class:`~jaxtrees.experiments.study.declaration.Study`'s declaration: its name, grid, replicates,
names and axis (and the axis' values per cell, :func:`axis_values`), each refused in one sentence naming the study,
the field and what is allowed.

>>> study_name("../escape")
Traceback (most recent call last):
...
ValueError: study name '../escape' is not a safe file name: it names the results directory OUT/NAME and its figures, so it must be letters, digits, '-', '_' and '.', not starting with '.' (e.g. 'my-study')
"""

from __future__ import annotations

import math
import numbers
import re

from jaxtrees.experiments.study.options import Axis

#: A study's name: one safe path component (it names OUT/NAME and the figures' files).
NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}")


def study_name(name) -> str:
    """``name`` unless it is not a safe single path component (letters, digits, '-', '_', '.'; not starting with
    '.'; not empty; at most 200 characters): ValueError."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"study name {name!r} is not a safe file name: it names the results directory OUT/NAME and "
                         f"its figures, so it must be letters, digits, '-', '_' and '.', not starting with '.' "
                         f"(e.g. 'my-study')")
    return name


def grids(study: str, grid) -> tuple:
    """``grid`` as ``(quick, full)``: one dict serves both sizes."""
    grids = (grid, grid) if isinstance(grid, dict) else tuple(grid) if isinstance(grid, (tuple, list)) else ()
    if len(grids) != 2 or not all(isinstance(g, dict) and all(isinstance(n, str) for n in g) for g in grids):
        raise ValueError(f"study {study!r}: grid must be a dict (parameter name -> a value or a list of values) "
                         f"or a pair (quick, full) of them, got {grid!r}")
    if set(grids[0]) != set(grids[1]):
        raise ValueError(f"study {study!r}: grid: the quick and full grids must name the same parameters (only in "
                         f"quick: {sorted(set(grids[0]) - set(grids[1]))}, only in full: "
                         f"{sorted(set(grids[1]) - set(grids[0]))})")
    for name in grids[1]:
        grid_values(study, name, [as_list(g[name]) for g in (grids if grids[0] is not grids[1] else grids[1:])])
    return grids


def grid_values(study: str, name: str, lists: list) -> None:
    """ValueError unless each of ``lists`` (a parameter's values in the quick and the full grid) is non-empty, holds
    each value once, and all are finite numbers, all booleans or all strings."""
    where = f"study {study!r}: grid parameter {name!r}"
    for values in lists:
        if not values:
            raise ValueError(f"{where} lists no values: give one value or a non-empty list of them")
    kinds = {}
    for value in (v for values in lists for v in values):
        kind = _kind(value)
        if kind is None:
            raise ValueError(f"{where}: the value {value!r} is a {type(value).__name__}; a grid value must be an int, "
                             f"float, bool or str (it is written to the rows as it is)")
        kinds.setdefault(kind, value)
    finite(where, [v for values in lists for v in values])
    if len(kinds) > 1:
        raise ValueError(f"{where} mixes {' and '.join(f'{k} ({v!r})' for k, v in sorted(kinds.items()))} values: "
                         f"give values of one type (numbers, booleans or strings)")
    for values in lists:
        seen = set()
        for value in values:
            if value in seen:
                raise ValueError(f"{where} lists the value {value!r} more than once: a cell would run twice; give "
                                 f"each value once")
            seen.add(value)


def finite(where: str, values) -> None:
    """ValueError (``where``: the study and parameter) at the first float of ``values`` that is inf or NaN."""
    for value in values:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where} lists the value {value!r}: a grid value must be a finite number (inf and nan "
                             f"name no cell: nan equals nothing, inf has no place on a figure's axis)")


def _kind(value) -> str | None:
    """"bool", "number" or "string" (Python values only), None for anything else."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)) and type(value).__module__ == "builtins":
        return "number"
    return "string" if isinstance(value, str) else None


def replicates(study: str, replicates) -> tuple:
    """``replicates`` as ``(quick, full)``: one number serves both sizes."""
    pair = tuple(replicates) if isinstance(replicates, (tuple, list)) else (replicates, replicates)
    if len(pair) != 2 or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in pair):
        raise ValueError(f"study {study!r}: replicates must be a positive int or a pair (quick, full) of them, "
                         f"got {replicates!r}")
    return pair


def names(study: str, field: str, names) -> tuple:
    """``names`` (parameter names) as a tuple; a string alone is refused (``("n",)``, not ``"n"``)."""
    if not isinstance(names, (tuple, list, dict)) or not all(isinstance(name, str) for name in names):
        raise ValueError(f"study {study!r}: {field} must be a tuple of parameter names, got {names!r}")
    return tuple(names)


def strings(grids: tuple, choices: dict) -> list:
    """The parameters whose values are strings but ``choices``: static, however the study declares them."""
    return [name for name in grids[1] if name not in choices
            and any(isinstance(v, str) for grid in grids for v in as_list(grid[name]))]


def axis(study: str, axis, parameters) -> Axis:
    """``axis`` as an :class:`Axis` whose name is not a grid parameter (a column of its own)."""
    try:
        axis = Axis(*axis)
    except TypeError:
        axis = None
    if axis is None or not isinstance(axis.name, str) or not callable(axis.values):
        raise ValueError(f"study {study!r}: axis must be a pair (column name, values(params) -> list)") from None
    if axis.name in parameters:
        raise ValueError(f"study {study!r}: axis {axis.name!r} is a grid parameter; the axis names a column of "
                         f"its own (the trial's outputs run along it)")
    return axis


def axis_values(study: str, axis: Axis, cell: dict) -> list:
    """The cell's axis values (``axis.values(cell)``), or ValueError naming the study, the axis and the cell unless
    they are a non-empty list of increasing numbers, each once (the axis column holds numbers)."""
    where = f"study {study!r}: axis {axis.name!r} (in the cell {', '.join(f'{k}={v}' for k, v in cell.items())})"
    try:
        values = axis.values(cell)
    except ValueError as e:
        raise ValueError(f"study {study!r}: axis {axis.name!r}: {e} (in the cell "
                         f"{', '.join(f'{k}={v}' for k, v in cell.items())})") from None
    except Exception as e:  # noqa: BLE001 - the user's function: its fault as one sentence, the traceback its cause
        raise ValueError(f"{where}: values(cell) raised {type(e).__name__}: {e}") from e
    listed = None if values is None or isinstance(values, (str, bytes, dict)) else _listed(values)
    if not listed:
        raise ValueError(f"{where}: values(cell) returned {values!r}; it must return a non-empty list of numbers, "
                         f"increasing, each once: one row per value")
    numeric = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in listed)
    if not numeric:  # strings were let through here, and the written part then refused as "must hold numbers"
        raise ValueError(f"{where}: values(cell) returned {listed!r}; its values must all be numbers (the axis column "
                         f"holds numbers: a label per value can be a grid parameter instead)")
    if any(a >= b for a, b in zip(listed, listed[1:])):
        raise ValueError(f"{where}: values(cell) returned {listed!r}; they must be increasing, each once (a value "
                         f"twice would write two rows of it per trial)")
    return listed


def _listed(values) -> list | None:
    try:
        return list(values)
    except TypeError:
        return None


def as_list(value, split=False) -> list:
    """``value`` as a list of values: a list or tuple as it is, a string split at commas where ``split``."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if split and isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [value]

"""The checks of a :class:`~jaxtrees.experiments.study.declaration.Study`'s declaration: its grid, replicates, names
and axis, each refused in one sentence naming the study, the field and what is allowed."""

from __future__ import annotations

from jaxtrees.experiments.study.options import Axis


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
    return grids


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


def as_list(value, split=False) -> list:
    """``value`` as a list of values: a list or tuple as it is, a string split at commas where ``split``."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if split and isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [value]

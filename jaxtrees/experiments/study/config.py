"""One resolved run of a study (:class:`Config`): its grid's values (:func:`configure`) and its results' columns.

:func:`configure` resolves a :class:`~jaxtrees.experiments.study.declaration.Study`'s grid (defaults, then
overrides) into a :class:`Config` and checks every cell before any heavy work; :data:`ID_COLUMNS` and
:func:`column_descriptions` say what each column of the results means.
"""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np

from jaxtrees.core import checks
from jaxtrees.experiments.study.declaration import Study
from jaxtrees.experiments.study import validation
from jaxtrees.experiments.study.validation import as_list

#: At most this many trials per run (cells x replicates); the runner lists the trials to do.
MAX_TRIALS = 2**24


#: The columns every results file starts with.
ID_COLUMNS = {
    "study": "the study's name",
    "seed": "the root seed of the run",
    "cell": "index of the cell (one combination of grid values) in the run's grid",
    "replicate": "trial number within the cell; the trial's key is fold_in(fold_in(key(seed), "
                 "crc32 of the cell's parameters but the study's shared ones), replicate)",
}


def column_descriptions(study: Study, config: Config) -> dict:
    """Every column of the study's results file -> what it means: the id columns, the grid's
    parameters, then the study's own columns (its axis and its trial's outputs)."""
    grid = {name: f"parameter (grid: {', '.join(map(str, values))})" for name, values in sorted(config.grid.items())}
    return {**ID_COLUMNS, **grid, **study.columns}


@dataclasses.dataclass(frozen=True)
class Config:
    """A resolved run: the grid (parameter -> list of values), replicates, seed, size."""

    study: str
    grid: dict
    replicates: int
    seed: int
    quick: bool

    def cells(self) -> list[dict]:
        """The grid's cells in a fixed order (the product of the value lists)."""
        names = sorted(self.grid)
        return [dict(zip(names, values)) for values in itertools.product(*(self.grid[n] for n in names))]

    @property
    def trials(self) -> int:
        """Cells x replicates."""
        return len(self.cells()) * self.replicates

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


def configure(study: Study, *, quick: bool = False, overrides: dict | None = None, seed: int = 0,
              replicates: int | None = None, called: str | None = None) -> Config:
    """Resolve the grid of ``study``: its quick or full defaults, then ``overrides``; ``called``: what a user types
    for the study (a file's path; default its name), which an unknown parameter's message names.

    ``overrides`` maps a parameter to a value or a list of values (strings are parsed to the
    parameter's type, and "a,b,c" is a list). A value given twice (``c=0.1,0.10``) is an error,
    as are inf and nan and a run of more than ``MAX_TRIALS`` trials. Every cell is checked here.

    >>> from jaxtrees.experiments import studies
    >>> config = configure(studies.get("juntas"), quick=True, overrides={"c": "0,0.2", "k": 3})
    >>> config.grid["c"], config.trials
    ([0.0, 0.2], 800)
    """
    seed = checks.integer("seed", seed, low=0, high=2**31 - 1)
    base = study.quick if quick else study.full
    grid = {name: as_list(value) for name, value in base.items()}
    for name, value in (overrides or {}).items():
        if name == "replicates":
            replicates = value
            continue
        if name not in grid:
            raise ValueError(f"unknown parameter {name!r} for study {study.name!r}; known: "
                             f"{', '.join(sorted(grid))}, replicates (`jaxtrees run {called or study.name} --help` "
                             f"describes each)")
        grid[name] = [_parse(name, v, as_list(study.full[name])[0]) for v in as_list(value, split=True)]
        if not grid[name]:
            raise ValueError(f"parameter {name!r} needs at least one value")
        validation.finite(f"study {study.name!r}: parameter {name!r}", grid[name])
        repeated = sorted({json.dumps(v) for v in grid[name] if grid[name].count(v) > 1})
        if repeated:
            raise ValueError(f"parameter {name!r} lists the value {', '.join(repeated)} more than once "
                             f"(a cell would run twice); give each value once")
    if replicates is None:
        replicates = study.replicates[0 if quick else 1]
    if isinstance(replicates, str):
        replicates = _parse("replicates", replicates, 1)
    config = Config(study.name, grid, 1, seed, quick)
    cells = config.cells()
    replicates = checks.integer("replicates", replicates, low=1, high=max(1, MAX_TRIALS // len(cells)))
    for cell in cells if study.check_cell is not None else ():
        try:
            study.check_cell(cell)
        except ValueError as e:  # the cell names the other parameters a bound came from (m_max >= m_min)
            raise ValueError(f"{e} (in the cell {', '.join(f'{k}={v}' for k, v in cell.items())})") from None
    for cell in cells if study.axis is not None else ():
        validation.axis_values(study.name, study.axis, cell)
    for name, values in grid.items():
        if name in study.static or not any(isinstance(v, str) for v in values):
            continue
        allowed = study.choices.get(name)
        if allowed is None:
            raise ValueError(f"study {study.name!r}: parameter {name!r} takes strings, so it must be static "
                             f"or declared in the study's choices")
        for value in values:
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return dataclasses.replace(config, replicates=replicates)


def _parse(name: str, value, example):
    """``value`` (a string, or a number from a JSON config) as the type of ``example``, so that
    equal cells get equal keys however they were given (``c=0`` and ``"c": 0`` are both 0.0)."""
    kind = type(example)
    if isinstance(value, np.generic):  # np.float64(0.4), np.int32(3), np.bool_(True): their Python value
        value = value.item()
    if isinstance(value, str):
        try:
            if kind is bool:
                return {"true": True, "false": False, "1": True, "0": False}[value.lower()]
            if kind in (int, float):
                return kind(value)
        except (ValueError, KeyError):
            raise ValueError(f"{name} must be {kind.__name__}, got {value!r}") from None
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is not str and kind is not type(value):
        raise ValueError(f"{name} must be {kind.__name__}, got {value!r}")
    return value

"""A study's definition (:class:`Study`) and one resolved run of it (:class:`Config`).

A :class:`Study` names its parameters (with the defaults of a ``quick`` and a ``full`` size),
says which of them are *static* (they change shapes or the compiled program: one compilation per
distinct combination) and gives a pure ``trial(key, params) -> {metric: array}``.
:func:`configure` resolves the grid (defaults, then overrides) into a :class:`Config` and checks
every cell before any heavy work. A trial's key depends only on the seed and its cell's
parameters (:meth:`Study.trial_key`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import zlib
from typing import Callable, NamedTuple

import jax

from jaxtrees.core import checks

#: At most this many trials per run (cells x replicates); the runner lists the trials to do.
MAX_TRIALS = 2**24


#: Parameters that mean the same in every built-in study that has them (a study's own
#: ``Study.parameters`` entry wins). Not ``k`` or ``c``: the addressing studies' c is a parity width.
PARAMETER_MEANINGS = {
    "n": "the number of input bits",
    "log2_n": "n = 2^log2_n input bits",
    "m_min": "the smallest training-set size (a power of two): m runs over m_min, 2 m_min, ..., m_max",
    "m_max": "the largest training-set size (a power of two): a trial draws m_max examples and learns on their "
             "prefixes",
    "impurity": "the greedy trees' splitting criterion (entropy: ID3 / C4.5, gini: CART)",
}


class Axis(NamedTuple):
    """What a trial's outputs run along: one row per value of ``values(cell)`` in column ``name``."""

    name: str
    values: Callable


@dataclasses.dataclass(frozen=True)
class Study:
    """A Monte Carlo study: parameters, their quick and full grids, and the trial.

    Attributes:
      name, description: shown by ``jaxtrees list``.
      quick, full: parameter -> list of values (the grid) or a single value, for ``--quick`` and
        the full size. Both must name the same parameters; the value types (int, float, str) of
        the full grid are the types ``--set`` parses to.
      static: parameters that fix shapes or the program (compiled once per combination); they
        reach ``trial`` as Python values, the others as traced float32 / int32 scalars.
      trial: ``trial(key, params) -> dict`` of float / int / bool arrays, each a scalar or of
        shape ``[len(axis values)]``.
      axis: optional :class:`Axis` ``(name, values(params) -> list)``: the trial's outputs run along
        it (one row per value).
      replicates: trials per cell, ``(quick, full)``.
      check: ``check(params)`` raises ValueError for a bad cell, before any heavy work.
      plot, report: ``plot(rows, path_stem) -> list of files`` and ``report(rows) -> markdown``; both
        see the results as a :class:`~jaxtrees.experiments.table.Table` (columns, never row dicts; a
        list of row dicts given by a caller becomes one).
      bytes_per_trial: optional ``bytes_per_trial(params)``, the device memory one trial of a
        cell needs at its peak; the default chunk then keeps a device under the runner's
        ``MEMORY_BUDGET``.
      working_set_per_trial: optional ``working_set_per_trial(params)``, the bytes one trial
        sweeps again and again (e.g. float rows of its sample, round after round); on a CPU the
        runner then vmaps fewer trials together, so that a group's sweeps stay in cache
        (``CPU_CACHE_BUDGET``).
      columns: what each output column (and the axis) means, for metadata.json (see
        :func:`column_descriptions`).
      shared: parameters left out of the trial key (common random numbers): cells that differ only
        in them get the same keys, e.g. ``("learner",)`` so that every learner sees the same
        distribution, target and sample in trial r of a cell.
      uniform: traced parameters that are the same for every trial of a vmapped group (the runner
        packs groups by their values): they reach ``trial`` unbatched, so that ``lax.cond`` /
        ``lax.switch`` on them run one branch per group (e.g. a depth that skips the levels below
        it) where a batched value would run every branch.
      bounds: uniform parameters (integers) with a static bound: the largest value among a static
        group's cells reaches ``trial`` as ``params[name + "_max"]`` (e.g. arrays padded to k_max),
        so one program serves every value. Results must not depend on the bound.
      choices: parameter -> allowed values (strings), for parameters that are neither static nor
        numbers: they reach ``trial`` as the int32 index of the value in ``params[name + "_choices"]``,
        the static tuple of the values a static group's cells use (in this tuple's order).
      buckets: parameter of ``choices`` -> ``bucket(value)``: cells whose values fall in different
        buckets compile different programs (as if the bucket were static), cells in one bucket share
        one, the trial choosing by the traced index (e.g. families of targets of one pytree
        structure: :func:`~jaxtrees.experiments.studies.common.chosen`).
      branches: static parameters whose values one program serves as branches: cells that differ
        only in them (and have as many axis values) share one program, a ``lax.switch`` on the
        group's branch (uniform per vmapped group) over the combinations of their values the program's
        cells use, each branch the trial traced with its values static (``program["branches"]``):
        the rows of a program per combination, at one program's sampling, scoring and trial loop.
        Every branch's outputs must have the same shapes and dtypes; the group size, ``bounds`` and
        ``choices`` come from all the program's cells (a branch's group may depend on the others').
      after: ``after(key, params, outputs) -> outputs``, applied to every trial's outputs (the trial's key;
        the params without ``branches``' parameters), outside the ``lax.switch`` of ``branches``: work that
        the branches share on outputs of one shape (e.g. each branch's data padded to the largest) is
        traced and compiled once, not once per branch. The rows are ``after``'s outputs.
      cpu_opt_level: XLA:CPU's LLVM optimization level for the study's programs (None: XLA's
        default, 3); an ``--xla_backend_optimization_level`` in XLA_FLAGS wins.
      level_loop: whether a program of few trials (at most ``runner.LOOP_MAX_TRIALS``, or at most this
        many where an int) grows its deep trees in a level loop (:func:`~jaxtrees.learners.growth.level_loop`:
        the same trees, compiled faster, run 2-5x slower); a small int or False where a trial grows many
        deep trees (the boosting study's forests).
      parameters: parameter -> what it means, for ``jaxtrees run STUDY --help`` (a name left out
        falls back to :data:`PARAMETER_MEANINGS`, the names every built-in study uses alike).
    """

    name: str
    description: str
    quick: dict
    full: dict
    static: tuple
    trial: Callable
    replicates: tuple
    check: Callable
    plot: Callable
    report: Callable
    axis: Axis | None = None
    bytes_per_trial: Callable | None = None
    working_set_per_trial: Callable | None = None
    columns: dict = dataclasses.field(default_factory=dict)
    shared: tuple = ()
    uniform: tuple = ()
    bounds: tuple = ()
    choices: dict = dataclasses.field(default_factory=dict)
    buckets: dict = dataclasses.field(default_factory=dict)
    branches: tuple = ()
    after: Callable | None = None
    cpu_opt_level: int | None = None
    level_loop: bool | int = True
    parameters: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.axis is not None:
            object.__setattr__(self, "axis", Axis(*self.axis))
        for name in ("plot", "report"):  # both see a Table, however they are called
            object.__setattr__(self, name, _tabled(getattr(self, name)))
        overlap = set(self.static) & (set(self.uniform) | set(self.bounds))
        if overlap:
            raise ValueError(f"study {self.name!r}: {sorted(overlap)} cannot be both static and traced")
        unknown = (set(self.uniform) | set(self.bounds) | set(self.choices) | set(self.parameters)) - set(self.full)
        if unknown:
            raise ValueError(f"study {self.name!r}: unknown parameters {sorted(unknown)}")
        if not isinstance(self.level_loop, bool):
            checks.integer("level_loop", self.level_loop, low=0)
        if set(self.branches) - set(self.static):
            raise ValueError(f"study {self.name!r}: branches {sorted(set(self.branches) - set(self.static))} must be "
                             f"static")
        if set(self.buckets) - set(self.choices):
            raise ValueError(f"study {self.name!r}: buckets {sorted(set(self.buckets) - set(self.choices))} must be "
                             f"choices")

    def meaning(self, name: str) -> str | None:
        """What parameter ``name`` means: the study's ``parameters`` entry, else :data:`PARAMETER_MEANINGS`'."""
        return self.parameters.get(name, PARAMETER_MEANINGS.get(name))

    @property
    def grouped(self) -> tuple:
        """The parameters a vmapped group shares: ``uniform``, ``bounds`` and ``branches``, sorted."""
        return tuple(sorted(set(self.uniform) | set(self.bounds) | set(self.branches)))

    def program(self, cells: list[dict]) -> dict:
        """The static values of the program that runs ``cells`` (cells of one static group): the
        static parameters, ``name_max`` for each of ``bounds`` and ``name_choices`` for each of ``choices``;
        where the cells hold several combinations of the ``branches`` parameters, ``branches``: those
        combinations (values in the order of ``branches``) in place of the parameters."""
        combinations = list(dict.fromkeys(tuple(c[name] for name in self.branches) for c in cells))
        several = len(combinations) > 1
        static = {name: cells[0][name] for name in self.static if not (several and name in self.branches)}
        if several:
            static["branches"] = tuple(combinations)
        bounds = {f"{name}_max": max(c[name] for c in cells) for name in self.bounds}
        choices = {f"{name}_choices": tuple(v for v in allowed if any(c[name] == v for c in cells))
                   for name, allowed in self.choices.items() if name not in self.static}
        return dict(sorted({**static, **bounds, **choices}.items()))

    def static_groups(self, cells: list[dict]) -> list[list[int]]:
        """Indices of ``cells`` by static group (cells with equal static values but ``branches``, equal
        buckets and, with branches, as many axis values), in run order."""
        groups: dict[tuple, list[int]] = {}
        for index, cell in enumerate(cells):
            key = tuple(cell[name] for name in sorted(self.static) if name not in self.branches)
            key += tuple(bucket(cell[name]) for name, bucket in sorted(self.buckets.items()))
            if self.branches and self.axis is not None:  # branches of one program give outputs of one shape
                key += (len(self.axis.values(cell)),)
            groups.setdefault(key, []).append(index)
        return list(groups.values())

    def programs(self, config: Config) -> list[dict]:
        """The static values of every program ``config`` compiles (one per static group), in run order."""
        cells = config.cells()
        return [self.program([cells[i] for i in members]) for members in self.static_groups(cells)]

    def key_hash(self, cell: dict) -> int:
        """The cell's part of its trials' keys: :func:`cell_hash` of its parameters but ``shared``."""
        return cell_hash({name: value for name, value in cell.items() if name not in self.shared})

    def trial_key(self, seed: int, cell, replicate):
        """The key of trial ``replicate`` of ``cell``: fold_in(fold_in(key(seed), h), replicate), h the
        cell's :meth:`key_hash` (``cell`` a dict) or ``cell`` itself (a hash, traced inside a program).

        Randomness: trial (cell, r) uses ``fold_in(fold_in(key(seed), h), r)`` where h is a 31-bit hash
        of the cell's parameter values (not its position in the grid), so a row depends only on the seed
        and its parameters, never on chunk size, device count, host count or which other cells run."""
        return _fold(seed, self.key_hash(cell) if isinstance(cell, dict) else cell, replicate)


def _tabled(function: Callable) -> Callable:
    """``function(rows, ...)`` called with a :class:`~jaxtrees.experiments.table.Table`."""
    if getattr(function, "tabled", False):
        return function

    @functools.wraps(function)
    def wrapper(rows, *args, **kwargs):
        from jaxtrees.experiments.table import Table

        return function(rows if isinstance(rows, Table) else Table.from_rows(rows), *args, **kwargs)

    wrapper.tabled = True
    return wrapper


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
              replicates: int | None = None) -> Config:
    """Resolve the grid of ``study``: its quick or full defaults, then ``overrides``.

    ``overrides`` maps a parameter to a value or a list of values (strings are parsed to the
    parameter's type, and "a,b,c" is a list). A value given twice (``c=0.1,0.10``) is an error,
    as is a run of more than ``MAX_TRIALS`` trials. Every cell is checked here.

    >>> from jaxtrees.experiments import studies
    >>> config = configure(studies.get("juntas"), quick=True, overrides={"c": "0,0.2", "k": 3})
    >>> config.grid["c"], config.trials
    ([0.0, 0.2], 400)
    """
    seed = checks.integer("seed", seed, low=0, high=2**31 - 1)
    base = study.quick if quick else study.full
    grid = {name: _as_list(value) for name, value in base.items()}
    for name, value in (overrides or {}).items():
        if name == "replicates":
            replicates = value
            continue
        if name not in grid:
            raise ValueError(f"unknown parameter {name!r} for study {study.name!r}; known: "
                             f"{', '.join(sorted(grid))}, replicates (`jaxtrees run {study.name} --help` "
                             f"describes each)")
        grid[name] = [_parse(name, v, _as_list(study.full[name])[0]) for v in _as_list(value, split=True)]
        if not grid[name]:
            raise ValueError(f"parameter {name!r} needs at least one value")
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
    for cell in cells:
        try:
            study.check(cell)
        except ValueError as e:  # the cell names the other parameters a bound came from (m_max >= m_min)
            raise ValueError(f"{e} (in the cell {', '.join(f'{k}={v}' for k, v in cell.items())})") from None
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


def trial_key(seed: int, cell: dict, replicate, study: Study | None = None):
    """The key of one trial (:meth:`Study.trial_key`; h = cell_hash(cell) when no ``study`` is given)."""
    h = cell_hash(cell) if study is None else study.key_hash(cell)
    return _fold(seed, h, replicate)


def _fold(seed: int, h, replicate):
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), h), replicate)


def cell_hash(cell: dict) -> int:
    """A 31-bit hash of the cell's parameter values (stable across runs, machines and grids)."""
    return zlib.crc32(json.dumps(cell, sort_keys=True).encode()) & 0x7FFFFFFF


def _as_list(value, split=False) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    if split and isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [value]


def _parse(name: str, value, example):
    """``value`` (a string, or a number from a JSON config) as the type of ``example``, so that
    equal cells get equal keys however they were given (``c=0`` and ``"c": 0`` are both 0.0)."""
    kind = type(example)
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

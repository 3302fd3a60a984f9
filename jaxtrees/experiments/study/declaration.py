"""A study's definition (:class:`Study`) and its trials' keys (:func:`trial_key`, :func:`cell_hash`).

A :class:`Study` needs a name, a pure ``trial(key, params) -> {output: array}`` (its docstring's first
paragraph describes the study), a grid (parameter -> values; one, or a ``quick`` and a ``full`` size) and
the trials per cell. Optional: which parameters are *static* (they change shapes or the compiled program:
one compilation per distinct combination; a parameter of strings is static unless it is a
``Compile.choices``), an axis, the *shared* parameters, what each name means, a check of a cell, the
figures and report, and the :class:`~.options.Compile` knobs (:mod:`.options`); :func:`~.config.configure`
resolves the grid into a :class:`~.config.Config` (:mod:`.config`). A trial's key depends only on the seed and its
cell's parameters (:meth:`Study.trial_key`).

>>> import jax
>>> def coin(key, params):
...     "Coin flips of bias p: heads or tails."
...     return {"heads": jax.random.bernoulli(key, params["p"])}
>>> study = Study("coin", coin, grid={"p": [0.25, 0.5], "coin": "fair"}, replicates=8)
>>> from jaxtrees.experiments.study import configure
>>> study.description, study.static, study.replicates, configure(study).trials
('Coin flips of bias p: heads or tails.', ('coin',), (8, 8), 16)
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
import zlib
from typing import Callable

import jax

from jaxtrees.core import checks
from jaxtrees.experiments.study.options import COMPILE_KNOBS, Axis, Checks, Compile
from jaxtrees.experiments.study import validation

#: Parameters that mean the same in every built-in study that has them (a study's own
#: ``Study.meanings`` entry wins). Not ``k`` or ``c``: the addressing studies' c is a parity width.
PARAMETER_MEANINGS = {
    "n": "the number of input bits",
    "log2_n": "n = 2^log2_n input bits",
    "m_min": "the smallest training-set size (a power of two): m runs over m_min, 2 m_min, ..., m_max",
    "m_max": "the largest training-set size (a power of two): a trial draws m_max examples and learns on their "
             "prefixes",
    "impurity": "the greedy trees' splitting criterion (entropy: ID3 / C4.5, gini: CART)",
}


@dataclasses.dataclass(frozen=True)
class Study:
    """A Monte Carlo study: its name, trial, grid and replicates; the rest is optional.

    Attributes:
      name: shown by ``jaxtrees list``, with :attr:`description`.
      trial: ``trial(key, params) -> dict`` of float / int / bool arrays, each a scalar or of shape
        ``[len(axis values)]``; the first paragraph of its docstring is the study's description.
      grid: parameter -> list of values or a single value; one grid (``--quick`` and full alike) or
        ``(quick, full)``, both naming the same parameters. The value types (int, float, str) of the full
        grid are the types ``--set`` parses to. Read back as ``(quick, full)``.
      replicates: trials per cell: one number or ``(quick, full)``; read back as ``(quick, full)``.
      axis: optional :class:`Axis` ``(name, values(params) -> list)``: the trial's outputs run along
        it (one row per value).
      static: parameters that fix shapes or the program (compiled once per combination); they
        reach ``trial`` as Python values, the others as traced float32 / int32 scalars. A parameter
        whose values are strings is static unless it is one of ``compile.choices`` (read back with them).
      shared: parameters left out of the trial key (common random numbers): cells that differ only
        in them get the same keys, e.g. ``("learner",)`` so that every learner sees the same
        distribution, target and sample in trial r of a cell.
      meanings: parameter, axis or output column -> what it means, for ``jaxtrees run STUDY --help``
        (:attr:`parameters`; a parameter left out falls back to :data:`PARAMETER_MEANINGS`) and
        metadata.json (:attr:`columns`, see :func:`~jaxtrees.experiments.study.config.column_descriptions`).
      check: ``check(params)`` raises ValueError for a bad cell, before any heavy work (None: no check
        beyond the grid's types); or :class:`Checks` ``(cell=, rows=)``, also the rows' invariants.
      plot, report: ``plot(rows, path_stem) -> list of files`` and ``report(rows) -> markdown``; both
        see the results as a :class:`~jaxtrees.experiments.table.Table` (columns, never row dicts; a
        list of row dicts given by a caller becomes one). None: the generic figures and report. ``plot`` may
        also be a figure spec (``jt.figure(x=, hue=, col=)``: the generic figure's layout).
      condition: the parameter whose values the generic report compares (None: the first that varies).
      censored: outputs that are censored times marked by a sentinel: a negative or NaN value means the budget ran
        out (e.g. ``steps_to_eps``, -1); the rows get ``NAME_censored`` beside NAME (an output returned as
        ``jt.Censored`` needs no entry); in :meth:`declaration` where given, unlike ``plot`` and ``condition``.
      compile: the :class:`Compile` knobs (also read as the study's attributes: ``study.bounds``, ...).
    """

    name: str
    trial: Callable
    grid: dict | tuple
    replicates: int | tuple
    axis: Axis | tuple | None = None
    static: tuple = ()
    shared: tuple = ()
    meanings: dict = dataclasses.field(default_factory=dict)
    check: Callable | Checks | None = None
    plot: Callable | None = None
    report: Callable | None = None
    compile: Compile = dataclasses.field(default_factory=Compile)
    condition: str | None = None
    censored: tuple = ()

    def __post_init__(self):
        set_ = functools.partial(object.__setattr__, self)
        validation.study_name(self.name)
        if not callable(self.trial):
            raise ValueError(f"study {self.name!r}: trial must be callable, got {self.trial!r}")
        set_("grid", validation.grids(self.name, self.grid))
        set_("replicates", validation.replicates(self.name, self.replicates))
        if not isinstance(self.compile, Compile):
            raise ValueError(f"study {self.name!r}: compile must be a Compile, got {self.compile!r}")
        set_("shared", validation.names(self.name, "shared", self.shared))
        set_("static", tuple(dict.fromkeys([*validation.names(self.name, "static", self.static),
                                            *validation.strings(self.grid, self.compile.choices)])))
        if self.axis is not None:
            set_("axis", validation.axis(self.name, self.axis, self.full))
        if isinstance(self.check, Checks):
            for name in ("cell", "rows"):
                if getattr(self.check, name) is not None and not callable(getattr(self.check, name)):
                    raise ValueError(f"study {self.name!r}: check.{name} must be callable or None, got "
                                     f"{getattr(self.check, name)!r}")
        for name in ("check", "plot", "report"):
            if (name == "check" and isinstance(self.check, Checks)) or (name == "plot" and _figure_spec(self.plot)):
                continue
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise ValueError(f"study {self.name!r}: {name} must be callable or None, got {getattr(self, name)!r}")
        for name in ("plot", "report"):  # both see a Table, however they are called
            if callable(getattr(self, name)):
                set_(name, _tabled(getattr(self, name)))
        self._check_names()
        self._check_presentation()

    def _check_presentation(self):
        """ValueError unless ``condition`` is a grid parameter (or None) and ``censored`` names outputs."""
        if self.condition is not None and self.condition not in self.full:
            raise ValueError(f"study {self.name!r}: condition {self.condition!r} is not a grid parameter (the grid's: "
                             f"{', '.join(sorted(self.full))})")
        if _figure_spec(self.plot):  # jt.figure(x=, hue=, col=): parameters (x may be the axis)
            axis = () if self.axis is None else (self.axis.name,)
            for field, names in (("x", () if self.plot.x is None else (self.plot.x,)), ("hue", self.plot.hue),
                                 ("col", self.plot.col)):
                unknown = [n for n in names if n not in self.full and not (field == "x" and n in axis)]
                if unknown:
                    raise ValueError(f"study {self.name!r}: jt.figure's {field} names {', '.join(map(repr, unknown))}, "
                                     f"not a grid parameter{' or the axis' if field == 'x' and axis else ''} (the "
                                     f"grid's: {', '.join(sorted(self.full))})")
        names = validation.names(self.name, "censored", self.censored)
        for name in names:
            if not name.isidentifier() or name.endswith("_censored"):
                raise ValueError(f"study {self.name!r}: censored names outputs (the trial then returns NAME and "
                                 f"NAME_censored), got {name!r}")
            if name in self.full or (self.axis is not None and name == self.axis.name):
                raise ValueError(f"study {self.name!r}: censored {name!r} is a grid parameter or the axis, not an "
                                 f"output")
        if len(set(names)) != len(names):
            raise ValueError(f"study {self.name!r}: censored names an output twice: {list(names)}")
        object.__setattr__(self, "censored", names)

    def _check_names(self):
        """ValueError naming the field whose names are not the grid's parameters, or that contradict."""
        meanings = self.meanings
        if not isinstance(meanings, dict) or not all(isinstance(v, str) for v in meanings.values()):
            raise ValueError(f"study {self.name!r}: meanings must map names to strings (what each means)")
        knobs = self.compile
        for field, names in (("static", self.static), ("shared", self.shared), ("compile.uniform", knobs.uniform),
                             ("compile.bounds", knobs.bounds), ("compile.choices", knobs.choices),
                             ("compile.branches", knobs.branches), ("compile.buckets", knobs.buckets)):
            unknown = sorted(set(validation.names(self.name, field, names)) - set(self.full))
            if unknown:
                raise ValueError(f"study {self.name!r}: {field} names {unknown}, which are not grid parameters "
                                 f"(the grid's: {', '.join(sorted(self.full))})")
        overlap = set(self.static) & (set(knobs.uniform) | set(knobs.bounds))
        if overlap:
            raise ValueError(f"study {self.name!r}: static and compile.uniform / compile.bounds: {sorted(overlap)} "
                             f"cannot be both static and traced (a string parameter not in compile.choices is static)")
        if not isinstance(knobs.level_loop, bool):
            try:
                checks.integer("compile.level_loop", knobs.level_loop, low=0)
            except ValueError as e:
                raise ValueError(f"study {self.name!r}: {e}") from None
        if set(knobs.branches) - set(self.static):
            raise ValueError(f"study {self.name!r}: compile.branches {sorted(set(knobs.branches) - set(self.static))} "
                             f"must be static")
        if set(knobs.buckets) - set(knobs.choices):
            raise ValueError(f"study {self.name!r}: compile.buckets {sorted(set(knobs.buckets) - set(knobs.choices))} "
                             f"must be choices")

    @property
    def quick(self) -> dict:
        """The ``--quick`` grid."""
        return self.grid[0]

    @property
    def full(self) -> dict:
        """The full grid."""
        return self.grid[1]

    @property
    def description(self) -> str:
        """The first paragraph of the trial's docstring, on one line ("" where it has none)."""
        return _first_paragraph(inspect.getdoc(self.trial))

    @property
    def parameters(self) -> dict:
        """The :attr:`meanings` of grid parameters."""
        return {name: text for name, text in self.meanings.items() if name in self.full}

    @property
    def columns(self) -> dict:
        """The :attr:`meanings` of the rest: the axis and the trial's outputs."""
        return {name: text for name, text in self.meanings.items() if name not in self.full}

    def meaning(self, name: str) -> str | None:
        """What parameter ``name`` means: the study's ``meanings`` entry, else :data:`PARAMETER_MEANINGS`'."""
        return self.parameters.get(name, PARAMETER_MEANINGS.get(name))

    @property
    def check_cell(self) -> Callable | None:
        """``check(params)`` of a cell (``check``, or ``check.cell`` of a :class:`Checks`)."""
        return self.check.cell if isinstance(self.check, Checks) else self.check

    @property
    def invariants(self) -> Callable | None:
        """``invariants(rows) -> {statement: bool per row}`` (``check.rows`` of a :class:`Checks`; else None)."""
        return self.check.rows if isinstance(self.check, Checks) else None

    def declaration(self) -> dict:
        """What decides the rows besides the code and the grid's values (JSON): the parameters' names, the
        static, shared and axis names and the compile knobs that change programs (functions by name); the
        censored outputs where there are any (not ``plot`` or ``condition``: presentation only)."""
        knobs = self.compile
        return {"parameters": sorted(self.full), "static": sorted(self.static), "shared": sorted(self.shared),
                "axis": None if self.axis is None else self.axis.name, "uniform": sorted(knobs.uniform),
                "bounds": sorted(knobs.bounds), "choices": {k: list(v) for k, v in sorted(knobs.choices.items())},
                "buckets": {name: {value: _jsonable(bucket(value)) for value in knobs.choices[name]}
                            for name, bucket in sorted(knobs.buckets.items())},
                "branches": list(knobs.branches), "cpu_opt_level": knobs.cpu_opt_level,
                "level_loop": knobs.level_loop, **{name: _qualified(getattr(knobs, name)) for name in (
                    "after", "bytes_per_trial", "working_set_per_trial")},
                **({"censored": sorted(self.censored)} if self.censored else {})}

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

    def programs(self, config) -> list[dict]:
        """The static values of every program ``config`` (a :class:`~jaxtrees.experiments.study.config.Config`)
        compiles (one per static group), in run order."""
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


def _knob(name: str) -> property:
    """A read-only property: the study's ``compile.<name>``."""
    return property(lambda study: getattr(study.compile, name), doc=f"``compile.{name}`` (:class:`Compile`).")


for _name in COMPILE_KNOBS:  # study.bounds, study.level_loop, ...: read-only, from study.compile
    setattr(Study, _name, _knob(_name))
del _name


def _figure_spec(value) -> bool:
    """Whether ``value`` is a figure spec (``jt.figure(...)``: not callable, with ``x``, ``hue`` and ``col``)."""
    return value is not None and not callable(value) and all(hasattr(value, a) for a in ("x", "hue", "col"))


def _first_paragraph(doc: str | None) -> str:
    """The first paragraph of ``doc``, its lines joined into one ("" for None)."""
    paragraph = re.split(r"\n\s*\n", (doc or "").strip())[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def _qualified(function) -> str | None:
    """``module.qualname`` of ``function`` (a functools.partial's function's), None for None."""
    if function is None:
        return None
    function = getattr(function, "func", function)
    return f"{getattr(function, '__module__', None)}.{getattr(function, '__qualname__', type(function).__qualname__)}"


def _jsonable(value):
    """``value`` where JSON holds it as it is, else its repr."""
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


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


def trial_key(seed: int, cell: dict, replicate, study: Study | None = None):
    """The key of one trial (:meth:`Study.trial_key`; h = cell_hash(cell) when no ``study`` is given)."""
    h = cell_hash(cell) if study is None else study.key_hash(cell)
    return _fold(seed, h, replicate)


def _fold(seed: int, h, replicate):
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), h), replicate)


def cell_hash(cell: dict) -> int:
    """A 31-bit hash of the cell's parameter values (stable across runs, machines and grids)."""
    return zlib.crc32(json.dumps(cell, sort_keys=True).encode()) & 0x7FFFFFFF

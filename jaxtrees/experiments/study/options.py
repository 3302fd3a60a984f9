"""What a study declares beside its grid and trial: its :class:`Axis`, its :class:`Compile` knobs and its
:class:`Checks`; :class:`~jaxtrees.experiments.study.declaration.Study` holds them."""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple


class Axis(NamedTuple):
    """What a trial's outputs run along: one row per value of ``values(cell)`` in column ``name``."""

    name: str
    values: Callable


@dataclasses.dataclass(frozen=True)
class Compile:
    """How a study's trials are compiled: which cells share a program and how, compiler options, memory.

    Attributes:
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
      bytes_per_trial: optional ``bytes_per_trial(params)``, the device memory one trial of a
        cell needs at its peak; the default chunk then keeps a device under the runner's
        ``MEMORY_BUDGET``.
      working_set_per_trial: optional ``working_set_per_trial(params)``, the bytes one trial
        sweeps again and again (e.g. float rows of its sample, round after round); on a CPU the
        runner then vmaps fewer trials together, so that a group's sweeps stay in cache
        (``CPU_CACHE_BUDGET``).
    """

    uniform: tuple = ()
    bounds: tuple = ()
    choices: dict = dataclasses.field(default_factory=dict)
    buckets: dict = dataclasses.field(default_factory=dict)
    branches: tuple = ()
    after: Callable | None = None
    cpu_opt_level: int | None = None
    level_loop: bool | int = True
    bytes_per_trial: Callable | None = None
    working_set_per_trial: Callable | None = None


#: The :class:`Compile` knobs a :class:`Study` reads as its own attributes (``study.bounds``, ...).
COMPILE_KNOBS = tuple(f.name for f in dataclasses.fields(Compile))


@dataclasses.dataclass(frozen=True)
class Checks:
    """A study's checks: ``cell(params)`` raises ValueError for a bad cell before any heavy work; ``rows(rows) ->
    {statement: bool array, True where it holds}`` states the rows' invariants (e.g.
    :func:`~jaxtrees.experiments.study.trials.exact_invariants`), whose breach the figures and report refuse, naming it."""

    cell: Callable | None = None
    rows: Callable | None = None

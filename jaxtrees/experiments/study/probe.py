"""A study checked against its grid before the first trial (:func:`probe`): the trial traced, never run.

Per program (static group) the trial is evaluated abstractly (``jax.eval_shape``) with its traced parameters traced,
as the runner traces it (outputs: a dict of numeric or boolean arrays of one row, or one per axis value, named by
strings that no id column, grid parameter or axis takes; a traced value within int32's or float32's range; a value
that must be a Python one), then with them concrete at the grid's smallest and at its largest values, so that the
building blocks' range checks (:class:`~jaxtrees.core.checks.OutOfRange`) fire. Each fault is one :class:`StudyError`
sentence in the study's terms (the parameter, its value, the allowed range, ``Study(static=...)``, the trial's
file:line and cell); the original exception is its ``__cause__``. Nothing is written and nothing runs.
"""

from __future__ import annotations

import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.core import censored, checks
from jaxtrees.experiments.study.config import ID_COLUMNS, Config
from jaxtrees.experiments.study.declaration import Study

#: The study objects and configs :func:`probe` passed (a second call for them is free).
_PASSED: dict = {}


class StudyError(ValueError):
    """What :func:`probe` found wrong, in one sentence or paragraph (the exception behind it: ``__cause__``)."""


class _Refused(Exception):
    """The trial's outputs refused inside the evaluation (not a dict, an output not an array)."""


def probe(study: Study, config: Config) -> None:
    """Raise :class:`StudyError` unless every program of ``config`` traces: the trial returns a dict of numeric or
    boolean outputs of the runner's shapes, reads only grid parameters, takes its traced ones traced, and the
    building blocks accept the grid's extreme values. Two traces per program (three for the first), none run."""
    memo = (id(study), json.dumps(config.as_json(), sort_keys=True, default=str))
    if _PASSED.get(memo) is study:
        return
    cells = config.cells()
    for index, members in enumerate(study.static_groups(cells)):
        _program(study, config, [cells[i] for i in members], traced_too=index == 0)
    _PASSED[memo] = study


def _program(study: Study, config: Config, cells: list[dict], traced_too: bool) -> None:
    """The probes of one program: traced (``traced_too``: the first program), then concrete at the traced parameters'
    minima and at their maxima (once where they have one value each); the outputs of each checked."""
    static = study.program(cells)
    base = {name: value for name, value in static.items() if name != "branches"}
    if "branches" in static:
        base.update(zip(study.branches, static["branches"][0]))
    traced = {name: _traced_values(study, static, name, [c[name] for c in cells])
              for name in sorted(config.grid) if name not in base}
    cell = {**cells[0], **{name: c for name, c in base.items() if name in config.grid}}
    if traced_too or not traced:
        _outputs(study, cell, _evaluate(study, base, traced, cell, {}))
    numeric = {name: values for name, values in traced.items() if name not in study.choices}
    for at in (0, -1) if numeric else ():
        if at == -1 and all(values[0] == values[-1] for values in numeric.values()):
            break
        concrete = {name: values[at] for name, values in numeric.items()}
        at_cell = {**cell, **{name: value[0] for name, value in concrete.items()}}
        _outputs(study, at_cell, _evaluate(study, base, traced, at_cell, concrete))


def _traced_values(study: Study, static: dict, name: str, values: list) -> list:
    """``[(grid value, the value the trial sees)]`` of a traced parameter, sorted: int32 where every value is an int or
    bool, float32 otherwise, a choice's index in the program's ``name_choices`` (as the runner passes them)."""
    distinct = sorted(set(values), key=lambda v: (str(type(v)), v))
    if name in study.choices:
        allowed = static[f"{name}_choices"]
        return [(v, np.int32(allowed.index(v))) for v in distinct]
    integer = all(isinstance(v, (int, np.integer)) for v in distinct)
    kind = np.int32 if integer else np.float32
    limit = int(np.iinfo(np.int32).max) if integer else float(np.finfo(np.float32).max)
    outside = [v for v in distinct if not -limit - integer <= v <= limit]
    if outside:
        raise StudyError(f"study {study.name}: grid parameter {name!r} = {outside[0]!r} is outside {kind.__name__}'s "
                         f"range [{-limit - integer:.10g}, {limit:.10g}], which a traced parameter takes: give values "
                         f"within it, or declare Study(static=({name!r}, ...)) to pass it as a Python value")
    ordered = sorted(distinct, key=float)
    twins = [(a, b) for a, b in zip(ordered, ordered[1:]) if kind(a) == kind(b)]
    if twins:  # two cells, two keys, one value seen by the trial
        raise StudyError(f"study {study.name}: grid parameter {name!r} lists {twins[0][0]!r} and {twins[0][1]!r}, "
                         f"which are one {kind.__name__} (the type a traced parameter takes), so their cells would "
                         f"run one value: give values that differ in {kind.__name__}, or declare "
                         f"Study(static=({name!r}, ...)) to pass them as Python values")
    return [(v, kind(v)) for v in distinct]


def _evaluate(study: Study, base: dict, traced: dict, cell: dict, concrete: dict):
    """:func:`_trace`, or the :class:`StudyError` naming its fault."""
    try:
        return _trace(study, base, traced, concrete)
    except StudyError:
        raise
    except Exception as e:  # noqa: BLE001 - every fault of the user's trial becomes one paragraph
        raise _explained(study, base, traced, cell, concrete, e) from e


def _trace(study: Study, base: dict, traced: dict, concrete: dict):
    """``jax.eval_shape`` of one trial (and ``after``): ``concrete`` parameters as values, the other traced ones
    abstract; the outputs' shapes."""
    fixed = {**base, **{name: value[1] for name, value in concrete.items()}}
    abstract = {name: values[0][1] for name, values in traced.items() if name not in concrete}
    unbranched = {name: value for name, value in fixed.items() if name not in study.branches}  # as the runner passes

    def one(key, dynamic):
        out = _arrays(study.trial(key, {**fixed, **dynamic}), study.censored)
        if study.after is not None:
            out = _arrays(study.after(key, {**unbranched, **dynamic}, out), study.censored)
        return out

    return jax.eval_shape(one, jax.eval_shape(lambda: jax.random.key(0)), abstract)  # an abstract key: nothing runs


def _arrays(out, declared=()) -> dict:
    """The trial's outputs as arrays (as the runner takes them: censored ones flattened), or :class:`_Refused`
    naming what is not."""
    if not isinstance(out, dict):
        raise _Refused(f"returned {type(out).__name__}, not a dict of outputs ({{name: array}})")
    for name in out:
        if not isinstance(name, str):
            raise _Refused(f"returns an output keyed {name!r} ({type(name).__name__}); output names are strings "
                           f"(they name the rows' columns): use {str(name)!r}")
        if not name.strip():
            raise _Refused(f"returns an output named {name!r}; an output's name names its column: give it a word")
    try:
        out = censored.flatten(out, declared)
    except ValueError as e:
        raise _Refused(str(e)) from None
    arrays = {}
    for name, value in out.items():
        if isinstance(value, (str, bytes, dict, list, tuple)) or value is None:
            raise _Refused(f"returned output {name!r} as {type(value).__name__}, not a numeric or boolean array")
        arrays[name] = jnp.asarray(value)
    return arrays


def _outputs(study: Study, cell: dict, shapes: dict) -> None:
    """Refuse outputs the rows cannot hold: a name of another column (an id, a grid parameter, the axis), complex
    or non-numeric dtypes, shapes other than one value per trial or one per axis value."""
    width = 1 if study.axis is None else len(list(study.axis.values(cell)))
    allowed = {(), (1,), (width,)}
    taken = {**{name: "an id column" for name in ID_COLUMNS}, **{name: "a grid parameter" for name in cell},
             **({study.axis.name: "the study's axis"} if study.axis is not None else {})}
    for name, shape in shapes.items():
        if name in taken:
            raise StudyError(f"study {study.name}: the trial ({_file(study)}) returns an output {name!r}, the name of "
                             f"{taken[name]} (a column every row already has): rename the output")
        kind = np.dtype(shape.dtype).kind if not jax.dtypes.issubdtype(shape.dtype, jax.dtypes.prng_key) else "key"
        if kind not in "biuf":
            cast = (f": return it as float32 ({name!r}: x.astype(jnp.float32))" if kind == "V" and
                    jax.dtypes.issubdtype(shape.dtype, np.floating) else "")  # bfloat16, float8: no Parquet type
            raise StudyError(f"study {study.name}: output {name!r} is {shape.dtype}; the rows hold numbers and "
                             f"booleans (float16/32/64, int, bool), not {shape.dtype}, complex numbers, strings or "
                             f"keys{cast}")
        if tuple(shape.shape) not in allowed:
            per = (f"a scalar or one value per {study.axis.name} value (shape ({width},))" if study.axis is not None
                   else "a scalar (a study without an axis has one row per trial)")
            raise StudyError(f"study {study.name}: output {name!r} has shape {tuple(shape.shape)} per trial; each "
                             f"output must be {per}")


def _explained(study: Study, base: dict, traced: dict, cell: dict, concrete: dict, e: Exception) -> StudyError:
    """``e`` (raised by the trial or a building block it called) as one sentence in the study's terms."""
    where, block = _located(study, e)
    at = f" (in the cell {_cell(cell)})"
    if isinstance(e, _Refused):
        return StudyError(f"study {study.name}: the trial ({_file(study)}) {e}")
    if isinstance(e, KeyError) and e.args and isinstance(e.args[0], str) and e.args[0] not in cell \
            and e.args[0] not in base:
        return StudyError(f"study {study.name}: the trial reads params[{e.args[0]!r}] at {where}, a parameter the "
                          f"grid does not define (the grid's: {', '.join(sorted(cell))}); add it to the grid")
    if isinstance(e, checks.OutOfRange):
        name = _culprit(e, cell, concrete)
        whose = f"{block}'s {e.name}" if block else e.name
        if name is not None:
            return StudyError(f"study {study.name}: {name} = {cell[name]!r} is outside {e.interval} ({whose})")
        return StudyError(f"study {study.name}: {e} ({whose}, at {where}){at}")
    name = _needs_static(study, base, traced, e) if not concrete and not isinstance(e, checks.OutOfRange) else None
    concretization = (checks.NeedsConcrete, jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError)
    if name is not None or isinstance(e, concretization):
        need = f"{block} needs `{e.name}`" if isinstance(e, checks.NeedsConcrete) and block else None
        if name is None:
            return StudyError(f"study {study.name}: {need or 'the trial needs'} a Python value at {where} (it sets a "
                              f"shape or a loop, or is range-checked), but it is traced: declare the parameters it "
                              f"comes from in Study(static=(...)) (traced: {', '.join(traced)})")
        what = need or f"the trial needs `{name}`"
        source = "" if what.endswith(f"`{name}`") else f" (from `{name}`)"
        return StudyError(f"study {study.name}: {what}{source} as a Python value (it sets a shape or a loop, or is "
                          f'range-checked) at {where}: declare Study(static=("{name}", ...))')
    if isinstance(e, ValueError):
        return StudyError(f"study {study.name}: {e} ({block + ', ' if block else ''}at {where}){at}")
    return StudyError(f"study {study.name}: the trial raised {type(e).__name__}: {e} at {where}{at}; "
                      f"`jaxtrees run ... --debug` shows the full traceback")


def _culprit(e: checks.OutOfRange, cell: dict, concrete: dict) -> str | None:
    """The grid parameter whose value the building block refused: its name, else its value (traced ones first)."""
    if e.name in cell:
        return e.name
    for name in [*concrete, *cell]:
        value = cell[name]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and isinstance(e.value, (int, float)) \
                and np.isclose(float(value), float(e.value), rtol=1e-6, atol=1e-7):
            return name
    return None


def _needs_static(study: Study, base: dict, traced: dict, e: Exception) -> str | None:
    """The traced parameter the trial needs as a Python value: the first (the error's name first, where it is one)
    whose being concrete makes the trace pass or fail otherwise; None where none does (a fault of another kind)."""
    name = getattr(e, "name", None)
    candidates = ([name] if name in traced else []) + [n for n in traced if n != name and n not in study.choices]
    for candidate in candidates:
        try:
            _trace(study, base, traced, {candidate: traced[candidate][0]})
        except Exception as again:  # noqa: BLE001 - the same fault: not this parameter
            if type(again) is type(e) or isinstance(again, StudyError):
                continue
        return candidate
    return None


def _located(study: Study, e: Exception) -> tuple[str, str | None]:
    """``(file:line, building block)``: the innermost frame of the trial's file in ``e``'s traceback, and the
    function it called there (``jt.NAME`` where jaxtrees exports it), None where the trial raised itself."""
    trial_file = _file(study)
    frames, tb = [], e.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    inner = max((i for i, f in enumerate(frames) if os.path.abspath(f.f_code.co_filename) == trial_file), default=None)
    if inner is None:
        return trial_file, None
    where = f"{trial_file}:{_line(e.__traceback__, inner)}"
    callee = frames[inner + 1] if inner + 1 < len(frames) else None
    if callee is None or "jaxtrees" not in callee.f_code.co_filename:
        return where, None
    qualname = callee.f_code.co_qualname.rpartition(".<locals>")[0] or callee.f_code.co_qualname
    head = qualname.split(".")[0]
    qualname = head if head[:1].isupper() else qualname  # a method: its class (jt.distributions.Smoothed)
    facade = sys.modules.get("jaxtrees")  # loaded (this module is in it): what it exports is jt.NAME
    if getattr(facade, head, None) is not None:
        return where, f"jt.{qualname}"
    module = callee.f_globals.get("__name__", "").rpartition(".")[2]
    return where, f"jt.{module}.{qualname}" if getattr(facade, module, None) is not None else qualname


def _line(tb, index: int) -> int:
    for _ in range(index):
        tb = tb.tb_next
    return tb.tb_lineno


def _file(study: Study) -> str:
    code = getattr(getattr(study.trial, "func", study.trial), "__code__", None)
    return os.path.abspath(code.co_filename) if code is not None else repr(study.trial)


def _cell(cell: dict) -> str:
    return ", ".join(f"{name}={value}" for name, value in sorted(cell.items()))

"""Censored outputs: a value that was not reached within a budget (steps to learn, examples to succeed).

A trial returns ``{"steps": Censored(value, censored)}`` (or a sentinel, -1, for an output the study declares
censored: ``Study(censored=("steps",))``); the runner writes it as two columns, ``steps`` and
``steps_censored`` (:func:`flatten`), and the generic report and figure read such a pair as right-censored: the
censored share and censoring-aware quantiles (Kaplan-Meier), never a mean. ``value`` of a censored trial is its
budget (the trial ran that long without reaching the event).

>>> import jax.numpy as jnp
>>> out = flatten({"steps": Censored(jnp.int32(200), jnp.bool_(True)), "error": jnp.float32(0.1)})
>>> sorted(out), int(out["steps"]), bool(out["steps_censored"])
(['error', 'steps', 'steps_censored'], 200, True)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp

#: The column beside a censored output NAME: ``NAME`` + SUFFIX (bool, True where the budget ran out).
SUFFIX = "_censored"


class Censored(NamedTuple):
    """A right-censored output: ``value`` (the event's time, or the budget where ``censored``) and ``censored`` (a
    bool; an integer is read as ``!= 0``, anything else refused)."""

    value: Any
    censored: Any


def flatten(outputs: dict, declared=()) -> dict:
    """``outputs`` with each :class:`Censored` entry NAME written as NAME (its value) and NAME_censored (bool); a
    ``declared`` name given as a plain value is censored where it is negative or NaN (a sentinel such as -1).
    ValueError where a trial's own output already takes the name NAME_censored, or where a flag is not a bool or an
    integer (:func:`_flag`)."""
    out = {}
    for name, value in outputs.items():
        if name in declared and not isinstance(value, Censored):
            value = Censored(value, ~(jnp.asarray(value) >= 0))
        if isinstance(value, Censored):
            if name + SUFFIX in outputs:
                raise ValueError(f"the trial returns both a censored output {name!r} and an output "
                                 f"{name + SUFFIX!r}: rename one")
            out[name], out[name + SUFFIX] = value.value, _flag(name, value.censored)
        else:
            out[name] = value
    return out


def _flag(name: str, flag):
    """``flag`` as a bool array: a bool as it is, an integer as ``flag != 0``; ValueError naming the output for
    anything else (a float flag would be averaged, or rounded, silently)."""
    given = flag
    try:
        flag = jnp.asarray(flag)
    except (TypeError, ValueError):
        flag = None
    kind = None if flag is None else jnp.dtype(flag.dtype).kind
    if kind == "b":
        return flag
    if kind in ("i", "u"):
        return flag != 0
    what = f"a {type(given).__name__}, not an array" if flag is None else f"{flag.dtype}"
    raise ValueError(f"output {name!r}: jt.Censored's `censored` is {what}; it must be a bool (True where the "
                     f"budget ran out) or an integer (read as != 0), e.g. Censored(steps, steps >= budget)")


def censored_names(columns) -> list[str]:
    """The censored outputs among ``columns`` (names): each NAME with a NAME_censored beside it."""
    names = set(columns)
    return [name for name in columns if name + SUFFIX in names]

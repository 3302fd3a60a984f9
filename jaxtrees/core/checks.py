"""Input validation shared by the public API.

Every check runs on concrete (host) values before any tracing or heavy work and raises
``ValueError`` naming the parameter and its allowed range (an :class:`OutOfRange`, which carries them; a traced
value where a Python one is needed: a :class:`NeedsConcrete`). Values that are JAX tracers (a user
vmapping over a constructor) cannot be inspected and are passed through unchecked.
"""

from __future__ import annotations

import numbers

import jax
import numpy as np


class OutOfRange(ValueError):
    """A value outside its declared range: ``name``, the bad ``value`` and the ``interval`` (e.g. "[0, 0.5]")."""

    def __init__(self, message: str, name: str, value, interval: str):
        super().__init__(message)
        self.name, self.value, self.interval = name, value, interval


class NeedsConcrete(ValueError):
    """A traced value where a plain Python one is needed (it fixes a shape, a loop, or is range-checked): ``name``."""

    def __init__(self, message: str, name: str):
        super().__init__(message)
        self.name = name


def is_concrete(x) -> bool:
    """True unless ``x`` (or a leaf of it) is a JAX tracer."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(x))


def _traced(name: str, value, kind: str) -> None:
    """Raise :class:`NeedsConcrete` when ``value`` is a JAX tracer where a plain Python number is required."""
    if isinstance(value, jax.core.Tracer):
        raise NeedsConcrete(f"{name} must be a plain Python {kind}, not a traced JAX value ({type(value).__name__}, "
                            f"as inside jax.jit or jax.vmap): {name} is read on the host before tracing, where it "
                            f"fixes an array shape, a loop or the compiled program, or is checked against its range; "
                            f"pass a Python {kind} from outside the traced function (a static argument: "
                            f"functools.partial, or jax.jit(..., static_argnames=...))", name)


def key(name: str, value):
    """Return ``value`` if it is a JAX PRNG key (``jax.random.key(seed)``, or a legacy ``uint32[2]``
    ``jax.random.PRNGKey``), else raise ValueError naming ``name`` and how to make one."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None and (jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
                              or (dtype == np.uint32 and np.shape(value)[-1:] == (2,))):
        return value
    raise ValueError(f"{name} must be a JAX PRNG key such as jax.random.key(0), got {_describe(value)}")


def _describe(value) -> str:
    """A short description of a wrong value: its type, and its dtype and shape for an array."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        return f"{type(value).__name__} {dtype}{list(np.shape(value))}"
    return f"{type(value).__name__} {value!r}"[:80]


def integer(name: str, value, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as a Python int in ``[low, high]`` or raise ``ValueError`` (a traced value: that a
    plain Python int is needed, and why)."""
    _traced(name, value, "int")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        interval = _interval(low, high, False, False)
        raise OutOfRange(f"{name} must be in {interval}, got {value}", name, value, interval)
    return value


def real(name: str, value, *, low=None, high=None, low_open=False, high_open=False) -> float:
    """Return ``value`` as a float in the given (half-)open interval or raise ``ValueError`` (a traced value:
    that a plain Python number is needed, and why)."""
    _traced(name, value, "number")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or _outside(value, low, high, low_open, high_open):
        interval = _interval(low, high, low_open, high_open)
        raise OutOfRange(f"{name} must be in {interval}, got {value}", name, value, interval)
    return value


def probabilities(name: str, values, *, low=0.0, high=1.0, low_open=False, high_open=False):
    """Check a 1-d array of probabilities lies in the interval; return it as float32 (unchanged if traced)."""
    if not is_concrete(values):
        return values
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d array, got shape {arr.shape}")
    bad = ~np.isfinite(arr) | _outside(arr, low, high, low_open, high_open)
    if bad.any():
        i = int(np.argmax(bad))
        interval = _interval(low, high, low_open, high_open)
        raise OutOfRange(f"{name} must lie in {interval}; {name}[{i}] = {float(arr[i])!r}", name, float(arr[i]),
                         interval)
    return np.asarray(arr, dtype=np.float32)


def nonnegative(name: str, values) -> None:
    """Raise ValueError naming the first entry of ``values`` that is negative or not finite
    (nothing to check when traced)."""
    if not is_concrete(values):
        return
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name} must be finite and >= 0; {name}[{i}] = {float(arr[i])!r}")


def same_n(name: str, n: int, target, other: str = "the target") -> None:
    """Raise ValueError unless ``target`` reads only variables in [0, n), where ``n`` is the number
    of variables of ``name`` (e.g. the length of p). Cheap, and at trace time under jit where the
    target's shapes fix its n (a mask ``bool[n]``; an addressing function's ``n``); otherwise from
    the indices it reads (a support, tree features), when they are concrete."""
    mask = getattr(target, "mask", None)
    if mask is not None and np.shape(mask)[-1] != n:
        raise ValueError(f"{name} and {other} must have the same n: {name} has n = {n}, {other} is over "
                         f"n = {np.shape(mask)[-1]} variables")
    need = getattr(target, "n", None)
    if isinstance(need, int) and need > n:
        raise ValueError(f"{name} and {other} must have the same n: {name} has n = {n}, {other} reads "
                         f"n = {need} variables")
    tree = getattr(target, "tree", None)
    for indices in (getattr(target, "support", None), getattr(target, "feature", None), getattr(tree, "feature", None)):
        if indices is not None and is_concrete(indices):
            used = int(np.max(np.asarray(indices), initial=-1))
            if used >= n:
                raise ValueError(f"{name} and {other} must have the same n: {name} has n = {n}, {other} reads "
                                 f"variable {used}")


def choice(name: str, value, allowed) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}, got {value!r}")
    return value


def _outside(v, low, high, low_open, high_open):
    out = np.zeros(np.shape(v), dtype=bool)
    if low is not None:
        out |= (v <= low) if low_open else (v < low)
    if high is not None:
        out |= (v >= high) if high_open else (v > high)
    return out


def _interval(low, high, low_open, high_open) -> str:
    lo = "-inf" if low is None else _fmt(low)
    hi = "inf" if high is None else _fmt(high)
    return f"{'(' if low_open else '['}{lo}, {hi}{')' if high_open else ']'}"


def _fmt(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)

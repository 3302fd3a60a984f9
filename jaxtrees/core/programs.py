"""Compiled programs held by the process: count what they cost, release them.

Every program XLA:CPU compiles stays mapped while a jit cache holds it (about three memory maps
per kernel), and a module-level ``jax.jit`` holds its programs for the life of the process, so a
process compiling a few hundred programs reaches the kernel's limit on maps and XLA's compiler
segfaults. :func:`release` drops every cached program; :func:`release_if_crowded` does so only
past a share of the limit, so that a long process (a notebook, a sweep over shapes, the test
suite in one process) keeps a bounded number of programs.

>>> from jaxtrees.core import programs
>>> programs.release_if_crowded(max_maps=10**9)  # far from the limit: nothing released
False
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys

# What a program costs: three memory maps per kernel (code, constants, data); a depth-3
# jaxtrees.grow (~52 kernels) costs ~156 maps and ~8 MB of resident memory. JAX keeps an
# executable as long as its jit cache entry lives, one entry per shape and static argument, and for
# a function that lives as long as the process (jaxtrees.grow, a module-level jax.jit(f) in a script
# or a test) that is the life of the process. Past vm.max_map_count (65,530 by default) the next
# mmap in XLA's compiler fails and the process dies with a segmentation fault (the test suite in
# one process did at 64,788 maps and 6.1 GB). release() gives the maps back at once and the heap
# the programs used is reused by later compiles; programs still referenced (a jax.stages.Compiled
# you hold) stay.

#: Caches (``functools.lru_cache``) in jaxtrees whose values are jitted functions; cleared by :func:`release`.
_CACHES: list = []

#: :func:`release_if_crowded` releases past this share of ``vm.max_map_count``.
MAP_SHARE = 0.25

#: Used where /proc/sys/vm/max_map_count cannot be read.
DEFAULT_MAP_LIMIT = 65530


#: XLA's GPU fusion autotuner (on by default in recent jaxlibs) compiles every reduce and transpose
#: fusion once more through the Triton block-level emitter and times both; jaxtrees' programs have
#: hundreds of reductions, some with a whole Threefry hash fused in, and those Triton compiles take
#: minutes (docs/benchmarks.md). Off in :func:`compiler_options`: the native emitter, as before.
FUSION_AUTOTUNER = "xla_gpu_experimental_enable_fusion_autotuner"


def compiler_options(device=None) -> dict | None:
    """XLA options for jaxtrees' programs on ``device`` (default: JAX's first): on a GPU the fusion
    autotuner off (``FUSION_AUTOTUNER``), unless XLA_FLAGS names it or this XLA lacks it; else None.

    Pass to ``jax.jit(f, compiler_options=...)`` or ``lowered.compile(...)``. The autotuner picks
    kernels by timing, so floats may round differently from a program compiled with it on; the
    study runner keeps a resumed run's first options (``jaxtrees.experiments.run.runner``).
    """
    import jax

    device = jax.devices()[0] if device is None else device
    if device.platform != "gpu" or FUSION_AUTOTUNER in os.environ.get("XLA_FLAGS", ""):
        return None
    options = {FUSION_AUTOTUNER: False}
    return options if _accepted(tuple(options.items())) else None


_defaults = compiler_options  # for jit, whose keyword takes the name


def jit(fun, *, compiler_options=None, **kwargs):
    """``jax.jit(fun, **kwargs)`` compiled with :func:`compiler_options` (``compiler_options``: more, or
    overriding), as the study runner compiles."""
    import jax

    options = {**(_defaults() or {}), **(compiler_options or {})}
    return jax.jit(fun, compiler_options=options or None, **kwargs)


#: Options :func:`_accepted` has settled: tuple of (name, value) -> whether this XLA knows them.
_ACCEPTED: dict = {}


def _accepted(options: tuple) -> bool:
    """Whether the default backend's XLA knows ``options`` (a trivial program compiled with them). Only
    XLA's "No such compile option" is remembered as a no; another failure says no this time only."""
    import jax
    import jax.numpy as jnp

    if options not in _ACCEPTED:
        try:
            jax.jit(lambda x: x + 1).lower(jax.ShapeDtypeStruct((), jnp.int32)).compile(dict(options))
        except Exception as e:  # noqa: BLE001  (XLA raises its runtime error type)
            if "No such compile option" not in str(e):
                return False
            _ACCEPTED[options] = False
        else:
            _ACCEPTED[options] = True
    return _ACCEPTED[options]


def holds_programs(cached):
    """Register a ``functools.lru_cache``-wrapped function whose values hold compiled programs
    (jitted functions), so that :func:`release` clears it; returns it unchanged."""
    _CACHES.append(cached)
    return cached


def map_count() -> int | None:
    """Memory maps of this process (lines of /proc/self/maps); None where there is no /proc."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return None


def map_limit() -> int:
    """The kernel's per-process limit on memory maps (``vm.max_map_count``)."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return DEFAULT_MAP_LIMIT


def resident_bytes() -> int | None:
    """Resident memory of this process now (VmRSS); None where there is no /proc."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def release() -> None:
    """Drop every cached compiled program of this process (JAX's caches and jaxtrees'), collect
    garbage and hand freed heap back to the system (glibc)."""
    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
    for cached in _CACHES:
        cached.cache_clear()
    gc.collect()
    _trim()


def crowded(max_maps: int | None = None, max_resident: int | None = None) -> bool:
    """Whether this process holds more than ``max_maps`` memory maps (default ``MAP_SHARE`` of
    ``vm.max_map_count``) or more than ``max_resident`` bytes of resident memory (default: no bound)."""
    maps = map_count()
    limit = int(MAP_SHARE * map_limit()) if max_maps is None else max_maps
    if maps is not None and maps > limit:
        return True
    resident = None if max_resident is None else resident_bytes()
    return resident is not None and resident > max_resident


def release_if_crowded(max_maps: int | None = None, max_resident: int | None = None) -> bool:
    """:func:`release` if :func:`crowded` (same arguments); returns whether it released."""
    if crowded(max_maps, max_resident):
        release()
        return True
    return False


def _trim() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass

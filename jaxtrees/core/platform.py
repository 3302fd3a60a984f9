"""Platform setup before JAX starts its backend: CPU devices and vector width.

:func:`split_cpu` makes one JAX CPU device per core and :func:`wide_vectors` asks XLA for 512-bit
vectors on a CPU with AVX-512, both through ``XLA_FLAGS``, so both must run before JAX starts its
backend (the first ``jax.devices()`` or computation; importing JAX does not start it). ``jaxtrees run``
calls both, and so do the benchmark scripts; the measured effect of each is in docs/benchmarks.md.
Neither changes a result: trials are keyed, and the arithmetic is byte-identical at any width.
"""

from __future__ import annotations

import os

__all__ = ["split_cpu", "wide_vectors"]


def split_cpu() -> None:
    """Split the CPU into one JAX device per core; call it before JAX starts its backend
    (``jaxtrees run`` and scripts/bench_gd.py do).

    ``--xla_force_host_platform_device_count``; ``$JAXTREES_CPU_DEVICES`` sets the count, 1 turns it off, and an
    XLA_FLAGS that already sets it wins. The runner's shard_map then keeps every core busy: XLA runs most of a trial's
    program on one thread per device. Results do not depend on it (trials are keyed). GPU and TPU runs are unaffected
    (the split only adds CPU devices, which the runner does not use when an accelerator is the default backend).
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" in flags:
        return  # the user's own split
    value = os.environ.get("JAXTREES_CPU_DEVICES", "").strip()
    if value:
        count = int(value) if value.isdigit() else 0
        if count < 1:
            raise ValueError(f"JAXTREES_CPU_DEVICES must be an integer >= 1 (1: one CPU device), got {value!r}")
    else:
        count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if count > 1:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()


def wide_vectors() -> None:
    """Ask XLA for 512-bit vectors on a CPU with AVX-512; call it before JAX starts its backend, as
    ``jaxtrees run`` and the benchmark scripts do.

    ``--xla_cpu_prefer_vector_width=512`` (XLA's default is 256): the tree engine's AND + popcount counting then runs on
    the wide registers; matmul-bound work (gradient descent, the Walsh-Hadamard transform) is unchanged, and results are
    byte-identical either way. ``$JAXTREES_CPU_VECTOR_WIDTH`` (128, 256 or 512) sets the width, and an XLA_FLAGS that
    already sets it wins.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_prefer_vector_width" in flags:
        return  # the user's own width
    value = os.environ.get("JAXTREES_CPU_VECTOR_WIDTH", "").strip()
    if value:
        if value not in ("128", "256", "512"):
            raise ValueError(f"JAXTREES_CPU_VECTOR_WIDTH must be 128, 256 or 512 (bits), got {value!r}")
        width = value
    else:
        width = "512" if _has_avx512() else None
    if width is not None:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_prefer_vector_width={width}".strip()


def _has_avx512() -> bool:
    """True if /proc/cpuinfo lists avx512f (Linux); False where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as fh:
            return any(line.startswith("flags") and " avx512f" in line for line in fh)
    except OSError:
        return False

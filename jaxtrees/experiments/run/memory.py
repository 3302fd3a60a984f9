"""Whether a study's programs fit the machine: its memory (:func:`available_memory`) against their estimated peak.

:func:`fits` refuses a program, before anything compiles, whose estimate exceeds :data:`MEMORY_SHARE` of what the
machine has, naming the largest ``--group`` that fits.
"""

from __future__ import annotations

__all__ = ["MEMORY_SHARE", "available_memory", "fits"]

#: The share of the memory a machine reports free (a device's limit) that a run's estimate may take.
MEMORY_SHARE = 0.8


def available_memory(device) -> int | None:
    """Bytes ``device`` can hold for a run: an accelerator's ``bytes_limit``; on a CPU the host's MemAvailable
    (/proc/meminfo), else None (unknown: no check)."""
    if device.platform != "cpu":
        stats = device.memory_stats() if hasattr(device, "memory_stats") else None
        limit = (stats or {}).get("bytes_limit")
        return int(limit) if limit else None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def fits(study: str, program: str, need: int, group: int, devices: list) -> None:
    """ValueError, before anything compiles, where a program's estimated peak (``need`` bytes per trial x its
    ``group`` vmapped trials, on every device of the host for a CPU) exceeds :data:`MEMORY_SHARE` of what the
    machine has, naming the estimate and the largest ``--group`` that fits (or that one trial does not)."""
    have = available_memory(devices[0])
    if have is None:
        return
    sharing = len(devices) if devices[0].platform == "cpu" else 1  # a CPU's devices share the host's memory
    peak, room = need * group * sharing, int(have * MEMORY_SHARE)
    if peak <= room:
        return
    where = "host memory available" if sharing > 1 or devices[0].platform == "cpu" else "device memory"
    largest = room // (need * sharing)
    gb = lambda b: f"{b / 2**30:,.1f} GB"  # noqa: E731
    advice = (f"rerun with --group {largest} (or fewer devices: JAXTREES_CPU_DEVICES)" if largest >= 1 else
              f"one trial alone needs {gb(need * sharing)}: choose smaller sizes (e.g. n or m_max)")
    raise ValueError(f"study {study}, program {program}: about {gb(peak)} at its peak ({gb(need)} per trial x "
                     f"{group} trials vmapped x {sharing} device(s)), more than {MEMORY_SHARE:.0%} of the "
                     f"{gb(have)} of {where}; {advice}")

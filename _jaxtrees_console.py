"""The ``jaxtrees`` command's entry point, outside the package so that it loads before JAX: Ctrl-C while jaxtrees and
JAX are imported (about a second) ends the command with one line and exit 130, not a traceback of the import; so
does too little memory to load them (exit 1)."""

import sys

#: The address space (``ulimit -v``) below which the command refuses to start: loading JAX and compiling a quick
#: study's program took 1.5-1.9 GB of it (2-core x86-64, jaxlib 0.10.2), and below that the failures are out of
#: Python's reach (glibc's "cannot allocate memory for thread-local data", XLA's std::bad_alloc in the process).
MIN_ADDRESS_SPACE_MB = 2048


def console() -> None:
    """Import :mod:`jaxtrees.cli` and run its ``console``; an interrupt during the import is one line, and so is an
    address space too small to load JAX in."""
    try:
        _address_space()
        from jaxtrees.cli import console as run
    except KeyboardInterrupt:
        print("jaxtrees: interrupted while loading", file=sys.stderr)
        raise SystemExit(130) from None
    except (ImportError, MemoryError) as e:  # a library that cannot be mapped: out of (address) space
        if not isinstance(e, MemoryError) and "failed to map segment" not in str(e):
            raise
        print(f"jaxtrees: error: out of memory while loading jaxtrees, JAX and their libraries ({e})", file=sys.stderr)
        raise SystemExit(1) from None
    run()


def _address_space() -> None:
    """SystemExit(1) with one line where ``ulimit -v`` leaves less than :data:`MIN_ADDRESS_SPACE_MB` (read here, not
    through ``jaxtrees.experiments.run.workers.address_limit``: this runs before the package is imported)."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY and limit < MIN_ADDRESS_SPACE_MB * 2**20:
        print(f"jaxtrees: error: the address space is limited to {limit // 2**20:,} MB (ulimit -v); loading JAX and "
              f"compiling a program needs at least {MIN_ADDRESS_SPACE_MB:,} MB: raise the limit (ulimit -v "
              f"{MIN_ADDRESS_SPACE_MB * 1024} or more)", file=sys.stderr)
        raise SystemExit(1)

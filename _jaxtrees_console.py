"""The ``jaxtrees`` command's entry point, outside the package so that it loads before JAX: Ctrl-C while jaxtrees and
JAX are imported (about a second) ends the command with one line and exit 130, not a traceback of the import."""

import sys


def console() -> None:
    """Import :mod:`jaxtrees.cli` and run its ``console``; an interrupt during the import is one line."""
    try:
        from jaxtrees.cli import console as run
    except KeyboardInterrupt:
        print("jaxtrees: interrupted while loading", file=sys.stderr)
        raise SystemExit(130) from None
    run()

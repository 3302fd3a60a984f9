"""A results directory's files written whole and durably, and its JSON metadata read back.

:func:`write_atomic` and :func:`atomically` write through a temporary, fsync and rename (then
:func:`fsync_directory`); :func:`read_json` reads ``metadata.json`` or ``rows/_config.json``; :func:`part_names`
lists the Parquet parts of ``rows/``.
"""

from __future__ import annotations

import json
import os


def write_atomic(path: str, data, mode: str = "w"):
    """Write ``path`` through a temporary file, fsync, rename and a directory fsync: readers see the
    old or the new contents, and a crash after the call loses neither."""
    atomically(path, lambda fh: fh.write(data), mode)


def atomically(path: str, write, mode: str = "wb"):
    """``write(file)`` into a temporary beside ``path``, fsync, rename, directory fsync; the temporary removed on
    any failure."""
    tmp = f"{path}.p{os.getpid()}.tmp"
    try:
        with open(tmp, mode, **({"newline": ""} if "b" not in mode else {})) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def fsync_directory(path: str):
    """fsync a directory, so that a rename into it survives a crash (a no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_json(path: str, rebuildable: bool = False):
    """The JSON object in ``path``, None if there is no such file (or, where ``rebuildable``, if it is
    damaged: the caller rebuilds it); else ValueError naming it."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8-sig") as fh:  # a byte-order mark (a spreadsheet or editor's) is read past
            value = json.load(fh)
        if not isinstance(value, dict) or not isinstance(value.get("config"), dict):
            raise ValueError("not a jaxtrees metadata object")
    except (OSError, ValueError) as e:
        if rebuildable:
            return None
        other = "metadata.json" if path.endswith("_config.json") else "rows/_config.json"
        raise ValueError(f"cannot read {path} ({e}) and no {other} to rebuild it from; choose another --out, or "
                         f"delete the results directory to start over") from None
    return value


def part_names(rows_dir: str) -> list[str]:
    """The parts (``part-*.parquet``) in ``rows_dir``, in name (writing) order."""
    if not os.path.isdir(rows_dir):
        return []
    return sorted(n for n in os.listdir(rows_dir) if n.startswith("part-") and n.endswith(".parquet"))

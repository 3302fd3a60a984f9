"""Where a run's rows live: ``OUT/STUDY/``, written so that nothing is lost or doubled.

- ``metadata.json``: the configuration, when it was created, and one entry per run (start, end,
  environment: versions, git commit, host, devices, command line).
- ``parts/*.csv``: one file per finished chunk, written to a temporary name and renamed, so a
  killed run leaves only whole chunks; a rerun skips the trials found there (resumption).
- ``results.csv``: every row, sorted, one header, once every trial is done.
- ``.lock-P``: held (``fcntl.flock``) by the run of process index P while it writes, naming its
  host and pid; a second run into the same directory is refused, and the lock dies with its
  process (kill -9 included), so a stale lock file never blocks.

Several processes (``jax.distributed``, one per host): each writes its own parts and temporaries
(``*.pP-PID.tmp``, removed only by process P), and process 0 alone writes ``metadata.json`` and
``results.csv``.

>>> import tempfile
>>> store = Store(tempfile.mkdtemp(), "demo")
>>> store.read_parts()
[]
"""

from __future__ import annotations

import csv
import datetime
import fcntl
import io
import json
import os
import platform
import subprocess
import sys
import time
import uuid

import jax
import numpy as np

class Store:
    """The results directory ``out/name``: metadata, parts, results and the writer's lock."""

    def __init__(self, out: str, name: str):
        self.directory = os.path.join(out, name)
        self.parts = os.path.join(self.directory, "parts")
        self.metadata_path = os.path.join(self.directory, "metadata.json")
        self.results_path = os.path.join(self.directory, "results.csv")
        self._lock = None
        self.process = jax.process_index()

    def open(self, config: dict) -> dict:
        """Create the directory, take the writer's lock, remove a killed run's temporaries and
        return the metadata (new, or the existing one if it holds the same ``config``).

        Raises ValueError if ``out`` cannot hold the directory, if another run holds the lock,
        or if the directory holds a run of another configuration."""
        try:
            os.makedirs(self.parts, exist_ok=True)
            lock = open(os.path.join(self.directory, f".lock-{self.process}"), "a+")
        except OSError as e:
            raise ValueError(f"out: cannot write the results directory {self.directory}: {e.strerror}") from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            lock.close()
            raise ValueError(f"another run ({holder}) is writing into {self.directory}; wait for it to finish "
                             f"(rerunning then resumes) or choose another --out") from None
        lock.truncate(0)
        lock.write(f"host {platform.node()}, pid {os.getpid()}\n")
        lock.flush()
        self._lock = lock
        mine = f".p{self.process}-"
        for folder in (self.directory, self.parts):
            for name in os.listdir(folder):
                if name.endswith(".tmp") and mine in name:  # another process's temporaries are its own
                    os.remove(os.path.join(folder, name))
        metadata = _read_json(self.metadata_path)
        if metadata is not None and metadata["config"] != json.loads(json.dumps(config)):
            self.close()
            raise ValueError(f"{self.directory} holds a run of another configuration (see its metadata.json); "
                             f"choose another --out or delete it")
        return metadata or {"config": config, "created": now(), "runs": []}

    def close(self):
        """Release the writer's lock."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def write_metadata(self, metadata: dict):
        """``metadata.json`` (process 0 only: one writer however many processes run)."""
        if self.process == 0:
            write_atomic(self.metadata_path, json.dumps(metadata, indent=2))

    def write_part(self, rows: list[dict]):
        """One finished chunk's rows, as a new file in ``parts/`` (atomic)."""
        name = f"{time.time_ns():020d}-{jax.process_index():04d}-{uuid.uuid4().hex[:8]}.csv"
        write_atomic(os.path.join(self.parts, name), csv_text(rows))

    def read_parts(self) -> list[dict]:
        """Every row written so far (whole chunks only), unsorted."""
        return read_parts(self.directory)

    def write_results(self, rows: list[dict]):
        """``results.csv``: the rows sorted by (cell, replicate), the axis order kept."""
        rows = sorted(rows, key=lambda r: (int(r["cell"]), int(r["replicate"])))
        write_atomic(self.results_path, csv_text(rows))


def read_parts(directory: str) -> list[dict]:
    """Every row written into ``directory/parts`` so far (whole chunks only), unsorted."""
    rows = []
    parts = os.path.join(directory, "parts")
    if os.path.isdir(parts):
        for name in sorted(os.listdir(parts)):
            if name.endswith(".csv"):
                with open(os.path.join(parts, name), newline="") as fh:
                    rows.extend(csv.DictReader(fh))
    return rows


def read_results(directory: str) -> list[dict]:
    """The rows of a finished run (``results.csv``), or of an unfinished one (its parts)."""
    path = os.path.join(directory, "results.csv")
    if os.path.exists(path):
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))
    rows = read_parts(directory)
    if not rows:
        raise ValueError(f"no results in {directory} (expected results.csv or parts/*.csv)")
    return rows


def completeness(directory: str, rows: list[dict]) -> tuple[int, int]:
    """(trials in ``rows``, trials the run's configuration asks for), from its metadata."""
    metadata = _read_json(os.path.join(directory, "metadata.json"))
    config = metadata["config"]
    cells = 1
    for values in config["grid"].values():
        cells *= len(values)
    return len({(r["cell"], r["replicate"]) for r in rows}), cells * config["replicates"]


def environment() -> dict:
    """Versions, git commit, host, devices, command line and XLA_FLAGS, for the metadata file."""
    import jaxtrees

    devices = jax.devices()
    return {
        "jaxtrees": jaxtrees.__version__, "git_commit": _git_commit(), "jax": jax.__version__,
        **{name: _version(name) for name in ("jaxlib", "optax", "matplotlib")},
        "numpy": np.__version__, "python": platform.python_version(), "platform": platform.platform(),
        "host": platform.node(), "command": sys.argv, "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "backend": jax.default_backend(), "devices": [str(d) for d in devices],
        "device_kind": devices[0].device_kind, "local_device_count": jax.local_device_count(),
        "process_index": jax.process_index(), "process_count": jax.process_count(),
    }


def csv_text(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_atomic(path: str, text: str):
    """Write ``path`` through a temporary file and a rename: readers see the old or the new text."""
    tmp = f"{path}.p{jax.process_index()}-{os.getpid()}.tmp"
    with open(tmp, "w", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _read_json(path: str):
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def _git_commit():
    """The commit of the checkout jaxtrees runs from (with "+dirty" for local changes), else None."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                                timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def _version(package: str) -> str:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:  # noqa: BLE001 - metadata only
        return "unknown"

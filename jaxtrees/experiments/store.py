"""Where a run's rows live: ``OUT/STUDY/``, written so that nothing is lost or doubled.

:class:`Store` holds the directory (``metadata.json``, one atomically written ``parts/*.csv`` per
chunk, ``parts/config.json``, ``results.csv`` and the writer's lock ``.lock-P``); :func:`read_parts`
and :func:`read_results` read its rows back, each checked against the configuration.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import fcntl
import io
import json
import operator
import os
import platform
import subprocess
import sys
import time
import uuid

import jax
import numpy as np

from jaxtrees.experiments.study import Config

#: What a part or results file with damage other than an unfinished last line asks the user to do.
WAY_OUT = ("move the file out of the directory (a part's trials then run again; results.csv is written "
           "again from the parts), or delete the results directory to start over")


class Store:
    """The results directory ``out/name``: metadata, parts, results and the writer's lock.

    - ``metadata.json``: the configuration, when it was created, and one entry per run (start, end,
      environment: versions, git commit, host, devices, command line).
    - ``parts/*.csv``: one file per finished chunk, written to a temporary name and renamed, so a
      killed run leaves only whole chunks; a rerun skips the trials found there (resumption).
    - ``parts/config.json``: the configuration the parts belong to, so the parts describe themselves:
      a directory whose ``metadata.json`` was lost gets it rebuilt from this file, and parts without
      either are refused, never relabelled as another run's.
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

    def __init__(self, out: str, name: str):
        self.directory = os.path.join(out, name)
        self.parts = os.path.join(self.directory, "parts")
        self.metadata_path = os.path.join(self.directory, "metadata.json")
        self.results_path = os.path.join(self.directory, "results.csv")
        self.manifest_path = os.path.join(self.parts, "config.json")
        self.config = None
        self._lock = None
        self.process = jax.process_index()

    def open(self, config: dict) -> dict:
        """Create the directory, take the writer's lock, remove a killed run's temporaries, move
        unfinished parts aside, record ``config`` beside the parts and return the metadata (new,
        the existing one if it holds the same ``config``, or one rebuilt from ``parts/config.json``).

        Raises ValueError if ``out`` cannot hold the directory, if another run holds the lock,
        or if the directory holds a run of another configuration or parts of an unknown one."""
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
        config = json.loads(json.dumps(config))
        try:
            metadata = _read_json(self.metadata_path)
            manifest = _read_json(self.manifest_path)
            for recorded, source in ((metadata, "metadata.json"), (manifest, "parts/config.json")):
                if recorded is not None and recorded.get("config") != config:
                    raise ValueError(f"{self.directory} holds a run of another configuration (see its {source}); "
                                     f"choose another --out or delete it")
            if metadata is None and manifest is None and _part_names(self.parts):
                raise ValueError(f"{self.parts} holds rows of an unknown configuration (neither metadata.json nor "
                                 f"parts/config.json says which run wrote them); choose another --out or delete "
                                 f"{self.directory}")
        except ValueError:
            self.close()
            raise
        self.config = config
        self._drop_unfinished()
        created = (metadata or manifest or {}).get("created") or now()
        if manifest is None and self.process == 0:
            write_atomic(self.manifest_path, json.dumps({"config": config, "created": created}, indent=2))
        if metadata is None and manifest is not None:
            print(f"jaxtrees: warning: {self.metadata_path} was missing: rebuilt from parts/config.json "
                  f"(the timings of earlier runs are lost)", file=sys.stderr)
        return metadata or {"config": config, "created": created, "runs": []}

    def _drop_unfinished(self):
        """Move each part whose last line is unfinished to ``NAME.csv.unfinished`` (its trials run again)."""
        for name in _part_names(self.parts):
            path = os.path.join(self.parts, name)
            try:
                if not _unfinished(path):
                    continue
                os.replace(path, path + ".unfinished")
            except FileNotFoundError:  # another process moved it first
                continue
            print(f"jaxtrees: warning: {path} ends in an unfinished line (a chunk cut short): moved to "
                  f"{name}.unfinished, its trials run again", file=sys.stderr)

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
        text = csv_text(rows)
        write_atomic(os.path.join(self.parts, name), text)
        _hold(os.path.join(self.parts, name), self.config, text=text)

    def read_parts(self) -> list[dict]:
        """Every row written so far (whole chunks only), unsorted, checked against the configuration."""
        return read_parts(self.directory, self.config)

    def write_results(self, rows: list[dict]):
        """``results.csv``: the rows sorted by (cell, replicate), the axis order kept."""
        rows = sorted(rows, key=lambda r: (int(r["cell"]), int(r["replicate"])))
        text = csv_text(rows)
        write_atomic(self.results_path, text)
        as_read = rows and all(isinstance(value, str) for value in rows[0].values())  # read_parts' rows
        _hold(self.results_path, self.config, rows=rows if as_read else None, text=None if as_read else text)


#: Inside :func:`reuse_written`: file -> (its signature, the configuration, its rows as read back, or its text).
_written: dict | None = None


@contextlib.contextmanager
def reuse_written():
    """Inside, :func:`read_parts` and :func:`read_results` take the rows this process wrote to a part
    or results file, while the file is unchanged and for the same configuration, instead of reading
    and checking it again (``jaxtrees run``: a million rows, ~7 s each); nothing is held outside."""
    global _written
    outer, _written = _written, {} if _written is None else _written
    try:
        yield
    finally:
        _written = outer


def _signature(path: str) -> tuple:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def _hold(path: str, config, rows: list[dict] | None = None, text: str | None = None):
    """Inside :func:`reuse_written`, keep what was just written to ``path``: its CSV ``text``, or
    ``rows`` that are already what reading it gives (``read_parts``' rows: every value a string)."""
    if _written is not None:
        _written[path] = (_signature(path), json.dumps(config, sort_keys=True), rows, text)


def _take(path: str, config) -> list[dict] | None:
    """The rows held for ``path``, as :func:`read_checked` reads them, if the file is unchanged and
    ``config`` the one they were written for; else None (read the file)."""
    held = (_written or {}).pop(path, None)
    if held is None or not os.path.exists(path) or held[:2] != (_signature(path), json.dumps(config, sort_keys=True)):
        return None
    rows, text = held[2:]
    if rows is not None:
        return rows
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader)
    return [dict(zip(header, values)) for values in reader if values]


def read_parts(directory: str, config: dict | None = None) -> list[dict]:
    """Every row written into ``directory/parts`` so far, unsorted, checked (:func:`read_checked`;
    against ``config``, default the one in ``parts/config.json``). A part whose last line is
    unfinished is left out with a warning; a trial found in two parts is an error.

    Every row read back is checked against the configuration: its ids and
    parameters those of its cell, every other field a number. A part whose last line is unfinished
    (a copy or a disk cut short) is an unfinished chunk: a run (:meth:`Store.open`) moves it aside to
    ``parts/NAME.csv.unfinished`` with a warning and runs its trials again. Any other damage is an
    error naming the file and line; the way out is to move that file out of ``parts/`` (its trials
    then run again) or to delete the directory and start over.
    """
    parts = os.path.join(directory, "parts")
    if config is None:
        config = (_read_json(os.path.join(parts, "config.json")) or {}).get("config")
    rows, header, seen = [], None, {}
    for name in _part_names(parts):
        path = os.path.join(parts, name)
        if _unfinished(path):
            print(f"jaxtrees: warning: {path} ends in an unfinished line (a chunk cut short): left out",
                  file=sys.stderr)
            continue
        part = _take(path, config)
        part = read_checked(path, config) if part is None else part
        if part and header is not None and list(part[0]) != header:
            raise ValueError(f"{path}: its columns differ from those of the other parts; {WAY_OUT}")
        header = header or (list(part[0]) if part else None)
        for trial in {(r["cell"], r["replicate"]) for r in part}:
            if seen.setdefault(trial, name) != name:
                raise ValueError(f"{path}: trial (cell {trial[0]}, replicate {trial[1]}) is also in "
                                 f"{seen[trial]}; {WAY_OUT}")
        rows.extend(part)
    return rows


def read_results(directory: str, config: dict | None = None) -> list[dict]:
    """The rows of a finished run (``results.csv``), or of an unfinished one (its parts), checked
    (against ``config`` where given). Raises ValueError if there are none."""
    path = os.path.join(directory, "results.csv")
    rows = _take(path, config)
    if rows is not None:
        return rows
    rows = read_checked(path, config) if os.path.exists(path) else read_parts(directory, config)
    if not rows:
        where = path if os.path.exists(path) else f"{directory} (expected results.csv or parts/*.csv)"
        raise ValueError(f"no results in {where}; rerun `jaxtrees run` with the same arguments to write them")
    return rows


def read_checked(path: str, config: dict | None = None) -> list[dict]:
    """The rows of one results or part file, each checked: every field present, ``cell`` and
    ``replicate`` integers and, given the run's ``config``, the study, seed and parameters those of
    the row's cell and every other field a number. Raises ValueError naming the file and line."""
    try:
        with open(path, newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                return []
            _check_header(path, header, config)
            lines = [values for values in reader]
    except (csv.Error, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a results file ({e}); {WAY_OUT}") from None
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    if not _all_valid(lines, header, config):  # then find the first bad line, and say what is wrong with it
        check = _row_check(path, header, config)
        for line, values in enumerate(lines, start=2):
            problem = check(values) if values else None  # a blank line holds no row
            if problem:
                raise ValueError(f"{path}, line {line}: {problem}; {WAY_OUT}")
    return [dict(zip(header, values)) for values in lines if values]


def _all_valid(lines: list[list[str]], header: list[str], config: dict | None) -> bool:
    """Whether every row of a file passes :func:`_row_check`'s checks, column by column (a file of a
    million rows in seconds); False sends the caller to the row-by-row check for the line and reason."""
    rows = [values for values in lines if values]
    if not rows or any(len(values) != len(header) for values in rows):
        return not rows
    columns = list(zip(*rows))
    cell, replicate = (columns[header.index(name)] for name in ("cell", "replicate"))
    if not all(v.isdigit() for v in cell) or not all(v.isdigit() for v in replicate):
        return False
    if config is None:
        return True
    names = sorted(config["grid"])
    expected = [tuple(str(c[name]) for name in names) for c in Config(**config).cells()]
    try:
        if max(map(int, set(cell))) >= len(expected) or max(map(int, set(replicate))) >= config["replicates"]:
            return False
    except ValueError:
        return False
    if set(columns[header.index("study")]) != {config["study"]} or set(columns[header.index("seed")]) != {
            str(config["seed"])}:
        return False
    params = zip(cell, *(columns[header.index(name)] for name in names))
    if any(got[1:] != expected[int(got[0])] for got in set(params)):
        return False
    try:
        for i, name in enumerate(header):
            if name not in config["grid"] and name != "study":
                for value in set(columns[i]):  # a column holds few distinct values, mostly
                    float(value)
    except ValueError:
        return False
    return True


def _check_header(path: str, header: list[str], config: dict | None):
    """Raise ValueError if ``header`` lacks a column every row is checked by."""
    names = [] if config is None else sorted(config["grid"])
    missing = [c for c in ["cell", "replicate"] + ([] if config is None else ["study", "seed", *names]) if c not in header]
    if missing:
        raise ValueError(f"{path}, line 1: the header lacks the column(s) {', '.join(missing)}; {WAY_OUT}")


def _row_check(path: str, header: list[str], config: dict | None):
    """``check(values) -> what is wrong with one row (None if nothing)`` for files with ``header``."""
    names = [] if config is None else sorted(config["grid"])
    cell_at, replicate_at = header.index("cell"), header.index("replicate")
    if config is not None:
        expected = [tuple(str(cell[name]) for name in names) for cell in Config(**config).cells()]
        params_at = [header.index(name) for name in names]
        study_at, seed_at = header.index("study"), header.index("seed")
        numbers = [i for i, name in enumerate(header) if name not in config["grid"] and name != "study"]

    def check(values):
        if len(values) != len(header):
            return f"{len(values)} fields where the header has {len(header)}"
        cell, replicate = values[cell_at], values[replicate_at]
        if not (cell.isdigit() and replicate.isdigit()):
            return f"cell and replicate must be integers >= 0, got {cell!r} and {replicate!r}"
        if config is None:
            return None
        if int(cell) >= len(expected) or int(replicate) >= config["replicates"]:
            return (f"cell {cell}, replicate {replicate} is not a trial of this run "
                    f"({len(expected)} cells x {config['replicates']} replicates)")
        if values[study_at] != config["study"] or values[seed_at] != str(config["seed"]):
            return (f"a row of study {values[study_at]!r}, seed {values[seed_at]!r}; this run is study "
                    f"{config['study']!r}, seed {config['seed']}")
        got = tuple(values[i] for i in params_at)
        if got != expected[int(cell)]:
            return (f"cell {cell} has {', '.join(f'{k}={v}' for k, v in zip(names, got))}; this run's cell "
                    f"{cell} has {', '.join(f'{k}={v}' for k, v in zip(names, expected[int(cell)]))}")
        for i in numbers:
            try:
                float(values[i])
            except ValueError:
                return f"{header[i]} must be a number, got {values[i]!r}"
        return None

    return check


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
    devices = jax.devices()
    return {
        "jaxtrees": _version("jaxtrees"), "git_commit": _git_commit(), "jax": jax.__version__,
        **{name: _version(name) for name in ("jaxlib", "optax", "matplotlib")},
        "numpy": np.__version__, "python": platform.python_version(), "platform": platform.platform(),
        "host": platform.node(), "command": sys.argv, "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "backend": jax.default_backend(), "devices": [str(d) for d in devices],
        "device_kind": devices[0].device_kind, "local_device_count": jax.local_device_count(),
        "process_index": jax.process_index(), "process_count": jax.process_count(),
    }


def csv_text(rows: list[dict]) -> str:
    """The rows as CSV, columns in the first row's order (every row must have the same fields)."""
    header = list(rows[0])
    if any(len(r) != len(header) for r in rows):
        raise ValueError("csv_text: rows with different fields")
    fields = operator.itemgetter(*header) if len(header) > 1 else (lambda r: (r[header[0]],))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    try:
        writer.writerows(map(fields, rows))  # rows as tuples: csv.DictWriter's per-row dict lookups cost 2x
    except KeyError as e:
        raise ValueError(f"csv_text: a row lacks the field {e}") from None
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
    """The JSON object in ``path``, None if there is no such file; ValueError naming it if damaged."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as fh:
            value = json.load(fh)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read {path}: {e}; delete the results directory (or choose another --out) "
                         f"to start over") from None
    if not isinstance(value, dict):
        raise ValueError(f"cannot read {path}: not a JSON object; delete the results directory to start over")
    return value


def _part_names(parts: str) -> list[str]:
    """The part files (``*.csv``) in ``parts``, in name (writing) order."""
    return sorted(n for n in os.listdir(parts) if n.endswith(".csv")) if os.path.isdir(parts) else []


def _unfinished(path: str) -> bool:
    """True if the file is empty or its last line has no line end: a chunk cut short."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() == 0:
            return True
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) != b"\n"


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

"""Where a run's rows live: ``OUT/STUDY/``, as columns, written so that nothing is lost or doubled.

:class:`Store` holds the directory: ``metadata.json``, the dataset ``rows/`` (one Parquet part per
compiled call, written atomically, and ``rows/_config.json``) and the run's lock ``.lock``;
:func:`read_results` reads the rows back as a :class:`~jaxtrees.experiments.table.Table`, checked
against the configuration. ``pandas.read_parquet(OUT/STUDY/rows)`` (or polars, DuckDB) reads them too.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import re
import sys
import time
import uuid
import zlib

import numpy as np

from jaxtrees.experiments.contract import WAY_OUT, config_digest, now
from jaxtrees.experiments.results.layout import Layout, check_columns, columns_table
from jaxtrees.experiments.table import Table, factorize

#: Parquet's key in a part's footer for what jaxtrees knows of it (configuration digest, rows, trials).
PART_KEY = b"jaxtrees"


class Store:
    """The results directory ``out/name``.

    - ``metadata.json``: the configuration, the determinism contract (what a resumed run must
      match), and one entry per run (start, end, environment, timings).
    - ``rows/part-*.parquet``: one part per compiled call, written to a hidden temporary, fsynced,
      renamed and the directory fsynced, so a killed run leaves only whole parts; each records its
      rows and trials, carries page checksums and its whole file's CRC-32 in its name, so a short or damaged
      part is found, moved to ``damaged/`` beside rows/ (readers of rows/ see whole parts only) and its trials run
      again.
    - ``rows/_config.json``: the configuration the parts belong to (metadata.json is rebuilt from it).
    - ``.lock``: one per directory, held (``fcntl.flock``) by the run's process 0 while it runs, naming
      its host, pid and run id; the other processes of a distributed run check that it names theirs.

    >>> import tempfile
    >>> len(Store(tempfile.mkdtemp(), "demo").trials_done(4, 2))
    8
    """

    def __init__(self, out: str, name: str, process: int = 0, processes: int = 1):
        self.directory = os.path.join(out, name)
        self.rows = os.path.join(self.directory, "rows")
        self.metadata_path = os.path.join(self.directory, "metadata.json")
        self.manifest_path = os.path.join(self.rows, "_config.json")
        self.lock_path = os.path.join(self.directory, ".lock")
        self.process, self.processes = process, processes
        self.config, self.digest, self._lock, self.configs, self.manifest = None, None, None, {}, {}

    def open(self, config: dict, run_id: str | None = None) -> dict:
        """Create the directory, take (process 0) or check (the others) the lock of run ``run_id``,
        remove this process's temporaries and return the metadata: new, the existing one if it holds
        the same ``config``, or rebuilt from ``rows/_config.json``. ValueError if another run holds
        the lock, or the directory holds another configuration or an earlier version's CSV rows."""
        config = json.loads(json.dumps(config))
        legacy = os.path.join(self.directory, "parts")
        if os.path.isdir(legacy) and any(n.endswith(".csv") for n in os.listdir(legacy)):
            raise ValueError(f"{self.directory} holds CSV rows of an earlier jaxtrees; convert them first with "
                             f"`jaxtrees convert {self.directory}` (then rerunning resumes), or choose another --out")
        try:
            os.makedirs(self.rows, exist_ok=True)
        except OSError as e:
            raise ValueError(f"out: cannot write the results directory {self.directory}: {e.strerror}") from None
        self._take_lock(run_id or uuid.uuid4().hex)
        try:
            for folder, mine in ((self.rows, f".p{self.process}-"), (self.directory, None), (self.rows, "_config")):
                for name in os.listdir(folder):  # a killed run's temporaries (another process's are its own)
                    if name.endswith(".tmp") and (name.startswith(mine) if mine else self.process == 0):
                        os.remove(os.path.join(folder, name))
            metadata = _read_json(self.metadata_path, rebuildable=os.path.exists(self.manifest_path))
            manifest = _read_json(self.manifest_path, rebuildable=metadata is not None)
            rebuilt = manifest is None and metadata is not None and os.path.exists(self.manifest_path)
            if rebuilt and self.process == 0:
                print(f"jaxtrees: warning: {self.manifest_path} was damaged: rebuilt from metadata.json",
                      file=sys.stderr)
            if manifest is None and metadata is not None and _part_names(self.rows):
                manifest = {key: metadata[key] for key in ("config", "created", "configs", "contract") if key in metadata}
            for recorded, source in ((metadata, "metadata.json"), (manifest, "rows/_config.json")):
                if recorded is not None:
                    _same_study(self.directory, recorded["config"], config, source)
            if manifest is None and _part_names(self.rows):
                raise ValueError(f"{self.rows} holds rows of an unknown configuration (no rows/_config.json says "
                                 f"which run wrote them); choose another --out or delete {self.directory}")
        except ValueError:
            self.close()
            raise
        self.config, self.digest = config, config_digest(config)
        self.configs = configs(manifest)
        self.configs.setdefault(self.digest, config)
        created = (metadata or manifest or {}).get("created") or now()
        self.manifest = {"config": config, "created": created, "configs": self.configs,
                         **({"contract": manifest["contract"]} if manifest and "contract" in manifest else {})}
        if self.process == 0 and (manifest != self.manifest or rebuilt):  # new, rebuilt, or a grid grown in place
            write_atomic(self.manifest_path, json.dumps(self.manifest, indent=2))
        if metadata is None and manifest is not None and self.process == 0:
            print(f"jaxtrees: warning: {self.metadata_path} was missing or damaged: rebuilt from rows/_config.json "
                  f"(the timings of earlier runs are lost)", file=sys.stderr)
        if metadata is None:
            metadata = {"config": config, "created": created, "runs": [],
                        **({"contract": self.manifest["contract"]} if "contract" in self.manifest else {})}
        if not metadata.get("runs"):
            metadata["runs"] = []
        metadata["config"], metadata["configs"] = config, self.configs  # each file can rebuild the other
        return metadata

    def record_contract(self, contract: dict):
        """Record the run's contract in rows/_config.json too (process 0), where a rebuilt metadata.json finds it."""
        if self.process == 0 and self.manifest.get("contract") != contract:
            self.manifest["contract"] = contract
            write_atomic(self.manifest_path, json.dumps(self.manifest, indent=2))

    def _take_lock(self, run_id: str):
        try:
            lock = open(self.lock_path, "a+")
        except IsADirectoryError:
            raise ValueError(f"{self.lock_path} is a directory, not jaxtrees' lock file; remove it "
                             f"(`rmdir {self.lock_path}`) and rerun") from None
        except OSError as e:
            raise ValueError(f"cannot open the lock file {self.lock_path}: {e.strerror}") from None
        if self.process != 0:  # process 0 holds it for the whole run; the others check it is their run's
            lock.seek(0)
            held = lock.read()
            lock.close()
            if f"run {run_id}" not in held:
                raise ValueError(f"{self.lock_path} is not held by this run (it reads {held.strip() or 'nothing'!r}): "
                                 f"do the processes share one results directory, and is another run writing there?")
            return
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "unknown"
            lock.close()
            raise ValueError(f"another run ({holder}) is writing into {self.directory}; wait for it to finish "
                             f"(rerunning then resumes) or choose another --out") from None
        except OSError as e:
            lock.close()
            raise ValueError(f"cannot lock {self.lock_path}: {e.strerror} (a file system without flock?); "
                             f"choose an --out on a local disk") from None
        lock.truncate(0)
        lock.write(f"host {platform.node()}, pid {os.getpid()}, run {run_id}\n")
        lock.flush()
        self._lock = lock

    def close(self):
        """Release the lock."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def write_metadata(self, metadata: dict):
        """``metadata.json`` (process 0 only: one writer however many processes run)."""
        if self.process == 0:
            write_atomic(self.metadata_path, json.dumps(metadata, indent=2))

    def write_part(self, columns: dict, trials: int) -> str:
        """One call's rows (``columns``: name -> array, :func:`~jaxtrees.experiments.results.layout.Layout.columns`)
        as a new part in ``rows/`` (atomic, durable); returns its path."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = columns_table(columns)
        stamp = {"config": self.digest, "rows": table.num_rows, "trials": int(trials)}
        table = table.replace_schema_metadata({PART_KEY: json.dumps(stamp).encode()})
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer, compression="zstd", compression_level=1, write_page_checksum=True,
                       write_statistics=False,  # min / max per page: 15% of the write, read by no one here
                       use_dictionary=[f.name for f in table.schema if not pa.types.is_floating(f.type)])
        data = buffer.getvalue()
        crc = zlib.crc32(memoryview(data))  # the whole file's, footer included: its name carries it
        name = f"part-{time.time_ns():020d}-{self.process:04d}-{uuid.uuid4().hex[:8]}-c{crc:08x}.parquet"
        path = os.path.join(self.rows, name)
        tmp = os.path.join(self.rows, f".p{self.process}-{name}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(memoryview(data))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_directory(self.rows)
        return path

    def trials_done(self, cells: int, replicates: int, layout: Layout | None = None) -> np.ndarray:
        """``done[cell * replicates + replicate]``: the trial's rows are all in one whole part. A part that
        cannot be read, fails a checksum, holds other rows than it records or fails a reader's checks
        (:func:`~jaxtrees.experiments.results.layout.check_columns`) is moved aside with a warning: its trials run again."""
        done = np.zeros(cells * replicates, bool)
        if self.config is None or not os.path.isdir(self.rows):
            return done
        keys = ["study", "seed", "cell", "replicate", *sorted(self.config["grid"])]  # planning reads only these
        for path, part, digest in _parts(self.rows, self.configs, keys, self.process == 0):  # whole file checked
            try:  # every row checked as a reader checks it (a part holds each of its trials whole)
                rows = check_columns([(path, part, digest)], self.config, False, layout, self.configs)
            except Exception as e:  # noqa: BLE001 - a check's ValueError, or pyarrow's on a part it misreads
                if not (isinstance(e, ValueError) or type(e).__module__.startswith("pyarrow")):
                    raise
                _damaged(path, str(e).removeprefix(f"{path}: ").split("; move the file")[0], self.process == 0)
                continue
            if len(rows):
                done[np.asarray(rows["cell"], np.int64) * replicates + rows["replicate"]] = True
        return done


def configs(manifest: dict | None) -> dict:
    """Digest -> configuration of every grid a directory's parts were written under (rows/_config.json's
    ``configs``; a manifest of an earlier version names one)."""
    if not manifest:
        return {}
    history = manifest.get("configs")
    if not isinstance(history, dict):
        history = {config_digest(manifest["config"]): manifest["config"]}
    return dict(history)


def _same_study(directory: str, recorded: dict, config: dict, source: str):
    """ValueError unless ``config`` may resume or grow the run ``recorded``: the same study, seed and parameters
    (the grid's values and the replicates may differ: rows depend only on the seed and their cell)."""
    if recorded == config:
        return
    differ = [f"{what} {recorded.get(key)!r}, not {config.get(key)!r}" for key, what in
              (("study", "study"), ("seed", "seed")) if recorded.get(key) != config.get(key)]
    if differ:
        raise ValueError(f"{directory} holds a run of another configuration ({', '.join(differ)}; see its "
                         f"{source}); choose another --out or delete it")
    before, now_ = sorted(recorded.get("grid", {})), sorted(config.get("grid", {}))
    if before != now_:
        raise ValueError(f"{directory} holds a run whose grid has the parameters {', '.join(before)}, not "
                         f"{', '.join(now_)} (see its {source}): every trial's key would change, so it cannot grow; "
                         f"choose another --out")


def read_results(directory: str, config: dict | None = None, columns: list[str] | None = None,
                 ordered: bool = True) -> Table:
    """The rows of ``directory`` (a finished run, or the whole parts of an unfinished one) as a
    :class:`~jaxtrees.experiments.table.Table` sorted by (cell, replicate) (``ordered``; else in the parts'
    order, which summaries do not need), each column checked against
    the configuration (``config``, default ``rows/_config.json``'s): ids and parameters those of its
    cell, every trial's rows present once. A directory of an earlier version (CSV) is read as it is.
    ValueError naming the file if there are no rows, a part is damaged or a trial is doubled."""
    from jaxtrees.experiments.results import legacy

    rows_dir = os.path.join(directory, "rows")
    if config is None:
        config = (_read_json(os.path.join(rows_dir, "_config.json"), rebuildable=True) or _read_json(
            os.path.join(directory, "metadata.json")) or {}).get("config")
    if not _part_names(rows_dir) and legacy.is_legacy(directory):
        return legacy.read(directory, config)
    if not _part_names(rows_dir):
        raise ValueError(f"no results in {directory} (expected rows/part-*.parquet); rerun `jaxtrees run` with the "
                         f"same arguments to write them")
    history = {} if config is None else configs(_read_json(os.path.join(rows_dir, "_config.json"), rebuildable=True)
                                                or _read_json(os.path.join(directory, "metadata.json"), rebuildable=True))
    if config is not None:
        history.setdefault(config_digest(config), config)
    parts = _parts(rows_dir, history or None, columns, move=None)
    try:
        rows = check_columns(parts, config, ordered, history=history)  # one part in memory at a time
    except Exception as e:  # noqa: BLE001 - pyarrow's error on a part whose types are not the run's
        if not type(e).__module__.startswith("pyarrow"):
            raise
        raise ValueError(f"{directory}: a part's columns cannot be read as this run's ({type(e).__name__}: "
                         f"{str(e).splitlines()[0][:200] if str(e) else ''}); rerun `jaxtrees run` with the same "
                         f"arguments (it moves damaged parts aside), or {WAY_OUT}") from None
    if not len(rows):
        raise ValueError(f"no rows of the current grid in {directory} ({rows.outside:,} rows of values or replicates "
                         f"since removed); rerun `jaxtrees run` with the same arguments to write them")
    return rows


def export_csv(directory: str, path: str | None = None, partial: bool = False) -> str:
    """Write the rows of ``directory`` as one tidy CSV (``directory/results.csv`` by default; ``-``: stdout), sorted
    by (cell, replicate), atomically and durably; returns its path. ValueError for an unfinished run (unless
    ``partial``), a directory as ``path``, or an old CSV directory's own results.csv."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from jaxtrees.experiments.results import legacy

    path = path or os.path.join(directory, "results.csv")
    if path != "-" and os.path.isdir(path):
        raise ValueError(f"--csv {path} is a directory; give the path of the CSV file to write")
    if not _part_names(os.path.join(directory, "rows")) and legacy.is_legacy(directory) and \
            os.path.abspath(path) == os.path.abspath(os.path.join(directory, "results.csv")):
        raise ValueError(f"{directory} holds an earlier jaxtrees' CSV rows (results.csv): convert them first "
                         f"(`jaxtrees convert {directory}`), or export elsewhere with --csv PATH")
    rows = read_results(directory)
    done, total = completeness(directory, rows)
    if done < total and not partial:
        raise ValueError(f"{directory} holds {done:,} of its {total:,} trials (a run unfinished or still running); "
                         f"rerun `jaxtrees run` with the same arguments to finish it, or pass --partial to export "
                         f"the trials done")
    table = _arrow(rows)
    if path == "-":
        buffer = pa.BufferOutputStream()
        pcsv.write_csv(table, buffer)
        sys.stdout.flush()
        sys.stdout.buffer.write(memoryview(buffer.getvalue()))
        sys.stdout.buffer.flush()
        return path
    _atomically(path, lambda fh: pcsv.write_csv(table, fh))
    return path


def _arrow(rows: Table):
    """The rows as a pyarrow table, columns of strings dictionary-encoded from their codes (no object per row)."""
    import pyarrow as pa

    arrays = {}
    for name in rows.names:
        codes, uniques = factorize(rows, name) if rows.dtype(name) == object else (None, ())
        if codes is not None and all(isinstance(value, str) for value in uniques):
            arrays[name] = pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(list(uniques), pa.string()))
        else:
            arrays[name] = pa.array(rows[name])
    return pa.table(arrays)


def completeness(directory: str, rows: Table) -> tuple[int, int]:
    """(trials in ``rows`` (as :func:`read_results` returns them), trials the run's configuration asks for),
    from its metadata."""
    from jaxtrees.experiments import studies
    from jaxtrees.experiments.study import Config

    config = Config(**_read_json(os.path.join(directory, "metadata.json"))["config"])
    cell = np.asarray(rows["cell"])
    lengths = Layout(studies.STUDIES.get(config.study), config).lengths
    if lengths is not None and cell.size and int(cell.max()) < lengths.size:  # rows as read: each trial whole, once
        return int((np.bincount(cell, minlength=lengths.size) // lengths).sum()), config.trials
    trial = cell.astype(np.int64) * config.replicates + np.asarray(rows["replicate"], np.int64)
    return int(np.unique(trial).size), config.trials


def _parts(rows_dir: str, digests: dict | None, columns, move: bool | None):
    """``(path, pyarrow table, digest)`` of each whole part of ``rows_dir`` of a configuration in ``digests``
    (None: any), ``digest`` the one it records; a part that cannot be read, or whose rows are not those it
    records, is moved to ``NAME.damaged`` (``move``: by this process, with a warning; False: by another) and
    left out, or (``move`` None: a reader's) raises ValueError naming it."""
    import pyarrow.parquet as pq

    for name in _part_names(rows_dir):
        path = os.path.join(rows_dir, name)
        try:
            reader = pq.ParquetFile(_verified(path), page_checksum_verification=True)
            stamp = json.loads((reader.schema_arrow.metadata or {}).get(PART_KEY, b"{}"))
            if digests is not None and stamp.get("config") is not None and stamp.get("config") not in digests:
                raise ValueError(f"{path}: a part of another configuration; {WAY_OUT}")
            # a part of an earlier version carries no whole-file checksum: every page is read (page checksums)
            table = reader.read(columns=columns if _CRC.search(name) else None)
            if columns is not None:
                table = table.select([c for c in columns if c in table.column_names])
                _numeric_schema(reader.schema_arrow, columns)
            if stamp.get("rows") != reader.metadata.num_rows or table.num_rows != stamp["rows"]:
                raise OSError(f"it holds {table.num_rows} rows where it records {stamp.get('rows')}")
        except FileNotFoundError:
            continue  # another process moved it first
        except (OSError, KeyError, TypeError, json.JSONDecodeError) as e:
            _damaged(path, str(e), move)
            continue
        except Exception as e:  # noqa: BLE001 - pyarrow's errors on a damaged file (ArrowInvalid, ...)
            if type(e).__module__.startswith("pyarrow"):
                _damaged(path, str(e).splitlines()[0] if str(e) else type(e).__name__, move)
                continue
            raise
        yield path, table, stamp.get("config")


def _numeric_schema(schema, read: list) -> None:
    """OSError unless every column not ``read`` (a run's outputs and axis, left unread by planning) holds numbers."""
    import pyarrow as pa

    for field in schema:
        if field.name not in read and not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
                                           or pa.types.is_boolean(field.type)):
            raise OSError(f"column {field.name} must hold numbers, got {field.type}")


def _verified(path: str):
    """The part's bytes (a pyarrow buffer) where its whole-file checksum matches the one its name carries (a part of
    an earlier version carries none: its path, page checksums only); OSError otherwise."""
    import pyarrow as pa

    match = _CRC.search(os.path.basename(path))
    if match is None:
        return path
    with open(path, "rb") as fh:
        data = fh.read()
    if zlib.crc32(data) != int(match.group(1), 16):
        raise OSError(f"its checksum {zlib.crc32(data):08x} is not the {match.group(1)} it was written with")
    return pa.BufferReader(data)


#: A part's whole-file CRC-32 in its name (``part-TIME-PROCESS-ID-cCRC.parquet``).
_CRC = re.compile(r"-c([0-9a-f]{8})\.parquet$")
#: Where damaged parts go, beside rows/ (so that every reader of rows/ sees whole parts only).
DAMAGED = "damaged"


def _damaged(path: str, why: str, move: bool | None):
    if move is None:
        raise ValueError(f"{path} is damaged ({why}); rerun `jaxtrees run` with the same arguments (the run moves it "
                         f"to {DAMAGED}/ beside rows/ and runs its trials again), or {WAY_OUT}")
    if not move:
        return
    aside = os.path.join(os.path.dirname(os.path.dirname(path)), DAMAGED)
    try:
        os.makedirs(aside, exist_ok=True)
        os.replace(path, os.path.join(aside, os.path.basename(path)))
    except FileNotFoundError:
        return
    print(f"jaxtrees: warning: {path} is damaged ({why}): moved to {os.path.join(aside, os.path.basename(path))}, "
          f"its trials run again", file=sys.stderr)


def write_atomic(path: str, data, mode: str = "w"):
    """Write ``path`` through a temporary file, fsync, rename and a directory fsync: readers see the
    old or the new contents, and a crash after the call loses neither."""
    _atomically(path, lambda fh: fh.write(data), mode)


def _atomically(path: str, write, mode: str = "wb"):
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


def _read_json(path: str, rebuildable: bool = False):
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


def _part_names(rows_dir: str) -> list[str]:
    """The parts (``part-*.parquet``) in ``rows_dir``, in name (writing) order."""
    if not os.path.isdir(rows_dir):
        return []
    return sorted(n for n in os.listdir(rows_dir) if n.startswith("part-") and n.endswith(".parquet"))

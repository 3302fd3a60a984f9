"""Where a run's rows are written: ``OUT/STUDY/``, as columns, so that nothing is lost or doubled.

:class:`Store` holds the directory: ``metadata.json``, the dataset ``rows/`` (one Parquet part per
compiled call, written atomically, and ``rows/_config.json``) and the run's lock ``.lock``. The rows are read back
by :func:`~jaxtrees.experiments.results.reading.read_results`.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import sys
import time
import uuid
import zlib

import numpy as np

from jaxtrees.experiments.contract import config_digest, now
from jaxtrees.experiments.results.files import fsync_directory, part_names, read_json, write_atomic
from jaxtrees.experiments.results.layout import Layout, check_columns, columns_table
from jaxtrees.experiments.results.reading import PART_KEY, configs, damaged, move_foreign, parts


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
        self.recorded: dict = {}  # metadata.json's and rows/_config.json's contracts (None: a copy lacks it)
        self.revision = 0  # the contract's revision the parts are written under (+1 per run that overrode a change)

    def open(self, config: dict, run_id: str | None = None) -> dict:
        """Create the directory, take (process 0) or check (the others) the lock of run ``run_id``,
        remove this process's temporaries and return the metadata: new, the existing one if it holds
        the same ``config``, or rebuilt from ``rows/_config.json``. ValueError if another run holds
        the lock, or the directory holds another configuration or an earlier version's CSV rows."""
        config = json.loads(json.dumps(config))
        legacy = os.path.join(self.directory, "parts")
        if os.path.isdir(legacy) and any(n.endswith(".csv") for n in os.listdir(legacy)):
            raise ValueError(f"{self.directory} holds CSV rows of an earlier jaxtrees, which a run cannot resume into: "
                             f"`jaxtrees convert {self.directory}` rewrites them as Parquet where they match this "
                             f"version's study (then rerunning resumes; it says what to do where they do not), and "
                             f"`jaxtrees report` / `export` read them as they are; or choose another --out")
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
            if self.process == 0:
                move_foreign(self.rows)  # rows/ holds the run's parts only: what pandas reads there is the run's
            metadata = read_json(self.metadata_path, rebuildable=os.path.exists(self.manifest_path))
            manifest = read_json(self.manifest_path, rebuildable=metadata is not None)
            started = bool(part_names(self.rows)) or bool((metadata or {}).get("runs"))
            self.recorded = {name: copy.get("contract") for name, copy in
                             (("metadata.json", metadata), ("rows/_config.json", manifest)) if copy is not None}
            if not started:  # nothing written yet (a run killed before its first call): no contract to keep
                self.recorded = {name: c for name, c in self.recorded.items() if c is not None}
            rebuilt = manifest is None and metadata is not None and os.path.exists(self.manifest_path)
            if rebuilt and self.process == 0:
                print(f"jaxtrees: warning: {self.manifest_path} was damaged: rebuilt from metadata.json",
                      file=sys.stderr)
            if manifest is None and metadata is not None and part_names(self.rows):
                manifest = {key: metadata[key] for key in ("config", "created", "configs", "contract", "revisions")
                            if key in metadata}
            for recorded, source in ((metadata, "metadata.json"), (manifest, "rows/_config.json")):
                if recorded is not None:
                    _same_study(self.directory, recorded["config"], config, source)
            if manifest is None and part_names(self.rows):
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
                         **{key: manifest[key] for key in ("contract", "revisions") if manifest and key in manifest}}
        if self.process == 0 and (manifest != self.manifest or rebuilt):  # new, rebuilt, or a grid grown in place
            write_atomic(self.manifest_path, json.dumps(self.manifest, indent=2))
        if metadata is None and manifest is not None and self.process == 0:
            print(f"jaxtrees: warning: {self.metadata_path} was missing or damaged: rebuilt from rows/_config.json "
                  f"(the timings of earlier runs are lost)", file=sys.stderr)
        if metadata is None:
            metadata = {"config": config, "created": created, "runs": [],
                        **{key: self.manifest[key] for key in ("contract", "revisions") if key in self.manifest}}
        if not metadata.get("runs"):
            metadata["runs"] = []
        metadata["config"], metadata["configs"] = config, self.configs  # each file can rebuild the other
        return metadata

    def record_contract(self, contract: dict, revisions: list | None = None):
        """Record the run's contract (and the contract's ``revisions``: what each override changed) in
        rows/_config.json too (process 0), where a rebuilt metadata.json finds them; the parts written from now on
        record the latest revision."""
        self.revision = len(revisions or [])
        recorded = {"contract": contract, **({"revisions": revisions} if revisions else {})}
        if self.process == 0 and any(self.manifest.get(key) != value for key, value in recorded.items()):
            self.manifest.update(recorded)
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
        stamp = {"config": self.digest, "rows": table.num_rows, "trials": int(trials), "revision": self.revision}
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
        for path, part, digest, _ in parts(self.rows, self.configs, keys, self.process == 0):  # whole file checked
            try:  # every row checked as a reader checks it (a part holds each of its trials whole)
                rows = check_columns([(path, part, digest)], self.config, False, layout, self.configs)
            except Exception as e:  # noqa: BLE001 - a check's ValueError, or pyarrow's on a part it misreads
                if not (isinstance(e, ValueError) or type(e).__module__.startswith("pyarrow")):
                    raise
                damaged(path, str(e).removeprefix(f"{path}: ").split("; move the file")[0], self.process == 0)
                continue
            if len(rows):
                trials = np.asarray(rows["cell"], np.int64) * replicates + rows["replicate"]
                if done[trials].any():  # a copy of a part, or two runs' parts of one trial: the later one goes
                    damaged(path, f"another part holds {int(done[trials].sum()):,} of its rows' trials too (a copy?)",
                            self.process == 0, then="its other trials run again")
                    continue
                done[trials] = True
        return done


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

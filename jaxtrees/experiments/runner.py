"""The study runner: a trial function and a parameter grid in, a tidy results file out.

A :class:`Study` names its parameters (with the defaults of a ``quick`` and a ``full`` size),
says which of them are *static* (they change shapes or the compiled program: one compilation per
distinct combination) and gives a pure ``trial(key, params) -> {metric: array}``. The runner
expands the grid into cells, runs ``replicates`` trials per cell and writes one row per trial
(and per entry of the study's ``axis``, e.g. per sample size on a common-random-numbers m-grid).

Randomness: trial (cell, r) uses ``fold_in(fold_in(key(seed), h), r)`` where h is a 32-bit hash
of the cell's parameter values (not its position in the grid), so a row depends only on the seed
and its parameters, never on chunk size, device count, host count or which other cells run.

Execution: the trials of a static group are cut into chunks of ``chunk`` trials (padded to a
fixed size, so one compilation serves every chunk), the chunk axis is sharded over all local
devices (``shard_map`` over ``Mesh(devices, ("batch",))``), each device runs its rows in groups of
``GROUP`` vmapped trials (the same compiled arithmetic for any chunk size or device count, so
rows are bitwise reproducible), and trials are split round-robin over hosts.

Storage: ``OUT/STUDY/`` holds ``metadata.json`` (versions, devices, seed, full config),
``parts/*.csv`` (one file per finished chunk, written to a temporary name and renamed, so a
killed run leaves only whole chunks) and, when every trial is done, ``results.csv`` (all rows,
sorted, one header; read it with ``pandas.read_csv``). Rerunning the same command resumes: the
trials found in ``parts/`` are skipped, so every row ends up exactly once.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import itertools
import json
import math
import os
import platform
import resource
import sys
import time
import uuid
import zlib
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from jaxtrees.core import checks

#: Trials vmapped together on one device (chunks are padded to multiples of GROUP x devices).
GROUP = 32
#: Default chunks hold at most 8 groups per device, fewer if the study's ``bytes_per_trial``
#: says they would need more than this much memory per device (an explicit chunk overrides).
MEMORY_BUDGET = 2 * 2**30
#: Row fields every results file starts with.
ID_FIELDS = ("study", "seed", "cell", "replicate")


@dataclasses.dataclass(frozen=True)
class Study:
    """A Monte Carlo study: parameters, their quick and full grids, and the trial.

    Attributes:
      name, description: shown by ``jaxtrees list``.
      quick, full: parameter -> list of values (the grid) or a single value, for ``--quick`` and
        the full size. Both must name the same parameters; the value types (int, float, str) of
        the full grid are the types ``--set`` parses to.
      static: parameters that fix shapes or the program (compiled once per combination); they
        reach ``trial`` as Python values, the others as traced float32 / int32 scalars.
      trial: ``trial(key, params) -> dict`` of float / int / bool arrays, each a scalar or of
        shape ``[len(axis values)]``.
      axis: optional ``(name, values(params) -> list)``: the trial's outputs run along it (one
        row per value).
      replicates: trials per cell, ``(quick, full)``.
      check: ``check(params)`` raises ValueError for a bad cell, before any heavy work.
      plot, report: ``plot(rows, path_stem) -> list of files`` and ``report(rows) -> markdown``.
      bytes_per_trial: optional ``bytes_per_trial(params)``, the device memory one trial of a
        cell needs at its peak; the default chunk then keeps a device under ``MEMORY_BUDGET``.
    """

    name: str
    description: str
    quick: dict
    full: dict
    static: tuple
    trial: Callable
    replicates: tuple
    check: Callable
    plot: Callable
    report: Callable
    axis: tuple | None = None
    bytes_per_trial: Callable | None = None


@dataclasses.dataclass(frozen=True)
class Config:
    """A resolved run: the grid (parameter -> list of values), replicates, seed, size."""

    study: str
    grid: dict
    replicates: int
    seed: int
    quick: bool

    def cells(self) -> list[dict]:
        """The grid's cells in a fixed order (the product of the value lists)."""
        names = sorted(self.grid)
        return [dict(zip(names, values)) for values in itertools.product(*(self.grid[n] for n in names))]

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


def configure(study: Study, *, quick: bool = False, overrides: dict | None = None, seed: int = 0,
              replicates: int | None = None) -> Config:
    """Resolve the grid of ``study``: its quick or full defaults, then ``overrides``.

    ``overrides`` maps a parameter to a value or a list of values (strings are parsed to the
    parameter's type, and "a,b,c" is a list). Every cell is checked here.
    """
    seed = checks.integer("seed", seed, low=0, high=2**31 - 1)
    base = study.quick if quick else study.full
    grid = {name: _as_list(value) for name, value in base.items()}
    for name, value in (overrides or {}).items():
        if name == "replicates":
            replicates = value
            continue
        if name not in grid:
            raise ValueError(f"unknown parameter {name!r} for study {study.name!r}; known: "
                             f"{', '.join(sorted(grid))}, replicates")
        grid[name] = [_parse(name, v, _as_list(study.full[name])[0]) for v in _as_list(value, split=True)]
        if not grid[name]:
            raise ValueError(f"parameter {name!r} needs at least one value")
    if replicates is None:
        replicates = study.replicates[0 if quick else 1]
    if isinstance(replicates, str):
        replicates = _parse("replicates", replicates, 1)
    replicates = checks.integer("replicates", replicates, low=1, high=2**31 - 1)
    config = Config(study.name, grid, replicates, seed, quick)
    for cell in config.cells():
        study.check(cell)
    return config


def run(study: Study, config: Config, out: str, *, chunk: int | None = None, progress: bool = True,
        max_trials: int | None = None) -> str:
    """Run (or resume) ``config`` of ``study`` into ``out/<study>/``; return the results path.

    ``chunk``: trials per compiled call, rounded up to a multiple of GROUP x devices (default
    256 per device); results do not depend on it.
    ``max_trials`` stops after that many new trials (for tests of resumption).
    """
    chunk = None if chunk is None else checks.integer("chunk", chunk, low=1)
    directory = os.path.join(out, study.name)
    parts = os.path.join(directory, "parts")
    os.makedirs(parts, exist_ok=True)
    for name in os.listdir(parts):  # temporaries of a killed run
        if name.endswith(".tmp"):
            os.remove(os.path.join(parts, name))
    metadata_path = os.path.join(directory, "metadata.json")
    metadata = _read_json(metadata_path)
    if metadata is not None and metadata["config"] != json.loads(json.dumps(config.as_json())):
        raise ValueError(f"{directory} holds a run of another configuration (see its metadata.json); "
                         f"choose another --out or delete it")
    if metadata is None:
        metadata = {"config": config.as_json(), "created": _now(), "runs": []}
    devices = jax.local_devices()
    this_run = {"started": _now(), "environment": environment(), "chunk": None}
    metadata["runs"].append(this_run)
    _write_atomic(metadata_path, json.dumps(metadata, indent=2))

    done = {(int(r["cell"]), int(r["replicate"])) for r in read_parts(directory)}
    cells = config.cells()
    groups: dict[tuple, list[int]] = {}
    for index, cell in enumerate(cells):
        groups.setdefault(tuple(cell[name] for name in sorted(study.static)), []).append(index)
    todo = [(i, r) for i in range(len(cells)) for r in range(config.replicates) if (i, r) not in done]
    todo = todo[jax.process_index()::jax.process_count()]
    if max_trials is not None:
        todo = todo[:max_trials]
    unit = GROUP * len(devices)
    per_call = -(-(chunk or 8 * unit) // unit) * unit
    this_run["chunk"] = {}
    bar = _Progress(study.name, len(todo), enabled=progress)
    fields = None
    for key_values, members in groups.items():
        member_set = set(members)
        pending = [t for t in todo if t[0] in member_set]
        if not pending:
            continue
        static = dict(zip(sorted(study.static), key_values))
        batched = _compile(study, static, config.seed, devices)
        size = min(per_call, -(-len(pending) // unit) * unit)  # a small group pads to GROUP x devices only
        if chunk is None and study.bytes_per_trial is not None:
            need = max(study.bytes_per_trial(cells[i]) for i in members)
            size = min(size, max(1, MEMORY_BUDGET // (need * GROUP)) * unit)
        this_run["chunk"][json.dumps(static, sort_keys=True)] = size
        for start in range(0, len(pending), size):
            trials = pending[start:start + size]
            outputs = batched(*_inputs(study, cells, trials, size, devices))
            outputs = {name: np.asarray(value)[: len(trials)] for name, value in outputs.items()}
            rows = _rows(study, config, cells, trials, outputs)
            fields = fields or list(rows[0])
            _write_part(parts, rows, fields)
            bar.update(len(trials))
    bar.close()
    this_run["finished"] = _now()
    this_run["peak_host_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    this_run["trials"] = len(todo)
    this_run["seconds"] = bar.elapsed
    _write_atomic(metadata_path, json.dumps(metadata, indent=2))
    rows = read_parts(directory)
    results = os.path.join(directory, "results.csv")
    if len({(r["cell"], r["replicate"]) for r in rows}) == len(cells) * config.replicates:
        rows.sort(key=lambda r: (int(r["cell"]), int(r["replicate"])))  # stable: axis order kept
        _write_atomic(results, _csv_text(rows, list(rows[0])))
    return results


def trial_key(seed: int, cell: dict, replicate):
    """The key of one trial: fold_in(fold_in(key(seed), cell_hash(cell)), replicate)."""
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), cell_hash(cell)), replicate)


def cell_hash(cell: dict) -> int:
    """A 31-bit hash of the cell's parameter values (stable across runs, machines and grids)."""
    return zlib.crc32(json.dumps(cell, sort_keys=True).encode()) & 0x7FFFFFFF


def read_parts(directory: str) -> list[dict]:
    """Every row written so far (whole chunks only), unsorted."""
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


def environment() -> dict:
    """Versions and devices, for the metadata file."""
    import jaxtrees

    devices = jax.devices()
    return {
        "jaxtrees": jaxtrees.__version__, "jax": jax.__version__, "jaxlib": _version("jaxlib"),
        "numpy": np.__version__, "python": platform.python_version(), "platform": platform.platform(),
        "backend": jax.default_backend(), "devices": [str(d) for d in devices],
        "device_kind": devices[0].device_kind, "local_device_count": jax.local_device_count(),
        "process_index": jax.process_index(), "process_count": jax.process_count(),
    }


def _compile(study: Study, static: dict, seed: int, devices):
    """``jit(shard_map(lax.map(vmap over GROUP trials)))``: every device runs the same compiled
    group of GROUP trials however many rows it holds, so per-trial arithmetic (and with it every
    float in a row) does not depend on the chunk size or the number of devices."""

    def one(args):
        cell_hash_, replicate, dynamic = args
        key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), cell_hash_), replicate)
        out = study.trial(key, {**static, **dynamic})
        return {name: jnp.asarray(value) for name, value in out.items()}

    def local(hashes, replicates, dynamic):
        return jax.lax.map(one, (hashes, replicates, dynamic), batch_size=GROUP)

    mesh = Mesh(np.asarray(devices), ("batch",))
    spec = PartitionSpec("batch")
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))


def _inputs(study: Study, cells, trials, per_call, devices):
    padded = trials + [trials[-1]] * (per_call - len(trials))
    hashes = np.asarray([cell_hash(cells[i]) for i, _ in padded], np.uint32)
    replicates = np.asarray([r for _, r in padded], np.uint32)
    dynamic = {}
    for name in cells[0]:
        if name in study.static:
            continue
        values = [cells[i][name] for i, _ in padded]
        dtype = np.int32 if all(isinstance(v, int) for v in values) else np.float32
        dynamic[name] = np.asarray(values, dtype)
    return hashes, replicates, dynamic


def _rows(study: Study, config: Config, cells, trials, outputs) -> list[dict]:
    rows = []
    axis_name = _axis_name(study)
    for t, (i, r) in enumerate(trials):
        base = {"study": study.name, "seed": config.seed, "cell": i, "replicate": r, **cells[i]}
        if axis_name is None:
            rows.append({**base, **{name: _scalar(value[t]) for name, value in outputs.items()}})
            continue
        values = study.axis[1](cells[i])
        for a, axis_value in enumerate(values):
            row = {**base, axis_name: axis_value}
            for name, value in outputs.items():
                row[name] = _scalar(value[t][a] if value.ndim > 1 else value[t])
            rows.append(row)
    return rows


def _axis_name(study: Study):
    return None if study.axis is None else study.axis[0]


def _scalar(v):
    v = np.asarray(v)
    if v.dtype == bool:
        return int(v)
    if np.issubdtype(v.dtype, np.integer):
        return int(v)
    return float(v)


def _write_part(parts: str, rows: list[dict], fields: list[str]):
    name = f"{time.time_ns():020d}-{jax.process_index():04d}-{uuid.uuid4().hex[:8]}.csv"
    _write_atomic(os.path.join(parts, name), _csv_text(rows, fields))


def _csv_text(rows, fields) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _write_atomic(path: str, text: str):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_json(path: str):
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def _as_list(value, split=False) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    if split and isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [value]


def _parse(name: str, value, example):
    """``value`` (a string, or a number from a JSON config) as the type of ``example``, so that
    equal cells get equal keys however they were given (``c=0`` and ``"c": 0`` are both 0.0)."""
    kind = type(example)
    if isinstance(value, str):
        try:
            if kind is bool:
                return {"true": True, "false": False, "1": True, "0": False}[value.lower()]
            if kind in (int, float):
                return kind(value)
        except (ValueError, KeyError):
            raise ValueError(f"{name} must be {kind.__name__}, got {value!r}") from None
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is not str and kind is not type(value):
        raise ValueError(f"{name} must be {kind.__name__}, got {value!r}")
    return value


def _version(package: str) -> str:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:  # noqa: BLE001 - metadata only
        return "unknown"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class _Progress:
    """Trials done, rate and ETA on stderr (one updating line on a terminal, else a line per ~10%)."""

    def __init__(self, name: str, total: int, enabled: bool):
        self.name, self.total, self.enabled = name, total, enabled
        self.done, self.start, self.last_line = 0, time.perf_counter(), -1
        self.tty = sys.stderr.isatty()
        if enabled:
            self._show()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def update(self, n: int):
        self.done += n
        if self.enabled:
            self._show()

    def close(self):
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()

    def _show(self):
        rate = self.done / max(self.elapsed, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        line = (f"{self.name}: {self.done}/{self.total} trials  {rate:,.0f} trials/s  "
                f"elapsed {self.elapsed:,.0f} s  ETA {'?' if math.isinf(eta) else f'{eta:,.0f} s'}")
        if self.tty:
            sys.stderr.write("\r" + line)
        else:
            decile = 10 * self.done // max(self.total, 1)
            if decile == self.last_line:
                return
            self.last_line = decile
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


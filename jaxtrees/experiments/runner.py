"""Running a study: its trials, in compiled chunks, on every local device, into a :class:`Store`.

:func:`run` writes one row per trial (and per entry of the study's ``axis``) into ``OUT/STUDY/``
(:mod:`~jaxtrees.experiments.store`), one compiled program per static group (:class:`_Job`),
showing :mod:`~jaxtrees.experiments.progress` on stderr. It also re-exports what a caller of
:func:`run` needs: ``Study``, ``Config``, ``configure``, ``cell_hash``, ``trial_key``, ``read_results``,
``read_parts``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import functools
import json
import os
import resource
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from jaxtrees.core import checks, programs
from jaxtrees.experiments.progress import Progress
from jaxtrees.experiments.store import Store, environment, now, read_parts, read_results
from jaxtrees.experiments.study import Config, Study, cell_hash, column_descriptions, configure, trial_key
from jaxtrees.learners import growth

__all__ = ["ACCELERATOR_GROUP", "CPU_CACHE_BUDGET", "GROUP", "MEMORY_BUDGET", "default_compile_threads", "group_size",
           "memory_budget", "run", "Study", "Config", "configure", "cell_hash", "trial_key", "read_results", "read_parts"]

#: Trials vmapped together on a CPU device: small groups under ``lax.map`` keep a group's working
#: set in cache (on 2 cores, growth for 4096 trials ran 2x faster in groups of 64 than in one vmap).
GROUP = 32
#: ... and on a GPU or TPU, which wants one wide vmap (on an H100, ``lax.map`` over groups of 64 ran
#: 3.4x slower than one vmap over 4096 trials).
ACCELERATOR_GROUP = 1024
#: Bytes a CPU group's working set may take (a study's ``working_set_per_trial`` x group): the
#: compare study's AdaBoost, forests and sparse recovery at m = 16384 (1.6 MiB per trial) ran 2-5x
#: faster in groups of 2 than of 32 on a 2-core AVX-512 CPU (each round sweeps the group's float
#: rows; past the caches every sweep goes to memory).
CPU_CACHE_BUDGET = 4 * 2**20
#: Memory per device a group of trials may use where the device does not report its own (a CPU):
#: default chunks hold at most 8 groups per device, fewer if the study's ``bytes_per_trial`` says
#: they would need more (an explicit chunk overrides).
MEMORY_BUDGET = 2 * 2**30


def default_compile_threads() -> int:
    """Programs compiled at once by default, ahead of the one running: half the CPU cores, 2 to 8.
    XLA:CPU compiles one program on ~1.6 of 2 cores and traces it on one (Python): on 2 cores two at a
    time compiled the compare study's programs 1.4x faster (docs/benchmarks.md)."""
    return max(2, min(8, (os.cpu_count() or 2) // 2))


def memory_budget(device) -> int:
    """Bytes a chunk may use on ``device``: a quarter of what an accelerator reports it can hold
    (``memory_stats()["bytes_limit"]``), else ``MEMORY_BUDGET``."""
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    limit = (stats or {}).get("bytes_limit")
    return int(limit) // 4 if limit else MEMORY_BUDGET


def group_size(device, bytes_per_trial: int | None = None, group: int | None = None,
               working_set: int | None = None) -> int:
    """Trials vmapped together on ``device``: ``group`` if given; else on a CPU ``GROUP``, halved
    (down to 1) while the group's working set (``working_set`` bytes per trial x group) exceeds
    ``CPU_CACHE_BUDGET``; else (a GPU or TPU) ``ACCELERATOR_GROUP``, halved (not below ``GROUP``)
    while a group's estimated memory (``bytes_per_trial`` x group) exceeds :func:`memory_budget`."""
    if group is not None:
        return checks.integer("group", group, low=1, high=2**16)
    if device.platform == "cpu":
        size = GROUP
        while working_set is not None and size > 1 and size * working_set > CPU_CACHE_BUDGET:
            size //= 2
        return size
    size = ACCELERATOR_GROUP
    while bytes_per_trial is not None and size > GROUP and size * bytes_per_trial > memory_budget(device):
        size //= 2
    return size


def run(study: Study, config: Config, out: str, *, chunk: int | None = None, group: int | None = None,
        progress: bool = True, max_trials: int | None = None, compile_threads: int | None = None) -> str:
    """Run (or resume) ``config`` of ``study`` into ``out/<study>/``; return the results path.

    ``chunk``: trials per compiled call, rounded up to a multiple of the group x devices (default
    8 groups per device, fewer if the study's memory estimate asks); results do not depend on it.
    ``group``: trials vmapped together per device (default :func:`group_size`: by platform).
    ``max_trials`` stops after that many new trials (for tests of resumption).
    ``compile_threads``: programs traced and compiled at once on background threads, ahead of the
    one running (default :func:`default_compile_threads`; 1: one ahead); results do not depend on it.
    Tracing happens on those threads, so JAX settings made with ``jax.config.update`` apply to the
    trials, and settings of a ``with`` block around the call (thread-local in JAX) do not.
    A second run into the same directory while this one writes raises ValueError.

    ``config`` is a resolved :class:`~jaxtrees.experiments.study.Config` (:func:`configure`); one row
    per trial (and per entry of the study's ``axis``, e.g. per sample size on a common-random-numbers
    m-grid) goes into ``OUT/STUDY/`` (:mod:`jaxtrees.experiments.store`: parts written atomically,
    resumable, locked against a second writer).

    Execution: the trials of a static group are cut into chunks of ``chunk`` trials (padded to a
    fixed size, so one compilation serves every chunk), the chunk axis is sharded over all local
    devices (``shard_map`` over ``Mesh(devices, ("batch",))``), each device runs its rows in groups of
    vmapped trials (:func:`group_size`: 32 on a CPU, fewer if the study's working set would overflow
    the caches, 1024 on a GPU or TPU, fewer if the study's memory estimate asks; the same compiled
    arithmetic for any chunk size or device count, so rows are bitwise reproducible; a resumed run
    keeps its group). Under ``jax.distributed`` (several processes, e.g. one per host)
    trial t of the grid runs on process t mod P, whatever was done before, so processes that start
    at different times never take the same trial; each writes its own parts, and after a barrier
    process 0 writes ``results.csv``.
    """
    chunk = None if chunk is None else checks.integer("chunk", chunk, low=1)
    group = None if group is None else checks.integer("group", group, low=1, high=2**16)
    threads = default_compile_threads() if compile_threads is None else checks.integer(
        "compile_threads", compile_threads, low=1, high=64)
    store = Store(out, study.name)
    metadata = store.open(config.as_json())
    try:
        job = _Job(study, config, store, metadata, jax.local_devices(), chunk, group, progress)
        todo = job.plan(max_trials)
        work = job.pending(todo)
        bar = Progress(job.label, len(todo), enabled=progress, programs=len(work))
        ahead = _Ahead(job, work, threads)
        try:
            for program, compiled in ahead.programs(bar):
                job.run(program, compiled, bar)
                del compiled  # this group's program, unmapped once it has run
                ahead.release_if_crowded()  # a notebook's own jit caches past a quarter of vm.max_map_count
        finally:
            ahead.cancel()
        bar.close()
        job.finish(len(todo), bar.elapsed)
    finally:
        store.close()
    return store.results_path


def _describe(static: dict) -> str:
    """A program's static values for the progress line (its branches counted, not listed)."""
    return ", ".join(f"{k}={len(v)}" if k == "branches" else f"{k}={'/'.join(map(str, v)) if isinstance(v, tuple) else v}"
                     for k, v in static.items())


@dataclasses.dataclass
class _Program:
    """One static group's program as this run sizes it: its static values (``name``: as JSON, the
    key of its entries in metadata.json), trials vmapped per device, trials per call, and the
    slots of its pending trials (:func:`_pack`)."""

    static: dict
    name: str
    group: int
    size: int
    slots: list
    trials: int
    planned: int = 0  # the group's trials in the whole grid (resumed or not), in its largest branch


class _Ahead:
    """The job's programs in order, each traced and compiled on a daemon thread while earlier ones
    run, at most ``threads`` ahead of the one running (XLA releases the GIL while it compiles). The
    wait for a program is what compiling adds to the run (``compile_wait_seconds``, the progress
    line's compile time); its thread's seconds are its ``compile_seconds``."""

    def __init__(self, job: "_Job", work, threads: int):
        self.job, self.work, self.threads = job, iter(work), threads
        self.queue: collections.deque = collections.deque()
        self.cancelled = threading.Event()

    def cancel(self):
        """Programs not yet traced or compiled are not (the run ended early: an error, an interrupt)."""
        self.cancelled.set()

    def _submit(self) -> bool:
        item = next(self.work, None)
        if item is None:
            return False
        program, future = self.job.size(*item), concurrent.futures.Future()

        def compile_():
            try:
                future.set_result(self.job.compile(program, self.cancelled))
            except BaseException as e:  # noqa: BLE001 (raised in the run, where the program is wanted)
                future.set_exception(e)

        threading.Thread(target=compile_, name="jaxtrees compile", daemon=True).start()
        self.queue.append((program, future))
        return True

    def programs(self, bar: Progress):
        """``(program, compiled)`` per static group, in order, recording each one's compile seconds."""
        while len(self.queue) < self.threads and self._submit():
            pass
        record = self.job.record
        while self.queue:
            program, future = self.queue.popleft()
            bar.phase("compiling " + _describe(program.static))
            started = time.perf_counter()
            held = list(future.result())  # [compiled, seconds]: handed on, not kept here while it runs
            record["compile_wait_seconds"][program.name] = round(time.perf_counter() - started, 3)
            record["compile_seconds"][program.name] = round(held.pop(), 3)
            bar.compiled(record["compile_wait_seconds"][program.name])
            del future
            self._submit()  # the next one compiles while this one runs
            yield program, held.pop()

    def release_if_crowded(self):
        """:func:`~jaxtrees.core.programs.release_if_crowded`, once the programs compiling now are
        done (JAX's caches are not cleared under a trace); the compiled ones held stay."""
        if programs.crowded():
            for _, future in self.queue:
                concurrent.futures.wait([future])
            programs.release()


@dataclasses.dataclass
class _Job:
    """One call of :func:`run`, in steps: :meth:`plan` the trials, then per static group :meth:`size`,
    :meth:`compile` and :meth:`run` its program, and :meth:`finish`; each step records its part of
    this run's entry in metadata.json (``record``)."""

    study: Study
    config: Config
    store: Store
    metadata: dict
    devices: list
    chunk: int | None
    group: int | None
    progress: bool

    def __post_init__(self):
        env = environment()
        # A resumed run compiles as the first run on this backend did (as it keeps the group): the same rows.
        earlier = [r["compiler_options"] for r in self.metadata["runs"]
                   if "compiler_options" in r and r.get("environment", {}).get("backend") == env["backend"]]
        self.record = {"started": now(), "environment": env, "chunk": {}, "group": {},
                       "compile_seconds": {}, "compile_wait_seconds": {}, "run_seconds": {}, "trials_run": {},
                       "compiler_options": earlier[0] if earlier else compiler_options(self.study, self.devices[0])}
        self.metadata["runs"].append(self.record)
        self.metadata["columns"] = column_descriptions(self.study, self.config)
        self.store.write_metadata(self.metadata)
        self.cells = self.config.cells()
        self.process, self.processes = jax.process_index(), jax.process_count()
        self.label = (self.study.name if self.processes == 1
                      else f"{self.study.name} [process {self.process} of {self.processes}]")

    def plan(self, max_trials: int | None) -> list[tuple[int, int]]:
        """This process's trials still to run, (cell, replicate) in grid order: trial t of the grid
        runs on process t mod P; those in the store's parts are done."""
        done = {(int(r["cell"]), int(r["replicate"])) for r in self.store.read_parts()}
        replicates = self.config.replicates
        todo = [(i, r) for i in range(len(self.cells)) for r in range(replicates)
                if (i * replicates + r) % self.processes == self.process and (i, r) not in done]
        return todo if max_trials is None else todo[:max_trials]

    def pending(self, todo) -> list[tuple[list[int], list]]:
        """(cells of a static group, its trials in ``todo``) for each group with trials to run."""
        out = []
        for members in self.study.static_groups(self.cells):
            member_set = set(members)
            pending = [t for t in todo if t[0] in member_set]
            if pending:
                out.append((members, pending))
        return out

    def size(self, members: list[int], pending: list) -> _Program:
        """The group's program sized for the devices: trials vmapped per device (a resumed run keeps
        the group it started with: the group is part of the arithmetic, a different one may change a
        float in its last ulp, so the rows stay those of one run) and trials per call."""
        study, cells = self.study, [self.cells[i] for i in members]
        static = study.program(cells)
        need = None if study.bytes_per_trial is None else max(map(study.bytes_per_trial, cells))
        working = None if study.working_set_per_trial is None else max(map(study.working_set_per_trial, cells))
        name = json.dumps(static, sort_keys=True)
        earlier = [r["group"][name] for r in self.metadata["runs"][:-1] if name in r.get("group", {})]
        group = self.group if self.group is not None or not earlier else earlier[-1]
        vmapped = group_size(self.devices[0], need, group, working)
        unit = vmapped * len(self.devices)
        per_call = -(-(self.chunk or 8 * unit) // unit) * unit
        if self.chunk is not None and per_call != self.chunk and self.progress and not self.record["chunk"]:
            print(f"{study.name}: chunk {self.chunk} rounded up to {per_call} (a multiple of {vmapped} trials x "
                  f"{len(self.devices)} device(s))", file=sys.stderr)
        slots = _pack(study, self.cells, pending, vmapped)
        size = min(per_call, -(-len(slots) // unit) * unit)  # a small set pads to one group per device only
        if self.chunk is None and need is not None:
            size = min(size, max(1, memory_budget(self.devices[0]) // (need * vmapped)) * unit)
        self.record["chunk"][name] = size
        self.record["group"][name] = vmapped
        # each branch compiles its own code: a branch's trials decide its level loop
        branch = collections.Counter(tuple(cells_[name] for name in study.branches) for cells_ in cells)
        return _Program(static, name, vmapped, size, slots, len(pending), max(branch.values()) * self.config.replicates)

    def compile(self, program: _Program, cancelled: threading.Event | None = None):
        """``(compiled, seconds)``: the program traced and compiled ahead of its first call (on any
        thread: it writes nothing of the job's); not started, or not compiled after tracing, once
        ``cancelled`` is set (CancelledError)."""
        if cancelled is not None and cancelled.is_set():
            raise concurrent.futures.CancelledError
        started = time.perf_counter()
        inputs = _inputs(self.study, program.static, self.cells, program.slots[:program.size], program.size,
                         program.group)
        # A program (branch) of few trials would spend more compiling unrolled tree levels than it saves running them.
        few = program.planned <= loop_max_trials(self.study)
        with growth.level_loop(growth.LOOP_CHUNK if few else None):
            lowered = _compile(self.study, program.static, self.config.seed, self.devices, program.group).lower(*inputs)
        if cancelled is not None and cancelled.is_set():
            raise concurrent.futures.CancelledError
        compiled = lowered.compile(self.record["compiler_options"])
        return compiled, time.perf_counter() - started

    def run(self, program: _Program, compiled, bar: Progress):
        """Every slot of the program, call by call, each call's rows written as one part: a call's rows
        are made and written while the next call runs (JAX dispatches it before they are read)."""
        started = time.perf_counter()
        running = None
        for start in range(0, len(program.slots), program.size):
            part = program.slots[start:start + program.size]
            outputs = compiled(*_inputs(self.study, program.static, self.cells, part, program.size, program.group))
            if running is not None:
                self._write(*running, bar)
            running = part, outputs
        if running is not None:
            self._write(*running, bar)
        self.record["run_seconds"][program.name] = round(time.perf_counter() - started, 3)
        self.record["trials_run"][program.name] = program.trials
        self.record["seconds"] = bar.elapsed
        self.store.write_metadata(self.metadata)  # a run killed later keeps this program's timings

    def _write(self, part, outputs, bar: Progress):
        """One call's rows (its real slots, not the padding) as one part."""
        real = [t for t, (_, padding) in enumerate(part) if not padding]
        outputs = {key: np.asarray(value)[real] for key, value in outputs.items()}
        trials = [part[t][0] for t in real]
        self.store.write_part(_rows(self.study, self.config, self.cells, trials, outputs))
        bar.update(len(trials))

    def finish(self, trials: int, seconds: float):
        """Record the run's end; after every process is done, process 0 writes ``results.csv``."""
        self.record["finished"] = now()
        self.record["peak_host_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        self.record["trials"] = trials
        self.record["seconds"] = seconds
        self.store.write_metadata(self.metadata)
        if self.processes > 1:  # every process's parts are on disk before process 0 reads them
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(f"jaxtrees run {self.study.name}")
        rows = self.store.read_parts()
        if self.process == 0 and len({(r["cell"], r["replicate"]) for r in rows}) == self.config.trials:
            self.store.write_results(rows)


def compiler_options(study: Study, device) -> dict | None:
    """XLA options for ``study``'s programs on ``device``: its ``cpu_opt_level`` on a CPU, unless
    XLA_FLAGS sets the level itself; on a GPU :func:`jaxtrees.core.programs.compiler_options`."""
    if device.platform != "cpu":
        return programs.compiler_options(device)
    if study.cpu_opt_level is None or OPT_LEVEL_FLAG in os.environ.get("XLA_FLAGS", ""):
        return None
    return {OPT_LEVEL_FLAG: study.cpu_opt_level}


#: Programs of at most this many trials in the grid grow their deep trees in a level loop
#: (:func:`jaxtrees.learners.growth.level_loop`: the same trees, one level compiled, each run slower).
LOOP_MAX_TRIALS = 512


def loop_max_trials(study: Study) -> int:
    """The most trials a program of ``study`` may have to grow its deep trees in a level loop (``Study.level_loop``)."""
    if isinstance(study.level_loop, bool):
        return LOOP_MAX_TRIALS if study.level_loop else 0
    return study.level_loop


#: XLA's option (and flag) for the LLVM optimization level of CPU programs.
OPT_LEVEL_FLAG = "xla_backend_optimization_level"


#: The input that holds a group's branch of a program of several (``Study.branches``).
BRANCH = "branch_index"


def _compile(study: Study, static: dict, seed: int, devices, group: int):
    """``jit(shard_map(scan over groups of vmap over ``group`` trials))`` (``lax.map`` with
    ``batch_size=group``, with the study's ``grouped`` parameters passed once per group, unbatched;
    where the program serves several ``branches``, the trial is a ``lax.switch`` on the group's):
    every device runs the same compiled group of trials however many rows it holds, so per-trial
    arithmetic (and with it every float in a row) does not depend on the chunk size or the number
    of devices."""

    base = {name: value for name, value in static.items() if name != "branches"}
    unbranched = {name: value for name, value in base.items() if name not in study.branches}  # after's: 1 branch or more

    def trial(key, values, dynamic, shared):
        out = study.trial(key, {**base, **values, **dynamic, **shared})
        return {name: jnp.asarray(value) for name, value in out.items()}

    def switch(key, dynamic, shared):
        if "branches" not in static:
            return trial(key, {}, dynamic, shared)
        branch = shared.pop(BRANCH)  # uniform per group: one branch runs
        branches = [functools.partial(trial, key, dict(zip(study.branches, values))) for values in static["branches"]]
        try:
            return jax.lax.switch(branch, branches, dynamic, shared)
        except TypeError as e:
            if "branch" not in str(e):
                raise
            raise ValueError(f"study {study.name!r}: the trial's outputs differ between the branches "
                             f"{dict(zip(study.branches, zip(*static['branches'])))} of one program (Study.branches "
                             f"needs one shape and dtype per output): {e}") from None

    def one(cell_hash_, replicate, dynamic, shared):
        key = study.trial_key(seed, cell_hash_, replicate)
        shared = dict(shared)
        out = switch(key, dynamic, shared)
        if study.after is None:
            return out
        out = study.after(key, {**unbranched, **dynamic, **shared}, out)  # once, whichever branch ran
        return {name: jnp.asarray(value) for name, value in out.items()}

    def local(hashes, replicates, dynamic, shared):
        by_group = lambda x: x.reshape((-1, group) + x.shape[1:])  # noqa: E731

        def body(carry, xs):
            return carry, jax.vmap(one, in_axes=(0, 0, 0, None))(*xs)

        xs = (by_group(hashes), by_group(replicates), jax.tree.map(by_group, dynamic), shared)
        _, out = jax.lax.scan(body, None, xs)
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), out)

    mesh = Mesh(np.asarray(devices), ("batch",))
    spec = PartitionSpec("batch")
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))


def _pack(study: Study, cells, pending, group: int) -> list[tuple]:
    """``pending`` trials as slots ``((cell, replicate), padding)`` in which every group of ``group``
    consecutive slots shares the values of the study's ``grouped`` parameters: trials sorted by those
    values (stable), each run of equal values padded to a whole number of groups with copies of its
    last trial (padding: computed, never written)."""
    names = study.grouped
    if not names:
        return [(t, False) for t in pending]
    value = lambda t: tuple(cells[t[0]][name] for name in names)  # noqa: E731
    slots = []
    for t in sorted(pending, key=lambda t: json.dumps(value(t))):
        if slots and len(slots) % group and value(slots[-1][0]) != value(t):
            slots += [(slots[-1][0], True)] * (group - len(slots) % group)
        slots.append((t, False))
    return slots


def _inputs(study: Study, static: dict, cells, slots, per_call, group: int):
    """The chunk's slots padded to ``per_call`` (copies of the last slot): cell hashes, replicate numbers,
    the dynamic parameters per trial and the ``grouped`` ones per group (int32 where every cell of the
    grid has an int or bool, or for ``choices`` (the value's index in the program's ``name_choices``),
    else float32: one dtype per parameter for the whole run, so one compilation serves every chunk)."""
    padded = [t for t, _ in slots] + [slots[-1][0]] * (per_call - len(slots))
    hashes = np.asarray([study.key_hash(cells[i]) for i, _ in padded], np.uint32)
    replicates = np.asarray([r for _, r in padded], np.uint32)
    dynamic, shared = {}, {}
    for name in cells[0]:
        if name in study.static:
            continue
        if name in study.choices:
            values = [static[f"{name}_choices"].index(cells[i][name]) for i, _ in padded]
            dtype = np.int32
        else:
            values = [cells[i][name] for i, _ in padded]
            dtype = np.int32 if all(isinstance(c[name], int) for c in cells) else np.float32
        if name in study.grouped:
            shared[name] = np.asarray(values[::group], dtype)
        else:
            dynamic[name] = np.asarray(values, dtype)
    if "branches" in static:
        combos = [tuple(combo) for combo in static["branches"]]
        branch = [combos.index(tuple(cells[i][name] for name in study.branches)) for i, _ in padded]
        shared[BRANCH] = np.asarray(branch[::group], np.int32)
    return hashes, replicates, dynamic, shared


def _rows(study: Study, config: Config, cells, trials, outputs) -> list[dict]:
    names = list(outputs)
    columns = [_python(outputs[name]) for name in names]  # one conversion per output, not per value
    rows = []
    for t, (i, r) in enumerate(trials):
        base = {"study": study.name, "seed": config.seed, "cell": i, "replicate": r, **cells[i]}
        if study.axis is None:
            rows.append({**base, **{name: column[t] for name, column in zip(names, columns)}})
            continue
        values = [column[t] for column in columns]
        nested = [isinstance(v, list) for v in values]
        for a, axis_value in enumerate(study.axis.values(cells[i])):
            row = {**base, study.axis.name: axis_value}
            row.update(zip(names, (v[a] if deep else v for v, deep in zip(values, nested))))
            rows.append(row)
    return rows


def _python(value):
    """An output array as nested Python lists: bools and integers as int, floats as float (exactly the
    array's values, as ``float(np.float32(x))``)."""
    value = np.asarray(value)
    if value.dtype == bool or np.issubdtype(value.dtype, np.integer):
        value = value.astype(np.int64)
    return value.tolist()

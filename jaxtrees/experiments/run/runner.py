"""Running a study: its trials, in compiled chunks, on every local device, into a :class:`Store`.

:func:`run` writes one row per trial (and per entry of the study's ``axis``) into ``OUT/STUDY/``
(:mod:`~jaxtrees.experiments.results.store`), one compiled program per static group
(:mod:`~jaxtrees.experiments.run.compiled`), showing :mod:`~jaxtrees.experiments.run.progress` on stderr.
A call's inputs are gathered from per-cell arrays and its outputs go to disk as columns: no Python
object per trial or row. It also re-exports what a caller of :func:`run` needs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import signal
import sys
import threading
import time

import jax
import numpy as np

from jaxtrees.core import checks
from jaxtrees.experiments import contract as contracts
from jaxtrees.experiments.run import workers
from jaxtrees.experiments.run import compiled as compiling
from jaxtrees.experiments.run.compiled import (ACCELERATOR_GROUP, CPU_CACHE_BUDGET, GROUP, LOOP_MAX_TRIALS,  # noqa: F401
                                           MEMORY_BUDGET, OPT_LEVEL_FLAG, compiler_options, default_compile_threads,
                                           group_size, loop_max_trials, memory_budget)  # noqa: F401
from jaxtrees.experiments.results.layout import Layout, inputs, pack
from jaxtrees.experiments.run.progress import Progress
from jaxtrees.experiments.contract import environment, now
from jaxtrees.experiments.results.reading import read_results
from jaxtrees.experiments.results.store import Store
from jaxtrees.experiments.results.writer import IN_FLIGHT, Writer
from jaxtrees.experiments.study import Config, Study, cell_hash, column_descriptions, configure, trial_key

__all__ = ["ACCELERATOR_GROUP", "CPU_CACHE_BUDGET", "GROUP", "MEMORY_BUDGET", "Changed", "default_compile_threads",
           "group_size", "memory_budget", "run", "Study", "Config", "configure", "cell_hash", "trial_key", "read_results"]

#: Seconds a default call should take at most, once its program's trials are timed: a killed run loses at most
#: the call running (and rows wait at most the writer's FLUSH_SECONDS to be written), and Ctrl-C waits for the
#: calls in flight: two (writer.IN_FLIGHT) while calls are short, one once a call takes a quarter of this or
#: more. A call of one group per device runs however long it takes.
TARGET_CALL_SECONDS = 30 / 2
#: A default call has at most this many times the groups of its program's previous call.
GROWTH = 4


class Changed(ValueError):
    """A resumed run differs from the recorded one in something that can change its rows."""


def run(study: Study, config: Config, out: str, *, chunk: int | None = None, group: int | None = None,
        progress: bool = True, max_trials: int | None = None, compile_threads: int | None = None,
        allow_changes: bool = False, compile_workers: str | None = None, about: dict | None = None) -> str:
    """Run (or resume) ``config`` of ``study`` into ``out/<study>/``; return that directory.

    ``chunk``: trials per compiled call, rounded up to a multiple of the group x devices; results do not
    depend on it. By default a program is compiled for 8 groups per device (fewer if the study's memory
    estimate asks) and its calls are timed: the first runs one group per device, the next ones up to
    ``GROWTH`` times more while a call takes under ``TARGET_CALL_SECONDS`` at the trial time measured.
    ``group``: trials vmapped together per device (default :func:`group_size`: by platform).
    ``max_trials`` stops after that many new trials (for tests of resumption).
    ``compile_threads``: programs traced and compiled at once on background threads, ahead of the
    one running (default :func:`default_compile_threads`; 1: one ahead); results do not depend on it.
    Tracing happens on those threads, so JAX settings made with ``jax.config.update`` apply to the
    trials, and settings of a ``with`` block around the call (thread-local in JAX) do not.
    ``compile_workers``: "threads" (trace and compile in this process), "processes" (in worker
    processes, each with its own GIL, which load nothing on the accelerator they do not need; the run
    loads each executable without tracing it again; :mod:`~jaxtrees.experiments.run.workers`) or "auto"
    (default, or ``$JAXTREES_COMPILE_WORKERS``): processes for two or more programs on a CPU or GPU (threads
    measured GIL-bound on both), threads for one program, on a TPU and under ``jax.distributed``; under
    "auto" a program whose worker fails is compiled in this process (said once on stderr). Results do
    not depend on it. With JAX's persistent compilation cache on, a program its program cache holds
    (:class:`~jaxtrees.experiments.run.programs.Programs`) is loaded without tracing, and workers start only
    for the others.
    A second run into the same directory while this one writes raises ValueError. ``about``: what metadata.json
    records of the study (where it came from, its generic spec: :func:`~jaxtrees.experiments.reporting.about`).

    Everything that can change a row's value (:func:`contract`: the group of each program, compiler
    options, versions, PRNG and precision settings, backend) is recorded in metadata.json before the
    first call; resuming under a difference raises :class:`Changed` naming it, unless
    ``allow_changes`` (the new values are then recorded with the run, as overrides).

    Execution: the trials of a static group are cut into chunks of ``chunk`` trials (placed in a fixed size, the
    groups they leave empty skipped, so one compilation serves every chunk), the chunk axis is sharded over all
    local devices (``shard_map`` over ``Mesh(devices, ("batch",))``), each device runs its rows in groups of
    vmapped trials (:func:`group_size`); the same compiled arithmetic for any chunk size or device count, so
    rows are bitwise reproducible. Under ``jax.distributed`` (several processes, e.g. one per host) trial t of
    the grid runs on process t mod P, whatever was done before; each writes its own parts, and the run ends at a
    barrier.
    """
    chunk = None if chunk is None else checks.integer("chunk", chunk, low=1)
    group = None if group is None else checks.integer("group", group, low=1, high=2**16)
    threads = default_compile_threads() if compile_threads is None else checks.integer(
        "compile_threads", compile_threads, low=1, high=64)
    process, processes = jax.process_index(), jax.process_count()
    platform = jax.local_devices()[0].platform
    workers.choose(compile_workers, study, platform, processes)  # a bad value fails before the store is opened
    store = Store(out, study.name, process, processes)
    run_id = f"{int(np.frombuffer(os.urandom(4), np.uint32)[0]):08x}"
    if process == 0:  # takes the directory's lock, then tells the others the run's id, which they find in it
        metadata = store.open(config.as_json(), run_id)
    run_id = _shared_id(run_id, processes)
    if process != 0:
        metadata = store.open(config.as_json(), run_id)
    try:
        if about is not None:
            metadata["study"] = about
        job = _Job(study, config, store, metadata, jax.local_devices(), chunk, group, progress, allow_changes)
        todo = job.plan(max_trials)
        work = job.start(todo)
        if progress and job.done and todo.size:
            print(f"{job.label}: {todo.size:,} new trials ({job.done:,} of {config.trials:,} in {store.directory} "
                  f"already done)", file=sys.stderr)
        bar = Progress(job.label, int(todo.size), enabled=progress, programs=len(work))
        fresh = [p for p in work if not compiling.cached(job, p)]  # those the program cache does not hold
        how = workers.choose(compile_workers, study, platform, processes, len(fresh))  # threads or processes
        job.record["compile_workers"] = how
        auto = (compile_workers or os.environ.get("JAXTREES_COMPILE_WORKERS", "auto")) == "auto"
        pool = (workers.Pool(workers.default_workers(len(fresh), threads), fallback=auto)
                if how == "processes" and fresh else None)
        ahead = compiling.Ahead(job, work, threads if pool is None else len(pool.pids), pool)
        try:
            with _deferred_interrupt() as interrupted:
                for program, executable in ahead.programs(bar, interrupted):
                    job.run(program, executable, bar, interrupted)
                    del executable  # this group's program, unmapped once it has run
                    if interrupted.is_set():
                        break  # the parts of the calls made are written; leaving raises KeyboardInterrupt
                    ahead.release_if_crowded()  # a notebook's own jit caches past a quarter of vm.max_map_count
        finally:
            ahead.cancel()
        bar.close()
        job.finish(int(todo.size), bar.elapsed)
    finally:
        store.close()
    return store.directory


def _shared_id(run_id: str, processes: int) -> str:
    """Process 0's ``run_id`` on every process (a broadcast; as it is with one process)."""
    if processes == 1:
        return run_id
    from jax.experimental import multihost_utils

    value = multihost_utils.broadcast_one_to_all(np.asarray([int(run_id, 16)], np.uint32))
    return f"{int(np.asarray(value)[0]):08x}"


class _deferred_interrupt:
    """Inside, Ctrl-C (SIGINT) or SIGTERM is held until the calls in flight are written (a KeyboardInterrupt
    raised inside a device-to-host copy can abort the process), then raised as KeyboardInterrupt; no call or
    compile is waited for beyond those."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self):
        self.flag = threading.Event()
        self.number = signal.SIGINT
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self._held) for s in self.SIGNALS}
        return self.flag

    def _held(self, number, _frame):
        self.number = number
        self.flag.set()

    def __exit__(self, *exc):
        for number, handler in self.previous.items():
            signal.signal(number, handler)
        if self.flag.is_set() and exc[0] is None:
            raise Interrupted(self.number)
        return False


class Interrupted(KeyboardInterrupt):
    """A run ended by a signal (SIGINT or SIGTERM) after its calls in flight were written; ``signal``: which."""

    def __init__(self, number: int):
        super().__init__(signal.Signals(number).name)
        self.signal = int(number)


def _placed(per_device: int, groups: int, devices: int, group: int) -> np.ndarray:
    """Where a call of ``groups`` groups per device goes in a program of ``per_device`` groups per device (the
    call axis is split into one block per device): in each device's first ``groups`` groups."""
    return (np.arange(devices)[:, None] * per_device * group + np.arange(groups * group)).ravel()


@dataclasses.dataclass
class _Pace:
    """How many groups per device a program's calls run: every compiled one (``most``) for a given chunk
    (``fixed``); else one, then at most ``GROWTH`` times the previous call's, as many as fit in
    ``TARGET_CALL_SECONDS`` at the seconds per group of the latest call timed, between 1 and ``most``. A
    call's seconds: from its dispatch, or from the end of the call before it, to its outputs on the host."""

    most: int
    fixed: bool
    calls: list = dataclasses.field(default_factory=list)  # (dispatched, groups per device, trials) per call
    seconds: list = dataclasses.field(default_factory=list)  # per call timed
    per_group: float | None = None  # seconds per group per device, of the latest call timed

    @property
    def ahead(self) -> int:
        """Calls that may be in flight as the next is dispatched: none before a default call is timed (the next
        one's size waits for it), nor after a call of a quarter of TARGET_CALL_SECONDS or more (the device idles
        the host's turn, milliseconds, where Ctrl-C would wait for a second long call); else IN_FLIGHT - 1."""
        if (not self.fixed and self.per_group is None) or (self.seconds and
                                                            self.seconds[-1] >= TARGET_CALL_SECONDS / 4):
            return 0
        return IN_FLIGHT - 1

    def next(self) -> int:
        """Groups per device of the next call."""
        if self.fixed:
            return self.most
        if self.per_group is None:
            return 1
        fit = int(TARGET_CALL_SECONDS / max(self.per_group, 1e-9))
        return max(1, min(self.most, GROWTH * self.calls[-1][1], fit))

    def measure(self, finished: list[float], bar: Progress):
        """Time the calls newly on the host (``finished``: when each reached it), telling ``bar``."""
        for k in range(len(self.seconds), min(len(finished), len(self.calls))):
            dispatched, groups, trials = self.calls[k]
            seconds = max(finished[k] - max(dispatched, finished[k - 1] if k else dispatched), 1e-6)
            self.seconds.append(seconds)
            self.per_group = seconds / groups
            bar.measured(trials, seconds)

    def summary(self) -> dict:
        """What metadata.json records of the program's calls: how many, the most trials and seconds of one."""
        return {"calls": len(self.calls), "most_trials": max((c[2] for c in self.calls), default=0),
                "most_seconds": round(max(self.seconds, default=0.0), 3)}


@dataclasses.dataclass
class _Program:
    """One static group's program as this run sizes it: its static values (``name``: as JSON, the
    key of its entries in metadata.json), trials vmapped per device, trials per call, and the
    slots (trial ids; ``padding``: computed, never written) of its pending trials (:func:`~jaxtrees.experiments.results.layout.pack`)."""

    static: dict
    name: str
    group: int
    size: int
    slots: np.ndarray
    padding: np.ndarray
    trials: int
    planned: int = 0  # the group's trials in the whole grid (resumed or not), in its largest branch


def contract(study: Study, device) -> dict:
    """What besides the seed and parameters can change a row's value, as recorded with a run
    (:func:`~jaxtrees.experiments.contract.terms`): code digests, the study's declaration, versions, JAX's
    value-changing settings, backend, device kind, CPU features, compiler options and XLA_FLAGS (but the
    device count and vector width, which do not)."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith(("--xla_force_host_platform_device_count", "--xla_cpu_prefer_vector_width"))]
    return contracts.terms(study, device, compiler_options(study, device), " ".join(flags), environment())


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


@dataclasses.dataclass
class _Job:
    """One call of :func:`run`, in steps: :meth:`plan` the trials, :meth:`start` (size every program,
    check and record the contract), then per program :meth:`compile` and :meth:`run`, and :meth:`finish`;
    each step records its part of this run's entry in metadata.json (``record``)."""

    study: Study
    config: Config
    store: Store
    metadata: dict
    devices: list
    chunk: int | None
    group: int | None
    progress: bool
    allow_changes: bool = False

    def __post_init__(self):
        self.cells = self.config.cells()
        self.layout = Layout(self.study, self.config)
        self.replicates = self.config.replicates
        self.process, self.processes = self.store.process, self.store.processes
        self.label = (self.study.name if self.processes == 1
                      else f"{self.study.name} [process {self.process} of {self.processes}]")
        self.hashes = np.asarray([self.study.key_hash(c) for c in self.cells], np.uint32)
        self.record = {"started": now(), "environment": environment(), "chunk": {}, "group": {}, "calls": {},
                       "compile_seconds": {}, "compile_wait_seconds": {}, "compiled_or_loaded": {}, "run_seconds": {},
                       "trials_run": {},
                       "host_seconds": 0.0, "handover_seconds": 0.0, "write_seconds": 0.0, "rows_written": 0}
        self._branch = {}  # program name -> each cell's branch index in it

    def plan(self, max_trials: int | None) -> np.ndarray:
        """This process's trials still to run (ids ``cell * replicates + replicate``, ascending): trial
        t of the grid runs on process t mod P; those whole in the store's parts are done."""
        done = self.store.trials_done(len(self.cells), self.replicates, self.layout)
        ids = np.arange(done.size, dtype=np.int64)
        todo = ids[(ids % self.processes == self.process) & ~done]
        self.done = int(np.count_nonzero(done))
        return todo if max_trials is None else todo[:max_trials]

    def start(self, todo: np.ndarray) -> list[_Program]:
        """Every program with trials in ``todo``, sized; the run's contract checked against the recorded
        one (:class:`Changed`) and recorded, with each program's group, before the first call."""
        cell_of = todo // self.replicates
        work = []
        for members in self.study.static_groups(self.cells):
            pending = todo[np.isin(cell_of, members)]
            if pending.size:
                work.append(self.size(members, pending))
        terms = contract(self.study, self.devices[0])
        recorded = self.metadata.get("contract")
        groups = {**(recorded or {}).get("groups", {}), **{p.name: p.group for p in work}}
        if self.processes > 1:  # every process computes the rows process 0 would
            from jaxtrees.experiments.run import distributed

            distributed.agree(self.process, self.processes, {**terms, "groups": {p.name: p.group for p in work}})
        if recorded is not None:
            changed = contracts.differences(recorded, terms) + contracts.group_changes(recorded, groups)
            if changed and not self.allow_changes:
                raise Changed(f"{self.store.directory} was started with other settings that can change its rows: "
                              f"{'; '.join(changed)}. Resume with the recorded ones (e.g. the same --group, "
                              f"XLA_FLAGS, jax version and code), choose another --out, or pass --allow-changes "
                              f"to resume anyway (recorded as an override)")
            if changed:
                self.record["overrides"] = changed
        # every program's group is recorded when first sized, in a resumed run too
        kept = terms if recorded is None or self.allow_changes else recorded
        self.metadata["contract"] = {**kept, "groups": groups}
        self.store.record_contract(self.metadata["contract"])
        self.metadata["runs"].append(self.record)
        self.metadata["columns"] = column_descriptions(self.study, self.config)
        self.store.write_metadata(self.metadata)
        return work

    def size(self, members: list[int], pending: np.ndarray) -> _Program:
        """The group's program sized for the devices: trials vmapped per device (a resumed run keeps
        the recorded group: the group is part of the arithmetic) and trials per call."""
        study, cells = self.study, [self.cells[i] for i in members]
        static = study.program(cells)
        need = None if study.bytes_per_trial is None else max(map(study.bytes_per_trial, cells))
        working = None if study.working_set_per_trial is None else max(map(study.working_set_per_trial, cells))
        name = json.dumps(static, sort_keys=True)
        recorded = (self.metadata.get("contract") or {}).get("groups", {}).get(name)
        if recorded is None:  # metadata of an earlier version: the group of its last run
            recorded = next((r["group"][name] for r in reversed(self.metadata["runs"]) if name in r.get("group", {})),
                            None)
        vmapped = group_size(self.devices[0], need, self.group if self.group is not None else recorded, working)
        if need is not None:
            fits(study.name, name, need, vmapped, self.devices)
        unit = vmapped * len(self.devices)
        per_call = -(-(self.chunk or 8 * unit) // unit) * unit
        if self.chunk is not None and per_call != self.chunk and self.progress and not self.record["chunk"]:
            print(f"{study.name}: chunk {self.chunk} rounded up to {per_call} (a multiple of {vmapped} trials x "
                  f"{len(self.devices)} device(s))", file=sys.stderr)
        slots, padding = pack(study, self.layout, pending, vmapped)
        size = min(per_call, -(-slots.size // unit) * unit)  # a small set pads to one group per device only
        if self.chunk is None and need is not None:
            size = min(size, max(1, memory_budget(self.devices[0]) // (need * vmapped)) * unit)
        self.record["chunk"][name] = size
        self.record["group"][name] = vmapped
        # each branch compiles its own code: a branch's trials decide its level loop
        branch = {}
        for c in cells:
            combo = tuple(c[n] for n in study.branches)
            branch[combo] = branch.get(combo, 0) + 1
        return _Program(static, name, vmapped, size, slots, padding, int(pending.size),
                        max(branch.values()) * self.replicates)

    def compile(self, program: _Program, cancelled: threading.Event | None = None, pool=None):
        """``(executable, seconds, how)``: :func:`~jaxtrees.experiments.run.compiled.compile_program`."""
        return compiling.compile_program(self, program, cancelled, pool)

    def run(self, program: _Program, executable, bar: Progress, interrupted: threading.Event | None = None):
        """Every slot of the program, call by call (:class:`_Pace`: how many groups each); the calls' rows go
        to a :class:`~jaxtrees.experiments.results.writer.Writer`, which copies them to the host and writes parts on
        its thread while the next call runs. An interrupt stops after the calls in flight, their rows written."""
        started = time.perf_counter()
        writer = Writer(self.store, self.layout, on_written=bar.update)
        unit = program.group * len(self.devices)
        pace = _Pace(program.size // unit, self.chunk is not None)
        start = 0
        try:
            while start < program.slots.size:
                if not writer.wait(len(pace.calls) - pace.ahead, interrupted):
                    break  # an interrupt: no more calls
                pace.measure(writer.finished, bar)
                groups = min(pace.next(), -(-(program.slots.size - start) // unit))
                t0 = time.thread_time()  # this thread's CPU seconds: waiting for the device or the writer is not host work
                inputs, trials, padding = self.call(program, start, groups)
                self.record["host_seconds"] += time.thread_time() - t0
                dispatched = time.perf_counter()
                outputs = executable(*inputs)
                t0 = time.thread_time()
                writer.put(trials, padding, outputs)
                self.record["handover_seconds"] += time.thread_time() - t0
                pace.calls.append((dispatched, groups, min(groups * unit, program.slots.size - start)))
                start += groups * unit
        finally:
            writer.close(flush=True)
            pace.measure(writer.finished, bar)
            self.record["write_seconds"] = round(self.record["write_seconds"] + writer.seconds, 3)
            self.record["write_cpu_seconds"] = round(self.record.get("write_cpu_seconds", 0.0) + writer.cpu_seconds, 3)
            self.record["rows_written"] += writer.rows
            self.record["calls"][program.name] = pace.summary()
        self.record["run_seconds"][program.name] = round(time.perf_counter() - started, 3)
        self.record["trials_run"][program.name] = program.trials
        self.record["seconds"] = bar.elapsed
        self.record["host_seconds"] = round(self.record["host_seconds"], 3)
        self.record["handover_seconds"] = round(self.record["handover_seconds"], 3)
        self.store.write_metadata(self.metadata)  # a run killed later keeps this program's timings

    def call(self, program: _Program, start: int, groups: int):
        """``(inputs, trials, padding)`` of a call of ``groups`` groups per device from slot ``start``: the
        slots placed in the program's compiled size, each device's first ``groups`` groups (copies of the
        last slot fill the rest; what they compute, and the skipped groups' zeros, are padding, not written)."""
        unit = program.group * len(self.devices)
        part = slice(start, start + groups * unit)
        slots, padding = program.slots[part], program.padding[part]
        placed = _placed(program.size // unit, groups, len(self.devices), program.group)[:slots.size]
        trials = np.repeat(slots[-1:], program.size)
        trials[placed] = slots
        skipped = np.ones(program.size, bool)
        skipped[placed] = padding
        return self.inputs(program, trials, groups), trials, skipped

    def inputs(self, program: _Program, slots: np.ndarray, groups: int | None = None):
        """A call's inputs for ``slots`` (padded to the program's size with copies of the last):
        cell hashes, replicates, the dynamic parameters per trial and the ``grouped`` ones per group, with
        whether each group runs (:data:`~jaxtrees.experiments.run.compiled.ACTIVE`: each device's first ``groups``;
        default all)."""
        if "branches" in program.static and program.name not in self._branch:
            combos = {tuple(combo): i for i, combo in enumerate(program.static["branches"])}
            self._branch[program.name] = np.asarray(
                [combos.get(tuple(c[n] for n in self.study.branches), -1) for c in self.cells], np.int32)
        hashes, replicates, dynamic, shared = inputs(self.study, self.layout, self.hashes, program.static, slots,
                                                     program.size, program.group, self._branch.get(program.name))
        per_device = program.size // (program.group * len(self.devices))
        runs = np.arange(program.size // program.group) % per_device < (per_device if groups is None else groups)
        return hashes, replicates, dynamic, {**shared, compiling.ACTIVE: runs}

    def finish(self, trials: int, seconds: float):
        """Record the run's end; under ``jax.distributed``, wait for every process (their parts on disk)."""
        self.record["finished"] = now()
        self.record["peak_host_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        self.record["trials"] = trials
        self.record["seconds"] = seconds
        self.store.write_metadata(self.metadata)
        if self.processes > 1:
            from jaxtrees.experiments.run import distributed

            distributed.finish(self.processes)

"""One call of :func:`~jaxtrees.experiments.run.runner.run`, in steps (:class:`Job`): plan the trials, size each
static group's program (:class:`Program`), check and record the run's :func:`contract`, run the program call by
call and record the run's end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import sys
import threading
import time

import numpy as np

from jaxtrees.experiments import contract as contracts
from jaxtrees.experiments.contract import environment, now
from jaxtrees.experiments.results.layout import Layout, inputs, pack
from jaxtrees.experiments.results.store import Store
from jaxtrees.experiments.results.writer import Writer, abandoned_ended
from jaxtrees.experiments.run import compiled as compiling
from jaxtrees.experiments.run import distributed
from jaxtrees.experiments.run.compiled import compiler_options, group_size, memory_budget
from jaxtrees.experiments.run.memory import fits
from jaxtrees.experiments.run.pacing import Pace
from jaxtrees.experiments.run.progress import Progress
from jaxtrees.experiments.study import Config, Study, column_descriptions

__all__ = ["Changed", "Job", "Program", "contract"]

class Changed(ValueError):
    """A resumed run differs from the recorded one in something that can change its rows."""


def _placed(per_device: int, groups: int, devices: int, group: int) -> np.ndarray:
    """Where a call of ``groups`` groups per device goes in a program of ``per_device`` groups per device (the
    call axis is split into one block per device): in each device's first ``groups`` groups."""
    return (np.arange(devices)[:, None] * per_device * group + np.arange(groups * group)).ravel()


@dataclasses.dataclass
class Program:
    """One static group's program as this run sizes it: its static values (``name``: as JSON, the
    key of its entries in metadata.json), trials vmapped per device, trials per call, and the
    slots (trial ids; ``padding``: computed, never written) of its pending trials
    (:func:`~jaxtrees.experiments.results.layout.pack`)."""

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


def recorded_changes(copies: dict, terms: dict, groups: dict) -> list[str]:
    """What differs between this run's ``terms`` (and program ``groups``) and each recorded copy of the contract
    (``copies``: metadata.json's, rows/_config.json's), each once; a copy that lacks its contract (edited or damaged)
    is a change too, never a fresh start."""
    changed = []
    for name, recorded in copies.items():
        if recorded is None:
            changed.append(f"{name} records no contract (the settings its rows were written under: the file was "
                           f"edited or damaged), so they cannot be compared")
            continue
        changed += [c for c in contracts.differences(recorded, terms) + contracts.group_changes(recorded, groups)
                    if c not in changed]
    return changed


@dataclasses.dataclass
class Job:
    """One call of :func:`~jaxtrees.experiments.run.runner.run`, in steps: :meth:`plan` the trials, :meth:`start`
    (size every program, check and record the contract), then per program :meth:`compile` and :meth:`run`, and
    :meth:`finish`; each step records its part of this run's entry in metadata.json (``record``)."""

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

    def start(self, todo: np.ndarray) -> list[Program]:
        """Every program with trials in ``todo``, sized; the run's contract checked against the recorded
        one (:class:`Changed`) and recorded, with each program's group, before the first call."""
        cell_of = todo // self.replicates
        work = []
        for members in self.study.static_groups(self.cells):
            pending = todo[np.isin(cell_of, members)]
            if pending.size:
                work.append(self.size(members, pending))
        terms = contract(self.study, self.devices[0])
        copies = self.store.recorded  # metadata.json's and rows/_config.json's: each checked
        recorded = next((c for c in copies.values() if c is not None), None)
        groups = {**(recorded or {}).get("groups", {}), **{p.name: p.group for p in work}}
        if self.processes > 1:  # every process computes the rows process 0 would
            distributed.agree(self.process, self.processes, {**terms, "groups": {p.name: p.group for p in work}})
        if copies:
            changed = recorded_changes(copies, terms, groups)
            if changed and not self.allow_changes:
                raise Changed(f"{self.store.directory} was started with other settings that can change its rows: "
                              f"{'; '.join(changed)}. Resume with the recorded ones (e.g. the same --group, "
                              f"XLA_FLAGS, jax version and code), choose another --out, or pass --allow-changes "
                              f"to resume anyway (recorded as an override)")
            if changed:
                self.record["overrides"] = changed
        # each run that overrides a change starts a revision of the contract: its parts record it, readers tell
        revisions = list(self.metadata.get("revisions") or self.store.manifest.get("revisions") or [])
        if self.record.get("overrides"):
            revisions.append({"revision": len(revisions) + 1, "started": self.record["started"],
                              "changes": self.record["overrides"]})
            self.metadata["revisions"] = revisions
        self.record["revision"] = len(revisions)
        # every program's group is recorded when first sized, in a resumed run too
        kept = terms if recorded is None or self.allow_changes else recorded
        self.metadata["contract"] = {**kept, "groups": groups}
        self.store.record_contract(self.metadata["contract"], revisions)
        self.metadata["runs"].append(self.record)
        self.metadata["columns"] = column_descriptions(self.study, self.config)
        self.store.write_metadata(self.metadata)
        return work

    def size(self, members: list[int], pending: np.ndarray) -> Program:
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
        return Program(static, name, vmapped, size, slots, padding, int(pending.size),
                        max(branch.values()) * self.replicates)

    def compile(self, program: Program, cancelled: threading.Event | None = None, pool=None):
        """``(executable, seconds, how)``: :func:`~jaxtrees.experiments.run.compiled.compile_program`."""
        return compiling.compile_program(self, program, cancelled, pool)

    def run(self, program: Program, executable, bar: Progress, interrupted: threading.Event | None = None):
        """Every slot of the program, call by call (:class:`Pace`: how many groups each); the calls' rows go
        to a :class:`~jaxtrees.experiments.results.writer.Writer`, which copies them to the host and writes parts on
        its thread while the next call runs. An interrupt dispatches no more calls: those whose outputs are ready are
        written, one still running is abandoned after the writer's grace (its trials run again on resume); a call an
        earlier run in this process abandoned is waited for first (it holds its memory on the device)."""
        if not abandoned_ended(interrupted):
            return
        started = time.perf_counter()
        writer = Writer(self.store, self.layout, on_written=bar.update)
        unit = program.group * len(self.devices)
        pace = Pace(program.size // unit, self.chunk is not None)
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
            writer.close(flush=True, interrupted=interrupted)
            pace.measure(writer.finished, bar)
            self.record["write_seconds"] = round(self.record["write_seconds"] + writer.seconds, 3)
            self.record["write_cpu_seconds"] = round(self.record.get("write_cpu_seconds", 0.0) + writer.cpu_seconds, 3)
            self.record["rows_written"] += writer.rows
            self.record["calls"][program.name] = {**pace.summary(), **({"abandoned": writer.abandoned}
                                                                        if writer.abandoned else {})}
        self.record["run_seconds"][program.name] = round(time.perf_counter() - started, 3)
        self.record["trials_run"][program.name] = writer.trials  # an interrupted run's: those written
        self.record["seconds"] = bar.elapsed
        self.record["host_seconds"] = round(self.record["host_seconds"], 3)
        self.record["handover_seconds"] = round(self.record["handover_seconds"], 3)
        self.store.write_metadata(self.metadata)  # a run killed later keeps this program's timings

    def call(self, program: Program, start: int, groups: int):
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

    def inputs(self, program: Program, slots: np.ndarray, groups: int | None = None):
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
            distributed.finish(self.processes)

"""Running a study: its trials, in compiled chunks, on every local device, into a :class:`Store`.

:func:`run` writes one row per trial (and per entry of the study's ``axis``) into ``OUT/STUDY/``
(:mod:`~jaxtrees.experiments.results.store`), one compiled program per static group
(:mod:`~jaxtrees.experiments.run.compiled`), showing :mod:`~jaxtrees.experiments.run.progress` on stderr.
A call's inputs are gathered from per-cell arrays and its outputs go to disk as columns: no Python
object per trial or row; its steps are :class:`~jaxtrees.experiments.run.job.Job`'s. It also re-exports what a
caller of :func:`run` needs.
"""

from __future__ import annotations

import os
import sys

import jax
import numpy as np

from jaxtrees.core import checks
from jaxtrees.experiments.run import distributed, workers
from jaxtrees.experiments.run import compiled as compiling
from jaxtrees.experiments.run.compiled import (ACCELERATOR_GROUP, CPU_CACHE_BUDGET, GROUP, LOOP_MAX_TRIALS,  # noqa: F401
                                           MEMORY_BUDGET, OPT_LEVEL_FLAG, compiler_options, default_compile_threads,
                                           group_size, loop_max_trials, memory_budget)  # noqa: F401
from jaxtrees.experiments.run.job import Changed, Job  # noqa: F401 (Changed: what run raises on a changed resume)
from jaxtrees.experiments.run.pacing import deferred_interrupt
from jaxtrees.experiments.run.progress import Progress
from jaxtrees.experiments.results.reading import read_results
from jaxtrees.experiments.results.store import Store
from jaxtrees.experiments.study import Config, Study, cell_hash, configure, trial_key
from jaxtrees.experiments.study.probe import probe

__all__ = ["ACCELERATOR_GROUP", "CPU_CACHE_BUDGET", "GROUP", "MEMORY_BUDGET", "Changed", "default_compile_threads",
           "group_size", "memory_budget", "run", "Study", "Config", "configure", "cell_hash", "trial_key", "read_results"]


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
    probe(study, config)  # the trial traced on the grid's values: a bad value or output is a sentence, nothing written
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
        job = Job(study, config, store, metadata, jax.local_devices(), chunk, group, progress, allow_changes)
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
            with deferred_interrupt() as interrupted:
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
    """Process 0's ``run_id`` on every process (as it is with one process); a process that stopped first is named."""
    if processes == 1:
        return run_id
    return distributed.from_process_0("run-id", run_id, jax.process_index(), processes)

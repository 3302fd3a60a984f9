"""A study's programs: built (``jit(shard_map(scan over vmapped groups))``), compiled ahead of their turn.

:func:`build` makes a static group's program, :func:`compile_program` loads it from the program cache
(:class:`~jaxtrees.experiments.run.programs.Programs`, without tracing) or traces and compiles it, :class:`Ahead`
compiles the programs in order on background threads while earlier ones run, :func:`compiler_options`
says how a study's programs are compiled on a device.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import os
import re
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from jaxtrees.core import censored, checks, programs
from jaxtrees.experiments import contract
from jaxtrees.experiments.run import programs as program_cache
from jaxtrees.experiments.run import xla_cache
from jaxtrees.experiments.results.layout import BRANCH  # noqa: F401 (the input a program's branch arrives in)
from jaxtrees.experiments.run.progress import Progress
from jaxtrees.learners import growth


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
    time compiled the compare study's programs 1.4x faster (docs/benchmarks.md). On threads of one
    process, tracing holds the GIL: two quick studies' programs on two threads of 2 cores compiled no
    faster than one after the other, in two compile workers 1.0-1.4x faster (issue 56's section)."""
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




def describe(static: dict) -> str:
    """A program's static values for the progress line (its branches counted, not listed)."""
    return ", ".join(f"{k}={len(v)}" if k == "branches" else f"{k}={'/'.join(map(str, v)) if isinstance(v, tuple) else v}"
                     for k, v in static.items())


class Ahead:
    """The job's programs in order, each loaded from the program cache or traced and compiled
    (:func:`compile_program`) on a daemon thread while earlier ones run, at most ``threads`` ahead of the
    one running (XLA:CPU releases the GIL while it compiles, tracing does not), or,
    given ``workers`` (:class:`~jaxtrees.experiments.run.workers.Pool`), each thread waiting for a worker
    process that traces and compiles it (XLA:GPU holds the GIL; :mod:`~jaxtrees.experiments.run.workers`). The
    wait for a program is what compiling adds to the run (``compile_wait_seconds``, the progress
    line's compile time); its thread's seconds are its ``compile_seconds``, and ``compiled_or_loaded``
    says whether XLA compiled it or it came from the persistent compilation cache."""

    def __init__(self, job: "Job", work, threads: int, workers=None):
        self.job, self.work, self.threads, self.workers = job, iter(work), threads, workers
        self.queue: collections.deque = collections.deque()
        self.cancelled = threading.Event()

    def cancel(self):
        """Programs not yet traced or compiled are not (the run ended early: an error, an interrupt); compile
        workers, if any, are ended."""
        self.cancelled.set()
        if self.workers is not None:
            self.workers.close()

    def _submit(self) -> bool:
        item = next(self.work, None)
        if item is None:
            return False
        program, future = item, concurrent.futures.Future()

        def compile_():
            try:
                future.set_result(self.job.compile(program, self.cancelled, self.workers) if self.workers is not None
                                  else self.job.compile(program, self.cancelled))
            except BaseException as e:  # noqa: BLE001 (raised in the run, where the program is wanted)
                future.set_exception(e)

        threading.Thread(target=compile_, name="jaxtrees compile", daemon=True).start()
        self.queue.append((program, future))
        return True

    def programs(self, bar: Progress, interrupted: threading.Event | None = None):
        """``(program, compiled)`` per static group, in order, recording each one's compile seconds; none
        more once ``interrupted`` is set, even while waiting for a compile (which is left to :meth:`cancel`)."""
        while len(self.queue) < self.threads and self._submit():
            pass
        record = self.job.record
        while self.queue:
            program, future = self.queue.popleft()
            bar.phase("compiling " + describe(program.static))
            started = time.perf_counter()
            if not _wait(future, interrupted):
                return
            held = list(future.result())  # [compiled, seconds, how]: handed on, not kept here while it runs
            how = held.pop()
            record["compile_wait_seconds"][program.name] = round(time.perf_counter() - started, 3)
            record["compile_seconds"][program.name] = round(held.pop(), 3)
            record.setdefault("compiled_or_loaded", {})[program.name] = how
            bar.compiled(record["compile_wait_seconds"][program.name],
                         f"{describe(program.static)}, {how} in {record['compile_seconds'][program.name]:.1f} s")
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


def _wait(future: concurrent.futures.Future, interrupted: threading.Event | None, poll: float = 0.1) -> bool:
    """Wait for ``future``: True once it is done, False as soon as ``interrupted`` is set."""
    while not (interrupted is not None and interrupted.is_set()):
        if concurrent.futures.wait([future], timeout=poll).done:
            return True
    return False


def compile_program(job, program, cancelled: threading.Event | None = None, pool=None):
    """``(executable, seconds, how)`` for ``job``'s (:class:`~jaxtrees.experiments.run.job.Job`) ``program``,
    on any thread: "loaded" from the program cache (no tracing) where it holds the program, else traced
    and compiled, in this process or, given ``pool`` (:class:`~jaxtrees.experiments.run.workers.Pool`), in a
    worker whose executable this process loads ("compiled", or "loaded" where XLA's part came from JAX's
    persistent cache); either is then put in the program cache (:func:`serialized`). Not started, or not
    compiled after tracing, once ``cancelled`` is set (CancelledError); where a worker has failed under
    "auto" (``pool.fallback``), this process compiles the rest."""
    import concurrent.futures

    if cancelled is not None and cancelled.is_set():
        raise concurrent.futures.CancelledError
    started = time.perf_counter()
    inputs = job.inputs(program, program.slots[:program.size])
    loop_chunk = growth.LOOP_CHUNK if program.planned <= loop_max_trials(job.study) else None  # few trials: a loop
    options = job.metadata["contract"]["compiler_options"]
    store, key = _program_cache(job, program, inputs, loop_chunk, options)
    if key is not None:
        executable = store.load(key, job.devices)
        if executable is not None:
            return executable, time.perf_counter() - started, "loaded"
    if pool is not None and not (pool.fallback and pool.fell_back.is_set()):
        from jax.experimental import serialize_executable

        request = {"study": job.study.name, "static": program.static, "seed": job.config.seed, "group": program.group,
                   "inputs": inputs, "loop_chunk": loop_chunk, "options": options, "devices": len(job.devices),
                   "platform": job.devices[0].platform}
        what = describe(program.static)
        try:
            payload, in_tree, out_tree, _, how = pool.compile(request, what, cancelled)
            if payload is not None:
                if key is not None:
                    store.save(key, payload, in_tree, out_tree)
                executable = serialize_executable.deserialize_and_load(
                    payload, in_tree, out_tree, backend=job.devices[0].client, execution_devices=job.devices)
                return executable, time.perf_counter() - started, how
            # else the worker could not send what it loaded from the persistent cache: loaded here, below
        except concurrent.futures.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 (chosen by "auto": compiled here, where a study's error is raised as ever)
            if not pool.fallback or getattr(e, "aborted", False):  # XLA aborted the worker: it would abort the run
                raise
            if not pool.fell_back.is_set():  # said once, with or without the progress line
                import sys

                print(f"\njaxtrees run: a compile worker failed for program {what} ({type(e).__name__}: "
                      f"{str(e).splitlines()[0][:200] if str(e) else ''}); compiling in this process instead "
                      f"(JAXTREES_COMPILE_WORKERS=threads: always)", file=sys.stderr)
            pool.fell_back.set()
    with growth.level_loop(loop_chunk):
        lowered = build(job.study, program.static, job.config.seed, job.devices, program.group).lower(*inputs)
    if cancelled is not None and cancelled.is_set():
        raise concurrent.futures.CancelledError
    with xla_cache.watch() as seen:  # loaded from the persistent compilation cache, or compiled
        executable = lowered.compile(options)
    if key is not None and seen.how != "reused":
        _save(store, key, executable, seen)
    return executable, time.perf_counter() - started, seen.how


def cached(job, program) -> bool:
    """Whether the program cache holds ``program`` (its entry may still prove damaged when loaded)."""
    loop_chunk = growth.LOOP_CHUNK if program.planned <= loop_max_trials(job.study) else None
    store, key = _program_cache(job, program, job.inputs(program, program.slots[:program.size]), loop_chunk,
                                job.metadata["contract"]["compiler_options"])
    return key is not None and store.has(key)


def _program_cache(job, program, inputs, loop_chunk, options):
    """``(Programs, key)`` of ``program``, or ``(None, None)`` where the cache is off. The package's source digest
    is part of every key; a study defined elsewhere (a user's file) adds its own code and declaration
    (:func:`~jaxtrees.experiments.contract.study_terms`), and one of no file (a notebook cell) is not cached."""
    from jaxtrees.experiments import studies

    store = program_cache.programs()
    if store is None:
        return None, None
    leaves, tree = jax.tree.flatten(inputs)
    parts = {"study": job.study.name, "static": program.static, "seed": job.config.seed, "group": program.group,
             "inputs": [str(tree), [(tuple(x.shape), str(x.dtype)) for x in leaves]], "loop_chunk": loop_chunk,
             "options": options}
    if studies.STUDIES.get(job.study.name) is not job.study:
        terms = contract.study_terms(job.study)
        if any(name.endswith("(no file)") for name in terms["study_code"] or {}):
            return None, None
        parts["study_terms"] = terms
    return store, program_cache.program_key(parts, job.devices)


def _save(store, key: str, executable, seen: xla_cache.Seen):
    """Put ``executable`` (compiled, or loaded from JAX's cache: ``seen``) in the program cache; one that
    does not serialize is skipped (traced and compiled or loaded again next time)."""
    payload = serialized(executable, seen)
    if payload is not None:
        store.save(key, *payload)


def serialized(executable, seen: xla_cache.Seen):
    """``(payload, in_tree, out_tree)`` of a fresh ``executable``, or of one loaded from JAX's persistent
    cache (the cache entry's bytes: :func:`~jaxtrees.experiments.run.programs.serialize`); None where it cannot."""
    if seen.how == "loaded" and len(seen.entries) != 1:
        return None
    try:
        return program_cache.serialize(executable, seen.entries[0] if seen.how == "loaded" else None)
    except Exception:  # noqa: BLE001 (a backend or program without serialization)
        return None


def compiler_options(study, device) -> dict | None:
    """XLA options for ``study``'s programs on ``device``: on a CPU the LLVM level, XLA_FLAGS'
    ``--xla_backend_optimization_level`` if it sets one, else the study's ``cpu_opt_level`` (None:
    XLA's default); on a GPU :func:`jaxtrees.core.programs.compiler_options`. Recorded with a run, so a
    resumed run compiles as it did."""
    if device.platform != "cpu":
        return programs.compiler_options(device)
    given = re.findall(rf"--{OPT_LEVEL_FLAG}=(\S+)", os.environ.get("XLA_FLAGS", ""))
    if given:  # the last one given is the one XLA takes
        return {OPT_LEVEL_FLAG: int(given[-1]) if given[-1].isdigit() else given[-1]}
    return None if study.cpu_opt_level is None else {OPT_LEVEL_FLAG: study.cpu_opt_level}


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




#: The input (one flag per group, with the ``grouped`` parameters) saying which groups of a call run.
ACTIVE = "__active__"


def _skipped(shapes):
    """A skipped group's outputs: zeros of the ``shapes`` a group's outputs have."""
    return lambda *_: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def build(study: Study, static: dict, seed: int, devices, group: int):
    """``jit(shard_map(scan over groups of vmap over ``group`` trials))`` (``lax.map`` with
    ``batch_size=group``, with the study's ``grouped`` parameters passed once per group, unbatched;
    where the program serves several ``branches``, the trial is a ``lax.switch`` on the group's):
    every device runs the same compiled group of trials however many rows it holds, so per-trial
    arithmetic (and with it every float in a row) does not depend on the chunk size or the number
    of devices. A group whose ``ACTIVE`` input is false is skipped (zeros): a call runs as many of the
    program's groups as it fills, so one compilation serves calls of every size up to the compiled one."""

    base = {name: value for name, value in static.items() if name != "branches"}
    unbranched = {name: value for name, value in base.items() if name not in study.branches}  # after's: 1 branch or more

    def trial(key, values, dynamic, shared):
        out = censored.flatten(study.trial(key, {**base, **values, **dynamic, **shared}), study.censored)
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
        out = censored.flatten(study.after(key, {**unbranched, **dynamic, **shared}, out), study.censored)  # once
        return {name: jnp.asarray(value) for name, value in out.items()}

    vmapped = jax.jit(jax.vmap(one, in_axes=(0, 0, 0, None)))  # a jit: traced once, for its shapes and in the cond

    def local(hashes, replicates, dynamic, shared):
        by_group = lambda x: x.reshape((-1, group) + x.shape[1:])  # noqa: E731
        shared = dict(shared)
        active = shared.pop(ACTIVE, None)  # absent (a caller of an earlier version): every group runs

        def body(carry, xs):
            if active is None:
                return carry, vmapped(*xs)
            *xs, runs = xs
            return carry, jax.lax.cond(runs, vmapped, _skipped(jax.eval_shape(vmapped, *xs)), *xs)

        xs = (by_group(hashes), by_group(replicates), jax.tree.map(by_group, dynamic), shared)
        _, out = jax.lax.scan(body, None, xs if active is None else (*xs, active))
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), out)

    mesh = Mesh(np.asarray(devices), ("batch",))
    spec = PartitionSpec("batch")
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=spec, check_vma=False))

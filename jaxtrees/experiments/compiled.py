"""A study's programs: built (``jit(shard_map(scan over vmapped groups))``), compiled ahead of their turn.

:func:`build` makes a static group's program, :class:`Ahead` compiles the programs in order on
background threads while earlier ones run, :func:`compiler_options` says how a study's programs are
compiled on a device.
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

from jaxtrees.core import programs
from jaxtrees.experiments.progress import Progress


def describe(static: dict) -> str:
    """A program's static values for the progress line (its branches counted, not listed)."""
    return ", ".join(f"{k}={len(v)}" if k == "branches" else f"{k}={'/'.join(map(str, v)) if isinstance(v, tuple) else v}"
                     for k, v in static.items())


class Ahead:
    """The job's programs in order, each traced and compiled on a daemon thread while earlier ones
    run, at most ``threads`` ahead of the one running (XLA releases the GIL while it compiles). The
    wait for a program is what compiling adds to the run (``compile_wait_seconds``, the progress
    line's compile time); its thread's seconds are its ``compile_seconds``."""

    def __init__(self, job: "Job", work, threads: int):
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
        program, future = item, concurrent.futures.Future()

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
            bar.phase("compiling " + describe(program.static))
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


def compiler_options(study, device) -> dict | None:
    """XLA options for ``study``'s programs on ``device``: on a CPU the LLVM level, XLA_FLAGS'
    ``--xla_backend_optimization_level`` if it sets one, else the study's ``cpu_opt_level`` (None:
    XLA's default); on a GPU :func:`jaxtrees.core.programs.compiler_options`. Recorded with a run, so a
    resumed run compiles as it did."""
    if device.platform != "cpu":
        return programs.compiler_options(device)
    match = re.search(rf"--{OPT_LEVEL_FLAG}=(\S+)", os.environ.get("XLA_FLAGS", ""))
    if match:
        return {OPT_LEVEL_FLAG: int(match.group(1)) if match.group(1).isdigit() else match.group(1)}
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


#: The input that holds a group's branch of a program of several (``Study.branches``).
BRANCH = "branch_index"


def build(study: Study, static: dict, seed: int, devices, group: int):
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

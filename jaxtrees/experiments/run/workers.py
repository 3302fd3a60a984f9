"""Compile workers: a study's programs traced, lowered and compiled in worker processes.

XLA's GPU compiler holds Python's GIL for most of a compile, so threads of one process compile one
program at a time (on an H200, three programs "at once" on three threads took 32 s each, one alone
9.7 s). A worker process has a GIL of its own: it traces, lowers and compiles one program (through the
persistent compilation cache where the run has one, written whole: :mod:`jaxtrees.experiments.run.xla_cache`)
and sends the executable back serialized (``jax.experimental.serialize_executable``; one it loaded from
the persistent cache as that entry's bytes); the run loads it without tracing it again and keeps it in
its program cache (:class:`~jaxtrees.experiments.run.programs.Programs`), so a warm run starts no worker. A
worker starts JAX's backend without preallocating accelerator memory (``XLA_PYTHON_CLIENT_PREALLOCATE=false``):
it holds what compiling needs, not 75% of the GPU.

:func:`choose` picks threads or processes per backend (``compile_workers``: "auto", "threads" or
"processes"). "auto" takes processes for a run of two or more programs on a GPU, where threads measured
GIL-bound, and on a CPU, where they measured so too: on 2 cores two programs on two threads compiled
no faster than one after the other, in two workers 1.0-1.4x faster than on threads, and quick studies
of 2-4 programs ran 0.9-1.3x faster end to end (docs/benchmarks.md); threads for one program, on a TPU
(one process holds the chip), under ``jax.distributed`` and for a study a worker cannot import. A worker's error reaches the run as
the exception an in-process compile raises (same type and message); a worker that dies (killed, out of
memory) is :class:`WorkerDied`, naming the program, and leaves no half-written cache entry.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time

__all__ = ["MODES", "Pool", "WorkerDied", "choose", "default_workers"]

#: The values of ``compile_workers`` (:func:`jaxtrees.experiments.run.runner.run`, ``$JAXTREES_COMPILE_WORKERS``).
MODES = ("auto", "threads", "processes")
#: Host memory a worker may take while it compiles (a study program's compile peaked near 1 GiB on a CPU).
WORKER_MEMORY = 2 * 2**30
#: JAX settings that can change a program, copied into every worker (as :func:`job.contract` records them).
CONFIG = ("jax_enable_x64", "jax_default_prng_impl", "jax_threefry_partitionable", "jax_default_matmul_precision",
          "jax_platforms")


class WorkerDied(RuntimeError):
    """A compile worker ended before it answered (killed, out of memory, a crash in XLA); ``aborted``: by
    SIGABRT (XLA's std::bad_alloc or a check failure), which compiling in the run's process would repeat."""

    def __init__(self, message: str, aborted: bool = False):
        super().__init__(message)
        self.aborted = aborted


def choose(mode: str | None, study, platform: str, processes: int = 1, programs: int | None = None) -> str:
    """"threads" or "processes" for ``mode`` ("auto", "threads", "processes"; None: ``$JAXTREES_COMPILE_WORKERS``,
    default "auto") on a backend of ``platform`` for a run of ``programs`` programs (None: not yet known):
    "auto" is processes on a CPU or GPU for a registered study of two or more programs in a single-process
    run (also of one program where the address space is limited: ``ulimit -v``), threads otherwise (one program
    has nothing to compile beside it). "processes" where workers cannot serve is a ValueError saying why."""
    mode = os.environ.get("JAXTREES_COMPILE_WORKERS", "auto") if mode is None else mode
    if mode not in MODES:
        raise ValueError(f"compile_workers must be one of {', '.join(MODES)} (JAXTREES_COMPILE_WORKERS), got {mode!r}")
    # one program (or none to compile) has nothing beside it, unless the address space is limited (ulimit -v),
    # where XLA's std::bad_alloc in a cold compile aborts the process that compiles: a worker, not the run
    few = programs is not None and programs < 2 and not address_limited()
    if mode == "threads" or (mode == "auto" and (platform not in ("cpu", "gpu") or few)):
        return "threads"
    from jaxtrees.experiments import studies

    reason = None
    if platform not in ("cpu", "gpu"):
        reason = f"a {platform} backend (one process holds the chip)"
    elif processes > 1:
        reason = "a run of several processes (jax.distributed)"
    elif studies.STUDIES.get(study.name) is not study:
        reason = f"study {study.name!r}, which is not a registered study a worker can import"
    if mode == "auto":
        return "processes" if reason is None else "threads"
    if reason is not None:
        raise ValueError(f"compile_workers='processes' cannot serve {reason}; use 'threads' or 'auto'")
    return mode


def default_workers(programs: int, ahead: int) -> int:
    """Workers for a run of ``programs`` programs compiled ``ahead`` at a time: at most one per program,
    per core and per ``WORKER_MEMORY`` of the host's available memory, at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    memory = _available_memory()
    by_memory = max(1, memory // WORKER_MEMORY) if memory else cores
    return max(1, min(programs, ahead, cores, by_memory))


def address_limit() -> int | None:
    """This process's address space limit in bytes (``ulimit -v``, RLIMIT_AS), or None where there is none."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if limit == resource.RLIM_INFINITY else limit


def address_limited() -> bool:
    """Whether this process's address space is limited (:func:`address_limit`)."""
    return address_limit() is not None


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def settings() -> dict:
    """What a worker takes from this process: the JAX settings of :data:`CONFIG`, the persistent cache."""
    import jax

    config = {name: getattr(jax.config, name) for name in CONFIG if getattr(jax.config, name, None) is not None}
    return {"config": config, "cache": jax.config.jax_compilation_cache_dir,
            "min_compile_seconds": jax.config.jax_persistent_cache_min_compile_time_secs}


class _Worker:
    """A fresh interpreter (not a fork: JAX's threads do not survive one; not multiprocessing's spawn,
    which would run the caller's ``__main__`` script again) joined to this process by a socket pair."""

    def __init__(self, settings_: dict):
        import socket
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        mine, theirs = socket.socketpair()
        env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}  # read when the worker's backend starts
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys; from jaxtrees.experiments.run.workers import _main; "
             "_main(int(sys.argv[1]), int(sys.argv[2]))", str(theirs.fileno()), str(os.getpid())],
            pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL,
            start_new_session=True)  # Ctrl-C in a terminal reaches the run, which ends its workers
        theirs.close()
        self.conn = Connection(mine.detach())
        self.conn.send(settings_)

    @property
    def pid(self) -> int:
        return self.process.pid

    def exitcode(self, timeout: float = 5.0) -> int | None:
        import subprocess

        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None


class Pool:
    """``count`` worker processes, started at once so that they import JAX while the run plans;
    :meth:`compile` takes an idle one, blocking until one is. ``fallback`` (the run chose workers by
    "auto"): where a worker fails, the run compiles that program in its own process, saying so once, so
    that a study's own error is raised there as ever and a worker that cannot serve costs time only."""

    def __init__(self, count: int, settings_: dict | None = None, fallback: bool = False):
        settings_ = settings() if settings_ is None else settings_
        self.fallback = fallback  # chosen by "auto": the run compiles a program in process where a worker fails
        self.fell_back = threading.Event()
        self.closed = threading.Event()
        self._idle: queue.Queue = queue.Queue()
        self._workers = []
        for _ in range(count):
            worker = _Worker(settings_)
            self._workers.append(worker)
            self._idle.put(worker)

    @property
    def pids(self) -> list[int]:
        return [w.pid for w in self._workers]

    def compile(self, request: dict, what: str, cancelled: threading.Event | None = None):
        """The worker's answer to ``request`` (:func:`_compile`'s arguments); its exception re-raised as it
        was raised there; :class:`WorkerDied` naming ``what`` if the worker ended first."""
        import concurrent.futures

        while True:
            if self.closed.is_set() or (cancelled is not None and cancelled.is_set()):
                raise concurrent.futures.CancelledError
            try:
                worker = self._idle.get(timeout=0.2)
                break
            except queue.Empty:
                continue
        try:
            worker.conn.send(request)
            status, value = worker.conn.recv()
        except (EOFError, OSError) as e:
            if self.closed.is_set():
                raise concurrent.futures.CancelledError from None
            code = worker.exitcode()
            how = (f"was killed by signal {-code} ({signal.Signals(-code).name})" if code is not None and code < 0
                   else f"exited with code {code}" if code is not None else f"stopped answering ({e})")
            memory = (" (SIGABRT or SIGKILL: most often the host ran out of memory, XLA's std::bad_alloc or the "
                      "kernel's OOM killer; a smaller --group compiles a smaller program)"
                      if code in (-signal.SIGABRT, -signal.SIGKILL) else "")
            raise WorkerDied(f"the compile worker (pid {worker.pid}) for program {what} {how}{memory} before it "
                             f"finished; no cache entry is half-written. Rerun the same command to resume (the "
                             f"parts written are kept), with JAXTREES_COMPILE_WORKERS=threads to compile in this "
                             f"process", aborted=code == -signal.SIGABRT) from None
        self._idle.put(worker)
        if status == "error":
            raise value
        return value

    def close(self):
        """End every worker (one compiling is killed: its cache entry, written whole or not at all, is not
        half-written)."""
        self.closed.set()
        for worker in self._workers:
            try:
                worker.conn.close()
            except OSError:
                pass
            if worker.process.poll() is None:
                worker.process.terminate()
        for worker in self._workers:
            if worker.exitcode() is None:
                worker.process.kill()
                worker.exitcode()


def _main(fd: int, parent: int | None = None):
    """A worker's entry point (``python -c``): serve compile requests on the connection ``fd`` while the run's
    process ``parent`` lives."""
    from multiprocessing.connection import Connection

    if parent is not None:
        _end_with(parent)
    conn = Connection(fd)
    try:
        settings_ = conn.recv()
    except (EOFError, OSError):
        return
    _serve(conn, settings_)


def _end_with(parent: int):
    """On Linux, have this worker killed when ``parent`` (the run) ends, even by SIGKILL (strictly, when the
    thread that started it ends: a :class:`Pool` lives within one call of the runner): a compile left running
    would hold a core (and accelerator memory) for nothing. Elsewhere the closed connection ends it once its
    compile is done."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the run ended before the line above
        os._exit(0)


def _serve(conn, settings_: dict):
    """A worker's life: take JAX settings and the cache, then compile requests until the pipe closes."""
    import jax

    for name, value in settings_["config"].items():
        jax.config.update(name, value)
    if settings_.get("cache"):
        from jaxtrees.experiments.run import xla_cache

        xla_cache.use(settings_["cache"], settings_.get("min_compile_seconds") or 0.0)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = ("ok", _compile(**request))
        except BaseException as e:  # noqa: BLE001 (sent to the run, raised there)
            reply = ("error", _portable(e))
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


def _portable(error: BaseException) -> BaseException:
    """``error`` if it pickles (its type and message are the run's), else a RuntimeError with both."""
    import pickle

    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(error).__name__}: {error}")


def _compile(study: str, static: dict, seed: int, group: int, inputs, loop_chunk, options, devices: int,
             platform: str):
    """Trace, lower and compile one program as :func:`jaxtrees.experiments.run.compiled.compile_program` does;
    return ``(serialized, in_tree, out_tree, seconds, how)``: a program loaded from the persistent cache
    is sent as its cache entry's bytes (:func:`~jaxtrees.experiments.run.programs.serialize`; jaxlib 0.10.2 on a
    CPU: an executable deserialized from the cache and serialized again raised "NOT_FOUND: Function
    bitcast_copy_fusion not found" when run), or, where that cannot be, as ``None`` (the run loads it
    from the cache itself)."""
    import jax

    from jaxtrees.experiments import studies
    from jaxtrees.experiments.run import compiled, programs, xla_cache
    from jaxtrees.learners import growth

    started = time.perf_counter()
    local = jax.local_devices()
    if len(local) != devices or local[0].platform != platform:
        raise RuntimeError(f"a compile worker sees {len(local)} {local[0].platform} device(s) where the run has "
                           f"{devices} {platform} device(s); set JAXTREES_COMPILE_WORKERS=threads")
    with growth.level_loop(loop_chunk):
        lowered = compiled.build(studies.get(study), static, seed, local, group).lower(*inputs)
    with xla_cache.watch() as seen:
        executable = lowered.compile(options)
    if seen.how == "compiled":
        payload, in_tree, out_tree = programs.serialize(executable)
    else:  # loaded from the persistent cache: its entry's bytes, or None (the run loads it from the cache)
        payload, in_tree, out_tree = compiled.serialized(executable, seen) or (None, None, None)
    return payload, in_tree, out_tree, time.perf_counter() - started, seen.how

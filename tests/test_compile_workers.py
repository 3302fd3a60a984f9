"""Compile workers (jaxtrees/experiments/workers.py): a program traced and compiled in a worker process
gives the rows of one compiled in the run's process; a worker's error is the in-process error; a worker
killed mid-compile is a clear error and leaves the compilation cache clean; threads or processes by backend."""

import dataclasses
import json
import os
import signal
import threading
import time
import types

import jax
import numpy as np
import pytest

from jaxtrees.experiments import studies
from jaxtrees.experiments.run import runner, workers, xla_cache

GRID = {"n": "8,10", "k": 2, "c": 0.2, "impurity": "entropy", "m_min": 16, "m_max": 64, "replicates": 4}


def _rows(directory):
    table = runner.read_results(str(directory))
    return [dict(zip(table.names, values)) for values in zip(*(table[n].tolist() for n in table.names))]


def test_programs_compiled_in_workers_give_the_rows_of_programs_compiled_in_process(tmp_path):
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides=GRID)
    rows = {}
    for how in ("threads", "processes"):
        directory = runner.run(study, config, str(tmp_path / how), progress=False, compile_workers=how)
        run = json.loads((tmp_path / how / "juntas" / "metadata.json").read_text())["runs"][-1]
        assert run["compile_workers"] == how
        assert set(run["compiled_or_loaded"].values()) == {"compiled"} and len(run["compiled_or_loaded"]) == 2
        rows[how] = _rows(directory)
    assert rows["processes"] == rows["threads"] and len(rows["threads"]) == 2 * 4 * 3


def _request(n=8, **change):
    """The request the runner sends for the tiny juntas program of ``n`` bits (its first call's inputs)."""
    from jaxtrees.experiments.results.layout import Layout, inputs as gather

    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides={**GRID, "n": n})
    static, group = study.program(config.cells()), 4
    hashes = np.asarray([study.key_hash(c) for c in config.cells()], np.uint32)
    inputs = gather(study, Layout(study, config), hashes, static, np.arange(group), group, group)
    request = {"study": "juntas", "static": static, "seed": 0, "group": group, "inputs": inputs, "loop_chunk": None,
               "options": None, "devices": len(jax.local_devices()), "platform": jax.local_devices()[0].platform}
    return {**request, **change}


def _error(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001
        return e
    raise AssertionError("no error")


def test_a_workers_error_is_the_error_of_an_in_process_compile_and_a_killed_worker_is_named(tmp_path):
    """A trial that fails to trace raises the same type and message from a worker as in this process;
    a worker killed while it compiles is WorkerDied naming the program and the signal, and the cache it
    wrote into holds only whole entries (a dead writer's temporary file is removed when a run opens it)."""
    settings = {"config": {}, "cache": str(tmp_path / "cache"), "min_compile_seconds": 0.0}
    pool = workers.Pool(1, settings)
    try:
        bad = _request(static={"nonsense": 1})
        here, there = _error(lambda: workers._compile(**bad)), _error(lambda: pool.compile(bad, "bad"))
        assert type(there) is type(here) and str(there) == str(here)
        pool.compile(_request(8), "n=8")  # a whole entry in the cache
        entries = sorted((tmp_path / "cache").glob("*" + xla_cache.SUFFIX))
        assert entries
        [pid] = pool.pids
        errors = []
        thread = threading.Thread(target=lambda: errors.append(_error(lambda: pool.compile(_request(10), "n=10"))))
        before = _cpu_seconds(pid)
        thread.start()
        while _cpu_seconds(pid) < before + 0.3 and thread.is_alive():  # the worker traces and compiles n=10
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        thread.join(timeout=30)
        [error] = errors
        assert isinstance(error, workers.WorkerDied), error
        assert "program n=10 was killed by signal 9 (SIGKILL) (SIGABRT or SIGKILL: most often the host ran out of " \
               "memory" in str(error)
        assert "JAXTREES_COMPILE_WORKERS=threads" in str(error)
    finally:
        pool.close()
    xla_cache._remove_orphans(str(tmp_path / "cache"))
    store = xla_cache.SafeCache(str(tmp_path / "cache"))
    for path in (tmp_path / "cache").iterdir():
        assert path.name.endswith(xla_cache.SUFFIX), path.name  # no temporary left
        assert store.get(path.name[: -len(xla_cache.SUFFIX)]) is not None, path.name  # and every entry whole
    assert set(entries) <= set((tmp_path / "cache").iterdir())


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_threads_or_processes_by_backend(monkeypatch):
    monkeypatch.delenv("JAXTREES_COMPILE_WORKERS", raising=False)
    monkeypatch.setattr(workers, "address_limited", lambda: False)
    juntas = studies.get("juntas")
    for platform in ("cpu", "gpu"):  # threads measured GIL-bound on both
        assert workers.choose(None, juntas, platform, programs=2) == "processes"
        assert workers.choose("auto", juntas, platform, programs=1) == "threads"  # nothing to compile beside it
        monkeypatch.setattr(workers, "address_limited", lambda: True)  # ulimit -v: XLA's bad_alloc ends a worker
        assert workers.choose("auto", juntas, platform, programs=1) == "processes"
        monkeypatch.setattr(workers, "address_limited", lambda: False)
        assert workers.choose("auto", juntas, platform, processes=2, programs=3) == "threads"
    assert workers.choose("auto", juntas, "tpu", programs=3) == "threads"
    assert workers.choose("processes", juntas, "cpu") == "processes"
    assert workers.choose("threads", juntas, "gpu") == "threads"
    monkeypatch.setenv("JAXTREES_COMPILE_WORKERS", "processes")
    assert workers.choose(None, juntas, "cpu") == "processes"
    own = dataclasses.replace(juntas, name="own")
    assert workers.choose("auto", own, "gpu", programs=2) == "threads"  # a worker cannot import it
    for mode, study, platform, match in (("processes", own, "cpu", "not a registered study"),
                                         ("processes", juntas, "tpu", "a tpu backend"),
                                         ("several", juntas, "cpu", "must be one of auto, threads, processes")):
        with pytest.raises(ValueError, match=match):
            workers.choose(mode, study, platform)


def test_a_bad_compile_workers_value_is_refused_before_the_run_starts(tmp_path):
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides=GRID)
    with pytest.raises(ValueError, match="compile_workers must be one of"):
        runner.run(study, config, str(tmp_path), progress=False, compile_workers="fibers")
    assert not (tmp_path / "juntas").exists()


def test_default_workers_fit_the_programs_the_cores_and_the_memory(monkeypatch):
    monkeypatch.setattr(workers, "_available_memory", lambda: 5 * 2**30)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(16)), raising=False)
    assert workers.default_workers(programs=10, ahead=8) == 2  # 5 GiB: two workers of 2 GiB
    assert workers.default_workers(programs=1, ahead=8) == 1
    monkeypatch.setattr(workers, "_available_memory", lambda: None)
    assert workers.default_workers(programs=10, ahead=8) == 8


def test_under_auto_a_failing_worker_leaves_the_program_to_this_process(tmp_path, monkeypatch, capsys):
    """Workers chosen by "auto" (a GPU's default) that cannot serve cost time, not the run: each program
    is compiled in process, said once; the rows are those of threads. Chosen explicitly, the error is raised."""
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides=GRID)
    monkeypatch.setattr(workers, "choose", lambda mode, *args: mode if mode == "threads" else "processes")  # a GPU's

    def broken(self, request, what, cancelled=None):
        raise workers.WorkerDied(f"the compile worker for program {what} was killed")

    monkeypatch.setattr(workers.Pool, "compile", broken)
    monkeypatch.setattr(workers, "_Worker", lambda settings: types.SimpleNamespace(pid=0))
    monkeypatch.setattr(workers.Pool, "close", lambda self: None)
    directory = runner.run(study, config, str(tmp_path / "auto"), progress=True, compile_workers="auto")
    err = capsys.readouterr().err
    assert err.count("a compile worker failed for program") == 1 and "compiling in this process instead" in err
    assert _rows(directory) == _rows(runner.run(study, config, str(tmp_path / "threads"), progress=False,
                                                compile_workers="threads"))
    with pytest.raises(workers.WorkerDied, match="was killed"):
        runner.run(study, config, str(tmp_path / "explicit"), progress=False, compile_workers="processes")


def test_under_auto_a_worker_aborted_by_xla_is_not_compiled_again_in_process(tmp_path, monkeypatch):
    """A worker ended by SIGABRT (XLA's std::bad_alloc under ``ulimit -v``, a check failure) is the run's error
    even under "auto": compiling that program in this process would abort the run the same way."""
    study = studies.get("juntas")
    config = runner.configure(study, quick=True, overrides=GRID)
    monkeypatch.setattr(workers, "choose", lambda mode, *args: "processes")

    def aborted(self, request, what, cancelled=None):
        raise workers.WorkerDied(f"the compile worker for program {what} was killed by signal 6", aborted=True)

    monkeypatch.setattr(workers.Pool, "compile", aborted)
    monkeypatch.setattr(workers, "_Worker", lambda settings: types.SimpleNamespace(pid=0))
    monkeypatch.setattr(workers.Pool, "close", lambda self: None)
    with pytest.raises(workers.WorkerDied, match="signal 6"):
        runner.run(study, config, str(tmp_path / "auto"), progress=False, compile_workers="auto")


@pytest.mark.parametrize("megabytes", [1000, 2100, 2700])
def test_a_run_under_a_small_address_space_is_one_sentence(tmp_path, megabytes):
    """Under ``ulimit -v``: below MIN_ADDRESS_SPACE_MB the command refuses to start, naming the limit (near it
    loading JAX failed in glibc or XLA, out of Python's reach: exit 127 or 134, once a segmentation fault at 2,100
    MB); above, with malloc's arenas capped, a run of two cold programs (no cache) runs whole or stops with one
    sentence naming the limit (XLA's std::bad_alloc in a compile worker, a thread that cannot start, a
    MemoryError), never a traceback or an abort."""
    import _jaxtrees_console as entry
    import resource
    import subprocess
    import sys

    limit = megabytes * 2**20
    cmd = [sys.executable, "-c", "from _jaxtrees_console import console; console()", "run", "juntas", "--quick",
           "--out", str(tmp_path), "--no-progress", *[f"--set={k}={v}" for k, v in GRID.items()]]
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAXTREES_CACHE_DIR": ""}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    floor = entry.MIN_ADDRESS_SPACE_MB
    if megabytes < floor:
        assert proc.returncode == 1 and proc.stderr == (
            f"jaxtrees: error: the address space is limited to {megabytes:,} MB (ulimit -v); loading JAX and compiling "
            f"a program needs at least {floor:,} MB: raise the limit (ulimit -v {floor * 1024} or more)\n")
        return
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr[-3000:])
    if proc.returncode == 1:
        assert f"address space limited to {megabytes:,} MB (ulimit -v)" in proc.stderr, proc.stderr[-3000:]


def test_a_warm_run_with_workers_loads_every_program_with_the_same_rows(tmp_path):
    """Cache on, workers on: cold (compiled in workers, kept in the program cache), then warm (every program
    loaded from the program cache: nothing traced in the run, no worker needed); with the program cache
    emptied, workers find the programs in JAX's cache and send that entry's bytes (an executable loaded from
    the cache and serialized again failed to run on jaxlib 0.10.2's CPU): loaded, nothing traced in the run,
    the program cache filled again. Every run's rows are those of a run on threads without a cache."""
    import shutil

    from test_compilation_cache import _traced_run

    threads = runner.run(studies.get("juntas"), runner.configure(studies.get("juntas"), quick=True, overrides=GRID),
                         str(tmp_path / "threads"), progress=False, compile_workers="threads")
    reference = _rows(threads)
    traces, how, rows = _traced_run(tmp_path / "cache", tmp_path / "cold", workers="processes")
    assert traces == 0 and how == {8: "compiled", 10: "compiled"} and rows == reference  # traced in the workers
    traces, how, rows = _traced_run(tmp_path / "cache", tmp_path / "warm", workers="processes")
    assert traces == 0 and how == {8: "loaded", 10: "loaded"} and rows == reference
    shutil.rmtree(tmp_path / "cache" / xla_cache.PROGRAMS)
    traces, how, rows = _traced_run(tmp_path / "cache", tmp_path / "from-jax", workers="processes")
    assert traces == 0 and how == {8: "loaded", 10: "loaded"} and rows == reference
    assert len(list((tmp_path / "cache" / xla_cache.PROGRAMS).glob("*.program"))) == 2
    traces, how, rows = _traced_run(tmp_path / "cache", tmp_path / "again", workers="processes")
    assert traces == 0 and how == {8: "loaded", 10: "loaded"} and rows == reference

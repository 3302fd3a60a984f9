"""Benchmark: compile a study's programs side by side on threads or in worker processes (issue 56).

For each study, its quick size's programs (as ``jaxtrees run`` sizes them: one CPU device per core, the
compilation cache off) are traced, lowered and compiled, no trial run, in a fresh process per mode:

    serial      one after another in this process (each program's seconds alone)
    threads     P at a time on threads of this process (the runner's compile-ahead threads)
    processes   P at a time in worker processes (jaxtrees.experiments.run.workers; started before the clock)

and it prints per mode the wall time to have every program ready and the sum of the programs' seconds,
then per study

    threads_over_processes_<study>: X    threads' wall / processes' wall (> 1: workers are faster)
    worker_start_s: X                    seconds to start P workers (import JAX and jaxtrees, start the backend)

    python scripts/bench_compile_workers.py --studies fourier,gd-scaling --parallel 2
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

from jaxtrees.core.platform import split_cpu, wide_vectors


def measure(name: str, mode: str, parallel: int) -> dict:
    """Compile ``name``'s quick programs in ``mode``; wall and per-program seconds (this process)."""
    split_cpu()
    wide_vectors()
    import jax

    from jaxtrees.experiments import studies
    from jaxtrees.experiments.run import runner, workers
    from jaxtrees.experiments.run.job import Job
    from jaxtrees.experiments.results.store import Store

    study = studies.get(name)
    config = runner.configure(study, quick=True)
    with tempfile.TemporaryDirectory() as out:
        store = Store(out, name, 0, 1)
        metadata = store.open(config.as_json(), "00000000")
        try:
            job = Job(study, config, store, metadata, jax.local_devices(), None, None, False)
            work = job.start(job.plan(None))
            pool, start_s = None, 0.0
            if mode == "processes":
                t0 = time.perf_counter()
                pool = workers.Pool(min(parallel, len(work)))
                _ready(pool)
                start_s = time.perf_counter() - t0
            compile_ = (lambda p: job.compile(p, None, pool)) if pool is not None else job.compile
            t0 = time.perf_counter()
            if mode == "serial":
                results = [compile_(p) for p in work]
            else:
                with concurrent.futures.ThreadPoolExecutor(parallel) as threads:
                    results = list(threads.map(compile_, work))
            wall = time.perf_counter() - t0
            if pool is not None:
                pool.close()
        finally:
            store.close()
    return {"study": name, "mode": mode, "programs": len(work), "wall_s": round(wall, 2),
            "sum_s": round(sum(r[1] for r in results), 2), "each_s": [round(r[1], 2) for r in results],
            "worker_start_s": round(start_s, 2)}


def _ready(pool):
    """Wait until every worker has imported JAX (a request it answers with an error; the idle queue is
    first in, first out, so each worker answers one)."""
    for _ in pool.pids:
        try:
            pool.compile({"study": None}, "readiness")
        except TypeError:
            pass


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", default="trees,agnostic,rank,fourier,gd-scaling")
    ap.add_argument("--parallel", type=int, default=2, help="programs compiled at once (threads or workers)")
    ap.add_argument("--one", nargs=2, metavar=("STUDY", "MODE"), help=argparse.SUPPRESS)  # a child process
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1], args.parallel)))
        return None
    env = {**os.environ, "JAXTREES_CACHE_DIR": ""}
    figures = []
    for name in args.studies.split(","):
        by_mode = {}
        for mode in ("serial", "threads", "processes"):
            proc = subprocess.run([sys.executable, __file__, "--one", name, mode, "--parallel", str(args.parallel)],
                                  env=env, capture_output=True, text=True, check=True)
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            by_mode[mode] = row
            print(f"{name:>18} {mode:>9}: {row['programs']} programs  wall {row['wall_s']:6.1f} s  "
                  f"sum {row['sum_s']:6.1f} s  each {row['each_s']}"
                  + (f"  (workers started in {row['worker_start_s']:.1f} s)" if mode == "processes" else ""),
                  flush=True)
        ratio = by_mode["threads"]["wall_s"] / by_mode["processes"]["wall_s"]
        figures.append({"study": name, **{m: r for m, r in by_mode.items()}, "threads_over_processes": round(ratio, 3)})
        print(f"threads_over_processes_{name}: {ratio:.3f}")
        print(f"worker_start_s: {by_mode['processes']['worker_start_s']:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return figures


if __name__ == "__main__":
    main()

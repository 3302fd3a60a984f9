"""Benchmark: what a study's time goes to, compiling or running trials, from a cold start.

Each study's quick size runs as a new user runs it: ``jaxtrees run STUDY --quick`` in a fresh
process, the persistent compilation cache off (``JAXTREES_CACHE_DIR=``), into a temporary
directory. Per study it prints the programs compiled, compile s (summed over the programs, each
traced and compiled on a background thread or in a compile worker, partly beside the trials of
earlier ones), waited s (what the run waited for compiles: compiling's part of the wall time),
trial s and wall s (from the run's metadata.json and the process's wall clock), then

    compile_share_quick_max: X     the largest waited s / wall s over the studies run
    compile_overlap_max: X         over the studies of two or more programs, the largest waited s /
                                   compile s: the wall time spent compiling over the sum of the programs'
                                   compile seconds (1: one program at a time, nothing beside the trials)
    programs_juntas_full: N        programs the full ``juntas`` study compiles (counted, not run)

With ``--warm`` every study runs twice, each in a fresh process, with the persistent compilation
cache on (a new temporary directory): cold (compiling, filling the cache), then warm (loading every
program), both importing one copy of the package taken at the start (the program cache's key holds the
source: edits of the working tree meanwhile would turn warm runs cold); per study its cold and warm wall
and trial s, then

    warm_over_trials_max: X        the largest warm wall / (trial s + 2 s per program)
    warm_before_post_run_max: X    the same without the post-run (read, figures, report)

and per warm run the wall s of its phases: the interpreter's start and exit, start-up (imports, backend,
cache, config), the run (compile or load, trials) and the post-run (read, figures, report).

    python scripts/bench_compile.py                       # every study's quick size (~20 min on 2 cores)
    python scripts/bench_compile.py --studies juntas,parity
    python scripts/bench_compile.py --warm                # cold and warm, the cache on
    python scripts/bench_compile.py --compile-workers processes   # programs compiled in worker processes
    python scripts/bench_compile.py --studies none        # only count programs
    python scripts/bench_compile.py --one-process         # every quick size in this one process, as a
                                                          # notebook runs them: wall s, peak RSS, memory maps
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from jaxtrees.experiments import studies
from jaxtrees.experiments.study import configure


def programs(name: str, quick: bool) -> int:
    """Programs a study compiles at its quick or full size (one per static group)."""
    study = studies.get(name)
    return len(study.programs(configure(study, quick=quick)))


#: ``jaxtrees run`` (argv) with its phases timed (wall s, this process's clock from its first line), written as
#: JSON to ``$JAXTREES_BENCH_PHASES``: ``run_start`` (start-up: imports, backend, cache, config), ``run`` (the
#: runner: plan, compile or load, trials, finish), ``post_run`` (read, figures, report; ``read``, ``figures``,
#: ``report`` apart), ``total``.
PHASES = """
import json, os, sys, time
t0 = time.perf_counter()
from jaxtrees import cli
from jaxtrees.experiments import reporting
from jaxtrees.experiments.results import reading
from jaxtrees.experiments.run import runner
marks = {}
def timed(owner, name, label):
    function = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        marks.setdefault(label + "_start", start - t0)
        try:
            return function(*args, **kwargs)
        finally:
            marks[label] = marks.get(label, 0.0) + time.perf_counter() - start
    setattr(owner, name, wrapper)
for owner, name, label in ((runner, "run", "run"), (cli, "_after_run", "post_run"), (reading, "read_results", "read"),
                           (reporting, "plot_files", "figures"), (reporting, "write_report", "report")):
    timed(owner, name, label)
code = cli.main(sys.argv[1:])
marks["total"] = time.perf_counter() - t0
with open(os.environ["JAXTREES_BENCH_PHASES"], "w") as f:
    json.dump(marks, f)
cli.exit_now(code)  # as the jaxtrees command ends
"""


def run_cold(name: str, out: str, cache: str = "", source: str | None = None) -> dict:
    """``jaxtrees run NAME --quick`` in a fresh process (the compilation cache ``cache``; empty: off; the package
    imported from ``source``, a folder holding a copy of it, if given); its figures, with the wall s of its phases
    (:data:`PHASES`; ``process`` is the wall outside them: the interpreter's start and exit)."""
    phases_file = os.path.join(os.path.dirname(out) or ".", f"phases-{os.path.basename(out)}.json")
    env = {**os.environ, "JAXTREES_CACHE_DIR": cache, "JAXTREES_BENCH_PHASES": phases_file}
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([source] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    command = [sys.executable, "-c", PHASES, "run", name, "--quick", "--out", out, "--no-progress"]
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, cwd=source)
    wall = time.perf_counter() - started
    with open(phases_file) as f:
        marks = json.load(f)
    ready = len(glob.glob(os.path.join(glob.escape(cache), "programs", "*.program"))) if cache else 0
    with open(os.path.join(out, name, "metadata.json")) as f:
        run = json.load(f)["runs"][-1]
    compile_s, trial_s = sum(run["compile_seconds"].values()), sum(run["run_seconds"].values())
    waited_s = sum(run["compile_wait_seconds"].values())
    how = list(run.get("compiled_or_loaded", {}).values())
    return {"study": name, "programs": len(run["compile_seconds"]), "compile_s": round(compile_s, 1),
            "waited_s": round(waited_s, 1), "trial_s": round(trial_s, 1), "wall_s": round(wall, 1),
            "compile_share": round(waited_s / wall, 3),
            "overlap": round(waited_s / compile_s, 3) if compile_s > 0 else None,
            "loaded": how.count("loaded"), "workers": run.get("compile_workers"), "ready": ready,
            "phases": {"process": round(wall - marks["total"], 2), "start_up": round(marks["run_start"], 2),
                       "run": round(marks["run"], 2), "post_run": round(marks.get("post_run", 0.0), 2),
                       **{k: round(marks.get(k, 0.0), 2) for k in ("read", "figures", "report")}}}


def snapshot(folder: str) -> str:
    """A copy of the jaxtrees package in ``folder``/src, imported by the runs: a warm run's program cache is
    keyed by the package's source, so an edit of the working tree between a study's cold and warm run (another
    engineer's) would make the warm run trace and compile again."""
    import shutil

    import jaxtrees

    source = os.path.join(folder, "src")
    shutil.copytree(os.path.dirname(jaxtrees.__file__), os.path.join(source, "jaxtrees"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return source


def run_in_process(name: str, out: str) -> dict:
    """``jaxtrees run NAME --quick`` in this process (the compilation cache off): wall s, and the
    process's peak resident memory and memory maps after it (issue 39: one process, many programs)."""
    import resource

    from jaxtrees.core import programs as programs_lib
    from jaxtrees.experiments.run import runner
    from jaxtrees.experiments.study import configure as configure_

    study = studies.get(name)
    started = time.perf_counter()
    runner.run(study, configure_(study, quick=True), out, progress=False)
    wall = time.perf_counter() - started
    return {"study": name, "wall_s": round(wall, 1), "maps": programs_lib.map_count(),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", default="all", help="comma-separated names, 'all' (default) or 'none'")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    ap.add_argument("--one-process", action="store_true",
                    help="run the quick sizes in this one process instead of a fresh one each (as a notebook would)")
    ap.add_argument("--warm", action="store_true",
                    help="run each study twice (fresh processes, the compilation cache on): cold, then warm")
    ap.add_argument("--compile-workers", choices=("auto", "threads", "processes"),
                    help="JAXTREES_COMPILE_WORKERS for the runs (default: the runner's choice by backend)")
    args = ap.parse_args(argv)
    if args.compile_workers:
        os.environ["JAXTREES_COMPILE_WORKERS"] = args.compile_workers
    names = {"all": sorted(studies.STUDIES), "none": []}.get(args.studies, args.studies.split(","))
    for name in names:
        studies.get(name)  # an unknown name fails before anything runs
    import jax

    device = f"{jax.devices()[0].device_kind} ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    how = "in this one process, one after another" if args.one_process else "cold, one fresh process each"
    print(f"device: {device}; jax {jax.__version__}; quick sizes {how}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.one_process:
            os.environ["JAXTREES_CACHE_DIR"] = ""
            for name in names:
                row = run_in_process(name, os.path.join(tmp, name))
                rows.append(row)
                print(f"{name:>18}: wall {row['wall_s']:7.1f} s  memory maps {row['maps']}  "
                      f"peak RSS {row['peak_rss_mb']} MB", flush=True)
            names = []
        source = snapshot(tmp) if args.warm and names else None
        for name in names:
            cache = os.path.join(tmp, "cache", name) if args.warm else ""
            row = run_cold(name, os.path.join(tmp, name), cache, source)
            rows.append(row)
            overlap = f", overlap {row['overlap']:.2f}" if row["programs"] > 1 and row["overlap"] is not None else ""
            print(f"{name:>18}: programs {row['programs']:3d}  compile {row['compile_s']:7.1f} s  "
                  f"waited {row['waited_s']:7.1f} s  trials {row['trial_s']:7.1f} s  wall {row['wall_s']:7.1f} s  "
                  f"(compile share {row['compile_share']:.2f}{overlap}; {row['workers']})", flush=True)
            if args.warm:
                warm = run_cold(name, os.path.join(tmp, name + "-warm"), cache, source)
                warm["traced"] = warm["ready"] - row["ready"]  # a program loaded without tracing writes no new entry
                budget = warm["trial_s"] + 2.0 * warm["programs"]
                warm["over_trials"] = round(warm["wall_s"] / budget, 3)
                row["warm"] = warm
                print(f"{'':>18}  warm: loaded {warm['loaded']}/{warm['programs']} ({warm['traced']} traced)  "
                      f"compile {warm['compile_s']:7.1f} s  waited {warm['waited_s']:7.1f} s  "
                      f"trials {warm['trial_s']:7.1f} s  wall {warm['wall_s']:7.1f} s  "
                      f"(cold {row['wall_s']:.1f} s; warm / (trials + 2 s per program) {warm['over_trials']:.2f})",
                      flush=True)
                phases = warm["phases"]
                warm["over_trials_before_post_run"] = round((warm["wall_s"] - phases["post_run"]) / budget, 3)
                print(f"{'':>18}  warm phases: process {phases['process']:.1f} s  start-up {phases['start_up']:.1f} s  "
                      f"run {phases['run']:.1f} s  post-run {phases['post_run']:.1f} s (read {phases['read']:.1f}, "
                      f"figures {phases['figures']:.1f}, report {phases['report']:.1f}); without the post-run "
                      f"{warm['over_trials_before_post_run']:.2f} of the budget", flush=True)
    summary = {"device": device, "jax": jax.__version__, "studies": rows,
               "programs_juntas_full": programs("juntas", quick=False)}
    if rows and not args.one_process:
        summary["compile_share_quick_max"] = max(r["compile_share"] for r in rows)
        several = [r["overlap"] for r in rows if r["programs"] > 1 and r["overlap"] is not None]
        if several:
            summary["compile_overlap_max"] = max(several)
        if args.warm:
            summary["warm_over_trials_max"] = max(r["warm"]["over_trials"] for r in rows)
            summary["warm_before_post_run_max"] = max(r["warm"]["over_trials_before_post_run"] for r in rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    if rows and not args.one_process:
        print(f"compile_share_quick_max: {summary['compile_share_quick_max']:.3f}")
        if "compile_overlap_max" in summary:
            print(f"compile_overlap_max: {summary['compile_overlap_max']:.3f}")
        if "warm_over_trials_max" in summary:
            print(f"warm_over_trials_max: {summary['warm_over_trials_max']:.3f}")
            print(f"warm_before_post_run_max: {summary['warm_before_post_run_max']:.3f}")
    print(f"programs_juntas_full: {summary['programs_juntas_full']}")
    return summary


if __name__ == "__main__":
    main()

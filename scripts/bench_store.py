"""Benchmark: the results store's host side, the juntas study at two sizes of rows.

Workload: ``jaxtrees run juntas --quick`` (n = 16, k = 3, 4, c = 0, 0.05, 0.1, 0.2, impurity = entropy, gini,
m = 16 .. 8192: 160 rows per replicate, counted from the grid) at ``--small`` replicates (10^6 rows' worth by
default: 6,250) and ``--large`` (10^7 rows: 62,500), each in a fresh process (``jaxtrees.cli.main``, as the command
line runs it) with the compilation cache off. Printed per size, from the run's metadata and the child's own clocks:

  host_us_per_row           the main thread's seconds building calls' inputs and handing their outputs to
                            the writer, per row (the writer's thread does the rest, while trials run)
  rows_per_s_write          rows per second of the store's part writing (columns to a durable Parquet part of the
                            writer's 2^17 rows, fsyncs included) with nothing else running: the run's rows again;
                            rows_per_s_write_in_run is the writer thread's wall rate during the trials (sharing
                            the cores with XLA's threads)
  post_run_s_per_million    read back, checks, figures and report after the last trial, per million rows
  peak_rss_mb               the process's peak resident memory (``peak_rss_mb_trials``: as the figures and report
                            begin, i.e. of the start and the trials; its largest child's, a figure drawn in a forked
                            child, beside it: ``peak_rss_mb_children``, the pages it shares with the parent included)
  disk_bytes_per_row        bytes of rows/ per row

The last lines are ``host_us_per_row``, ``rows_per_s_write``, ``post_run_s_per_million_rows`` (the large
size), ``peak_rss_mb_1e6``, ``peak_rss_mb_1e7`` and ``disk_bytes_per_row``.

    python scripts/bench_store.py                         # 10^6 and 10^7 rows (~8 min on 2 cores)
    python scripts/bench_store.py --small 625 --large 6250     # 10^5 and 10^6 rows

``--grouping TRIALS`` measures instead a report's group-by over that many trials (a table as ``read_results``
returns it, grouped by (k, c, impurity, cell, replicate) as smoothed-base's report groups them), side by side: keys
as one tuple per group (``table.groups``, the only way before issue 64) against codes only
(``table.group_codes``) and keys as columns (``table.group_columns``); seconds (best of ``--reps``) and peak traced
MiB of each, on a fresh table each time.

    python scripts/bench_store.py --grouping 1000000      # 10^6 trials
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

def rows_per_replicate() -> int:
    """Rows of one replicate of the quick juntas grid: its cells' sample sizes (16 cells x 10 m since its Gini
    cells; 8 x 10 before, when the defaults were 12,500 and 125,000 replicates)."""
    from jaxtrees.experiments import studies
    from jaxtrees.experiments.study import configure
    from jaxtrees.experiments.study.trials import sample_sizes

    return sum(len(sample_sizes(cell)) for cell in configure(studies.get("juntas"), quick=True).cells())


def child(replicates: int, out: str) -> dict:
    """One run in this process: its figures from the metadata and this process's clocks."""
    from jaxtrees import cli
    from jaxtrees.experiments import reporting

    peaks = _peak_before(reporting, "after_run")
    started = time.perf_counter()
    args = ["run", "juntas", "--quick", "--set", f"replicates={replicates}", "--out", out, "--no-progress"]
    code = cli.main(args)
    wall = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"jaxtrees {' '.join(args)} exited {code}")
    directory = os.path.join(out, "juntas")
    with open(os.path.join(directory, "metadata.json")) as fh:
        run = json.load(fh)["runs"][-1]
    rows = run["rows_written"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the write-alone pass reads the rows again
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    write_alone = _write_alone(directory, run)
    disk = sum(os.path.getsize(os.path.join(directory, "rows", n)) for n in os.listdir(os.path.join(directory, "rows")))
    return {"rows": rows, "trials": run["trials"], "wall_s": wall, "run_s": run["seconds"],
            "post_run_s": reporting.LAST_POST_RUN_SECONDS,
            "host_us_per_row": 1e6 * (run["host_seconds"] + run["handover_seconds"]) / rows,
            "rows_per_s_write_in_run": rows / max(run["write_seconds"], 1e-9), "rows_per_s_write": write_alone,
            "peak_rss_mb": peak, "peak_rss_mb_trials": peaks.get("after_run"), "peak_rss_mb_children": peak_children,
            "disk_bytes_per_row": disk / rows, "device": run["environment"]["device_kind"],
            "devices": run["environment"]["local_device_count"]}


def _peak_before(module, name: str) -> dict:
    """``module.name`` wrapped to note this process's peak RSS (MB) as it is called, in the returned dict."""
    peaks, wrapped = {}, getattr(module, name)

    def noted(*args, **kwargs):
        peaks[name] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return wrapped(*args, **kwargs)

    setattr(module, name, noted)
    return peaks


def _write_alone(directory: str, run: dict) -> float:
    """Rows per second of the store's part writing (columns to a durable Parquet part, fsyncs included) with nothing
    else running: the run's rows written again as parts of the writer's size into a scratch directory."""
    import numpy as np

    from jaxtrees.experiments.results import reading, store, writer

    table = reading.read_results(directory, ordered=False)
    scratch = store.Store(tempfile.mkdtemp(dir=os.path.dirname(directory)), "scratch")
    scratch.open(json.load(open(os.path.join(directory, "metadata.json")))["config"])
    columns = {name: np.asarray(table[name], dtype=object) if table[name].dtype == object else table[name]
               for name in table.names}
    step, started = writer.ROWS_PER_PART, time.perf_counter()
    for start in range(0, len(table), step):
        scratch.write_part({name: value[start:start + step] for name, value in columns.items()}, 0)
    seconds = time.perf_counter() - started
    scratch.close()
    return len(table) / seconds


def grouping(trials: int, rows_per_trial: int, reps: int) -> dict:
    """Seconds and peak traced MiB of grouping ``trials`` trials by trial, per way (see the module's docstring)."""
    import tracemalloc

    import numpy as np

    from jaxtrees.experiments import table as tables

    per_cell = [(k, c) for k in (3, 4) for c in (0.0, 0.05, 0.1, 0.2)]
    replicates = -(-trials // len(per_cell))
    cell = np.repeat(np.arange(len(per_cell), dtype=np.int32), replicates * rows_per_trial)
    replicate = np.tile(np.repeat(np.arange(replicates, dtype=np.int32), rows_per_trial), len(per_cell))
    columns = {"cell": cell, "replicate": replicate,
               "k": tables.ByCell([3, 4], [k == 4 for k, _ in per_cell]),
               "c": tables.ByCell([0.0, 0.05, 0.1, 0.2], [[0.0, 0.05, 0.1, 0.2].index(c) for _, c in per_cell]),
               "impurity": tables.ByCell(np.asarray(["entropy"], object), np.zeros(len(per_cell), np.int32))}
    by = ["k", "c", "impurity", "cell", "replicate"]
    ways = {"keys": tables.groups, "codes": tables.group_codes, "columns": tables.group_columns}
    out = {"trials": len(per_cell) * replicates, "rows": cell.size}
    for name, way in ways.items():
        best = np.inf
        for _ in range(reps):
            table = tables.Table(columns)
            started = time.perf_counter()
            way(table, by)
            best = min(best, time.perf_counter() - started)
        table = tables.Table(columns)
        tracemalloc.start()
        way(table, by)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out[f"grouping_s_{name}"], out[f"grouping_mib_{name}"] = best, peak / 2**20
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, help="replicates of the small size (default: 10^6 rows' worth)")
    ap.add_argument("--large", type=int, help="replicates of the large size (default: 10^7 rows' worth)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--grouping", type=int, help="measure a group-by over this many trials instead (see above)")
    ap.add_argument("--rows-per-trial", type=int, default=1, help="with --grouping: rows per trial")
    ap.add_argument("--reps", type=int, default=3, help="with --grouping: timed rounds per way")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.child, args.out)))
        return
    if args.grouping:
        r = grouping(args.grouping, args.rows_per_trial, args.reps)
        print(f"{r['trials']:,} trials ({r['rows']:,} rows) grouped by trial, on "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores")
        for name, value in r.items():
            if name.startswith("grouping_"):
                print(f"{name}: {value:.3f}")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(r, fh, indent=2)
        return
    env = {**os.environ, "JAXTREES_CACHE_DIR": ""}
    per = rows_per_replicate() if args.small is None or args.large is None else 0
    results = {}
    for label, replicates in (("1e6", args.small or -(-10**6 // per)), ("1e7", args.large or -(-10**7 // per))):
        with tempfile.TemporaryDirectory() as out:
            proc = subprocess.run([sys.executable, __file__, "--child", str(replicates), "--out", out], env=env,
                                  capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        r = results[label] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{label}: {r['rows']:,} rows ({r['trials']:,} trials) on {r['devices']} x {r['device']}: "
              f"wall {r['wall_s']:.1f} s, trials {r['run_s']:.1f} s, after them {r['post_run_s']:.2f} s; "
              f"host {r['host_us_per_row']:.3f} us/row, write {r['rows_per_s_write']:,.0f} rows/s "
              f"({r['rows_per_s_write_in_run']:,.0f} during the trials), "
              f"peak RSS {r['peak_rss_mb']:,.0f} MB ({r['peak_rss_mb_trials'] or 0:,.0f} before the figures and "
              f"report; its largest child, a figure drawn beside: "
              f"{r['peak_rss_mb_children']:,.0f} MB, pages shared with it included), "
              f"{r['disk_bytes_per_row']:.2f} bytes/row", flush=True)
    large = results["1e7"]
    lines = {"host_us_per_row": max(r["host_us_per_row"] for r in results.values()),
             "rows_per_s_write": min(r["rows_per_s_write"] for r in results.values()),
             "post_run_s_per_million_rows": large["post_run_s"] / (large["rows"] / 1e6),
             "peak_rss_mb_1e6": results["1e6"]["peak_rss_mb"], "peak_rss_mb_1e7": large["peak_rss_mb"],
             "disk_bytes_per_row": max(r["disk_bytes_per_row"] for r in results.values())}
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    for name, value in lines.items():
        print(f"{name}: {value:.3f}" if value < 100 else f"{name}: {value:,.0f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"sizes": results, **lines}, fh, indent=2)


if __name__ == "__main__":
    main()

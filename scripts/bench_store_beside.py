"""Benchmark: bench_store's child side by side with another commit's, alternating in one run (rounds of: that
commit, this tree, this tree with ``--set`` overrides where given), so that both see the same load.

Workload: ``jaxtrees run juntas --quick`` at ``--replicates`` (default: 10^6 rows of this tree's grid) and, in a
temporary git worktree of ``--commit``, its own ``scripts/bench_store.py`` child at ``--their-replicates`` (its grid
may have other rows per replicate: 80 at d75b454, 160 now), compilation cache off. Printed per run: rows, seconds
after the trials, host us per row, write-alone rows per second, trials' seconds and the load; then the medians.

    python scripts/bench_store_beside.py --commit d75b454 --their-replicates 12500 --set impurity=entropy
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Runs a tree's bench_store child with extra ``jaxtrees run`` arguments (argv: replicates, out, extra...).
CHILD = """
import sys, json
sys.path.insert(0, "scripts")
import bench_store
from jaxtrees import cli
extra, main = sys.argv[3:], cli.main
cli.main = lambda args: main(list(args) + extra)
print(json.dumps(bench_store.child(int(sys.argv[1]), sys.argv[2])))
"""
FIGURES = ("post_run_s", "host_us_per_row", "rows_per_s_write", "run_s")


def once(tree: str, replicates: int, extra: list[str]) -> dict:
    """One child run in ``tree`` (its own package and script), its figures and the load as it ended."""
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "JAXTREES_CACHE_DIR": "", "PYTHONPATH": tree}
        proc = subprocess.run([sys.executable, "-c", CHILD, str(replicates), out, *extra], cwd=tree, env=env,
                              capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: the child failed:\n{proc.stderr[-3000:]}")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "load": os.getloadavg()[0]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", required=True, help="the commit to compare with (e.g. d75b454)")
    ap.add_argument("--their-replicates", type=int, required=True, help="replicates of its runs (its grid's rows)")
    ap.add_argument("--replicates", type=int, help="replicates of this tree's runs (default: 10^6 rows)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="also run this tree with these overrides (e.g. impurity=entropy: the older grid)")
    ap.add_argument("--set-replicates", type=int, help="replicates of the --set runs (default: --their-replicates)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--json", help="write every run's figures here")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import bench_store

    mine = args.replicates or -(-10**6 // bench_store.rows_per_replicate())
    runs = [(args.commit, None, args.their_replicates, []), ("this tree", ROOT, mine, [])]
    if args.set:
        extra = [a for item in args.set for a in ("--set", item)]
        runs.append((f"this tree, {' '.join(args.set)}", ROOT, args.set_replicates or args.their_replicates, extra))
    results = {label: [] for label, *_ in runs}
    with tempfile.TemporaryDirectory() as scratch:
        theirs = os.path.join(scratch, "tree")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", theirs, args.commit], check=True,
                       capture_output=True)
        try:
            for round_ in range(args.rounds):
                for label, tree, replicates, extra in runs:
                    r = once(tree or theirs, replicates, extra)
                    results[label].append(r)
                    print(f"round {round_} {label}: {r['rows']:,} rows; after the trials {r['post_run_s']:.2f} s, "
                          f"host {r['host_us_per_row']:.4f} us/row, write {r['rows_per_s_write']:,.0f} rows/s, "
                          f"trials {r['run_s']:.1f} s, load {r['load']:.1f}", flush=True)
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", theirs], capture_output=True)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    for label, rs in results.items():
        print(f"median {label}: " + ", ".join(f"{name} {statistics.median(r[name] for r in rs):.4g}" for name in FIGURES))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()

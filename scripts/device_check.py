"""Issue 56's checks on an accelerator, in one call: a session lent a GPU has minutes of device time, so every
measurement it asks for runs from this one script, in order of importance, each step in a fresh process.

    python scripts/device_check.py --out DIR                # on the device machine; ~7-9 min on an H100 / H200
    python scripts/device_check.py --out DIR --smoke        # the same steps at tiny sizes, anywhere (a CPU)

Steps (wall s of each fresh process, its stdout / stderr tail kept in DIR/STEP.log):
  juntas_full_cold    ``jaxtrees run juntas`` at its full size, a new compilation cache     (goal <= 35 s)
  juntas_full_warm    the same command again into another directory: every program loaded  (goal <= 20 s)
  compare_quick_cold  ``jaxtrees run compare --quick``, a new cache                          (goal <= 30 s)
  bench_default       ``scripts/bench.py`` with its default flags                           (goal < 60 s)
  compare_full        ``jaxtrees run compare`` at its full size (its report is kept)
  gd_scaling_full     ``jaxtrees run gd-scaling`` at its full size: k up to 5, n up to 256 (its report is kept)

A step starts only while ``--budget`` seconds remain (default 540, a 600 s call's limit less a margin) and is stopped
at the budget's end; DIR/summary.json holds the device, jax's version and each step's wall s, exit code and
``compiled_or_loaded``; the table is printed as it goes. The reports of the full runs are copied to DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

#: Tiny overrides per study for ``--smoke`` (a CPU runs every step in a minute or two).
SMOKE = {"juntas": ["--set", "n=16", "--set", "k=3", "--set", "c=0.1", "--set", "m_max=64", "--set", "replicates=4",
                    "--set", "impurity=entropy"],
         "compare": ["--set", "learner=id3-entropy,stump-gini", "--set", "family=junta", "--set", "replicates=4"],
         "gd-scaling": ["--quick", "--set", "n=8", "--set", "k=2", "--set", "c=0.1", "--set", "replicates=2"]}


def steps(out: str, smoke: bool) -> list[tuple[str, list[str], dict]]:
    """``(name, argv, extra environment)`` of each step, in order of importance."""
    jaxtrees = [sys.executable, "-m", "jaxtrees.cli", "run"]
    tiny = {name: SMOKE[name] if smoke else [] for name in SMOKE}
    quick = ["--quick"] if smoke else []
    cache, compare_cache = os.path.join(out, "cache"), os.path.join(out, "cache-compare")
    bench = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench.py")]
    if smoke:
        bench += ["--help"]  # the script starts; its timed work is the device's
    return [
        ("juntas_full_cold", [*jaxtrees, "juntas", *quick, *tiny["juntas"], "--out", os.path.join(out, "cold")],
         {"JAXTREES_CACHE_DIR": cache}),
        ("juntas_full_warm", [*jaxtrees, "juntas", *quick, *tiny["juntas"], "--out", os.path.join(out, "warm")],
         {"JAXTREES_CACHE_DIR": cache}),
        ("compare_quick_cold", [*jaxtrees, "compare", "--quick", *tiny["compare"], "--out", os.path.join(out, "quick")],
         {"JAXTREES_CACHE_DIR": compare_cache}),
        ("bench_default", bench, {}),
        ("compare_full", [*jaxtrees, "compare", *quick, *tiny["compare"], "--out", os.path.join(out, "full")],
         {"JAXTREES_CACHE_DIR": compare_cache}),
        ("gd_scaling_full", [*jaxtrees, "gd-scaling", *tiny["gd-scaling"], "--out", os.path.join(out, "full")],
         {"JAXTREES_CACHE_DIR": cache}),
    ]


def _how(argv: list[str]) -> dict | None:
    """The run's ``compiled_or_loaded`` (metadata.json of the study it ran), None for other steps."""
    if "--out" not in argv or "run" not in argv:
        return None
    study = argv[argv.index("run") + 1]
    try:
        with open(os.path.join(argv[argv.index("--out") + 1], study, "metadata.json")) as fh:
            return json.load(fh)["runs"][-1].get("compiled_or_loaded")
    except (OSError, ValueError, KeyError, IndexError):
        return None


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="a directory for the runs, logs and summary.json")
    ap.add_argument("--budget", type=float, default=540.0, help="seconds for all steps (default 540)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: check the steps run, anywhere")
    ap.add_argument("--only", help="comma-separated step names (default: every step)")
    args = ap.parse_args(argv)
    if args.budget <= 0:
        raise SystemExit(f"--budget must be > 0 seconds, got {args.budget}")
    os.makedirs(args.out, exist_ok=True)
    deadline = time.monotonic() + args.budget
    probe = subprocess.run([sys.executable, "-c", "import jax; d = jax.devices()[0]; print(jax.__version__, "
                            "len(jax.devices()), d.platform, d.device_kind)"], capture_output=True, text=True)
    device = probe.stdout.strip() or probe.stderr.strip()[-300:]
    print(f"device: {device}", flush=True)
    chosen = None if not args.only else set(args.only.split(","))
    summary = {"device": device, "smoke": args.smoke, "budget_s": args.budget, "steps": []}
    for name, command, env in steps(args.out, args.smoke):
        if chosen is not None and name not in chosen:
            continue
        left = deadline - time.monotonic()
        if left < 5:
            summary["steps"].append({"step": name, "skipped": "budget spent"})
            print(f"{name:>20}: skipped (budget spent)", flush=True)
            continue
        started = time.perf_counter()
        try:
            proc = subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=left)
            code, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as e:
            code = "timeout"
            text = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(errors="replace")
        wall = round(time.perf_counter() - started, 1)
        with open(os.path.join(args.out, f"{name}.log"), "w") as fh:
            fh.write(text)
        row = {"step": name, "wall_s": wall, "exit": code, "how": _how(command)}
        summary["steps"].append(row)
        how = row["how"]
        said = "" if not how else f"  ({', '.join(sorted(set(how.values())))} {len(how)} program(s))"
        print(f"{name:>20}: {wall:7.1f} s  exit {code}{said}", flush=True)
        with open(os.path.join(args.out, "summary.json"), "w") as fh:
            json.dump(summary, fh, indent=1)
    for study in ("compare", "gd-scaling"):  # the full runs' reports, to commit with wall time and device
        report = os.path.join(args.out, "full", study, "report.md")
        if os.path.exists(report):
            shutil.copy(report, os.path.join(args.out, f"{study}-report.md"))
    return summary


if __name__ == "__main__":
    main()

"""The benchmark scripts run at tiny sizes and end with their ratio line."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _main(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.mark.parametrize("name, args, last", [
    pytest.param("bench", ["--B", "8", "--m", "64", "--n", "4", "--k", "2", "--depth", "2", "--sklearn-trials", "2",
                           "--test-m", "128", "--reps", "1", "--skip", "scaling,memory"],
                 "compile_e2e_n4_k2_s", marks=pytest.mark.slow),
    pytest.param("bench_gd", ["--B", "4", "--n", "8", "--width", "8", "--steps", "20", "--reps", "1"], "speedup_vs_loop",
                 marks=pytest.mark.slow),
    ("bench_sampling", ["--B", "8", "--m", "64", "--n", "8", "--k", "2", "--precisions", "8", "--reps", "1"], None),
    ("bench_fourier", ["--tables", "2", "--table-n", "6", "--B", "8", "--m", "64", "--n", "5", "--group", "4",
                       "--numpy-trials", "2", "--reps", "1"], "lmn_speedup_vs_numpy"),
    ("bench_weighted", ["--B", "4", "--m", "64", "--n", "6", "--k", "2", "--depth", "2", "--group", "2",
                        "--sklearn-trials", "2", "--reps", "1"], "weighted_growth_speedup_vs_sklearn"),
    ("bench_boosting", ["--data", "heart", "--splits", "2", "--rounds", "5", "--sklearn-splits", "1", "--reps", "1"],
     "adaboost_speedup_vs_sklearn"),
    ("bench_forest", ["--data", "cancer", "--splits", "2", "--trees", "4", "--depth", "3", "--sklearn-splits", "1",
                      "--reps", "1"], "forest_speedup_vs_sklearn"),
    ("bench_rank", ["--batch", "8", "--n", "6", "--m", "32", "--length", "2", "--reference-samples", "4", "--reps", "1"],
     "findmin_ms_1024"),
    ("bench_compile", ["--studies", "none"], "programs_juntas_full"),
    pytest.param("bench_compile", ["--studies", "parity"], "programs_juntas_full", marks=pytest.mark.slow),
    pytest.param("bench_compile", ["--studies", "trees", "--warm"], "programs_juntas_full", marks=pytest.mark.slow),
    pytest.param("bench_compile_workers", ["--studies", "trees"], "worker_start_s", marks=pytest.mark.slow),
])
def test_bench_script_runs(capsys, name, args, last):
    _main(name)(args)
    out = capsys.readouterr().out.strip().splitlines()
    assert out
    if last:
        key, value = out[-1].split(": ")
        assert key == last and float(value) > 0
    bound = {"bench_boosting": "counting_bound_ms", "bench_forest": "unweighted_trees_ms"}.get(name)
    if bound:  # the bound the ratio is measured against, in ms
        values = [float(line.split(": ")[1]) for line in out if line.startswith(bound + ": ")]
        assert len(values) == 1 and values[0] > 0
    if name == "bench":
        keys = [line.split(": ")[0] for line in out[-3:-1]]
        assert keys == ["growth_speedup_vs_sklearn", "end_to_end_speedup_vs_numpy_sklearn"]


def test_device_check_runs_every_step_at_its_smoke_size(tmp_path):
    """scripts/device_check.py (issue 56's accelerator checks in one call) at tiny sizes: every step ends with exit 0,
    the warm juntas run loads what the cold one compiled, and a spent budget skips the rest by name."""
    summary = _main("device_check")(["--out", str(tmp_path / "a"), "--smoke"])
    steps = {row["step"]: row for row in summary["steps"]}
    assert list(steps) == ["juntas_full_cold", "juntas_full_warm", "compare_quick_cold", "bench_default",
                           "compare_full", "gd_scaling_full"]
    assert all(row["exit"] == 0 for row in steps.values()), steps
    assert set(steps["juntas_full_cold"]["how"].values()) == {"compiled"}
    assert set(steps["juntas_full_warm"]["how"].values()) == {"loaded"}
    assert (tmp_path / "a" / "compare-report.md").exists() and (tmp_path / "a" / "gd-scaling-report.md").exists()
    short = _main("device_check")(["--out", str(tmp_path / "b"), "--smoke", "--budget", "1"])
    assert [row.get("skipped") for row in short["steps"]] == ["budget spent"] * 6

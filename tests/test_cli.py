"""The command line and the benchmark script, run at tiny sizes."""

import csv
import importlib.util
from pathlib import Path

import pytest

from jaxtrees import cli

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--n", "8", "--k", "2", "--trials", "16", "--m", "16", "64", "256"]


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_quickstart_writes_results_and_figure(tmp_path, capsys):
    assert cli.main(["quickstart", "--out", str(tmp_path), *TINY]) == 0
    rows = _rows(tmp_path / "quickstart.csv")
    assert len(rows) == 2 * 2 * 3  # targets x distributions x m
    assert (tmp_path / "quickstart.png").stat().st_size > 10_000
    for r in rows:
        assert 0 <= int(r["successes"]) <= 16
        assert float(r["wilson_low"]) <= float(r["success_rate"]) <= float(r["wilson_high"])
    # Under the uniform distribution every gain of a parity is 0 in expectation: a 2-parity on
    # 8 bits is found only by luck; under smoothing with m = 256 it is found almost always.
    rate = {(r["target"], r["distribution"], int(r["m"])): float(r["success_rate"]) for r in rows}
    assert rate[("parity", "smoothed", 256)] >= 0.75
    assert "P[test error = 0]" in capsys.readouterr().out


def test_quickstart_is_reproducible(tmp_path):
    for sub in ("a", "b"):
        assert cli.main(["quickstart", "--out", str(tmp_path / sub), "--seed", "3", *TINY]) == 0
    assert _rows(tmp_path / "a" / "quickstart.csv") == _rows(tmp_path / "b" / "quickstart.csv")


@pytest.mark.parametrize("args, name", [(["--k", "9", "--n", "8"], "k"), (["--c", "0.7"], "c"),
                                        (["--trials", "0"], "trials"), (["--m", "0"], "m")])
def test_quickstart_bad_input_exits_2(tmp_path, capsys, args, name):
    assert cli.main(["quickstart", "--out", str(tmp_path), *args]) == 2
    assert f"{name} must" in capsys.readouterr().err


def test_bench_grow_runs_and_reports_speedup(capsys):
    spec = importlib.util.spec_from_file_location("bench_grow", ROOT / "scripts" / "bench_grow.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--B", "16", "--m", "100", "--n", "8", "--k", "2", "--depth", "3",
                "--sklearn-trials", "4", "--reps", "1"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    name, value = last.split(": ")
    assert name == "speedup_vs_sklearn" and float(value) > 0

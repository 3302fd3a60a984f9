"""Issue 58: faults and mistakes at the command line are one sentence and a nonzero exit, never a traceback."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import helpers

from jaxtrees import cli
from jaxtrees.experiments.run import runner

TINY = ["--quick", "--set", "n=8", "--set", "k=2", "--set", "c=0,0.2", "--set", "impurity=entropy", "--set", "m_min=16",
        "--set", "m_max=64", "--set", "replicates=6", "--no-progress"]


def _cli(*args, env=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "jaxtrees.cli", *args], env={**os.environ, **(env or {})},
                          capture_output=True, text=True, **kwargs)


@pytest.mark.parametrize("command", ["list", "run juntas --help"])
def test_a_closed_pipe_is_not_an_error(command):
    proc = subprocess.run(f"{sys.executable} -m jaxtrees.cli {command} | head -1", shell=True, capture_output=True,
                          text=True)
    assert proc.stdout.count("\n") == 1 and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


@pytest.mark.parametrize("platform", ["cuda", "foo"])
def test_a_backend_this_machine_lacks_is_one_sentence(tmp_path, platform):
    proc = _cli("run", "juntas", "--out", str(tmp_path), *TINY, env={"JAX_PLATFORMS": platform})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"JAX cannot start the backend JAX_PLATFORMS={platform} here" in proc.stderr


def test_distributed_starts_say_what_to_check(tmp_path, capsys):
    proc = _cli("run", "juntas", "--out", str(tmp_path), *TINY, "--distributed", env={"JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "elsewhere give --coordinator HOST:PORT --num-processes P --process-id I" in proc.stderr
    started = time.monotonic()
    assert cli.main(["run", "juntas", "--out", str(tmp_path), *TINY, "--coordinator", "localhost:1",
                     "--num-processes", "2", "--process-id", "1", "--distributed-timeout", "2"]) == 2
    assert time.monotonic() - started < 60
    assert "process 1: no coordinator at localhost:1 after 2 s" in capsys.readouterr().err
    assert cli.main(["run", "juntas", "--out", str(tmp_path), *TINY, "--coordinator", "localhost:1",
                     "--num-processes", "2", "--process-id", "1", "--distributed-timeout", "0"]) == 2
    assert "--distributed-timeout must be >= 1" in capsys.readouterr().err


def test_out_of_memory_names_group_and_chunk(tmp_path, capsys, monkeypatch):
    def exhausted(*args, **kwargs):
        raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 123 bytes.")

    monkeypatch.setattr(runner, "run", exhausted)
    assert cli.main(["run", "juntas", "--out", str(tmp_path), *TINY]) == 1
    err = capsys.readouterr().err
    assert "out of device or host memory" in err and "--group" in err and "--chunk" in err


def test_ctrl_c_while_jaxtrees_loads_is_one_line():
    """The command's entry point (_jaxtrees_console, outside the package) loads before JAX: Ctrl-C during the
    imports (about a second) ends the command with exit 130 and one line, no traceback."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    started = ("import sys, _jaxtrees_console as c; "  # 'started' said inside console's try, as its first step
               "c._address_space = lambda: print('started', file=sys.stderr, flush=True); c.console()")
    proc = subprocess.Popen([sys.executable, "-c", started, "list"], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline() == "started\n"  # inside the entry point's try (it imports sys only); jax loads next
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the imports finished before the interrupt reached them")
    assert proc.returncode == 130 and err.strip() == "jaxtrees: interrupted while loading", err
    assert time.perf_counter() - sent < 2


def test_ctrl_c_stops_with_130_and_the_run_resumes(tmp_path):
    """SIGINT is held until the calls made are written (a KeyboardInterrupt inside a device-to-host copy once
    aborted the process): exit 130 with "rerun the same command to resume", and rerunning finishes the rows."""
    tiny = [a if not a.startswith("replicates=") else "replicates=320" for a in TINY]
    args = ["run", "juntas", "--out", str(tmp_path), "--chunk", "32", *tiny]
    proc = subprocess.Popen([sys.executable, "-m", "jaxtrees.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "JAXTREES_FLUSH_SECONDS": "0"})
    rows = tmp_path / "juntas" / "rows"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not list(rows.glob("part-*.parquet")):
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the run finished before the interrupt reached it")
    assert proc.returncode == 130 and "rerun the same command to resume" in err and "Traceback" not in err, err
    assert cli.main(args) == 0


def test_unclear_cases_are_clear(tmp_path, capsys):
    """A report on rows lacking an output column, a lock file that is a directory, metadata with no runs."""
    assert cli.main(["run", "juntas", "--out", str(tmp_path), *TINY]) == 0
    directory = tmp_path / "juntas"
    import pyarrow.parquet as pq

    [part] = (directory / "rows").glob("part-*.parquet")
    table = pq.read_table(part)
    copy = tmp_path / "copy" / "juntas"
    shutil.copytree(directory, copy)
    [copied] = (copy / "rows").glob("part-*.parquet")
    pq.write_table(table.drop_columns(["support_recovered"]), copied)
    helpers.resealed(copied)
    capsys.readouterr()
    assert cli.main(["report", str(copy)]) == 2
    assert "the rows lack a column the juntas study's figures and report need" in capsys.readouterr().err

    (directory / ".lock").unlink()
    (directory / ".lock").mkdir()
    assert cli.main(["run", "juntas", "--out", str(tmp_path), *TINY]) == 2
    assert f"{directory / '.lock'} is a directory" in capsys.readouterr().err
    (directory / ".lock").rmdir()

    metadata = json.loads((directory / "metadata.json").read_text())
    (directory / "metadata.json").write_text(json.dumps({**metadata, "runs": []}))
    assert cli.main(["report", str(directory)]) == 2
    assert "records no run yet; rerun `jaxtrees run` with the same arguments" in capsys.readouterr().err
    assert cli.main(["run", "juntas", "--out", str(tmp_path), *TINY]) == 0

    # the sweep (scripts/sweep_bad_inputs.py): a --csv into a missing directory was pyarrow's FileNotFoundError
    capsys.readouterr()
    missing = tmp_path / "no" / "such" / "rows.csv"
    assert cli.main(["export", str(directory), "--csv", str(missing)]) == 2
    assert f"--csv {missing}: the directory {missing.parent} does not exist" in capsys.readouterr().err


def test_an_os_error_is_one_sentence(tmp_path, capsys, monkeypatch):
    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/somewhere/rows")

    monkeypatch.setattr(runner, "run", denied)
    assert cli.main(["run", "juntas", "--out", str(tmp_path), *TINY]) == 1
    assert capsys.readouterr().err == ("jaxtrees run: error: Permission denied (/somewhere/rows); check the path and "
                                       "its permissions\n")

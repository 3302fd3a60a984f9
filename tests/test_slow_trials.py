"""Slow trials (issue 63 item 7): a default call is sized from the trial time measured, so that a killed run
loses at most about two calls, Ctrl-C or SIGTERM ends a run within about two calls (or at once while it
compiles), rows do not depend on the sizes chosen, and the first call prints an estimate of the run's time.

The study is deliberately slow and fast to compile: each group of trials sleeps ``$SLOW_DELAY`` seconds per
trial in a host callback (``jax.pure_callback``), logging the trials it ran to ``$SLOW_LOG``; its rows do not
depend on the delay. It lives in a module file, so that a subprocess can run it (``python -c``).
"""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from jaxtrees.experiments import contract
from jaxtrees.experiments.run import pacing, runner

MODULE = '''
"""A slow study: each group sleeps $SLOW_DELAY s per trial (logged to $SLOW_LOG); $SLOW_TRACE s to trace."""
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxtrees.experiments.study import Study


def _sleep(x):
    x = np.asarray(x)
    time.sleep(float(os.environ.get("SLOW_DELAY", "0")) * x.size)
    if os.environ.get("SLOW_LOG"):
        with open(os.environ["SLOW_LOG"], "a") as fh:
            fh.write(f"{x.size}\\n")
    return np.zeros(x.shape, np.float32)


def trial(key, params):
    """Sleeps, then draws a uniform number."""
    time.sleep(float(os.environ.get("SLOW_TRACE", "0")))
    pause = jax.pure_callback(_sleep, jax.ShapeDtypeStruct((), jnp.float32), params["x"], vmap_method="broadcast_all")
    return {"u": jax.random.uniform(key) * params["x"] + pause}


STUDY = Study(name="slow", trial=trial, grid={"x": [1.0, 2.0]}, replicates=10)
'''

#: The subprocess's run: ARGV out, target seconds, replicates; exit 130 on KeyboardInterrupt.
SCRIPT = textwrap.dedent('''
    import sys
    sys.path.insert(0, sys.argv[1])
    import slow_study
    from jaxtrees.experiments.run import pacing, runner
    pacing.TARGET_CALL_SECONDS = float(sys.argv[3])
    config = runner.configure(slow_study.STUDY, replicates=int(sys.argv[4]))
    try:
        runner.run(slow_study.STUDY, config, sys.argv[2], group=GROUP)
    except KeyboardInterrupt as e:
        sys.exit(128 + getattr(e, "signal", 2))  # as the command: 130 for SIGINT, 143 for SIGTERM
''')
GROUP = 2  # trials vmapped per group: one group sleeps GROUP x SLOW_DELAY
DELAY = 0.05  # a group: 0.1 s; 8 groups (the default's most): 0.8 s
TARGET = 0.5  # at most 5 groups per call: 10 trials


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    """The slow study's module: ``(directory, module)``."""
    directory = tmp_path_factory.mktemp("slow_study")
    (directory / "slow_study.py").write_text(MODULE)
    sys.path.insert(0, str(directory))
    try:
        import slow_study
    finally:
        sys.path.remove(str(directory))
    return directory, slow_study


def _start(slow, out, replicates, env, target=TARGET):
    """The slow study run in a subprocess at ``target`` seconds a call, its stderr piped."""
    script = SCRIPT.replace("GROUP", str(GROUP))
    return subprocess.Popen([sys.executable, "-c", script, str(slow[0]), str(out), str(target), str(replicates)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SLOW_DELAY": str(DELAY), "JAXTREES_FLUSH_SECONDS": "0.2", **env})


def _written(out) -> int:
    """Rows (one per trial) in the whole parts of ``out``."""
    return sum(pq.read_metadata(p).num_rows for p in (Path(out) / "slow" / "rows").glob("part-*.parquet"))


def _when_written(proc, out, seconds: float):
    """Wait until ``out`` has a part, then ``seconds`` more; fails if the run ended first."""
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not _written(out):
        time.sleep(0.01)
    time.sleep(seconds)
    assert proc.poll() is None, proc.communicate()[1]


def _rows(directory) -> list:
    table = runner.read_results(str(directory))
    return sorted(zip(*(table[n].tolist() for n in ("cell", "replicate", "u"))))


def _resumed(slow, out) -> list:
    """The rows of the slow study's run in ``out`` resumed in this process without a delay."""
    contract.source_digest.cache_clear()  # the package's digest now, as the subprocess read it (not at import)
    config = runner.configure(slow[1].STUDY, replicates=40)
    return _rows(runner.run(slow[1].STUDY, config, str(out), group=GROUP, progress=False))


@pytest.fixture(scope="module")
def reference(slow, tmp_path_factory):
    """The slow study's rows (40 replicates) without a delay, at the default sizes and TARGET_CALL_SECONDS."""
    config = runner.configure(slow[1].STUDY, replicates=40)
    return _rows(runner.run(slow[1].STUDY, config, str(tmp_path_factory.mktemp("reference")), group=GROUP,
                            progress=False))


def test_a_killed_run_loses_at_most_about_two_calls(slow, tmp_path, reference):
    """SIGKILL 1.5 s into the trials: the trials run (logged by the callback) and not in a whole part are at
    most two calls' worth (a call of TARGET seconds: 10 trials) and the flush window's (0.2 s: 4 trials); the
    same run resumed gives the rows of an uninterrupted one."""
    log = tmp_path / "ran.log"
    proc = _start(slow, tmp_path, 40, {"SLOW_LOG": str(log)})
    _when_written(proc, tmp_path, 1.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ran, written = sum(map(int, log.read_text().split())), _written(tmp_path)
    per_call = TARGET / DELAY
    assert 10 <= written < 80 and ran - written <= 2 * per_call + 0.2 / DELAY, (ran, written)
    assert _resumed(slow, tmp_path) == reference


def test_sigint_ends_a_run_within_two_calls_and_sigterm_one_compiling_at_once(slow, tmp_path, reference):
    """SIGINT while trials run: the run ends within two calls (2 x TARGET; 3 s allowed for the interpreter's
    exit on a loaded machine) with exit 130, its parts whole; resumed, it gives the rows of an uninterrupted
    run. SIGTERM while a program compiles (a trace of 60 s) ends the run at once, with exit 143."""
    proc = _start(slow, tmp_path, 40, {})
    _when_written(proc, tmp_path, 0.5)
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1]
    latency = time.perf_counter() - sent
    assert proc.returncode == 130 and latency < 2 * TARGET + 3, (latency, err)
    assert 0 < len(runner.read_results(str(tmp_path / "slow"))) < 80
    assert _resumed(slow, tmp_path) == reference

    proc = _start(slow, tmp_path / "compiling", 40, {"SLOW_TRACE": "60"})
    lines = []
    while not any("compiling" in line for line in lines):  # the progress line's phase
        lines.append(proc.stderr.readline())
        assert lines[-1] or proc.poll() is None, "".join(lines)
    time.sleep(0.5)
    sent = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 143 and time.perf_counter() - sent < 5  # 128 + SIGTERM, as a shell reports


def test_rows_do_not_depend_on_the_call_sizes_and_the_first_call_prints_an_estimate(slow, tmp_path, reference,
                                                                                     monkeypatch, capsys):
    """Timed calls (TARGET_CALL_SECONDS 0.1 at 10 ms a trial: 1, then 4, then at most 5 groups of 2 trials), on
    one device and on two, a fixed chunk (6 trials) and the default sizes (1, 4, 8 groups) give the same rows;
    the first call prints the run's estimate."""
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    two = _start(slow, tmp_path / "two", 40, {"SLOW_DELAY": "0.01", "XLA_FLAGS": flags}, target=0.1)
    monkeypatch.setattr(pacing, "TARGET_CALL_SECONDS", 0.1)
    monkeypatch.setenv("SLOW_DELAY", "0.01")
    config = runner.configure(slow[1].STUDY, replicates=40)
    timed = runner.run(slow[1].STUDY, config, str(tmp_path / "timed"), group=GROUP)
    err = capsys.readouterr().err
    assert re.search(r"slow: 80 trials at [\d.,]+ trials/s \(the first call's rate\): about \d+ s\n", err), err
    calls = _metadata(timed)["calls"]
    assert [4 <= c["most_trials"] <= 10 for c in calls.values()] == [True], calls  # 5 groups of 2: 0.1 s
    monkeypatch.setenv("SLOW_DELAY", "0")
    fixed = runner.run(slow[1].STUDY, config, str(tmp_path / "fixed"), group=GROUP, chunk=6, progress=False)
    assert [c["most_trials"] for c in _metadata(fixed)["calls"].values()] == [6]
    assert two.wait(timeout=120) == 0, two.communicate()[1]
    run = _metadata(tmp_path / "two" / "slow")
    assert list(run["chunk"].values()) == [8 * 2 * GROUP], run["chunk"]  # compiled: 8 groups on each device
    assert [c["most_trials"] % (2 * GROUP) == 0 and c["calls"] > 3 for c in run["calls"].values()] == [True], run
    assert _rows(timed) == _rows(fixed) == _rows(tmp_path / "two" / "slow") == reference


def _metadata(directory) -> dict:
    import json

    return json.loads((Path(directory) / "metadata.json").read_text())["runs"][-1]

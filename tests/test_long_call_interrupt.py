"""Ctrl-C during a call that does not end (issue 72 item 2): the calls whose outputs are ready are written, the one
still running is abandoned after the writer's grace (never written, even once it ends), and the process ends at once:
the command with exit 130 and one line, ``jt.run`` from Python as Python ends on an uncaught KeyboardInterrupt (or,
where the program goes on, waiting for the call at its end, which a second Ctrl-C ends); a resume runs the abandoned
trials and gives the rows of an uninterrupted run.

"A long call" is true by construction: with ``$HELD_FOREVER`` set, a trial of hold = 1 counts in float32 towards
infinity, which never ends (the count stops growing at 2^24). On one CPU device with groups of 4 trials, the first
call runs the hold = 0 cell's 4 trials, the second the hold = 1 cell's; the first call's estimate line is printed
after the run has passed its last check for an interrupt before dispatching the second, so a SIGINT sent once it
appears lands while the second call is dispatched and running.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import jaxtrees as jt
from jaxtrees.experiments import contract
from jaxtrees.experiments.results import reading, writer

HELD = '''
"""Two cells; with $HELD_FOREVER set, a trial of hold = 1 counts in float32 towards infinity: it never ends."""
import os

import jax
import jax.numpy as jnp

import jaxtrees as jt


def trial(key, params):
    """u ~ U[0, 1), whatever the loop ran."""
    stop = jnp.where(params["hold"] > 0, jnp.inf if os.environ.get("HELD_FOREVER") else 0.0, 0.0)
    count = jax.lax.while_loop(lambda c: c < stop, lambda c: c + 1.0, jnp.float32(0.0))
    draw, weights = jax.random.split(key)
    w = jax.random.normal(weights, (32, 32))
    weight = jnp.abs(w @ w).sum()  # XLA's CPU client runs a program of few flops on the calling thread: not this one
    return {"u": jnp.where((count >= stop) & (weight >= 0), jax.random.uniform(draw), -1.0)}


STUDY = jt.Study(name="held", trial=trial, grid={"hold": [0, 1]}, replicates=4)
'''
GROUP = 4  # one group per call at first: the first call is the hold = 0 cell's 4 trials
ESTIMATE = "(the first call's rate)"
INTERRUPTED = "jaxtrees run: interrupted (rerun the same command to resume: every part written is whole)"
ENV = {"HELD_FOREVER": "1", "JAXTREES_CPU_DEVICES": "1", "JAXTREES_CACHE_DIR": "", "JAX_PLATFORMS": "cpu"}

#: ``jt.run`` from a plain Python program: ``argv`` study file, out, then "raise" (the KeyboardInterrupt uncaught) or
#: "catch" (caught, and the program ends normally).
SCRIPT = '''
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # not the SIG_IGN a background job may inherit
import jaxtrees as jt
try:
    jt.run(sys.argv[1], out=sys.argv[2], group=GROUP, figures=False)
except KeyboardInterrupt:
    if sys.argv[3] == "raise":
        raise
    print("caught", file=sys.stderr, flush=True)
'''.replace("GROUP", str(GROUP))


@pytest.fixture
def held(tmp_path):
    path = tmp_path / "held.py"
    path.write_text(HELD)
    return path


def _rows(directory) -> list:
    table = reading.read_results(str(directory))
    return sorted(zip(*(np.asarray(table[n]).tolist() for n in ("cell", "replicate", "u"))))


def _until(proc, text: str) -> list[str]:
    """stderr's lines up to the first that holds ``text``; fails if the process ends first."""
    lines = []
    while not lines or text not in lines[-1]:
        lines.append(proc.stderr.readline())
        assert lines[-1] or proc.poll() is None, "".join(lines)
    return lines


def test_ctrl_c_abandons_a_call_that_never_ends_and_a_resume_completes_the_rows(held, tmp_path):
    command = shutil.which("jaxtrees", path=os.path.dirname(sys.executable))
    assert command is not None, "the jaxtrees command is not installed beside this Python"
    out = tmp_path / "out"
    proc = subprocess.Popen([command, "run", str(held), "--out", str(out), "--group", str(GROUP)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, **ENV})
    _until(proc, ESTIMATE)
    proc.send_signal(signal.SIGINT)
    try:
        rest = proc.communicate(timeout=120)[1]  # a guard only: before, the command waited for the call for ever
    finally:
        proc.kill()
    assert proc.returncode == 130, rest
    said = [line for line in rest.splitlines() if not line.startswith("held: ")]  # the progress lines aside
    assert said == [INTERRUPTED], rest
    run = json.loads((out / "held" / "metadata.json").read_text())["runs"][-1]
    assert [c.get("abandoned") for c in run["calls"].values()] == [1], run["calls"]
    assert list(run["trials_run"].values()) == [4], run["trials_run"]  # those written (before: all 8, as planned)

    contract.source_digest.cache_clear()  # the package's digest now, as the subprocess read it (not at import)
    jt.run(str(held), out=str(tmp_path / "reference"), group=GROUP, progress=False, figures=False)
    reference = _rows(tmp_path / "reference" / "held")
    assert _rows(out / "held") == reference[:4]  # the first call's trials (cell 0), as an uninterrupted run's
    jt.run(str(held), out=str(out), group=GROUP, progress=False, figures=False)
    assert _rows(out / "held") == reference


@pytest.mark.parametrize("ending", ["raise", "catch"])
def test_jt_run_from_python_ends_as_python_does_or_waits_for_the_call_at_its_end(held, tmp_path, ending):
    """Uncaught, the KeyboardInterrupt ends the program at once (by SIGINT, as Python ends it), never by "terminate
    called without an active exception" (exit 134); caught, the program goes on and, at its end, waits for the call
    saying so, until a second Ctrl-C ends it the same way."""
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(held), str(tmp_path), ending],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, **ENV})
    _until(proc, ESTIMATE)
    proc.send_signal(signal.SIGINT)
    if ending == "catch":
        lines = _until(proc, "waiting for the call")
        assert lines[-2:] == ["caught\n", "jaxtrees: waiting for the call an interrupted run left running on the "
                                          "device (Ctrl-C ends it now)\n"], lines
        proc.send_signal(signal.SIGINT)
    try:
        rest = proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGINT, rest
    assert "terminate called" not in rest and "Fatal Python error" not in rest, rest
    if ending == "raise":
        assert rest.rstrip().endswith("Interrupted: SIGINT"), rest
    assert len(reading.read_results(str(tmp_path / "held"))) == 4  # the first call's rows


class _Output:
    """A call's output on a device, held: ``np.asarray`` waits until ``copy`` is set; ``is_ready`` says whether
    ``ready`` is set, and sets ``copy`` where ``copy_when_asked`` (a ready output whose copy is slow)."""

    def __init__(self, values, ready: bool, copy_when_asked: bool = False):
        self.values, self.ready, self.copy = np.asarray(values, np.float32), threading.Event(), threading.Event()
        self.copy_when_asked = copy_when_asked
        if ready:
            self.ready.set()

    def is_ready(self) -> bool:
        if self.copy_when_asked:
            self.copy.set()
        return self.ready.is_set()

    def __array__(self, dtype=None, copy=None):
        self.copy.wait()
        return self.values


class _Layout:
    replicates = 1
    lengths = np.ones(8, np.int64)

    @staticmethod
    def columns(cells, replicates, outputs):
        return {"cell": cells, **outputs}


class _Store:
    def __init__(self):
        self.parts = []

    def write_part(self, columns, trials):
        self.parts.append(columns["cell"].tolist())


def test_the_writer_writes_the_ready_calls_and_never_the_abandoned_one(monkeypatch, capsys):
    """No grace: the first call (ready, its copy slow) is written, the second (running) and the third (queued behind
    it) are abandoned and stay unwritten once their outputs arrive; a next run waits for them to end (they hold their
    memory on the device), or stops as soon as it is interrupted."""
    monkeypatch.setattr(writer, "GRACE_SECONDS", 0.0)
    store, interrupted = _Store(), threading.Event()
    calls = [_Output([0, 1], ready=True, copy_when_asked=True), _Output([2, 3], ready=False),
             _Output([4, 5], ready=True)]
    rows = writer.Writer(store, _Layout(), flush_seconds=0.0)
    for k, output in enumerate(calls):
        rows.put(np.arange(2 * k, 2 * k + 2), np.zeros(2, bool), {"u": output})
    interrupted.set()
    rows.close(flush=True, interrupted=interrupted)
    assert store.parts == [[0, 1]] and rows.abandoned == 2 and len(rows.finished) == 1
    assert not writer.abandoned_ended(interrupted)
    assert "waiting for the call an interrupted run left running" in capsys.readouterr().err
    for output in calls[1:]:  # the running call ends after the run has closed its store
        output.ready.set()
        output.copy.set()
    rows.fetcher.join(timeout=60)
    assert not rows.fetcher.is_alive() and rows.fetcher.name == "abandoned fetcher"
    assert store.parts == [[0, 1]] and writer.abandoned_ended()

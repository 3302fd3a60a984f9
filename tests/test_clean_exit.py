"""``jt.run`` from Python ends with exit 0 every time: no thread or pool of the run is left to take the GIL while the
interpreter finalizes (pyarrow's ``PyBuffer`` released by its pool after a threaded read aborted the process: exit 134,
"terminate called without an active exception"), and a program cache of another device count is never loaded."""

import os
import subprocess
import sys

import pytest

from jaxtrees.experiments.results import ending

#: Eight CPU devices on any machine: more parts, read on pyarrow's threads (4 of 20 tries aborted before).
CALL = ("import jaxtrees as jt; jt.run('juntas', out={out!r}, quick=True, progress=False, figures={figures}, "
        "set={{'n': 8, 'k': 2, 'c': 0.1, 'impurity': 'entropy', 'm_max': 64, 'replicates': 4}})")
TRIES = 20


def _env(cache, devices: int = 8) -> dict:
    return {**os.environ, "JAXTREES_CACHE_DIR": str(cache), "JAXTREES_CPU_DEVICES": str(devices),
            "JAX_PLATFORMS": "cpu", "PYTHONFAULTHANDLER": "1"}


def _codes(command, tmp_path, env) -> list:
    """``(exit code, stderr's end)`` of TRIES runs of ``command`` (OUT replaced by a fresh directory), two at a time."""
    codes = []
    for first in range(0, TRIES, 2):
        procs = [subprocess.Popen([part.replace("OUT", str(tmp_path / f"out{i}")) for part in command],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
                 for i in range(first, min(first + 2, TRIES))]
        codes += [(p.returncode, err[-300:] if p.returncode else "") for p in procs for err in [p.communicate()[1]]]
    return codes


@pytest.mark.parametrize("how", ["inline", "script"])
def test_jt_run_from_python_exits_0_every_time(tmp_path, how):
    code = CALL.format(out="OUT", figures=how == "script").replace("'OUT'", "sys.argv[-1]")
    code = "import sys; " + code
    if how == "inline":
        command = [sys.executable, "-c", code, "OUT"]
    else:
        (tmp_path / "study_run.py").write_text(code + "\n")
        command = [sys.executable, str(tmp_path / "study_run.py"), "OUT"]
    codes = _codes(command, tmp_path, _env(tmp_path / "cache"))
    assert [c for c, _ in codes] == [0] * TRIES, [c for c in codes if c[0]]


def test_a_program_cache_of_other_devices_is_not_prefetched(tmp_path):
    """The programs the last run of the same call used are loaded ahead only onto the devices they were compiled
    for: 2 devices, then 8 (a program of 2 loaded onto 8 was XLA's check failure, exit 134), then 2 again."""
    out = tmp_path / "out"
    for devices in (2, 8, 2):
        proc = subprocess.run([sys.executable, "-c", CALL.format(out=str(out), figures=False)], capture_output=True,
                              text=True, env=_env(tmp_path / "cache", devices))
        assert proc.returncode == 0, proc.stderr[-2000:]
        subprocess.run(["rm", "-rf", str(out)], check=True)


def test_settle_joins_the_package_threads_and_finds_pyarrows_pools():
    """:func:`ending.settle` joins a thread named ``jaxtrees...`` and waits for pyarrow's pools (found in its
    library), leaving other threads alone."""
    import threading
    import time

    import pyarrow  # noqa: F401 - loaded, as after a read

    done = []
    mine = threading.Thread(target=lambda: (time.sleep(0.2), done.append(1)), name="jaxtrees test", daemon=True)
    other = threading.Event()
    theirs = threading.Thread(target=other.wait, name="someone else's", daemon=True)
    mine.start()
    theirs.start()
    ending.settle()
    assert done == [1] and theirs.is_alive()
    other.set()
    assert ending.arrow_idle()

"""The ``jaxtrees`` command ends with ``cli.exit_now``: atexit handlers run and output flushed, then ``os._exit``;
a plain exit where the interpreter's teardown may matter."""

import os
import subprocess
import sys

import pytest

from jaxtrees import cli

ENDING = """
import atexit, sys, threading, time
atexit.register(lambda: print("atexit ran", flush=True))
print("buffered, no newline", end="")
if sys.argv[1] == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), print(" thread finished", end=""))).start()
from jaxtrees import cli
cli.exit_now(int(sys.argv[2]))
"""


@pytest.mark.parametrize("fast", ["1", "0"])
def test_exit_now_keeps_the_code_output_and_atexit_handlers(fast):
    proc = subprocess.run([sys.executable, "-c", ENDING, "none", "3"], capture_output=True, text=True,
                          env={**os.environ, "JAXTREES_FAST_EXIT": fast})
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "buffered, no newlineatexit ran\n"


def test_exit_now_waits_for_a_running_thread():
    """A non-daemon thread still running is waited for, as a plain exit does (never cut off)."""
    proc = subprocess.run([sys.executable, "-c", ENDING, "thread", "0"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "buffered, no newline thread finishedatexit ran\n"


def test_the_command_is_console_and_ends_with_exit_now(tmp_path):
    """``python -m jaxtrees.cli`` and the installed command (through _jaxtrees_console) run :func:`cli.console`: a
    whole study's files are written and its exit code kept when the process ends at once."""
    import tomllib

    with open(os.path.join(os.path.dirname(cli.__file__), "..", "pyproject.toml"), "rb") as fh:
        assert tomllib.load(fh)["project"]["scripts"]["jaxtrees"] == "_jaxtrees_console:console"  # it calls cli's
    args = ["run", "juntas", "--quick", "--out", str(tmp_path), "--no-progress", "--set", "k=3", "--set", "c=0.1",
            "--set", "impurity=entropy", "--set", "m_max=64", "--set", "replicates=4"]
    env = {**os.environ, "JAXTREES_CACHE_DIR": "", "JAXTREES_CPU_DEVICES": "1"}
    proc = subprocess.run([sys.executable, "-m", "jaxtrees.cli", *args], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().splitlines()[-1].startswith("wrote ")
    directory = tmp_path / "juntas"
    assert {"juntas.png", "juntas.svg", "juntas_signal.png", "juntas_signal.svg", "report.md"} <= {
        p.name for p in directory.iterdir()}
    assert (directory / "report.md").read_text().startswith("# jaxtrees study `juntas`")
    assert (directory / "juntas_signal.svg").read_text().rstrip().endswith("</svg>")
    bad = subprocess.run([sys.executable, "-m", "jaxtrees.cli", "run", "juntas", "--set", "k=0", "--out", str(tmp_path)],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "k" in bad.stderr

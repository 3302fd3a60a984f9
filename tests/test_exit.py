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


#: SIGINT at these seconds after the command's handler is in place (its entry module's first instructions; the
#: interpreter's own start-up before them, 45-67 ms idle but 0.3 s and more on a loaded machine, is out of its reach:
#: docs/benchmarks-history.md): while numpy, JAX and jaxtrees load (segfaults, a lost signal in JAX's gc callback,
#: numpy's ImportError traceback before), then while the run plans and compiles.
INSTANTS = [round(0.15 * i, 2) for i in range(20)]


@pytest.mark.parametrize("at", INSTANTS)
def test_ctrl_c_at_any_moment_is_exit_130_and_one_line(tmp_path, at):
    """The installed command, interrupted at ``at`` seconds: exit 130, one line saying so, nothing else (no
    traceback, no "Exception ignored", no signal lost while a module loads or a finalizer runs)."""
    import shutil
    import signal
    import time

    command = shutil.which("jaxtrees", path=os.path.dirname(sys.executable))
    assert command is not None, "the jaxtrees command is not installed beside this Python"
    ready = tmp_path / "handler-ready"
    env = {**os.environ, "JAXTREES_CACHE_DIR": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu",
           "JAXTREES_TEST_HANDLER_READY": str(ready)}
    proc = subprocess.Popen([command, "run", "juntas", "--quick", "--out", str(tmp_path), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    while not ready.exists():  # the instants count from the handler's installation, whatever the machine's load
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.005)
    time.sleep(at)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    lines = [line for line in err.splitlines() if not line.startswith("jaxtrees run: compilation cache ")]
    assert proc.returncode == 130 and len(lines) == 1 and "interrupted" in lines[0], (proc.returncode, err)


DROPPED = """
import os, signal, sys, time
import _jaxtrees_console as entry
from jaxtrees import cli

def main():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        pass  # dropped, as C code that clears every error while calling Python drops it
    start = time.monotonic()
    try:
        while time.monotonic() - start < (0 if sys.argv[1] == "ends" else 30):
            time.sleep(0.01)
    except KeyboardInterrupt:
        print(f"sent again after {time.monotonic() - start:.2f} s", flush=True)
        return 130
    return 0

cli.main = main
entry.console()
"""


@pytest.mark.parametrize("how", ["runs on", "ends"])
def test_a_ctrl_c_dropped_by_the_code_it_landed_in_is_not_lost(how):
    """A KeyboardInterrupt swallowed where it was raised is raised again RESEND seconds later; a command that ends
    with exit 0 before that ends with exit 130 and one line."""
    import _jaxtrees_console as entry

    proc = subprocess.run([sys.executable, "-c", DROPPED, how.split()[0]], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    if how == "runs on":
        assert proc.stdout.startswith("sent again after ") and proc.stderr == ""
        assert float(proc.stdout.split()[3]) < entry.RESEND + 2, proc.stdout
    else:
        assert proc.stdout == "" and proc.stderr == "jaxtrees: interrupted\n"

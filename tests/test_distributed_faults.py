"""Faults of a distributed run named right (issue 72, items 7 and 9): a --process-id given twice, a port held by
something that is not a jaxtrees process 0, a peer that dies mid-run (its survivors end at once, by the keeper's
word, not after the heartbeats' timeout) and a process whose device-level contract differs (every process compares)."""

import os
import socket
import subprocess
import sys
import threading

import pytest

import helpers

from jaxtrees.experiments.run import distributed

TINY = ["--set", "n=8", "--set", "k=2", "--set", "c=0,0.2", "--set", "impurity=entropy", "--set", "m_min=16",
        "--set", "m_max=64", "--no-progress"]
#: Longer than every bound below: a survivor that ended within them was not told by the heartbeats.
HEARTBEATS = "300"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _meet(address: str, processes: int, ids, timeout: float = 20) -> dict:
    """Each of ``ids`` joins the rendezvous at ``address`` on a thread of its own: what each was told (None: it
    joined)."""
    told = {}

    def join(key, pid):
        try:
            distributed._rendezvous(address, processes, pid, timeout)
            told[key] = None
        except ValueError as e:
            told[key] = str(e)

    threads = [threading.Thread(target=join, args=(key, pid)) for key, pid in enumerate(ids)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return told


def _leave():
    """Close this process's links to the keepers the tests started, and wait for those keepers to end."""
    while distributed._KEPT:
        distributed._KEPT.pop().close()
    while distributed._KEEPER:
        assert distributed._KEEPER.pop().wait(timeout=30) is not None


def test_a_process_id_given_twice_is_named_to_every_process():
    """Two processes given --process-id 0: the second one's keeper finds the port taken (before: 'Address already in
    use ... choose a free port'); it asks the holder, process 0's keeper, which refuses both by the id."""
    address = f"localhost:{_port()}"
    try:
        told = _meet(address, 2, [0, 0])
    finally:
        _leave()
    said = f"--process-id 0 was given to two processes (the second found a process 0 serving the coordinator at {address})"
    assert len(told) == 2 and all(said in e for e in told.values()), told
    assert not any("Address already in use" in e or "free port" in e for e in told.values()), told


def test_an_id_given_twice_after_the_run_started_is_told_what_holds_the_port():
    """Processes 0 and 1 have met (the coordination service now holds the port); a second process 1, or a second
    process 0 (its keeper finds the port taken), hears HTTP/2 there and is told so, with the likely cause."""
    port = _port()
    address = f"localhost:{port}"
    try:
        assert _meet(address, 2, [0, 1]) == {0: None, 1: None}
        with pytest.raises(ValueError, match=r"process 1: localhost:\d+ answered but is not a jaxtrees process 0 \(it "
                                             r"speaks HTTP/2, as the coordination service of a run under way does: "
                                             r"were two processes given the same --process-id\?\)"):
            distributed._rendezvous(address, 2, 1, 20)
        with pytest.raises(ValueError, match=f"process 0 cannot serve the coordinator on port {port} of --coordinator "
                                             f"{address}: a program that is not a jaxtrees process 0 .* speaks HTTP/2"):
            distributed._rendezvous(address, 2, 0, 20)
    finally:
        _leave()


class _Holder:
    """A plain TCP server on a port (not jaxtrees): it accepts and says nothing, closes at once, answers a line, or
    (shy) closes at a word before its own first word, an HTTP/2 SETTINGS frame, as a loaded gRPC server can."""

    def __init__(self, how: str):
        self.how, self.server = how, socket.create_server(("", 0))
        self.port, self.held = self.server.getsockname()[1], []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            if self.how == "closes":
                conn.close()
                continue
            if self.how == "shy":
                conn.settimeout(0.5)
                try:
                    heard = conn.recv(100)
                except TimeoutError:
                    heard = b""
                if heard:
                    conn.close()
                    continue
                conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            if self.how == "answers":
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
            self.held.append(conn)  # silent: held open, never a word

    def close(self):
        self.server.close()
        for conn in self.held:
            conn.close()


@pytest.mark.parametrize("how, said", [("silent", "it said nothing within 1 s"),
                                        ("closes", "it closed the connection without a word"),
                                        ("answers", "it answered 'SSH-2.0-OpenSSH_9.6'"),
                                        ("shy", "it speaks HTTP/2, as the coordination service of a run under way "
                                                "does: were two processes given the same --process-id?")])
@pytest.mark.parametrize("pid", [1, 0])
def test_a_port_held_by_another_program_is_named(monkeypatch, how, said, pid):
    """Process 1 pointed at a port whose holder is not a jaxtrees process 0 (before: 'the coordinator is up but not
    every process joined' after --distributed-timeout, or a retry loop for ever); process 0 whose port is taken by
    it (before: 'Address already in use')."""
    monkeypatch.setattr(distributed, "ANSWER", 1.0)  # the holder's silence, told after 1 s instead of 10
    holder = _Holder(how)
    address = f"localhost:{holder.port}"
    try:
        with pytest.raises(ValueError) as e:
            distributed._rendezvous(address, 2, pid, 60)
    finally:
        holder.close()
        _leave()
    first = (f"process 1: {address} answered but is not a jaxtrees process 0 ({said}); check --coordinator" if pid else
             f"process 0 cannot serve the coordinator on port {holder.port} of --coordinator {address}: a program "
             f"that is not a jaxtrees process 0 waiting for its processes holds it ({said}); choose a free port")
    assert str(e.value).startswith(first), str(e.value)


_PROCESS = """
import os, sys, types
from jaxtrees.experiments.run import distributed
pid, port = int(sys.argv[1]), int(sys.argv[2])
args = types.SimpleNamespace(distributed=False, coordinator=f"localhost:{port}", num_processes=3, process_id=pid,
                             distributed_timeout=int(sys.argv[3]), study="juntas", quick=True, set=[], config=None,
                             seed=0, chunk=None, group=None, out=".", allow_changes=False)
distributed.initialize(args)
if pid == 2:
    os._exit(9)  # dies between the start and the end of the run, by construction
try:
    print("run id", distributed.from_process_0("run-id", "c0ffee00", pid, 3), flush=True)
    distributed.finish(3)
except ValueError as e:
    print(e, flush=True)
    sys.exit(2)
"""


def test_a_dead_peer_ends_the_survivors_at_once(tmp_path):
    """Process 2 dies after the start: processes 0 and 1 end with the sentence naming it, told by the keeper as its
    connection closes. Before, they waited for the heartbeats (--distributed-timeout, here 300 s: longer than the
    bound the survivors are waited for)."""
    script = tmp_path / "process.py"
    script.write_text(_PROCESS)
    port = _port()
    procs = [subprocess.Popen([sys.executable, str(script), str(pid), str(port), HEARTBEATS],
                              env={**os.environ, "JAX_PLATFORMS": "cpu"}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for pid in range(3)]
    ends = [p.communicate(timeout=120) for p in procs]
    assert procs[2].returncode == 9
    for p, (out, err) in zip(procs[:2], ends[:2]):
        assert p.returncode == 2 and "process(es) 2 of 3 stopped before the end of the run" in out, (out, err)
        assert "Check failure" not in err and "Traceback" not in err, err


def _cli(port: int, out, pid: int, processes: int, *extra, env=None, python=()):
    command = [sys.executable, *(python or ["-m", "jaxtrees.cli"]), "run", "juntas", "--quick", "--out", str(out),
               *TINY, *extra, "--coordinator", f"localhost:{port}", "--num-processes", str(processes),
               "--process-id", str(pid)]
    return subprocess.Popen(command, env={**os.environ, "JAX_PLATFORMS": "cpu", "JAXTREES_CPU_DEVICES": "1",
                                          **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_peer_killed_mid_run_ends_the_survivors_at_once(tmp_path):
    """jaxtrees run, three processes: process 2 killed mid-run (by construction: its writer blocks once its first
    part is written, JAXTREES_TEST_STOP_AFTER_PARTS); processes 0 and 1 write their share, then end with the sentence
    naming it at once (the keeper's word), not after --distributed-timeout (300 s here)."""
    port, out = _port(), tmp_path / "out"
    extra = ["--set", "replicates=48", "--chunk", "8", "--group", "4", "--distributed-timeout", HEARTBEATS]
    flush = {"JAXTREES_FLUSH_SECONDS": "0"}
    procs = [_cli(port, out, pid, 3, *extra, env={**flush, **({"JAXTREES_TEST_STOP_AFTER_PARTS": "1"} if pid == 2
                                                                else {})}) for pid in range(3)]
    rows = out / "juntas" / "rows"
    helpers.kill_after_first_part(procs, rows)
    ends = [p.communicate(timeout=120) for p in procs[:2]]
    procs[2].communicate()
    for p, (_, err) in zip(procs[:2], ends):
        assert p.returncode == 2 and "process(es) 2 of 3 stopped before the end of the run" in err, err
        assert "Traceback" not in err and "Check failure" not in err, err


#: Process 1 as on a host whose CPU has other vector features: a device-level term of the contract that nothing
#: known before JAX starts (arguments, XLA_FLAGS, JAX's environment, versions, source) shows.
OTHER_HOST = ["-c", "import sys; from jaxtrees.experiments import contract; contract.cpu_features = lambda: 'sse2'; "
              "from jaxtrees import cli; sys.argv[0] = 'jaxtrees'; cli.console()"]


def test_a_process_whose_device_level_contract_differs_is_refused_on_every_process(tmp_path):
    """Every process compares every term of the contract (run/job.py's agree, after JAX starts), not only the settings
    known before: process 1's CPU features differ, and both processes end naming the term and the two processes
    before any trial runs."""
    port = _port()
    procs = [_cli(port, tmp_path, pid, 2, python=OTHER_HOST if pid == 1 else ()) for pid in range(2)]
    ends = [p.communicate(timeout=300) for p in procs]
    said = "process 1 would compute other rows than process 0: the CPU's vector features: process 0 '"
    for p, (_, err) in zip(procs, ends):
        assert p.returncode == 2 and said in err and "process 1 'sse2'" in err, err
        assert "Traceback" not in err, err
    assert not list((tmp_path / "juntas" / "rows").glob("part-*.parquet"))

"""Every process checks itself (issue 64): at the rendezvous each process sends its settings (arguments, XLA_FLAGS,
JAX's environment, versions, source digest); a difference ends every process with one sentence naming it."""

import socket
import threading
import types

import pytest

from jaxtrees.experiments.run import distributed, keeper


def _port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_a_process_with_other_arguments_ends_every_process_naming_the_setting(capsys):
    port, errors = _port(), {}

    def join(pid, mine):
        try:
            distributed._rendezvous(f"localhost:{port}", 3, pid, 20, mine)
        except ValueError as e:
            errors[pid] = str(e)

    same = {"--set": ["replicates=8"], "jax": "0.10.2"}
    threads = [threading.Thread(target=join, args=(1, same))]
    threads[0].start()
    threads.append(threading.Thread(target=join, args=(2, {**same, "--set": ["replicates=16"]})))
    threads[1].start()
    join(0, same)
    for t in threads:
        t.join(30)
    said = "process 2 was started with --set = ['replicates=16'], process 0 with ['replicates=8']"
    assert set(errors) == {0, 1, 2} and all(said in e for e in errors.values()), errors
    assert "waiting for 2 other process(es)" in capsys.readouterr().err


def test_the_settings_name_the_arguments_and_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("JAX_RANDOM_SEED_OFFSET", "3")
    args = types.SimpleNamespace(study="juntas", quick=True, set=["k=3"], config=None, seed=None, chunk=None,
                                 group=None, out=str(tmp_path), allow_changes=False)
    told = distributed.settings(args)
    assert told["JAX_RANDOM_SEED_OFFSET"] == "3" and told["--set"] == ["k=3"] and len(told["jaxtrees source"]) == 16
    assert keeper._differences(told, {**told, "--group": 8}, 1).startswith("process 1 was started with --group")
    assert keeper._differences(told, dict(told), 1) == ""


@pytest.mark.parametrize("theirs", [{}, {"extra": 1}])
def test_an_older_peer_or_an_extra_setting_is_a_difference(theirs):
    assert keeper._differences({"a": 1}, theirs, 1)


class _Coordinator:
    """The coordination service's key-value store and live-process barrier, for threads standing for processes."""

    def __init__(self, alive, dead=()):
        self.values, self.dead = {}, set(dead)
        self.barrier = threading.Barrier(alive)

    def client(self):
        return types.SimpleNamespace(key_value_set=self.values.__setitem__, get_live_nodes=self.live,
                                     key_value_dir_get=lambda prefix: [(k, v) for k, v in list(self.values.items())
                                                                       if k.startswith(prefix)])

    def live(self, ids):
        self.barrier.wait(10)
        return {i: 1 for i in ids if i not in self.dead}


@pytest.mark.parametrize("theirs, said", [
    ({"backend": "gpu"}, "process 1 would compute other rows than process 0: the backend: process 0 'cpu', process 1 'gpu'"),
    ({"groups": {"prog": 8}}, "the group of program prog: process 0 4, process 1 8"),
])
def test_a_process_whose_contract_differs_ends_every_process_naming_it(monkeypatch, theirs, said):
    """After JAX starts, each process's contract (device kind, CPU features, compiler options, groups, ...) is
    compared with process 0's before the first call: every process ends with the same sentence."""
    coordinator, errors = _Coordinator(2), {}
    monkeypatch.setattr(distributed, "_client", coordinator.client)
    mine = {"backend": "cpu", "device_kind": "cpu", "groups": {"prog": 4}}

    def agree(pid, terms):
        try:
            distributed.agree(pid, 2, terms)
        except ValueError as e:
            errors[pid] = str(e)

    other = threading.Thread(target=agree, args=(1, {**mine, **theirs}))
    other.start()
    agree(0, mine)
    other.join(30)
    assert set(errors) == {0, 1} and all(said in e for e in errors.values()), errors
    errors.clear()
    coordinator = _Coordinator(2)
    monkeypatch.setattr(distributed, "_client", coordinator.client)
    other = threading.Thread(target=agree, args=(1, {**mine, "groups": {"other program": 16}}))
    other.start()
    agree(0, mine)  # the same contract (programs of other groups are no difference): no error
    other.join(30)
    assert errors == {}


def test_a_dead_process_ends_the_others_with_a_sentence(monkeypatch):
    monkeypatch.setattr(distributed, "_client", _Coordinator(1, dead={1, 2}).client)
    with pytest.raises(ValueError, match="process\\(es\\) 1, 2 of 3 stopped before the end of the run"):
        distributed.finish(3)


def test_a_dead_compile_worker_is_one_sentence(monkeypatch, tmp_path, capsys):
    from jaxtrees import cli
    from jaxtrees.experiments.run import runner, workers

    def died(*args, **kwargs):
        raise workers.WorkerDied("the compile worker (pid 1) for program n=8 was killed by signal 9 (SIGKILL)")

    monkeypatch.setattr(runner, "run", died)
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "jaxtrees run: error: the compile worker (pid 1)" in err and "Traceback" not in err



_PROCESS = """
import os, sys, time, types
from jaxtrees.experiments.run import distributed
pid, port, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
slurm = mode == "slurm"
args = types.SimpleNamespace(distributed=slurm, coordinator=None if slurm else f"localhost:{port}",
                             num_processes=None if slurm else 3, process_id=None if slurm else pid,
                             distributed_timeout=30, study="juntas", quick=True, set=[], config=None, seed=0,
                             chunk=None, group=None, out=".", allow_changes=False)
distributed.initialize(args)
if mode == "kill0" and pid == 0:
    os._exit(9)  # process 0 dies mid-run (it started the keeper, which serves the coordination)
try:
    distributed.finish(args.num_processes)
except ValueError as e:
    print(e, flush=True)
    sys.exit(2)
time.sleep(2 if pid == 1 else 0)  # process 1 leaves 2 s after process 0 has reached its exit
print("left", pid, flush=True)
"""


def _processes(tmp_path, mode: str, count: int = 3, env=None) -> list:
    import os
    import subprocess
    import sys

    script = tmp_path / "process.py"
    script.write_text(_PROCESS)
    port = _port()
    procs = [subprocess.Popen([sys.executable, str(script), str(pid), str(port), mode],
                              env={**os.environ, "JAX_PLATFORMS": "cpu", **(env(pid, port) if env else {})},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for pid in range(count)]
    return [(p, *p.communicate(timeout=120)) for p in procs]


def test_process_0_leaves_before_the_others(tmp_path):
    """Recoverable tasks have no shutdown barrier: a process whose shutdown came after process 0 (which served the
    coordination) had exited aborted ("Failed to disconnect from coordination service", exit -6; CI, 4 processes).
    The keeper serves it until every process has left: every process exits 0, none aborts."""
    for pid, (p, out, err) in enumerate(_processes(tmp_path, "leave")):
        assert p.returncode == 0 and f"left {pid}" in out and "Check failure" not in err, (pid, p.returncode, err)
        assert "experimental recoverable task" not in err  # the keeper's service starts without its warning


def test_the_death_of_process_0_ends_the_others_with_a_sentence(tmp_path):
    """Process 0 killed mid-run: before, every other process aborted at once (XLA's client polls the service,
    which lived in process 0); now the others end with the sentence naming it, told by the keeper at once."""
    for pid, (p, out, err) in enumerate(_processes(tmp_path, "kill0")[1:], start=1):
        assert p.returncode == 2 and "process(es) 0 of 3 stopped before the end of the run" in out, (pid, out, err)
        assert "Check failure" not in err and "Terminating process" not in err, err


def test_distributed_finds_a_slurm_step_and_meets_at_the_keeper(tmp_path):
    """``--distributed`` under SLURM (its variables faked on one host): JAX's cluster detection gives the
    coordinator, count and ids, which then go through the same rendezvous, keeper and checks."""
    def slurm(pid, port):
        return {"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "localhost", "SLURM_NTASKS": "2",
                "SLURM_PROCID": str(pid), "SLURM_LOCALID": str(pid), "JAX_COORDINATOR_PORT": str(port)}

    for pid, (p, out, err) in enumerate(_processes(tmp_path, "slurm", 2, slurm)):
        assert p.returncode == 0 and f"left {pid}" in out, (pid, p.returncode, err)
        assert ("waiting for 1 other" if pid == 0 else "joining process 0 at localhost:") in err, err

"""Every process checks itself (issue 64): at the rendezvous each process sends its settings (arguments, XLA_FLAGS,
JAX's environment, versions, source digest); a difference ends every process with one sentence naming it."""

import socket
import threading
import types

import pytest

from jaxtrees.experiments import distributed


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
    assert distributed._differences(told, {**told, "--group": 8}, 1).startswith("process 1 was started with --group")
    assert distributed._differences(told, dict(told), 1) == ""


@pytest.mark.parametrize("theirs", [{}, {"extra": 1}])
def test_an_older_peer_or_an_extra_setting_is_a_difference(theirs):
    assert distributed._differences({"a": 1}, theirs, 1)


def test_a_dead_compile_worker_is_one_sentence(monkeypatch, tmp_path, capsys):
    from jaxtrees import cli
    from jaxtrees.experiments import runner, workers

    def died(*args, **kwargs):
        raise workers.WorkerDied("the compile worker (pid 1) for program n=8 was killed by signal 9 (SIGKILL)")

    monkeypatch.setattr(runner, "run", died)
    assert cli.main(["run", "juntas", "--quick", "--out", str(tmp_path), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "jaxtrees run: error: the compile worker (pid 1)" in err and "Traceback" not in err

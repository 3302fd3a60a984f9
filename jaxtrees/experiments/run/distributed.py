"""Several processes (``jax.distributed``): a rendezvous of every process before JAX's coordination service starts,
so that a process that never comes, a wrong count or a taken port is one sentence (no C++ abort), then
``jax.distributed.initialize``; at the end, :func:`finish` waits for every process still alive.

The rendezvous and then JAX's coordination service run in a keeper process of their own (:func:`keep`, started by
process 0), which stays until every process of the run has exited (each keeps its rendezvous connection open). So
process 0's death is a peer's death like any other (the others end with a sentence), not an abort of every process:
a client whose connection to the service closes aborts at once (XLA polls it for errors), and jaxlib's binding of
the only hook (``missed_heartbeat_callback``) fails with std::bad_cast.
"""

from __future__ import annotations

import json
import sys
import time

#: This process's connection to the keeper (:func:`keep`), open until the process exits.
_KEPT: list = []
#: The keeper process that process 0 started (its ``Popen``).
_KEEPER: list = []


def initialize(args) -> None:
    """``jax.distributed.initialize`` before any JAX computation, when asked for (``args``: the command line's
    ``distributed``, ``coordinator``, ``num_processes``, ``process_id`` and ``distributed_timeout``). With
    ``--distributed`` the cluster (SLURM, Open MPI, Cloud TPU) gives the three, as JAX finds them."""
    explicit = (args.coordinator, args.num_processes, args.process_id)
    if not args.distributed and all(v is None for v in explicit):
        return
    if any(v is None for v in explicit) and any(v is not None for v in explicit):
        raise ValueError("--coordinator, --num-processes and --process-id go together (or use --distributed alone)")
    timeout = args.distributed_timeout
    if timeout < 1:
        raise ValueError(f"--distributed-timeout must be >= 1 second, got {timeout}")
    local_devices = None
    if args.distributed and args.num_processes is None:
        *explicit, local_devices = _cluster(timeout)
        args.coordinator, args.num_processes, args.process_id = explicit
    if args.num_processes < 1:
        raise ValueError(f"--num-processes must be >= 1, got {args.num_processes}")
    if not 0 <= args.process_id < args.num_processes:
        raise ValueError(f"--process-id must be in [0, {args.num_processes - 1}], got {args.process_id}")
    kept = args.num_processes > 1
    if kept:
        _rendezvous(args.coordinator, args.num_processes, args.process_id, timeout, settings(args))
    import jax
    from jax._src import distributed as state

    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU processes (no effect on GPU / TPU)
    jax.config.update("jax_enable_recoverability", True)  # a peer's death: a sentence at the end, not an abort of all
    where = f" at {args.coordinator}" if args.coordinator else ""
    real = state._jax
    if kept and args.process_id == 0:
        state._jax = _ServedElsewhere(real)  # the keeper serves the coordination
    try:
        jax.distributed.initialize(args.coordinator, args.num_processes, args.process_id, local_devices,
                                   initialization_timeout=timeout, heartbeat_timeout_seconds=timeout)
    except Exception as e:  # noqa: BLE001 - the coordination service's errors
        raise ValueError(f"process {args.process_id} could not join the run{where} within {timeout} s ({e}); check "
                         f"that every process was started with the same --coordinator and --num-processes and its "
                         f"own --process-id, and that HOST:PORT is reachable from each") from None
    finally:
        state._jax = real


def _cluster(timeout: float) -> tuple:
    """(coordinator, processes, process id, local device ids) from the cluster's environment, as JAX finds them."""
    from jax._src import clusters

    found = clusters.ClusterEnv.auto_detect_unset_distributed_params(None, None, None, None, None, int(timeout))
    if any(v is None for v in found[:3]):
        raise ValueError("--distributed found no cluster to join (it reads SLURM, Open MPI and Cloud TPU settings); "
                         "elsewhere give --coordinator HOST:PORT --num-processes P --process-id I")
    return found


class _ServedElsewhere:
    """JAX's extension module, but for the coordination service, which the keeper process runs (:func:`keep`)."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    @staticmethod
    def get_distributed_runtime_service(*args, **kwargs):
        return _NoService()


class _NoService:
    def shutdown(self):
        pass


def agree(process: int, processes: int, terms: dict) -> None:
    """Every process's contract (what can change a row: :func:`~jaxtrees.experiments.contract.terms` with its
    programs' groups) against process 0's, before the first call: the same ValueError on every process, naming
    the first process and the settings in which it differs."""
    from jaxtrees.experiments import contract

    client = _client()
    if client is None:
        return
    client.key_value_set(f"jaxtrees/contract/{process}", json.dumps(terms, sort_keys=True, default=str))
    _stopped(client, processes)  # a barrier: every live process has set its key
    mine = terms if process == 0 else _contract_of(client, 0, processes)
    for pid in range(1, processes):
        theirs = _contract_of(client, pid, processes)
        words = ("process 0", f"process {pid}")
        changed = contract.differences(mine, theirs, words) + contract.group_changes(mine, theirs.get("groups", {}),
                                                                                    words)
        if changed:
            raise ValueError(f"process {pid} would compute other rows than process 0: {'; '.join(changed)}; start "
                             f"every process with the same installation, environment and arguments")


def _contract_of(client, pid: int, processes: int) -> dict:
    """Process ``pid``'s contract from the key-value store; a process that died since the barrier: its sentence."""
    try:
        return json.loads(client.blocking_key_value_get(f"jaxtrees/contract/{pid}", 60_000))
    except Exception:  # noqa: BLE001 - the coordination service's error: the process has gone
        _stopped(client, processes)
        raise ValueError(f"process {pid} of {processes} did not publish its contract within 60 s; rerun the same "
                         f"command on every process") from None


def finish(processes: int) -> None:
    """Wait until every process has reached the end of the run (its parts on disk). A process that stopped first
    (killed, or ended by an error) is found by the coordination service's heartbeats within --distributed-timeout
    (the run is recoverable): ValueError naming it, so that the survivors end with a sentence and release the lock."""
    client = _client()
    if client is None:  # a JAX without it: a plain barrier
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("jaxtrees run")
        return
    _stopped(client, processes)


def _client():
    """JAX's coordination client, where it can tell the live processes (None otherwise)."""
    from jax._src import distributed as state

    client = state.global_state.client
    return client if client is not None and hasattr(client, "get_live_nodes") else None


def _stopped(client, processes: int) -> None:
    """A barrier of the live processes; ValueError naming those that stopped (found by their heartbeats)."""
    missing = sorted(set(range(processes)) - set(client.get_live_nodes(list(range(processes)))))
    if missing:
        raise ValueError(f"process(es) {', '.join(map(str, missing))} of {processes} stopped before the end of the "
                         f"run (killed, or ended by an error: see their output); the parts every process wrote are "
                         f"whole: rerun the same command on every process to run the missing trials")


#: The first line a process sends process 0 in :func:`_rendezvous` (then P, its id and its :func:`settings`).
HELLO = "jaxtrees-rendezvous"


def settings(args) -> dict:
    """What every process of a run must share, known before JAX starts: the command's arguments (but the process id),
    XLA_FLAGS and JAX's environment settings, versions and jaxtrees' source digest."""
    import hashlib
    import os

    from jaxtrees.experiments import contract

    config = None
    if getattr(args, "config", None):
        try:
            with open(args.config, "rb") as fh:
                config = hashlib.sha256(fh.read()).hexdigest()[:16]
        except OSError:
            config = "unreadable"

    versions = {name: contract.version(name) for name in ("jax", "jaxlib", "numpy", "optax")}
    return {"study": args.study, "--quick": args.quick, "--set": sorted(args.set), "--config": config,
            "--seed": args.seed, "--chunk": args.chunk, "--group": args.group, "--out": os.path.abspath(args.out),
            "--allow-changes": args.allow_changes, "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
            **{k: v for k, v in sorted(os.environ.items()) if k.startswith("JAX_") and k != "JAX_PLATFORMS"},
            **versions, "jaxtrees source": contract.source_digest()}


def _differences(mine: dict, theirs: dict, pid: int) -> str:
    """The first setting in which process ``pid`` differs from process 0, as a clause; "" where none does."""
    for key in sorted(set(mine) | set(theirs)):
        if mine.get(key) != theirs.get(key):
            return (f"process {pid} was started with {key} = {theirs.get(key)!r}, process 0 with "
                    f"{mine.get(key)!r}")
    return ""


def _rendezvous(address: str, processes: int, process_id: int, timeout: float, mine: dict | None = None) -> None:
    """Meet every process at ``address`` before ``jax.distributed.initialize``; ValueError after ``timeout`` s.

    XLA's coordination client ends the process with a C++ abort (SIGABRT, DEADLINE_EXCEEDED) when a peer has not
    registered within the timeout, which Python cannot catch. So process 0 first starts the keeper (:func:`keep`),
    which listens on HOST:PORT; every process connects and says P, its id and its settings; when all are there and
    agree, the keeper says "go" and starts the coordination service on the same port, and each process calls
    ``initialize`` (whose client retries until the service is up), keeping its connection open until it exits."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--coordinator must be HOST:PORT, got {address!r}")
    mine = mine or {}
    if process_id == 0:
        print(f"process 0: waiting for {processes - 1} other process(es) at {address} (--distributed-timeout "
              f"{timeout:g} s)", file=sys.stderr)
        _start_keeper(int(port), address, processes, timeout)
        host, timeout = "localhost", timeout + GRACE + 5  # the keeper's own deadline, then its answer
    else:
        print(f"process {process_id}: joining process 0 at {address} (--distributed-timeout {timeout:g} s)",
              file=sys.stderr)
    _join(host.strip("[]"), int(port), address, processes, process_id, timeout, time.monotonic() + timeout, mine)


def _start_keeper(port: int, address: str, processes: int, timeout: float) -> None:
    """Start :func:`keep` in a process of its own session (a Ctrl-C of process 0's terminal leaves it to the others)
    and wait until it listens; ValueError with its sentence where it cannot."""
    import os
    import subprocess

    command = [sys.executable, "-c", "import sys; from jaxtrees.experiments.run.distributed import keep; "
               "keep(*sys.argv[1:])", str(port), address, str(processes), repr(float(timeout))]
    keeper = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                              start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    _KEEPER.append(keeper)
    line = keeper.stdout.readline().strip()
    keeper.stdout.close()
    if line != "ready":
        keeper.wait()
        raise ValueError(line.removeprefix("error ") if line.startswith("error ") else
                         f"process 0 could not start the coordinator of {address} (exit {keeper.returncode})")


def keep(port: str, address: str, processes: str, timeout: str) -> None:
    """The keeper: the rendezvous on ``port``, then JAX's coordination service on it, until every process has
    closed its connection (exited, or died); a refusal or a timeout is said to every process that joined."""
    import os
    import socket

    port, processes, timeout = int(port), int(processes), float(timeout)
    deadline = time.monotonic() + timeout
    from jax._src.lib import _jax

    try:
        server = (socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
                  if socket.has_dualstack_ipv6() else socket.create_server(("", port)))
    except OSError as e:
        print(f"error process 0 cannot serve the coordinator on port {port} of --coordinator {address} "
              f"({e.strerror or e}); choose a free port and give every process the same one", flush=True)
        os._exit(1)
    print("ready", flush=True)
    peers = _gather(server, address, processes, timeout, deadline)
    if peers is None:
        os._exit(1)
    for conn in peers.values():
        _say(conn, "go")
    server.close()
    quiet, said = os.open(os.devnull, os.O_WRONLY), os.dup(2)
    os.dup2(quiet, 2)  # without its warning that recoverable tasks are experimental (absl, at construction)
    try:
        bind = os.environ.get("JAX_COORDINATOR_BIND_ADDRESS", f"[::]:{port}")  # as JAX would bind it
        service = _jax.get_distributed_runtime_service(bind, processes, heartbeat_timeout=int(timeout),
                                                       recoverable=True)
    finally:
        os.dup2(said, 2)
    import selectors

    watch = selectors.DefaultSelector()
    for conn in peers.values():
        conn.setblocking(False)
        watch.register(conn, selectors.EVENT_READ)
    while watch.get_map():
        for found, _ in watch.select():
            try:
                ended = not found.fileobj.recv(64)
            except BlockingIOError:
                ended = False
            except OSError:
                ended = True
            if ended:
                watch.unregister(found.fileobj)
                found.fileobj.close()
    service.shutdown()
    os._exit(0)


def _gather(server, address: str, processes: int, timeout: float, deadline: float) -> dict | None:
    """The keeper's side of :func:`_rendezvous`: every process's connection by id once all P have joined and agree
    with process 0; None once it has told those that joined why not."""
    hellos: dict = {}
    while len(hellos) < processes:
        left = deadline - time.monotonic()
        if left <= 0:
            missing = sorted(set(range(processes)) - set(hellos))
            line = (f"timeout process(es) {', '.join(map(str, missing))} of {processes} did not join at {address} "
                    f"within {timeout:g} s (--distributed-timeout); start each with --coordinator {address} "
                    f"--num-processes {processes} and its own --process-id, on hosts that can reach process 0's")
            for conn, _ in hellos.values():
                _say(conn, line)
            return None
        server.settimeout(left)
        try:
            conn, _ = server.accept()
        except TimeoutError:
            continue
        conn.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
        try:
            words = [w.strip() for w in conn.makefile("r").readline().split(" ", 3)]
        except OSError:
            conn.close()
            continue
        if len(words) < 3 or words[0] != HELLO or not words[1].isdigit() or not words[2].isdigit():
            conn.close()  # not one of ours (a port scanner, a health check)
            continue
        theirs, pid = int(words[1]), int(words[2])
        try:
            told = json.loads(words[3]) if len(words) > 3 and words[3] else {}
        except ValueError:
            told = {"settings": "unreadable"}
        problem = (f"process {pid} was started with --num-processes {theirs}, process 0 with {processes}"
                   if theirs != processes else
                   f"two processes were started with --process-id {pid}" if pid in hellos else "")
        advice = "give every process the same --num-processes and each its own --process-id"
        hellos[pid] = (conn, told)
        if not problem and 0 in hellos:  # each against process 0's settings, once it is there
            problem = next(filter(None, (_differences(hellos[0][1], t, p) for p, (_, t) in sorted(hellos.items()))),
                           "")
            advice = "start every process with the same arguments, environment and installation"
        if problem:
            for other, _ in [(conn, told), *hellos.values()]:  # every process ends, with the difference named
                _say(other, f"refused {problem}; {advice}")
            _refuse_late(server, f"refused {problem}; {advice}", processes - len(hellos), deadline)
            return None
    return {pid: conn for pid, (conn, _) in hellos.items()}


#: Seconds process 0 stays to tell processes still joining that the run was refused.
GRACE = 5.0


def _refuse_late(server, line: str, left: int, deadline: float) -> None:
    """Tell up to ``left`` processes that join within :data:`GRACE` seconds (or the deadline) ``line``."""
    end = min(deadline, time.monotonic() + GRACE)
    while left > 0 and time.monotonic() < end:
        server.settimeout(max(0.05, end - time.monotonic()))
        try:
            conn, _ = server.accept()
        except (TimeoutError, OSError):
            continue
        with conn:
            try:
                conn.settimeout(1.0)
                conn.makefile("r").readline()
            except OSError:
                pass
            _say(conn, line)
        left -= 1


def _join(host: str, port: int, address: str, processes: int, process_id: int, timeout: float,
          deadline: float, mine: dict | None = None) -> None:
    """Each process's side of :func:`_rendezvous`: reach the keeper, say who it is, wait for "go"; the connection
    then stays open (:data:`_KEPT`) until the process exits."""
    import socket

    hello = f"{HELLO} {processes} {process_id} {json.dumps(mine or {}, separators=(',', ':'))}\n".encode()
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=2)
        except OSError as e:
            if time.monotonic() >= deadline:
                raise ValueError(f"process {process_id}: no coordinator at {address} after {timeout:g} s "
                                 f"({e.strerror or e}); start process 0 with --coordinator {address} on that host "
                                 f"(it serves the coordinator), or check the address and that the port is "
                                 f"reachable") from None
            time.sleep(0.5)
            continue
        try:
            conn.sendall(hello)
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            reply = conn.makefile("r").readline().strip()
        except TimeoutError:
            conn.close()
            raise ValueError(f"process {process_id}: the coordinator at {address} is up but not every process "
                             f"joined within {timeout:g} s (--distributed-timeout); start the others with "
                             f"the same --coordinator and --num-processes {processes}") from None
        except OSError:
            conn.close()
            time.sleep(0.5)
            continue
        if reply == "go":
            conn.settimeout(None)
            _KEPT.append(conn)
            return
        conn.close()
        if reply.startswith("refused "):
            raise ValueError(f"process {process_id}: the coordinator at {address} refused it: "
                             f"{reply.removeprefix('refused ')}")
        if reply.startswith("timeout "):
            raise ValueError(f"process {process_id}: {reply.removeprefix('timeout ')}")
        raise ValueError(f"process {process_id}: the coordinator at {address} gave up waiting for the other "
                         f"processes (see process 0's message)" if not reply else
                         f"process {process_id}: {address} answered {reply[:60]!r}, not a jaxtrees process 0; "
                         f"check the address")


def _say(conn, line: str) -> None:
    """Send one line to a peer, ignoring a peer that has gone."""
    try:
        conn.sendall(f"{line}\n".encode())
    except OSError:
        pass

"""Several processes (``jax.distributed``): a rendezvous of every process before JAX's coordination service starts,
so that a process that never comes, a wrong count or a taken port is one sentence (no C++ abort), then
``jax.distributed.initialize``; at the end, :func:`finish` waits for every process still alive.

:func:`initialize` joins the run; :func:`agree` compares the processes' contracts before the first call. The
rendezvous and the coordination service run in a keeper process of their own (:mod:`~jaxtrees.experiments.run.keeper`,
started by process 0), so process 0's death is a peer's death like any other, not an abort of every process.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time

from jaxtrees.experiments import contract
from jaxtrees.experiments.run.keeper import GRACE, HELLO

#: This process's connection to the keeper (:func:`~jaxtrees.experiments.run.keeper.keep`), open until the process
#: exits.
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
    """JAX's extension module, but for the coordination service, which the keeper process runs
    (:func:`~jaxtrees.experiments.run.keeper.keep`)."""

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


def settings(args) -> dict:
    """What every process of a run must share, known before JAX starts: the command's arguments (but the process id),
    XLA_FLAGS and JAX's environment settings, versions and jaxtrees' source digest."""
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


def _rendezvous(address: str, processes: int, process_id: int, timeout: float, mine: dict | None = None) -> None:
    """Meet every process at ``address`` before ``jax.distributed.initialize``; ValueError after ``timeout`` s.

    XLA's coordination client ends the process with a C++ abort (SIGABRT, DEADLINE_EXCEEDED) when a peer has not
    registered within the timeout, which Python cannot catch. So process 0 first starts the keeper
    (:func:`~jaxtrees.experiments.run.keeper.keep`), which listens on HOST:PORT; every process connects and says P,
    its id and its settings; when all are there and agree, the keeper says "go" and starts the coordination service
    on the same port, and each process calls ``initialize`` (whose client retries until the service is up), keeping
    its connection open until it exits."""
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
    """Start :func:`~jaxtrees.experiments.run.keeper.keep` in a process of its own session (a Ctrl-C of process 0's
    terminal leaves it to the others) and wait until it listens; ValueError with its sentence where it cannot."""
    command = [sys.executable, "-c", "import sys; from jaxtrees.experiments.run.keeper import keep; "
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


def _join(host: str, port: int, address: str, processes: int, process_id: int, timeout: float,
          deadline: float, mine: dict | None = None) -> None:
    """Each process's side of :func:`_rendezvous`: reach the keeper, say who it is, wait for "go"; the connection
    then stays open (:data:`_KEPT`) until the process exits."""
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

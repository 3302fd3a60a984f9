"""Several processes (``jax.distributed``): a rendezvous of every process before JAX's coordination service starts,
so that a process that never comes, a wrong count or a taken port is one sentence (no C++ abort), then
``jax.distributed.initialize``; at the end, :func:`finish` waits for every process still alive.
"""

from __future__ import annotations

import atexit
import json
import sys
import time

#: Set by :func:`finish` on process 0: the run reached its end, so at exit process 0 waits for the others to leave.
_ENDED = []


def initialize(args) -> None:
    """``jax.distributed.initialize`` before any JAX computation, when asked for (``args``: the command line's
    ``distributed``, ``coordinator``, ``num_processes``, ``process_id`` and ``distributed_timeout``)."""
    explicit = (args.coordinator, args.num_processes, args.process_id)
    if not args.distributed and all(v is None for v in explicit):
        return
    if any(v is None for v in explicit) and any(v is not None for v in explicit):
        raise ValueError("--coordinator, --num-processes and --process-id go together (or use --distributed alone)")
    if args.num_processes is not None:
        if args.num_processes < 1:
            raise ValueError(f"--num-processes must be >= 1, got {args.num_processes}")
        if not 0 <= args.process_id < args.num_processes:
            raise ValueError(f"--process-id must be in [0, {args.num_processes - 1}], got {args.process_id}")
    timeout = args.distributed_timeout
    if timeout < 1:
        raise ValueError(f"--distributed-timeout must be >= 1 second, got {timeout}")
    if args.num_processes is not None and args.num_processes > 1:
        _rendezvous(args.coordinator, args.num_processes, args.process_id, timeout, settings(args))
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU processes (no effect on GPU / TPU)
    jax.config.update("jax_enable_recoverability", True)  # a peer's death: a sentence at the end, not an abort of all
    where = f" at {args.coordinator}" if args.coordinator else ""
    try:
        jax.distributed.initialize(*explicit, initialization_timeout=timeout, heartbeat_timeout_seconds=timeout)
    except ValueError as e:
        if args.distributed and "coordinator" in str(e):
            raise ValueError("--distributed found no cluster to join (it reads SLURM, Open MPI and Cloud TPU settings); "
                             "elsewhere give --coordinator HOST:PORT --num-processes P --process-id I") from None
        raise
    except Exception as e:  # noqa: BLE001 - the coordination service's errors
        raise ValueError(f"process {args.process_id} could not join the run{where} within {timeout} s ({e}); check "
                         f"that every process was started with the same --coordinator and --num-processes and its "
                         f"own --process-id, and that HOST:PORT is reachable from each") from None
    atexit.register(_leave, timeout)  # runs before JAX's own exit handler (registered when jax was imported)


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
    mine = terms if process == 0 else json.loads(client.blocking_key_value_get("jaxtrees/contract/0", 60_000))
    for pid in range(1, processes):
        theirs = json.loads(client.blocking_key_value_get(f"jaxtrees/contract/{pid}", 60_000))
        words = ("process 0", f"process {pid}")
        changed = contract.differences(mine, theirs, words) + contract.group_changes(mine, theirs.get("groups", {}),
                                                                                    words)
        if changed:
            raise ValueError(f"process {pid} would compute other rows than process 0: {'; '.join(changed)}; start "
                             f"every process with the same installation, environment and arguments")


def finish(processes: int) -> None:
    """Wait until every process has reached the end of the run (its parts on disk). A process that stopped first
    (killed, or ended by an error) is found by the coordination service's heartbeats within --distributed-timeout
    (the run is recoverable): ValueError naming it, so that the survivors end with a sentence and release the lock."""
    client = _client()
    if client is None:  # a JAX without it: a plain barrier
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("jaxtrees run")
        return
    _ENDED.append(processes)
    _stopped(client, processes)


def _leave(timeout: float) -> None:
    """At exit, before JAX shuts its client down: the coordination service lives in process 0, and a process whose
    shutdown finds it gone aborts (recoverable tasks have no shutdown barrier). So process 0, at the end of a run,
    waits until every other process has disconnected (a query of the live processes returns once each has either
    asked too or left), at most ``timeout`` + 5 s; one that died meanwhile is found by its heartbeats within it."""
    import threading

    from jax._src import distributed as state

    client = _client()
    if client is None or state.global_state.process_id != 0 or not _ENDED:
        return

    def wait():
        try:
            client.get_live_nodes(list(range(_ENDED[0])))
        except Exception:  # noqa: BLE001 - the service is going away: nothing left to wait for
            pass

    waiting = threading.Thread(target=wait, daemon=True)
    waiting.start()
    waiting.join(timeout + 5)


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
    from jaxtrees.experiments.store import _version

    versions = {name: _version(name) for name in ("jax", "jaxlib", "numpy", "optax")}
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
    registered within the timeout, which Python cannot catch. So process 0 first listens on HOST:PORT itself, the
    others connect and say P and their id; when all are there it says "go", closes the port, and each calls
    ``initialize`` (whose client retries until process 0's coordination service takes the port over)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--coordinator must be HOST:PORT, got {address!r}")
    deadline = time.monotonic() + timeout
    mine = mine or {}
    if process_id == 0:
        print(f"process 0: waiting for {processes - 1} other process(es) at {address} (--distributed-timeout "
              f"{timeout:g} s)", file=sys.stderr)
        _gather(int(port), address, processes, timeout, deadline, mine)
    else:
        print(f"process {process_id}: joining process 0 at {address} (--distributed-timeout {timeout:g} s)",
              file=sys.stderr)
        _join(host.strip("[]"), int(port), address, processes, process_id, timeout, deadline, mine)


def _gather(port: int, address: str, processes: int, timeout: float, deadline: float, mine: dict) -> None:
    """Process 0's side of :func:`_rendezvous`: accept the P - 1 others, then tell each to go."""
    import socket

    try:
        server = (socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
                  if socket.has_dualstack_ipv6() else socket.create_server(("", port)))
    except OSError as e:
        raise ValueError(f"process 0 cannot serve the coordinator on port {port} of --coordinator {address} "
                         f"({e.strerror or e}); choose a free port and give every process the same one") from None
    peers: dict = {}
    try:
        with server:
            while len(peers) < processes - 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(range(1, processes)) - set(peers))
                    raise ValueError(
                        f"process 0: process(es) {', '.join(map(str, missing))} of {processes} did not join at "
                        f"{address} within {timeout:g} s (--distributed-timeout); start each with --coordinator "
                        f"{address} --num-processes {processes} and its own --process-id, on hosts that can reach "
                        f"this one")
                server.settimeout(left)
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                conn.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
                try:
                    words = conn.makefile("r").readline().split(" ", 3)
                except OSError:
                    conn.close()
                    continue
                words = [w.strip() for w in words]
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
                           f"two processes were started with --process-id {pid}" if pid in peers or pid == 0 else "")
                advice = "give every process the same --num-processes and each its own --process-id"
                if not problem:
                    problem = _differences(mine, told, pid)
                    advice = "start every process with the same arguments, environment and installation"
                if problem:
                    for other in [conn, *peers.values()]:  # every process ends, with the difference named
                        _say(other, f"refused {problem}")
                    _refuse_late(server, f"refused {problem}", processes - 2 - len(peers), deadline)
                    raise ValueError(f"process 0 at {address}: {problem}; {advice}")
                peers[pid] = conn
            for conn in peers.values():
                _say(conn, "go")
            for conn in peers.values():  # the peers close first, so that the port is free for the coordinator
                try:
                    conn.settimeout(5.0)
                    conn.recv(1)
                except OSError:
                    pass
    finally:
        for conn in peers.values():
            conn.close()


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
    """Process I's side of :func:`_rendezvous`: reach process 0, say who it is, wait for "go"."""
    import socket

    while True:
        try:
            with socket.create_connection((host, port), timeout=2) as conn:
                conn.sendall(f"{HELLO} {processes} {process_id} {json.dumps(mine or {}, separators=(',', ':'))}\n".encode())
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    reply = conn.makefile("r").readline().strip()
                except TimeoutError:
                    raise ValueError(f"process {process_id}: the coordinator at {address} is up but not every process "
                                     f"joined within {timeout:g} s (--distributed-timeout); start the others with "
                                     f"the same --coordinator and --num-processes {processes}") from None
            if reply == "go":
                return
            if reply.startswith("refused "):
                raise ValueError(f"process {process_id}: the coordinator at {address} refused it: "
                                 f"{reply.removeprefix('refused ')}")
            raise ValueError(f"process {process_id}: the coordinator at {address} gave up waiting for the other "
                             f"processes (see process 0's message)" if not reply else
                             f"process {process_id}: {address} answered {reply[:60]!r}, not a jaxtrees process 0; "
                             f"check the address")
        except OSError as e:
            if time.monotonic() >= deadline:
                raise ValueError(f"process {process_id}: no coordinator at {address} after {timeout:g} s "
                                 f"({e.strerror or e}); start process 0 with --coordinator {address} on that host "
                                 f"(it serves the coordinator), or check the address and that the port is "
                                 f"reachable") from None
            time.sleep(0.5)


def _say(conn, line: str) -> None:
    """Send one line to a peer, ignoring a peer that has gone."""
    try:
        conn.sendall(f"{line}\n".encode())
    except OSError:
        pass

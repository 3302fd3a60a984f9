"""Several processes (``jax.distributed``): a rendezvous of every process before JAX's coordination service starts,
so that a process that never comes, a wrong count or a taken port is one sentence (no C++ abort), then
``jax.distributed.initialize``.
"""

from __future__ import annotations

import time


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
        _rendezvous(args.coordinator, args.num_processes, args.process_id, timeout)
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU processes (no effect on GPU / TPU)
    where = f" at {args.coordinator}" if args.coordinator else ""
    try:
        jax.distributed.initialize(*explicit, initialization_timeout=timeout)
    except ValueError as e:
        if args.distributed and "coordinator" in str(e):
            raise ValueError("--distributed found no cluster to join (it reads SLURM, Open MPI and Cloud TPU settings); "
                             "elsewhere give --coordinator HOST:PORT --num-processes P --process-id I") from None
        raise
    except Exception as e:  # noqa: BLE001 - the coordination service's errors
        raise ValueError(f"process {args.process_id} could not join the run{where} within {timeout} s ({e}); check "
                         f"that every process was started with the same --coordinator and --num-processes and its "
                         f"own --process-id, and that HOST:PORT is reachable from each") from None


#: The first line a process sends process 0 in :func:`_rendezvous` (then P and its id).
HELLO = "jaxtrees-rendezvous"


def _rendezvous(address: str, processes: int, process_id: int, timeout: float) -> None:
    """Meet every process at ``address`` before ``jax.distributed.initialize``; ValueError after ``timeout`` s.

    XLA's coordination client ends the process with a C++ abort (SIGABRT, DEADLINE_EXCEEDED) when a peer has not
    registered within the timeout, which Python cannot catch. So process 0 first listens on HOST:PORT itself, the
    others connect and say P and their id; when all are there it says "go", closes the port, and each calls
    ``initialize`` (whose client retries until process 0's coordination service takes the port over)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--coordinator must be HOST:PORT, got {address!r}")
    deadline = time.monotonic() + timeout
    if process_id == 0:
        _gather(int(port), address, processes, timeout, deadline)
    else:
        _join(host.strip("[]"), int(port), address, processes, process_id, timeout, deadline)


def _gather(port: int, address: str, processes: int, timeout: float, deadline: float) -> None:
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
                    words = conn.makefile("r").readline().split()
                except OSError:
                    conn.close()
                    continue
                if len(words) != 3 or words[0] != HELLO or not words[1].isdigit() or not words[2].isdigit():
                    conn.close()  # not one of ours (a port scanner, a health check)
                    continue
                theirs, pid = int(words[1]), int(words[2])
                problem = (f"process {pid} was started with --num-processes {theirs}, process 0 with {processes}"
                           if theirs != processes else
                           f"two processes were started with --process-id {pid}" if pid in peers or pid == 0 else "")
                if problem:
                    _say(conn, f"refused {problem}")
                    raise ValueError(f"process 0 at {address}: {problem}; give every process the same "
                                     f"--num-processes and each its own --process-id")
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


def _join(host: str, port: int, address: str, processes: int, process_id: int, timeout: float,
          deadline: float) -> None:
    """Process I's side of :func:`_rendezvous`: reach process 0, say who it is, wait for "go"."""
    import socket

    while True:
        try:
            with socket.create_connection((host, port), timeout=2) as conn:
                conn.sendall(f"{HELLO} {processes} {process_id}\n".encode())
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

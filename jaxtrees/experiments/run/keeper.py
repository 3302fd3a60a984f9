"""The keeper: the process that process 0 starts to meet every process and then serve JAX's coordination service.

:func:`keep` listens on the coordinator's port, gathers every process's hello (P, its id, its settings), says "go"
when all P agree with process 0 (else tells each why not), then runs the coordination service on the same port
until every process has closed its connection, telling the others at once of each that closes ("gone N": a process
killed or ended by an error is named to its peers then, not after the heartbeats' timeout). Each process's side is in
:mod:`~jaxtrees.experiments.run.distributed`.
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import socket
import time

__all__ = ["GRACE", "HELLO", "JOINED", "keep"]

#: The first line a process sends the keeper (then P, its id and its
#: :func:`~jaxtrees.experiments.run.distributed.settings`).
HELLO = "jaxtrees-rendezvous"
#: The keeper's first answer to a hello (then "go", or why not): a process told nothing of the kind knows that
#: HOST:PORT is held by something else.
JOINED = "jaxtrees-joined"


def keep(port: str, address: str, processes: str, timeout: str) -> None:
    """The keeper: the rendezvous on ``port``, then JAX's coordination service on it, until every process has
    closed its connection (exited, or died); a refusal or a timeout is said to every process that joined."""
    port, processes, timeout = int(port), int(processes), float(timeout)
    deadline = time.monotonic() + timeout
    from jax._src.lib import _jax

    try:
        server = (socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
                  if socket.has_dualstack_ipv6() else socket.create_server(("", port)))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:  # process 0 asks the holder who it is (another process 0, or not jaxtrees)
            print("busy", flush=True)
            os._exit(1)
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
    watch = selectors.DefaultSelector()
    for pid, conn in peers.items():
        _keepalive(conn, timeout)
        conn.setblocking(False)
        watch.register(conn, selectors.EVENT_READ, pid)
    while watch.get_map():
        for found, _ in watch.select():
            try:
                ended = not found.fileobj.recv(64)
            except BlockingIOError:
                ended = False
            except OSError:
                ended = True
            if ended:  # exited, killed, or its host gone: every other process is told at once
                watch.unregister(found.fileobj)
                found.fileobj.close()
                for other in watch.get_map().values():
                    _say(other.fileobj, f"gone {found.data}")
    service.shutdown()
    os._exit(0)


def _gather(server, address: str, processes: int, timeout: float, deadline: float) -> dict | None:
    """The keeper's side of the rendezvous: every process's connection by id once all P have joined and agree
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
        conn.settimeout(max(0.1, min(2.0, deadline - time.monotonic())))  # a jaxtrees process says it at once
        try:
            words = [w.strip() for w in conn.makefile("r").readline().split(" ", 3)]
        except OSError:
            conn.close()
            continue
        if len(words) < 3 or words[0] != HELLO or not words[1].isdigit() or not words[2].isdigit():
            conn.close()  # not one of ours (a port scanner, a health check)
            continue
        theirs, pid = int(words[1]), int(words[2])
        _say(conn, JOINED)
        try:
            told = json.loads(words[3]) if len(words) > 3 and words[3] else {}
        except ValueError:
            told = {"settings": "unreadable"}
        problem = (f"--process-id {pid} was given to two processes (the second found "
                   f"{'a process 0 serving the coordinator' if pid == 0 else f'a process {pid} in the run'} at "
                   f"{address})" if pid in hellos else
                   f"process {pid} was started with --num-processes {theirs}, process 0 with {processes}"
                   if theirs != processes else "")
        advice = "give every process the same --num-processes and each its own --process-id"
        if pid not in hellos:
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


def _differences(mine: dict, theirs: dict, pid: int) -> str:
    """The first setting in which process ``pid`` differs from process 0, as a clause; "" where none does."""
    for key in sorted(set(mine) | set(theirs)):
        if mine.get(key) != theirs.get(key):
            return (f"process {pid} was started with {key} = {theirs.get(key)!r}, process 0 with "
                    f"{mine.get(key)!r}")
    return ""


def _keepalive(conn, timeout: float) -> None:
    """TCP keepalive on a peer's connection, so that its host's death closes it within about ``timeout`` s."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", timeout / 2), ("TCP_KEEPINTVL", timeout / 8), ("TCP_KEEPCNT", 4)):
        if hasattr(socket, option):  # Linux's names
            conn.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), max(1, int(value)))


def _say(conn, line: str) -> None:
    """Send one line to a peer, ignoring a peer that has gone."""
    try:
        conn.sendall(f"{line}\n".encode())
    except OSError:
        pass

"""Several processes (``jax.distributed``): a rendezvous of every process before JAX's coordination service starts,
so that a process that never comes, a wrong count, an id given twice or a port held by another program is one
sentence (no C++ abort), then ``jax.distributed.initialize``; at the end, :func:`finish` waits for every process, and
names at once one that stopped first (:func:`meet`: a barrier on the key-value store, told by the keeper).

:func:`initialize` joins the run; :func:`agree` compares the processes' contracts before the first call. The
rendezvous and the coordination service run in a keeper process of their own (:mod:`~jaxtrees.experiments.run.keeper`,
started by process 0), so process 0's death is a peer's death like any other, not an abort of every process.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import socket
import subprocess
import sys
import time
import types

import numpy as np

from jaxtrees.experiments import contract
from jaxtrees.experiments.run.keeper import GRACE, HELLO, JOINED

#: This process's connection to the keeper (a :class:`_Link`), open until the process exits.
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
        return types.SimpleNamespace(shutdown=lambda: None)  # the keeper's service: not this process's to stop


def agree(process: int, processes: int, terms: dict) -> None:
    """Every process's contract (what can change a row: :func:`~jaxtrees.experiments.contract.terms` with its
    programs' groups, device-level terms included) against process 0's, before the first call: each process reads
    every contract, so every process ends with the same ValueError, naming the first process that differs and the
    terms in which it does."""
    if _client() is None:
        return
    told = meet("contract", process, processes, json.dumps(terms, sort_keys=True, default=str))
    mine = terms if process == 0 else json.loads(told[0])
    for pid in range(1, processes):
        theirs = json.loads(told[pid])
        words = ("process 0", f"process {pid}")
        changed = contract.differences(mine, theirs, words) + contract.group_changes(mine, theirs.get("groups", {}),
                                                                                    words)
        if changed:
            raise ValueError(f"process {pid} would compute other rows than process 0: {'; '.join(changed)}; start "
                             f"every process with the same installation, environment and arguments")


def finish(processes: int) -> None:
    """Wait until every process has reached the end of the run (its parts on disk). A process that stopped first
    (killed, or ended by an error) is named at once where the keeper saw its connection close (else by the
    coordination service's heartbeats within --distributed-timeout): ValueError naming it, so that the survivors
    end with a sentence and release the lock."""
    if _client() is None:  # a JAX without it: a plain barrier
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("jaxtrees run")
        return
    from jax._src import distributed as state

    meet("finished", state.global_state.process_id, processes)


def from_process_0(name: str, value: str, process: int, processes: int) -> str:
    """Process 0's ``value`` on every process (a barrier too: a process that stopped first is named; without the
    coordination client, a broadcast of a value as long on every process)."""
    if _client() is None:
        from jax.experimental import multihost_utils

        told = multihost_utils.broadcast_one_to_all(np.frombuffer(value.encode(), np.uint8))  # one length on all
        return np.asarray(told, np.uint8).tobytes().decode()
    return meet(name, process, processes, value)[0]


#: How many times each :func:`meet` was held by each process id (its keys are new each time).
_ROUNDS: dict = {}


def meet(name: str, process: int, processes: int, value: str = "") -> dict[int, str]:
    """A barrier of every process that gives each one's ``value`` (by process id), in JAX's key-value store. With a
    keeper (:mod:`~jaxtrees.experiments.run.keeper`), which says at once which process's connection closed
    (killed, ended by an error, its host gone), a process that stopped before setting its key is named within a
    fraction of a second; without one, by the heartbeats (``get_live_nodes``). ValueError naming those stopped."""
    client = _client()
    _ROUNDS[name, process] = round_ = _ROUNDS.get((name, process), 0) + 1
    prefix = f"jaxtrees/{name}/{round_}/"
    client.key_value_set(f"{prefix}{process}", value)
    if not _KEPT:  # initialized by the caller (no keeper): the live processes' barrier, by heartbeats
        missing = sorted(set(range(processes)) - set(client.get_live_nodes(list(range(processes)))))
        if missing:
            raise ValueError(_stopped(missing, processes))
    pause, gone = 0.01, set()
    while True:
        told = {int(key.rpartition("/")[2]): v for key, v in client.key_value_dir_get(prefix)}
        if len(told) >= processes:
            return told
        missing = sorted(gone - set(told))  # gone, read before the keys: they never set theirs
        if missing or not _KEPT:
            raise ValueError(_stopped(missing or sorted(set(range(processes)) - set(told)), processes))
        gone |= _KEPT[0].gone(pause)
        pause = min(0.25, pause * 1.5)


def _stopped(missing: list, processes: int) -> str:
    return (f"process(es) {', '.join(map(str, missing))} of {processes} stopped before the end of the run (killed, "
            f"or ended by an error: see their output); the parts every process wrote are whole: rerun the same "
            f"command on every process to run the missing trials")


def _client():
    """JAX's coordination client, where it can tell the live processes (None otherwise)."""
    from jax._src import distributed as state

    client = state.global_state.client
    return client if client is not None and hasattr(client, "get_live_nodes") else None


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
    its connection open until it exits. A process 0 whose port is taken asks its holder who it is: another process
    0 of this run (an id given twice) or some other program."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--coordinator must be HOST:PORT, got {address!r}")
    mine = mine or {}
    busy = False
    if process_id == 0:
        print(f"process 0: waiting for {processes - 1} other process(es) at {address} (--distributed-timeout "
              f"{timeout:g} s)", file=sys.stderr)
        busy = not _start_keeper(int(port), address, processes, timeout)
        host, timeout = "localhost", timeout + GRACE + 5  # the keeper's own deadline, then its answer
    else:
        print(f"process {process_id}: joining process 0 at {address} (--distributed-timeout {timeout:g} s)",
              file=sys.stderr)
    _join(host.strip("[]"), int(port), address, processes, process_id, timeout, time.monotonic() + timeout, mine,
          busy)


def _start_keeper(port: int, address: str, processes: int, timeout: float) -> bool:
    """Start :func:`~jaxtrees.experiments.run.keeper.keep` in a process of its own session (a Ctrl-C of process 0's
    terminal leaves it to the others) and wait until it listens: True; False where the port is in use; ValueError
    with its sentence where it cannot start otherwise."""
    command = [sys.executable, "-c", "import sys; from jaxtrees.experiments.run.keeper import keep; "
               "keep(*sys.argv[1:])", str(port), address, str(processes), repr(float(timeout))]
    keeper = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                              start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = keeper.stdout.readline().strip()
    keeper.stdout.close()
    if line == "ready":
        _KEEPER.append(keeper)
        return True
    keeper.wait()
    if line == "busy":
        return False
    raise ValueError(line.removeprefix("error ") if line.startswith("error ") else
                     f"process 0 could not start the coordinator of {address} (exit {keeper.returncode})")


#: Seconds a process waits for the keeper's first word after its hello, before calling HOST:PORT's holder foreign
#: (the keeper reads one connection at a time, giving each 2 s to say hello: a few silent ones may come first).
ANSWER = 10.0


def _join(host: str, port: int, address: str, processes: int, process_id: int, timeout: float,
          deadline: float, mine: dict | None = None, busy: bool = False) -> None:
    """Each process's side of :func:`_rendezvous`: reach the keeper, say who it is, wait for "go"; the connection
    then stays open (:data:`_KEPT`) until the process exits. ``busy``: process 0, whose port was taken, asking its
    holder who it is."""
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
        break
    link = _Link(conn)
    try:
        conn.sendall(hello)
        reply = link.line(time.monotonic() + ANSWER)
    except OSError:  # closed, reset or silent before the keeper's first word
        reply = None
    if reply is None or not (reply == JOINED.encode() or reply.startswith((b"refused ", b"timeout "))):
        link.close()
        if not (link.heard or link.silent):  # closed at our hello: what does it say unasked?
            link.heard = _unasked(host, port)
        raise ValueError(_foreign(process_id, address, link.said(), busy))
    # then the keeper's verdict, which it gives by its own deadline: a process leaving at its own deadline as the
    # keeper said "go" left the others to abort (XLA's registration barrier)
    if reply == JOINED.encode():
        try:
            reply = link.line(time.monotonic() + timeout + GRACE + 5)
        except OSError:
            reply = b""
    text = reply.decode(errors="replace")
    if text == "go":
        conn.settimeout(None)
        _KEPT.append(link)
        return
    link.close()
    if text.startswith("refused "):
        raise ValueError(f"process {process_id}: the coordinator at {address} refused it: "
                         f"{text.removeprefix('refused ')}")
    if text.startswith("timeout "):
        raise ValueError(f"process {process_id}: {text.removeprefix('timeout ')}")
    if not link.silent:
        raise ValueError(f"process {process_id}: the coordinator at {address} gave up waiting for the other "
                         f"processes (see process 0's message)")
    raise ValueError(f"process {process_id}: the coordinator at {address} took it in but said neither go nor why "
                     f"not within {timeout + GRACE + 5:g} s (--distributed-timeout {timeout:g} and its grace); see "
                     f"process 0's message")


def _foreign(process_id: int, address: str, said: str, busy: bool) -> str:
    """The sentence for HOST:PORT held by something that is not a jaxtrees process 0 (``said``: what it did)."""
    if busy:
        return (f"process 0 cannot serve the coordinator on port {address.rpartition(':')[2]} of --coordinator "
                f"{address}: a program that is not a jaxtrees process 0 waiting for its processes holds it ({said}); "
                f"choose a free port and give every process the same one")
    return (f"process {process_id}: {address} answered but is not a jaxtrees process 0 ({said}); check --coordinator "
            f"(process 0's HOST:PORT) and that no other program holds that port")


def _unasked(host: str, port: int, wait: float = 2.0) -> bytes:
    """The first bytes HOST:PORT sends unasked within ``wait`` s (b"" if none): gRPC's SETTINGS (a loaded one may
    close at our hello before they leave)."""
    try:
        with socket.create_connection((host, port), timeout=wait) as conn:
            return conn.recv(200)
    except OSError:
        return b""


class _Link:
    """A connection to the keeper, read line by line: its answers to the hello, then "gone N" for each process whose
    connection closed (:func:`meet`)."""

    def __init__(self, conn):
        self.conn, self.pending, self.heard, self.silent = conn, b"", b"", False
        self.stopped: set = set()  # the processes the keeper said are gone

    def line(self, deadline: float) -> bytes:
        """The next line (without its newline); OSError where the other side closed (or reset) the connection first
        or said nothing by ``deadline`` (what it did: :meth:`said`)."""
        while b"\n" not in self.pending:
            self.conn.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.conn.recv(4096)
            except TimeoutError:
                self.silent = True
                raise ConnectionError from None
            if not data:
                raise ConnectionError
            self.pending += data
            self.heard += data[:200]
        line, _, self.pending = self.pending.partition(b"\n")
        return line.strip()

    def said(self) -> str:
        """What HOST:PORT did instead of a jaxtrees keeper's answer, in words."""
        raw = self.heard
        if raw[3:4] == b"\x04" and raw[:2] == b"\x00\x00":  # an HTTP/2 SETTINGS frame: gRPC's first word
            return ("it speaks HTTP/2, as the coordination service of a run under way does: were two processes "
                    "given the same --process-id?")
        if raw:
            return f"it answered {raw[:60].decode(errors='replace').strip()!r}"
        if self.silent:
            return f"it said nothing within {ANSWER:g} s"
        return "it closed the connection without a word"  # or reset it, our hello unread

    def gone(self, wait: float) -> set:
        """The processes the keeper has said are gone, waiting up to ``wait`` s for its next word; ValueError where
        the keeper itself has gone (its host, or it was killed: the coordination service with it)."""
        ready, _, _ = select.select([self.conn], [], [], wait)
        if ready:
            self.conn.setblocking(False)
            try:
                data = self.conn.recv(4096)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            finally:
                self.conn.setblocking(True)
            if data == b"":
                raise ValueError("process 0's keeper (the coordinator, serving every process) stopped: its host or "
                                 "its process ended; rerun the same command on every process to run the missing "
                                 "trials")
            self.pending += data or b""
        *lines, self.pending = self.pending.split(b"\n")
        self.stopped |= {int(w[1]) for w in (line.split() for line in lines) if len(w) == 2 and w[0] == b"gone"
                       and w[1].isdigit()}
        return self.stopped

    def close(self):
        self.conn.close()

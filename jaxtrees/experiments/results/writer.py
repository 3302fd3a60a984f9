"""A run's rows on their way to disk: copied to the host and gathered into parts on background threads.

:class:`Writer` takes each call's outputs (device arrays) with its trials; one thread copies them to the
host as each call ends, another turns them into columns (:meth:`~jaxtrees.experiments.results.layout.Layout.columns`)
and writes a part (:meth:`~jaxtrees.experiments.results.store.Store.write_part`) once at least ``ROWS_PER_PART``
rows or ``FLUSH_SECONDS`` of them are waiting: a part's fixed cost (fsync, rename, directory fsync:
~10 ms on a local disk) is spread over many rows, the rows of a call do not wait for the next call to end,
and the run's main thread only dispatches calls. An interrupted run writes the calls whose outputs are ready and
abandons one still running (:meth:`Writer.close`): its rows are never written, and the process's end does not wait
for it where it can end safely without (:func:`_at_exit`).
"""

from __future__ import annotations

import atexit
import collections
import os
import queue
import signal
import sys
import threading
import time

import numpy as np

#: A part is written once this many rows wait (or :data:`FLUSH_SECONDS` passed): ~0.3 MB of Parquet.
ROWS_PER_PART = 2**17
#: ... or once the oldest waiting rows are this old, whether or not another call has ended: a killed run loses
#: at most this much of its finished calls' trials (``$JAXTREES_FLUSH_SECONDS`` sets it; 0: a part per call).
FLUSH_SECONDS = 5.0
#: Calls dispatched and not yet on the host, at most (:meth:`Writer.wait` before each call: back pressure):
#: one running, one queued behind it, so that the device does not wait for the host between short calls.
IN_FLIGHT = 2
#: Seconds an interrupted run still gives a call running on the device to reach the host before abandoning it
#: (:meth:`Writer.close`); a call whose outputs are ready is always written.
GRACE_SECONDS = 1.0
#: The fetchers of abandoned calls (each waits for its call on the device), until they end: :func:`_at_exit`.
_ABANDONED: list[threading.Thread] = []
#: Set by :func:`ending_now`: the process ends by ``os._exit`` once its exit handlers have run.
_ENDING_NOW = threading.Event()


def ending_now() -> None:
    """Say that the process ends by ``os._exit`` after its exit handlers (:func:`jaxtrees.cli.exit_now`): an
    abandoned call need not be waited for (:func:`_at_exit`)."""
    _ENDING_NOW.set()


class Writer:
    """``put(trials, padding, outputs)`` per call, ``close()`` at the end (raises what a thread raised, e.g.
    a full disk); ``on_written(trials)`` is called (on the writing thread) per part written. ``finished``: when
    each call's outputs reached the host (``time.perf_counter``), in order; ``abandoned``: calls given up by an
    interrupted :meth:`close`."""

    def __init__(self, store, layout, on_written=None, rows_per_part: int = ROWS_PER_PART,
                 flush_seconds: float | None = None):
        self.store, self.layout, self.on_written = store, layout, on_written
        if flush_seconds is None:
            value = os.environ.get("JAXTREES_FLUSH_SECONDS", "").strip()
            try:
                flush_seconds = float(value) if value else FLUSH_SECONDS
            except ValueError:
                raise ValueError(f"JAXTREES_FLUSH_SECONDS must be a number of seconds >= 0, got {value!r}") from None
        self.rows_per_part, self.flush_seconds = rows_per_part, flush_seconds
        self.queue: queue.Queue = queue.Queue(maxsize=IN_FLIGHT)  # calls handed over
        self.host: queue.Queue = queue.Queue()  # their rows on the host
        self.error: BaseException | None = None
        self.seconds, self.cpu_seconds, self.rows = 0.0, 0.0, 0  # making and writing parts (wall, CPU); rows written
        self.trials = 0  # trials written (an interrupted run's count, not its program's)
        self.finished: list[float] = []
        self.parts, self.stop_after = 0, _stop_after()
        self.abandoned, self._cut = 0, False  # _cut: set once, under _changed; no call reaches the host after it
        self._pending: collections.deque = collections.deque()  # outputs of the calls handed over, not on the host
        self._changed = threading.Condition()
        self.fetcher = threading.Thread(target=self._fetch, name="jaxtrees fetcher", daemon=True)
        self.thread = threading.Thread(target=self._loop, name="jaxtrees writer", daemon=True)
        self.fetcher.start()
        self.thread.start()

    def put(self, trials: np.ndarray, padding: np.ndarray, outputs: dict):
        """Hand over one call: its slots' trial ids, which of them are padding, its outputs."""
        self._raise()
        with self._changed:
            self._pending.append(outputs)
        self.queue.put((trials, padding, outputs))

    def wait(self, calls: int, interrupted: threading.Event | None = None, poll: float = 0.1) -> bool:
        """Wait until ``calls`` calls are on the host (or a thread has failed): True, or False as soon as
        ``interrupted`` is set."""
        with self._changed:
            while len(self.finished) < calls and self.error is None:
                if interrupted is not None and interrupted.is_set():
                    return False
                self._changed.wait(poll)
        return not (interrupted is not None and interrupted.is_set())

    def close(self, flush: bool = True, interrupted: threading.Event | None = None, poll: float = 0.05):
        """Write what waits (``flush``; else drop it: its trials run again) and stop the threads. Once ``interrupted``
        is set (before or while the calls handed over reach the host), the calls whose outputs are ready are still
        written, and a call still running on the device after :data:`GRACE_SECONDS` is abandoned: not waited for,
        its rows (and those of the calls queued behind it) never written, even once its outputs arrive, so that a
        resume runs its trials again."""
        if flush and interrupted is not None:
            with self._changed:
                deadline = None
                while self._pending and self.error is None:
                    if interrupted.is_set():
                        deadline = deadline or time.perf_counter() + GRACE_SECONDS
                        if time.perf_counter() >= deadline and not _ready(self._pending[0]):
                            self._cut, self.abandoned = True, len(self._pending)
                            self._pending.clear()
                            break
                    self._changed.wait(poll)
        if self._cut:  # the rows on the host written; the fetcher left to end with its call
            self.host.put(("flush",))
            self.thread.join()
            _abandon(self.fetcher)
        else:
            self.queue.put(("flush",) if flush else ("drop",))
            self.fetcher.join()
            self.thread.join()
        self._raise()

    def _raise(self):
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _fetch(self):
        """Copy each call's rows to the host as it ends (the copy waits for the call); once :meth:`close` has
        abandoned the calls still running, hand nothing more over and end."""
        while True:
            item = self.queue.get()
            if self._cut:
                return
            if len(item) == 1 or self.error is not None:
                if len(item) == 1:
                    self.host.put(item)
                    return
                continue  # after a failure: drain, copy nothing more
            try:
                trials, padding, outputs = item
                real = np.flatnonzero(~padding)
                host = {name: np.asarray(value)[:trials.size][real] for name, value in outputs.items()}
                with self._changed:  # on the host before the cut, or never
                    if self._cut:
                        return
                    self._pending.popleft()
                    self.finished.append(time.perf_counter())
                    self.host.put((trials[real], host))
                    self._changed.notify_all()
            except BaseException as e:  # noqa: BLE001 - raised in the run's thread by put / close
                if self._cut:
                    return
                self.error = e
                self._failed()

    def _loop(self):
        """Gather the rows on the host into parts: a part once ROWS_PER_PART rows wait or the oldest waited
        FLUSH_SECONDS."""
        waiting, rows, since = [], 0, None
        while True:
            try:
                item = self.host.get(timeout=None if since is None else
                                     max(self.flush_seconds - (time.perf_counter() - since), 0.0))
            except queue.Empty:
                item = None
            if item is not None and len(item) == 1:
                if item[0] == "flush" and waiting and self.error is None:
                    self._write(waiting)
                return
            if item is not None and self.error is None:
                try:
                    waiting.append(item)
                    rows += int(self.layout.lengths[item[0] // self.layout.replicates].sum())
                    since = since or time.perf_counter()
                except BaseException as e:  # noqa: BLE001
                    self.error = e
            if waiting and self.error is None and (rows >= self.rows_per_part or
                                                   time.perf_counter() - since >= self.flush_seconds):
                self._write(waiting)
                waiting, rows, since = [], 0, None

    def _failed(self):
        """A thread failed: tell :meth:`wait` and :meth:`close`."""
        with self._changed:
            self._changed.notify_all()

    def _write(self, waiting):
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            trials = np.concatenate([t for t, _ in waiting])
            outputs = {name: np.concatenate([h[name] for _, h in waiting]) for name in waiting[0][1]}
            replicates = self.layout.replicates
            columns = self.layout.columns(trials // replicates, trials % replicates, outputs)
            self.store.write_part(columns, int(trials.size))
        except BaseException as e:  # noqa: BLE001 - raised in the run's thread by put / close
            self.error = e
            return
        self.seconds += time.perf_counter() - started
        self.cpu_seconds += time.thread_time() - cpu
        self.rows += int(columns["cell"].size)
        self.trials += int(trials.size)
        if self.on_written is not None:
            self.on_written(int(trials.size))
        self.parts += 1
        if self.parts == self.stop_after:  # a fault test's "mid-run", by construction: never returns
            threading.Event().wait()


def _stop_after() -> int | None:
    """``$JAXTREES_TEST_STOP_AFTER_PARTS``: for fault tests only, the writer blocks for ever once it has written this
    many parts (the process then hangs mid-run, for a test to kill it there); None (unset, the default): never."""
    value = os.environ.get("JAXTREES_TEST_STOP_AFTER_PARTS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def _ready(outputs: dict) -> bool:
    """Whether a call's outputs are computed (``jax.Array.is_ready``; a host array is)."""
    return all(getattr(value, "is_ready", lambda: True)() for value in outputs.values())


def abandoned_ended(interrupted: threading.Event | None = None, poll: float = 0.1) -> bool:
    """Wait until the calls abandoned by this process's interrupted runs have ended (each still holds its memory and
    cores on the device), saying so where it waits: True, or False as soon as ``interrupted`` is set."""
    running = [t for t in _ABANDONED if t.is_alive()]
    if running:
        print("jaxtrees: waiting for the call an interrupted run left running on the device to end (it holds its "
              "memory)", file=sys.stderr, flush=True)
    for thread in running:
        while thread.is_alive():
            if interrupted is not None and interrupted.is_set():
                return False
            thread.join(poll)
    return True


def _abandon(fetcher: threading.Thread) -> None:
    """Leave ``fetcher`` to end with its call, renamed out of the package's threads (which
    :func:`~jaxtrees.experiments.results.ending.settle` joins); :func:`_at_exit` decides what the process's end does."""
    fetcher.name = "abandoned fetcher"
    _ABANDONED[:] = [t for t in _ABANDONED if t.is_alive()] + [fetcher]
    atexit.unregister(_at_exit)
    atexit.register(_at_exit)  # after JAX's own handlers were registered: runs before they clear its backends


def _at_exit() -> None:
    """An abandoned call still running as the process ends. Under :func:`jaxtrees.cli.exit_now` (which runs the
    handlers, then ``os._exit``): nothing to do. At the interpreter's end, its fetcher taking the GIL back after
    finalization began (and a host callback of the call, Python on an XLA thread) would be ended by ``pthread_exit``
    inside C++: "terminate called without an active exception", exit 134. So a program ended by an uncaught
    KeyboardInterrupt runs the other handlers and ends as Python ends it then (SIGINT), without finalizing; any
    other end waits for the call, saying so (Ctrl-C ends it at once the same way)."""
    running = [t for t in _ABANDONED if t.is_alive()]
    if not running or _ENDING_NOW.is_set():
        return
    if not (isinstance(getattr(sys, "last_value", None), KeyboardInterrupt) and not sys.flags.interactive
            and not hasattr(sys, "ps1")):
        try:
            print("jaxtrees: waiting for the call an interrupted run left running on the device (Ctrl-C ends it now)",
                  file=sys.stderr, flush=True)
            for thread in running:
                thread.join()
            return
        except KeyboardInterrupt:
            pass
    atexit.unregister(_at_exit)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    os._exit(130)  # where SIGINT is blocked

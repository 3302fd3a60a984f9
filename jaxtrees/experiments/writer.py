"""A run's rows on their way to disk: gathered into parts on a background thread while the device runs.

:class:`Writer` takes each call's outputs (device arrays) with its trials, and on its own thread copies
them to the host, turns them into columns (:meth:`~jaxtrees.experiments.layout.Layout.columns`) and
writes a part (:meth:`~jaxtrees.experiments.store.Store.write_part`) once at least ``ROWS_PER_PART``
rows or ``FLUSH_SECONDS`` of them are waiting: a part's fixed cost (fsync, rename, directory fsync:
~10 ms on a local disk) is spread over many rows, and the run's main thread only dispatches calls.
"""

from __future__ import annotations

import os
import queue
import threading
import time

import numpy as np

#: A part is written once this many rows wait (or :data:`FLUSH_SECONDS` passed): ~0.3 MB of Parquet.
ROWS_PER_PART = 2**17
#: ... or once the oldest waiting rows are this old: a killed run loses at most this much of its trials
#: (``$JAXTREES_FLUSH_SECONDS`` sets it; 0: a part per call).
FLUSH_SECONDS = 5.0
#: Calls handed over and not yet on the host, at most (the main thread waits beyond: back pressure).
IN_FLIGHT = 2


class Writer:
    """``put(trials, padding, outputs)`` per call, ``close()`` at the end (raises what the thread
    raised, e.g. a full disk); ``on_written(trials)`` is called (on the thread) per part written."""

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
        self.queue: queue.Queue = queue.Queue(maxsize=IN_FLIGHT)
        self.error: BaseException | None = None
        self.seconds, self.cpu_seconds, self.rows = 0.0, 0.0, 0  # making and writing parts (wall, CPU); rows written
        self.thread = threading.Thread(target=self._loop, name="jaxtrees writer", daemon=True)
        self.thread.start()

    def put(self, trials: np.ndarray, padding: np.ndarray, outputs: dict):
        """Hand over one call: its slots' trial ids, which of them are padding, its outputs."""
        self._raise()
        self.queue.put((trials, padding, outputs))

    def close(self, flush: bool = True):
        """Write what waits (``flush``; else drop it: its trials run again) and stop the thread."""
        self.queue.put(("flush",) if flush else ("drop",))
        self.thread.join()
        self._raise()

    def _raise(self):
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _loop(self):
        waiting, rows, since = [], 0, None
        while True:
            item = self.queue.get()
            if len(item) == 1:
                if item[0] == "flush" and waiting and self.error is None:
                    self._write(waiting)
                return
            if self.error is not None:
                continue  # after a failure: drain, write nothing more
            try:
                trials, padding, outputs = item
                real = np.flatnonzero(~padding)
                host = {name: np.asarray(value)[:trials.size][real] for name, value in outputs.items()}  # waits for the call
                waiting.append((trials[real], host))
                rows += int(self.layout.lengths[trials[real] // self.layout.replicates].sum())
                since = since or time.perf_counter()
                if rows >= self.rows_per_part or time.perf_counter() - since >= self.flush_seconds:
                    self._write(waiting)
                    waiting, rows, since = [], 0, None
            except BaseException as e:  # noqa: BLE001 - raised in the run's thread by put / close
                self.error = e

    def _write(self, waiting):
        started, cpu = time.perf_counter(), time.thread_time()
        trials = np.concatenate([t for t, _ in waiting])
        outputs = {name: np.concatenate([h[name] for _, h in waiting]) for name in waiting[0][1]}
        replicates = self.layout.replicates
        columns = self.layout.columns(trials // replicates, trials % replicates, outputs)
        try:
            self.store.write_part(columns, int(trials.size))
        except BaseException as e:  # noqa: BLE001
            self.error = e
            return
        self.seconds += time.perf_counter() - started
        self.cpu_seconds += time.thread_time() - cpu
        self.rows += int(columns["cell"].size)
        if self.on_written is not None:
            self.on_written(int(trials.size))

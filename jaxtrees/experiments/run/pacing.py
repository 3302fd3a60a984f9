"""How a run's calls go: sized to a target time (:class:`Pace`), and stopped by a signal between calls, the calls
finished written and one still running abandoned (:class:`deferred_interrupt`, :class:`Interrupted`).
"""

from __future__ import annotations

import dataclasses
import signal
import threading

from jaxtrees.experiments.results.writer import IN_FLIGHT
from jaxtrees.experiments.run.progress import Progress

__all__ = ["GROWTH", "Interrupted", "Pace", "TARGET_CALL_SECONDS", "deferred_interrupt"]

#: Seconds a default call should take at most, once its program's trials are timed: a killed or interrupted run
#: loses at most the calls in flight (and rows wait at most the writer's FLUSH_SECONDS to be written): two
#: (writer.IN_FLIGHT) while calls are short, one once a call takes a quarter of this or more. A call of one group
#: per device runs however long it takes; Ctrl-C does not wait for it (writer.GRACE_SECONDS).
TARGET_CALL_SECONDS = 30 / 2
#: A default call has at most this many times the groups of its program's previous call.
GROWTH = 4


class deferred_interrupt:
    """Inside, Ctrl-C (SIGINT) or SIGTERM is held (a KeyboardInterrupt raised inside a dispatch or a device-to-host
    copy can abort the process) until no more calls are dispatched, the calls whose outputs are ready are written
    and one still running is abandoned (the writer's ``close``: after its GRACE_SECONDS), then raised as
    KeyboardInterrupt; no compile is waited for. A call run on the dispatching thread (on a CPU: a program with a
    host callback, or of few flops) ends before the signal is seen."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self):
        self.flag = threading.Event()
        self.number = signal.SIGINT
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self._held) for s in self.SIGNALS}
        return self.flag

    def _held(self, number, _frame):
        self.number = number
        self.flag.set()

    def __exit__(self, *exc):
        for number, handler in self.previous.items():
            signal.signal(number, handler)
        if self.flag.is_set() and exc[0] is None:
            raise Interrupted(self.number)
        return False


class Interrupted(KeyboardInterrupt):
    """A run ended by a signal (SIGINT or SIGTERM), its finished calls written; ``signal``: which."""

    def __init__(self, number: int):
        super().__init__(signal.Signals(number).name)
        self.signal = int(number)


@dataclasses.dataclass
class Pace:
    """How many groups per device a program's calls run: every compiled one (``most``) for a given chunk
    (``fixed``); else one, then at most ``GROWTH`` times the previous call's, as many as fit in
    ``TARGET_CALL_SECONDS`` at the seconds per group of the latest call timed, between 1 and ``most``. A
    call's seconds: from its dispatch, or from the end of the call before it, to its outputs on the host."""

    most: int
    fixed: bool
    calls: list = dataclasses.field(default_factory=list)  # (dispatched, groups per device, trials) per call
    seconds: list = dataclasses.field(default_factory=list)  # per call timed
    per_group: float | None = None  # seconds per group per device, of the latest call timed

    @property
    def ahead(self) -> int:
        """Calls that may be in flight as the next is dispatched: none before a default call is timed (the next
        one's size waits for it), nor after a call of a quarter of TARGET_CALL_SECONDS or more (the device idles
        the host's turn, milliseconds, where an interrupt would abandon a second long call); else IN_FLIGHT - 1."""
        if (not self.fixed and self.per_group is None) or (self.seconds and
                                                            self.seconds[-1] >= TARGET_CALL_SECONDS / 4):
            return 0
        return IN_FLIGHT - 1

    def next(self) -> int:
        """Groups per device of the next call."""
        if self.fixed:
            return self.most
        if self.per_group is None:
            return 1
        fit = int(TARGET_CALL_SECONDS / max(self.per_group, 1e-9))
        return max(1, min(self.most, GROWTH * self.calls[-1][1], fit))

    def measure(self, finished: list[float], bar: Progress):
        """Time the calls newly on the host (``finished``: when each reached it), telling ``bar``."""
        for k in range(len(self.seconds), min(len(finished), len(self.calls))):
            dispatched, groups, trials = self.calls[k]
            seconds = max(finished[k] - max(dispatched, finished[k - 1] if k else dispatched), 1e-6)
            self.seconds.append(seconds)
            self.per_group = seconds / groups
            bar.measured(trials, seconds)

    def summary(self) -> dict:
        """What metadata.json records of the program's calls: how many, the most trials and seconds of one."""
        return {"calls": len(self.calls), "most_trials": max((c[2] for c in self.calls), default=0),
                "most_seconds": round(max(self.seconds, default=0.0), 3)}

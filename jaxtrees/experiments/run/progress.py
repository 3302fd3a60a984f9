"""A progress line on stderr, as tqdm draws one: trials done, rate, elapsed, ETA and the phase.

:class:`Progress` counts compile time apart from the trials' and redraws one line on a terminal,
printing a line per phase change and per tenth of the trials elsewhere.
"""

from __future__ import annotations

import math
import sys
import time


class Progress:
    """Trials done of ``total``; :meth:`phase` names what runs now (e.g. "compiling n=16").

    Time spent in "compiling ..." phases (waiting for a program; the runner compiles the next ones
    while trials run) is counted apart: the rate is that of running trials, the ETA adds the programs
    still to compile at the mean wait so far ("?" before the first one has compiled), and the line
    shows the compile seconds and the programs compiled.

    On a terminal one line is redrawn in place; elsewhere (a log file, CI, a notebook's stderr) a
    line is printed per phase change and per tenth of the trials. The run's first call measured
    (:meth:`measured`) prints its estimate of the trials' time; until a part is written, the rate and ETA
    are those of the calls measured.

    >>> bar = Progress("demo", total=64, enabled=False)
    >>> bar.update(32); bar.done
    32
    """

    def __init__(self, name: str, total: int, enabled: bool = True, programs: int = 0):
        self.name, self.total, self.enabled, self.programs = name, total, enabled, programs
        self.compiled_seconds: list[float] = []
        self.done, self.start, self.last_decile = 0, time.perf_counter(), -1
        self.compiling, self._compile_start = 0.0, None  # seconds spent compiling; start of the current compile
        self.current = "starting"
        self._running = "running"  # the phase while trials run: what the last program was and how it came
        self.ran, self.ran_seconds = 0, 0.0  # trials of the calls measured, and their seconds on the device
        self.tty = sys.stderr.isatty()
        self._show(force=True)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def phase(self, text: str):
        """Show ``text`` as the current phase (always printed); a phase "compiling ..." lasts until
        the next phase or update."""
        self._end_compile()
        self.current = text
        if text.startswith("compiling"):
            self._compile_start = time.perf_counter()
        self._show(force=True)

    def compiled(self, seconds: float, how: str | None = None):
        """One more of the ``programs`` compiled, ``seconds`` waited for it; trials run now, the phase
        saying ``how`` the program came (e.g. "n=16, loaded in 0.4 s": "[running n=16, loaded in 0.4 s]")."""
        self.compiled_seconds.append(seconds)
        self._running = "running" if how is None else f"running {how}"
        self.phase(self._running)

    def eta(self) -> float:
        """Seconds left: the trials at the rate so far, plus the programs still to compile at the
        mean compile time so far (less what the current compile has taken); inf when unknown."""
        rate = self.rate()
        if self.done < self.total and rate <= 0:
            return math.inf
        trials = (self.total - self.done) / rate if self.done < self.total else 0.0
        left = max(self.programs - len(self.compiled_seconds), 0)
        if not left:
            return trials
        if not self.compiled_seconds:
            return math.inf
        current = self._current_compile()
        mean = sum(self.compiled_seconds) / len(self.compiled_seconds)
        return trials + max(left * mean - current, 0.0)

    def rate(self) -> float:
        """Trials per second of running trials (compiling left out, the current compile too); before any
        is written, that of the calls measured."""
        if not self.done and self.ran:
            return self.ran / max(self.ran_seconds, 1e-9)
        return self.done / max(self.elapsed - self.compiling - self._current_compile(), 1e-9)

    def measured(self, trials: int, seconds: float):
        """A call of ``trials`` trials took ``seconds`` on the device; the first prints :meth:`estimate`."""
        first = not self.ran
        self.ran, self.ran_seconds = self.ran + trials, self.ran_seconds + seconds
        if first and self.enabled:
            self._say(self.estimate())
        self._show()

    def estimate(self) -> str:
        """The trials' time at the rate measured: "juntas: 1,600 trials at 12.3 trials/s (...): about 2 min 10 s"."""
        rate, left = self.rate(), max(self.programs - len(self.compiled_seconds), 0)
        shown = f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"
        compiling = f", and {left} more program{'s' * (left > 1)} to compile" if left else ""
        return (f"{self.name}: {self.total:,} trials at {shown} trials/s (the first call's rate): about "
                f"{duration(self.total / max(rate, 1e-9))}{compiling}")

    def _say(self, line: str):
        """Print ``line`` apart from the progress line (redrawn below it on a terminal)."""
        sys.stderr.write(("\r\033[K" if self.tty else "") + line + "\n")
        sys.stderr.flush()

    def _current_compile(self) -> float:
        return 0.0 if self._compile_start is None else time.perf_counter() - self._compile_start

    def update(self, n: int):
        """``n`` more trials done."""
        self._end_compile()
        self.done += n
        self.current = self._running
        self._show()

    def close(self):
        self._end_compile()
        self.current = "done"
        self._show(force=True)
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()

    def _end_compile(self):
        if self._compile_start is not None:
            self.compiling += time.perf_counter() - self._compile_start
            self._compile_start = None

    def _show(self, force: bool = False):
        if not self.enabled:
            return
        rate = self.rate()
        eta = self.eta()
        programs = f", {len(self.compiled_seconds)}/{self.programs} programs" if self.programs else ""
        line = (f"{self.name}: {self.done}/{self.total} trials  {rate:,.0f} trials/s  "
                f"elapsed {self.elapsed:,.0f} s (compile {self.compiling:,.0f} s{programs})  "
                f"ETA {'?' if math.isinf(eta) else f'{eta:,.0f} s'}  [{self.current}]")
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
        else:
            decile = 10 * self.done // max(self.total, 1)
            if decile == self.last_decile and not force:
                return
            self.last_decile = decile
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def duration(seconds: float) -> str:
    """``seconds`` in words: "45 s", "2 min 10 s", "3 h 5 min".

    >>> duration(130.4), duration(11100), duration(4)
    ('2 min 10 s', '3 h 5 min', '4 s')
    """
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600:,} h {seconds % 3600 // 60} min"

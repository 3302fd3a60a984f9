"""A progress line on stderr, as tqdm draws one: trials done, rate, elapsed, ETA and the phase.

Time spent in "compiling ..." phases is counted apart: the rate and the ETA are those of running
trials (the ETA leaves out compilations still to come), and the line shows the compile seconds.

On a terminal one line is redrawn in place; elsewhere (a log file, CI, a notebook's stderr) a
line is printed per phase change and per tenth of the trials.

>>> bar = Progress("demo", total=64, enabled=False)
>>> bar.update(32); bar.done
32
"""

from __future__ import annotations

import math
import sys
import time


class Progress:
    """Trials done of ``total``; :meth:`phase` names what runs now (e.g. "compiling n=16")."""

    def __init__(self, name: str, total: int, enabled: bool = True):
        self.name, self.total, self.enabled = name, total, enabled
        self.done, self.start, self.last_decile = 0, time.perf_counter(), -1
        self.compiling, self._compile_start = 0.0, None  # seconds spent compiling; start of the current compile
        self.current = "starting"
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

    def update(self, n: int):
        """``n`` more trials done."""
        self._end_compile()
        self.done += n
        self.current = "running"
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
        rate = self.done / max(self.elapsed - self.compiling, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        line = (f"{self.name}: {self.done}/{self.total} trials  {rate:,.0f} trials/s  "
                f"elapsed {self.elapsed:,.0f} s (compile {self.compiling:,.0f} s)  "
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

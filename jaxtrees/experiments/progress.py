"""A progress line on stderr, as tqdm draws one: trials done, rate, elapsed, ETA and the phase.

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
        self.current = "starting"
        self.tty = sys.stderr.isatty()
        self._show(force=True)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def phase(self, text: str):
        """Show ``text`` as the current phase (always printed)."""
        self.current = text
        self._show(force=True)

    def update(self, n: int):
        """``n`` more trials done."""
        self.done += n
        self.current = "running"
        self._show()

    def close(self):
        self.current = "done"
        self._show(force=True)
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()

    def _show(self, force: bool = False):
        if not self.enabled:
            return
        rate = self.done / max(self.elapsed, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        line = (f"{self.name}: {self.done}/{self.total} trials  {rate:,.0f} trials/s  "
                f"elapsed {self.elapsed:,.0f} s  ETA {'?' if math.isinf(eta) else f'{eta:,.0f} s'}  [{self.current}]")
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
        else:
            decile = 10 * self.done // max(self.total, 1)
            if decile == self.last_decile and not force:
                return
            self.last_decile = decile
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

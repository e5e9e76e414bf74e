"""Progress on stderr: a redrawn bar on a terminal, a plain line every few seconds in logs."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """``bar(done, total, label)`` redraws one line on a terminal.

    When stderr is not a terminal (a log file, a batch job), it writes a plain
    ``simcluster: progress ...`` line at most every ``interval_s`` seconds (none
    for work that ends sooner), and a last one when work that printed ends.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        width: int = 30,
        interval_s: float = 5.0,
    ) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()
        self.interval_s = interval_s
        self._last = self.t0
        self._printed = False

    def _log_line(self, done: int, total: int, label: str) -> None:
        now = time.perf_counter()
        if now - self._last < self.interval_s and not (done >= total and self._printed):
            return
        self._last = now
        self._printed = True
        self.stream.write(
            f"simcluster: progress {done}/{total} after {now - self.t0:.0f} s: {label[:60]}\n"
        )
        self.stream.flush()

    def __call__(self, done: int, total: int, label: str) -> None:
        if total <= 0:
            return
        if not self.enabled:
            self._log_line(done, total, label)
            return
        filled = int(self.width * done / total)
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.perf_counter() - self.t0
        self.stream.write(f"\r[{bar}] {done}/{total} {elapsed:6.1f}s {label[:40]:<40}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()

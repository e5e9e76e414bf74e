"""A small progress bar on stderr: redrawn on a terminal, plain lines in logs.

When stderr is not a terminal (a log file, CI), ``log_every`` seconds > 0 makes
the bar write one plain line at most that often while work is under way, so a
long run shows progress in its log; runs shorter than that write nothing.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """``bar(done, total, label)`` redraws one line on a TTY; see the module docstring."""

    def __init__(
        self, stream: TextIO | None = None, width: int = 30, log_every: float = 0.0
    ) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.log_every = log_every
        self.t0 = self.last = time.perf_counter()

    def __call__(self, done: int, total: int, label: str) -> None:
        if total <= 0:
            return
        if not self.enabled:
            now = time.perf_counter()
            if self.log_every > 0 and now - self.last >= self.log_every:
                self.last = now
                self.stream.write(f"progress {done}/{total} {now - self.t0:.1f}s {label}\n")
                self.stream.flush()
            return
        filled = int(self.width * done / total)
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.perf_counter() - self.t0
        self.stream.write(f"\r[{bar}] {done}/{total} {elapsed:6.1f}s {label[:40]:<40}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()

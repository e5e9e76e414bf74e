"""A small progress bar on stderr (only when stderr is a terminal)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """``bar(done, total, label)`` redraws one line; silent when not a TTY."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()

    def __call__(self, done: int, total: int, label: str) -> None:
        if not self.enabled or total <= 0:
            return
        filled = int(self.width * done / total)
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = time.perf_counter() - self.t0
        self.stream.write(f"\r[{bar}] {done}/{total} {elapsed:6.1f}s {label[:40]:<40}")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()

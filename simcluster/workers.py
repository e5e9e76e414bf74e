"""Process pools whose workers die with the process that started them.

A worker started by :func:`process_pool` asks Linux to SIGKILL it when its
parent exits (``prctl(PR_SET_PDEATHSIG)``), and a watchdog thread exits it when
its parent process id changes (every other POSIX system, and a parent that
was itself SIGKILLed before the prctl took hold). So a ``sweep --jobs N``
killed with SIGKILL leaves no worker, and then no multiprocessing resource
tracker (it exits once every process holding its pipe is gone), behind.
Workers are started with ``spawn`` (no fork of a threaded parent).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor

__all__ = ["process_pool", "die_with_parent"]

#: seconds between the watchdog's checks of the parent process id
WATCH_INTERVAL_S = 0.5


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: exit as soon as process ``parent_pid`` is gone."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1 (Linux)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent_pid:  # died before the prctl
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(WATCH_INTERVAL_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def process_pool(max_workers: int) -> ProcessPoolExecutor:
    """A spawn-context pool of ``max_workers`` processes that die with this one."""
    import multiprocessing

    return ProcessPoolExecutor(
        max_workers=max_workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    )

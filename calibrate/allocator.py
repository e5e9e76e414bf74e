"""The host allocator's fresh pages, for the CPU kernel benchmarks.

glibc's ``malloc`` serves a large block by a fresh anonymous mapping (``mmap``) and
unmaps it on ``free``: every such allocation page-faults on its first touch. Its
threshold adapts (a freed mapped block raises it to that block's size) but never past
``DEFAULT_MMAP_THRESHOLD_MAX``, 32 MiB on 64-bit hosts (``4 * 1024 * 1024 *
sizeof(long)``, glibc malloc/malloc.c), so a block of 32 MiB or more is mapped anew each
time unless the heap's free top happens to hold it. Whether a kernel benchmark's
outputs and scratch buffers fault then depends on what the process allocated before
(the same ``torch.topk`` of 2.56 M elements took 13.7 ms in a calibration whose heap
held its 41 MB scratch and 41 ms in a fresh process on this host, 2026-11-28).

So the CPU kernel families are timed with every allocation served from the heap
(:func:`heap_only`: ``mallopt(M_MMAP_MAX, 0)`` and no trimming): the kernel's own
time. The first touch of fresh mapped pages is its own benchmark
(``calibrate.kernels.fresh_output_cases``) and the profile's ``fresh_output`` entry,
priced per fresh allocation of at least :data:`MAPPED_FROM_BYTES`
(:meth:`simcluster.compute.profile.DeviceProfile.fresh_output_time`).
"""

from __future__ import annotations

import ctypes
import platform
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["MAPPED_FROM_BYTES", "MAPPED_FROM_ORIGIN", "glibc", "heap_only"]

#: glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit hosts (bytes)
MAPPED_FROM_BYTES = 32 << 20
MAPPED_FROM_ORIGIN = (
    "glibc malloc maps a block anew (mmap) at or above its dynamic mmap threshold, which "
    "never rises past DEFAULT_MMAP_THRESHOLD_MAX = 4 * 1024 * 1024 * sizeof(long) = 32 MiB "
    "on 64-bit hosts (malloc/malloc.c); smaller blocks come back from the heap"
)

# mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
#: glibc's defaults after its dynamic threshold reached its maximum: mmap threshold
#: 32 MiB, trim threshold twice that, 65536 mappings at most (DEFAULT_MMAP_MAX)
_RESTORE = ((_M_MMAP_MAX, 65536), (_M_MMAP_THRESHOLD, MAPPED_FROM_BYTES),
            (_M_TRIM_THRESHOLD, 2 * MAPPED_FROM_BYTES))  # fmt: skip


def glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (the only allocator modelled), else None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


@contextmanager
def heap_only(enabled: bool = True) -> Iterator[bool]:
    """Serve every allocation from the heap, never returned to the system, inside the
    block (glibc only; elsewhere, or with ``enabled`` false, nothing changes). Yields
    whether it did. Afterwards mapping is on again with glibc's largest dynamic
    thresholds (:data:`MAPPED_FROM_BYTES`, trim at twice that)."""
    libc = glibc() if enabled else None
    if libc is None:
        yield False
        return
    libc.mallopt(_M_MMAP_MAX, 0)
    libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    try:
        yield True
    finally:
        for param, value in _RESTORE:
            libc.mallopt(param, value)

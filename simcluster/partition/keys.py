"""Fast replacements for ``np.unique`` on non-negative integer keys.

``np.unique`` (NumPy 2) hashes its input before sorting the distinct values, which
is far slower than one unstable sort or, for keys in a small range, a
``bincount``. Every function here returns exactly what the matching ``np.unique``
call returns (sorted distinct keys, counts as int64, inverse indices) for 1-D
integer arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "count_unique",
    "unique_counts",
    "unique_counts_sorted",
    "unique_inverse",
    "unique_sorted",
]

#: key ranges up to ``_DENSE_SLACK`` plus twice the number of keys use bincount
_DENSE_SLACK = 1 << 12


def _distinct_mask(s: np.ndarray) -> np.ndarray:
    """True at the first entry of every run of equal values of the sorted ``s``."""
    keep = np.empty(s.size, dtype=bool)
    if s.size:
        keep[0] = True
        np.not_equal(s[1:], s[:-1], out=keep[1:])
    return keep


def count_unique(keys: np.ndarray) -> int:
    """``np.unique(keys).size``."""
    s = np.sort(np.asarray(keys).reshape(-1))
    return int(s.size and 1 + np.count_nonzero(s[1:] != s[:-1]))


def unique_sorted(keys: np.ndarray) -> np.ndarray:
    """``np.unique(keys)``."""
    s = np.sort(np.asarray(keys).reshape(-1))
    return s[_distinct_mask(s)]


def unique_counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_counts=True)``."""
    return unique_counts_sorted(np.sort(np.asarray(keys).reshape(-1)))


def unique_counts_sorted(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(s, return_counts=True)`` for an already sorted 1-D ``s``."""
    starts = np.flatnonzero(_distinct_mask(s))
    # run lengths, written into one array (``np.diff(starts, append=s.size)`` builds
    # two more of the same size, a few ms at half a million keys)
    counts = np.empty(starts.size, dtype=np.intp)
    if starts.size:
        np.subtract(starts[1:], starts[:-1], out=counts[:-1])
        counts[-1] = s.size - starts[-1]
    return s[starts], counts


def _dense_ok(keys: np.ndarray) -> int | None:
    """The key bound ``max + 1`` when a ``bincount`` over it is cheap, else None."""
    if keys.size == 0 or keys.dtype.kind not in "iu":
        return None
    lo, hi = int(keys.min()), int(keys.max())
    if lo < 0 or hi >= 2 * keys.size + _DENSE_SLACK:
        return None
    return hi + 1


def unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for 1-D ``keys``."""
    keys = np.asarray(keys).reshape(-1)
    bound = _dense_ok(keys)
    if bound is not None:
        present = np.bincount(keys, minlength=bound) > 0
        rank = np.cumsum(present) - 1
        uniq = np.flatnonzero(present).astype(keys.dtype, copy=False)
        return uniq, rank[keys].astype(np.intp, copy=False)
    order = np.argsort(keys)
    s = keys[order]
    keep = _distinct_mask(s)
    inv = np.empty(keys.size, dtype=np.intp)
    inv[order] = np.cumsum(keep) - 1
    return s[keep], inv

"""Results are checked before they are written: a wrong number is a bug report.

Every number in a run's records must be finite, and every time (a field whose
name ends in ``_s`` or contains ``time``), byte count (``bytes``) and rate
(``per_s``, ``throughput``) must also be non-negative. Inputs are validated
before simulating, so a violation means the model produced it: the run stops
with :class:`~simcluster.errors.ResultError` (exit code 3), one line naming
the field and the record, and nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from simcluster.errors import ResultError, format_path

__all__ = ["check_records"]

_NON_NEGATIVE = ("_s", "time", "bytes", "per_s", "throughput", "speedup", "efficiency")


def _must_be_non_negative(key: str) -> bool:
    k = key.lower()
    return k.endswith("_s") or any(word in k for word in _NON_NEGATIVE)


def _label(rec: Any) -> str:
    if isinstance(rec, dict):
        parts = [f"{k}={rec[k]}" for k in ("schedule", "gpus") if k in rec]
        if parts:
            return " ".join(parts)
    return "?"


def check_records(records: Iterable[dict[str, Any]], what: str = "results") -> None:
    """Raise ResultError at the first non-finite number or negative time/bytes/rate."""
    for i, rec in enumerate(records):
        todo: list[tuple[Any, tuple[Any, ...], str]] = [(rec, (), "")]
        while todo:
            value, loc, key = todo.pop()
            if isinstance(value, bool):
                continue
            if isinstance(value, int | float):
                bad = None
                if not math.isfinite(value):
                    bad = "is not finite"
                elif value < 0 and _must_be_non_negative(key):
                    bad = "is negative"
                if bad:
                    raise ResultError(
                        f"internal error: {what}[{i}] ({_label(rec)}): "
                        f"{format_path(loc)} = {value!r} {bad}; nothing was written. "
                        "Please report this with the scenario."
                    )
            elif isinstance(value, dict):
                todo.extend((v, (*loc, str(k)), str(k)) for k, v in value.items())
            elif isinstance(value, list | tuple):
                todo.extend((v, (*loc, j), key) for j, v in enumerate(value))

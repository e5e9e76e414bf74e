"""results.json and results.csv: one flat record per schedule x size."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simcluster.report.outdir import write_text_atomic

__all__ = ["write_json", "write_csv", "flatten", "dumps"]


def _cell(v: Any) -> Any:
    """A CSV cell: lists and mappings as JSON (not Python reprs)."""
    return json.dumps(v, allow_nan=False) if isinstance(v, list | dict | tuple) else v


def flatten(rec: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts become ``outer.inner`` columns; deeper nesting and lists are JSON."""
    out: dict[str, Any] = {}
    for k, v in rec.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                out[f"{k}.{k2}"] = _cell(v2)
        else:
            out[k] = _cell(v)
    return out


def dumps(payload: Any, indent: int | None = 2, what: str = "results") -> str:
    """Strict JSON text: a NaN or infinity is a ResultError (exit 3), never ``NaN`` in a file."""
    try:
        return json.dumps(payload, indent=indent, sort_keys=False, allow_nan=False) + "\n"
    except ValueError as exc:
        from simcluster.errors import ResultError

        raise ResultError(f"internal error: {what}: {exc}; nothing was written") from None


def write_json(path: Path, payload: dict[str, Any]) -> None:
    write_text_atomic(path, dumps(payload))


def write_csv(path: Path, records: Sequence[dict[str, Any]]) -> None:
    flat = [flatten(r) for r in records]
    columns: list[str] = []
    for r in flat:
        for k in r:
            if k not in columns:
                columns.append(k)
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=columns)
    w.writeheader()
    for r in flat:
        w.writerow(r)
    write_text_atomic(path, buf.getvalue())

"""results.json and results.csv: one flat record per schedule x size."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["write_json", "write_csv", "flatten"]


def flatten(rec: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts become ``outer.inner`` columns."""
    out: dict[str, Any] = {}
    for k, v in rec.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                out[f"{k}.{k2}"] = v2
        else:
            out[k] = v
    return out


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")


def write_csv(path: Path, records: Sequence[dict[str, Any]]) -> None:
    flat = [flatten(r) for r in records]
    columns: list[str] = []
    for r in flat:
        for k in r:
            if k not in columns:
                columns.append(k)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns)
        w.writeheader()
        for r in flat:
            w.writerow(r)

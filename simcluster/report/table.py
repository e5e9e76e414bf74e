"""Terminal tables drawn from flat result records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "format_table",
    "scaling_table",
    "segment_table",
    "human_seconds",
    "human_bytes",
]


def human_seconds(s: float) -> str:
    if s >= 86400:
        return f"{s / 86400:.2f} d"
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.2f} min"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1000
    return f"{n:.1f} TB"


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], left: Sequence[int] = (0,)
) -> str:
    """Plain aligned table: columns in ``left`` (default the first) left, others right;
    no trailing spaces."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def scaling_table(records: Sequence[dict[str, Any]]) -> str:
    """One table per schedule: the columns a performance engineer reads first."""
    out = []
    for name in dict.fromkeys(r["schedule"] for r in records):
        rows = [
            (
                r["gpus"],
                r["nodes"],
                human_seconds(r["iteration_time_s"]),
                human_seconds(r["compute_s"]),
                human_seconds(r["comm_s"]),
                human_seconds(r["exposed_comm_s"]),
                f"{r['throughput_samples_per_s']:.1f}",
                human_seconds(r["time_to_train_s"]),
                f"{r['speedup']:.2f}x",
                f"{100 * r['efficiency']:.1f}%",
                human_bytes(r["inter_node_bytes"]),
            )
            for r in records
            if r["schedule"] == name
        ]
        first = next(r for r in records if r["schedule"] == name)
        out.append(
            f"{name}  [device {first['profile']}; network {first['network_profile']}, "
            f"{first['network_model']}]"
        )
        out.append(
            format_table(
                [
                    "GPUs",
                    "nodes",
                    "iteration",
                    "compute",
                    "comm",
                    "exposed comm",
                    "samples/s",
                    "time to train",
                    "speedup",
                    "efficiency",
                    "inter-node/iter",
                ],
                rows,
            )
        )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def segment_table(records: Sequence[dict[str, Any]]) -> str:
    """Programs other than the plain step (consensus, averaging steps) at the largest size."""
    if not records:
        return ""
    largest = max(r["gpus"] for r in records)
    rows = []
    for r in records:
        if r["gpus"] != largest:
            continue
        for seg in r.get("segments", []):
            if seg["plain"]:
                continue
            parts = ", ".join(
                f"{k} {human_seconds(v)}" for k, v in seg["breakdown_s"].items() if v > 0
            )
            rows.append(
                (
                    r["schedule"],
                    seg["label"],
                    f"{seg['count']:g}",
                    human_seconds(seg["time_s"]),
                    human_bytes(seg["inter_node_bytes"]),
                    parts,
                )
            )
    if not rows:
        return ""
    head = f"other programs at {largest} GPUs (per run of each; breakdown on the first rank class)"
    table = format_table(
        ["schedule", "program", "runs", "time", "inter-node", "breakdown"], rows, left=(0, 1, 5)
    )
    return head + "\n" + table + "\n"

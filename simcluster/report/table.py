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
    "memory_warnings",
    "fitted_constants",
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


def _seconds(v: float | None) -> str:
    return "-" if v is None else human_seconds(v)


def _partial(r: dict[str, Any]) -> str:
    """The partial last step: its time and its batch as a share of a full one."""
    t, n, full = r.get("partial_step_time_s"), r.get("partial_samples"), r.get("step_samples")
    if t is None:
        return "-"
    return f"{human_seconds(t)} ({100 * n / full:.0f}%)" if n and full else human_seconds(t)


def scaling_table(records: Sequence[dict[str, Any]]) -> str:
    """One table per schedule: the columns a performance engineer reads first.

    step, compute, comm and exposed comm are per full-batch step; the partial
    last step of an epoch is its own column (time, and its batch as a share of
    a full one); samples/s and time to train cover the whole run.
    """
    out = []
    for name in dict.fromkeys(r["schedule"] for r in records):
        rows = [
            (
                r["gpus"],
                r["nodes"],
                _seconds(r.get("step_time_s", r["iteration_time_s"])),
                _seconds(r.get("step_compute_s", r["compute_s"])),
                _seconds(r.get("step_comm_s", r["comm_s"])),
                _seconds(r.get("step_exposed_comm_s", r["exposed_comm_s"])),
                _partial(r),
                f"{r['throughput_samples_per_s']:.1f}",
                human_seconds(r["time_to_train_s"]),
                f"{r['speedup']:.2f}x",
                f"{100 * r['efficiency']:.1f}%",
                human_bytes(r["inter_node_bytes"]),
                _memory_cell(r),
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
                    "step",
                    "compute",
                    "comm",
                    "exposed comm",
                    "last step",
                    "samples/s",
                    "time to train",
                    "speedup",
                    "efficiency",
                    "inter-node/iter",
                    "mem/GPU",
                ],
                rows,
            )
        )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _memory_cell(r: dict[str, Any]) -> str:
    mem = r.get("memory_per_gpu_bytes")
    if mem is None:
        return "-"
    return human_bytes(mem) + (" !" if r.get("fits") is False else "")


def memory_warnings(records: Sequence[dict[str, Any]]) -> list[str]:
    """One line per record whose memory per GPU exceeds the device's."""
    out = []
    for r in records:
        if r.get("fits") is False:
            parts = ", ".join(
                f"{k} {human_bytes(v)}" for k, v in r["memory_breakdown_bytes"].items() if v > 0
            )
            out.append(
                f"warning: {r['schedule']} at {r['gpus']} GPUs needs "
                f"{human_bytes(r['memory_per_gpu_bytes'])} per GPU, more than the device's "
                f"{human_bytes(r['device_memory_bytes'])} ({parts})"
            )
    return out


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


def fitted_constants(profiles: Sequence[Any]) -> list[str]:
    """One line per fitted constant of the given profiles (objects with ``name`` and
    ``provenance``; the fit tool records ``provenance.fit``): parameter, value, the
    case it was fitted to and that case's source. Empty when none is fitted."""
    out = []
    for prof in profiles:
        fit = (getattr(prof, "provenance", None) or {}).get("fit")
        if not fit:
            continue
        unit = fit.get("reference_unit", "")
        out.append(
            f"  {prof.name}: {fit['parameter']} = {fit['value']:g}, fitted to "
            f"{fit['case']} (reference {fit['reference']:g} {unit}".rstrip()
            + f"; {fit.get('case_source', '')})"
        )
    return out

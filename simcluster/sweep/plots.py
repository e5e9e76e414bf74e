"""Plots of a sweep: lines (one swept field) or heatmaps (two or more) per metric.

Each point contributes, per schedule, the record at its largest GPU count. When
the swept field is ``study.gpus`` (one size per point), speedup is recomputed
across points against the smallest size, as a strong-scaling curve.
Values with units (``50 Gb/s``, ``2 us``) are plotted by their number in base
units; other non-numeric values are categories.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simcluster.report.outdir import save_figure

__all__ = ["plot_sweep", "METRICS", "numeric"]

#: metric column -> (axis label, scale)
METRICS = {
    "speedup": ("speedup", 1.0),
    "throughput_samples_per_s": ("samples/s", 1.0),
    "time_to_train_s": ("time to train (h)", 1 / 3600),
}


def numeric(text: str) -> float | None:
    """A cell as a number: plain numbers, then bandwidths (bytes/s) and latencies (s)."""
    from simcluster.topology.units import parse_bandwidth, parse_latency

    try:
        return float(text)
    except (TypeError, ValueError):
        pass
    for parse in (parse_bandwidth, parse_latency):
        try:
            return float(parse(text))
        except Exception:  # noqa: BLE001 - any parse failure means "not this unit"
            continue
    return None


def _has_unit(text: str) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return True
    return False


def _largest_per_point(rows: Sequence[dict[str, str]], paths: Sequence[str]):
    """(point values tuple, schedule) -> row at the largest gpus."""
    best: dict[tuple, dict[str, str]] = {}
    for r in rows:
        key = (tuple(r[p] for p in paths), r["schedule"])
        if key not in best or int(r["gpus"]) > int(best[key]["gpus"]):
            best[key] = r
    return best


def _values(rows: Sequence[dict[str, str]], path: str) -> list[str]:
    seen: list[str] = []
    for r in rows:
        if r[path] not in seen:
            seen.append(r[path])
    return seen


def _metric(row: dict[str, str], metric: str, ref: dict[str, str] | None) -> float:
    """A row's metric; speedup from points.csv (already across points when
    ``study.gpus`` is swept), else against ``ref`` for rows written without it."""
    if metric == "speedup" and ref is not None and not row.get("speedup"):
        return float(ref["time_to_train_s"]) / float(row["time_to_train_s"])
    return float(row[metric]) * METRICS[metric][1]


def plot_sweep(
    out: Path, rows: Sequence[dict[str, str]], paths: Sequence[str], title: str
) -> list[Path]:
    """Write the PNGs for a sweep; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows or not paths:
        return []
    schedules = list(dict.fromkeys(r["schedule"] for r in rows))
    best = _largest_per_point(rows, paths)
    written: list[Path] = []
    x_path = paths[0]
    xs = _values(rows, x_path)
    xnum = [numeric(x) for x in xs]
    is_num = all(v is not None for v in xnum)
    per_point_gpus = x_path == "study.gpus"
    if len(paths) == 1:
        fig, axes = plt.subplots(1, len(METRICS), figsize=(5 * len(METRICS), 4), squeeze=False)
        for ax, metric in zip(axes[0], METRICS, strict=True):
            for s in schedules:
                pts = [best.get(((x,), s)) for x in xs]
                ref = pts[0] if per_point_gpus else None
                ys = [_metric(p, metric, ref) if p else float("nan") for p in pts]
                xv = xnum if is_num else list(range(len(xs)))
                ax.plot(xv, ys, marker="o", label=s)
            if is_num and min(xnum) > 0 and max(xnum) / min(xnum) >= 16:
                ax.set_xscale("log")
                if per_point_gpus:  # a scaling curve: log-log
                    ax.set_yscale("log")
            if not is_num:
                ax.set_xticks(range(len(xs)), xs, rotation=30)
            elif any(_has_unit(x) for x in xs):
                # ticks in the user's units ("25 Gb/s"), not bytes/s
                ax.set_xticks(xnum, xs, rotation=30, fontsize=8)
                ax.minorticks_off()
            if ax.get_yscale() == "linear":
                # from zero, with headroom: a 2 % change must not look like a cliff
                ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
            ax.set_xlabel(x_path)
            ax.set_ylabel(METRICS[metric][0])
            ax.grid(True, alpha=0.3)
        axes[0][0].legend(fontsize=8)
        gpus = sorted({int(p["gpus"]) for p in best.values()})
        at = "" if per_point_gpus else f" (at {gpus[-1]} GPUs)" if len(gpus) == 1 else ""
        fig.suptitle(title + at)
        fig.tight_layout()
        path = out / "sweep.png"
        save_figure(fig, path)
        plt.close(fig)
        return [path]
    # Two or more axes: heatmap over the first two, the others at their first value.
    y_path = paths[1]
    ys = _values(rows, y_path)
    fixed = {p: _values(rows, p)[0] for p in paths[2:]}
    note = ", ".join(f"{p}={v}" for p, v in fixed.items())
    for metric in METRICS:
        fig, axes = plt.subplots(
            1, len(schedules), figsize=(4.2 * len(schedules), 3.6), squeeze=False
        )
        for ax, s in zip(axes[0], schedules, strict=True):
            grid: list[list[float]] = []
            for yv in ys:
                line = []
                for xv in xs:
                    vals = {x_path: xv, y_path: yv, **fixed}
                    row = best.get((tuple(vals[p] for p in paths), s))
                    line.append(_metric(row, metric, None) if row else float("nan"))
                grid.append(line)
            im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
            for i, line in enumerate(grid):
                for j, v in enumerate(line):
                    ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7, color="w")
            ax.set_xticks(range(len(xs)), xs, rotation=30, fontsize=7)
            ax.set_yticks(range(len(ys)), ys, fontsize=7)
            ax.set_xlabel(x_path)
            ax.set_ylabel(y_path)
            ax.set_title(s, fontsize=9)
            fig.colorbar(im, ax=ax, shrink=0.8)
        fig.suptitle(f"{title}: {METRICS[metric][0]}" + (f" ({note})" if note else ""))
        fig.tight_layout()
        path = out / f"heatmap-{metric}.png"
        save_figure(fig, path)
        plt.close(fig)
        written.append(path)
    return written


def summary_lines(
    rows: Sequence[dict[str, Any]], paths: Sequence[str], limit: int | None = None
) -> list[str]:
    """Per point and schedule, the row at the point's largest GPU count, as a text table
    (every row unless ``limit`` is given)."""
    from simcluster.report import format_table

    best = _largest_per_point(rows, paths)
    across = list(paths) == ["study.gpus"]  # one size per point: speedup across points
    first: dict[str, dict[str, Any]] = {}
    body = []
    for r in best.values():
        ref = first.setdefault(r["schedule"], r) if across else None
        body.append(
            [
                *(r[p] for p in paths),
                r["schedule"],
                r["gpus"],
                f"{_metric(r, 'speedup', ref):.2f}x",
                f"{float(r['throughput_samples_per_s']):.1f}",
                f"{float(r['time_to_train_s']) / 3600:.3f} h",
            ]
        )
    head = [*paths, "schedule", "GPUs", "speedup", "samples/s", "time to train"]
    if limit is None or len(body) <= limit:
        return format_table(head, body).splitlines()
    more = f"... {len(body) - limit} more (all rows in points.csv)"
    return format_table(head, body[:limit]).splitlines() + [more]

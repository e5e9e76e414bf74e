"""PNG plots drawn from result records (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_scaling", "plot_breakdown"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _by_schedule(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault(r["schedule"], []).append(r)
    return out


def plot_scaling(path: Path, records: Sequence[dict[str, Any]], title: str) -> None:
    """Speedup (with the ideal line) and efficiency against GPU count."""
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    groups = _by_schedule(records)
    for name, rs in groups.items():
        g = [r["gpus"] for r in rs]
        ax1.plot(g, [r["speedup"] for r in rs], marker="o", label=name)
        ax2.plot(g, [100 * r["efficiency"] for r in rs], marker="o", label=name)
    gpus = sorted({r["gpus"] for r in records})
    ax1.plot(gpus, [x / gpus[0] for x in gpus], "k--", lw=0.8, label="ideal")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(gpus)
        ax.set_xticklabels([str(x) for x in gpus])
        ax.set_xlabel("GPUs")
        ax.grid(alpha=0.3)
    ax1.set_ylabel(f"speedup vs {gpus[0]} GPUs")
    ax2.set_ylabel("parallel efficiency (%)")
    ax2.set_ylim(0, 105)
    ax1.legend()
    fig.suptitle(title)
    fig.tight_layout()
    from simcluster.report.outdir import save_figure

    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)


def _full(rec: dict[str, Any], key: str) -> float:
    """A per-step figure over full-batch steps (``step_<key>``), else the run mean."""
    v = rec.get(f"step_{key}")
    return rec[key] if v is None else v


def plot_breakdown(path: Path, records: Sequence[dict[str, Any]], title: str) -> None:
    """Grouped stacked bars: per GPU count, one bar per schedule split into
    compute and exposed communication (seconds per full-batch step)."""
    plt = _plt()
    groups = _by_schedule(records)
    gpus = sorted({r["gpus"] for r in records})
    width = 0.8 / max(len(groups), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(gpus) * max(1, len(groups) / 2) + 2), 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, (name, rs) in enumerate(groups.items()):
        by_g = {r["gpus"]: r for r in rs}
        xs = [i + (j - (len(groups) - 1) / 2) * width for i, g in enumerate(gpus) if g in by_g]
        comp = [_full(by_g[g], "compute_s") for g in gpus if g in by_g]
        exposed = [_full(by_g[g], "exposed_comm_s") for g in gpus if g in by_g]
        color = colors[j % len(colors)]
        ax.bar(xs, comp, width * 0.95, color=color, label=f"{name}: compute")
        ax.bar(
            xs,
            exposed,
            width * 0.95,
            bottom=comp,
            color=color,
            alpha=0.45,
            hatch="//",
            label=f"{name}: exposed comm",
        )
    ax.set_xticks(range(len(gpus)))
    ax.set_xticklabels([str(g) for g in gpus])
    ax.set_xlabel("GPUs")
    ax.set_ylabel("seconds per full-batch step (mean)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    from simcluster.report.outdir import save_figure

    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)

"""Validation output: per-case table, summary per paper and overall, scatter plot."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simcluster.report import human_seconds
from simcluster.validation.runner import CaseResult

__all__ = ["case_table", "summary", "summary_table", "plot_scatter", "fmt_value"]


def fmt_value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        return human_seconds(v)
    if unit == "x":
        return f"{v:.2f}x"
    if unit == "%":
        return f"{v:.1f}%"
    return f"{v:.4g} {unit}".rstrip()


def _pct(e: float | None) -> str:
    return "-" if e is None else f"{e * 100:+.1f}%"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    """Aligned text table; columns in ``right`` are right-aligned, others left."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        out = [
            str(c).rjust(w) if i in right else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _short_profiles(text: str) -> str:
    """``v100 (spec) / nccl-spec (spec)`` -> ``v100:spec nccl-spec:spec``."""
    parts = []
    for piece in text.split(" / "):
        piece = piece.replace(" [network only]", "")
        if piece.endswith(")") and " (" in piece:
            name, kind = piece[:-1].split(" (", 1)
            parts.append(f"{name}:{kind}")
        elif piece:
            parts.append(piece)
    return " ".join(parts)


def case_table(results: Sequence[CaseResult]) -> str:
    """One block per paper: every case with predicted, reference, signed error."""
    blocks = []
    papers = list(dict.fromkeys(r.paper for r in results))
    for paper in papers:
        mine = [r for r in results if r.paper == paper]
        rows = []
        skipped: dict[str, list[str]] = {}
        notes = []
        for r in mine:
            c = r.case
            ref = fmt_value(c.reference, c.unit)
            if c.reference_range:
                lo, hi = c.reference_range
                ref += f" [{fmt_value(lo, c.unit)}..{fmt_value(hi, c.unit)}]"
            if r.status == "skipped":
                skipped.setdefault(r.message, []).append(c.id)
                continue
            if r.status == "dropped":
                notes.append(f"  {c.id} ({fmt_value(c.reference, c.unit)}): {r.message}")
                continue
            if r.status == "ok":
                inside = c.reference_range is not None and r.error == 0
                err = ("in range" if inside else _pct(r.error)) + (" fitted" if r.fitted else "")
                rows.append(
                    [
                        c.id,
                        fmt_value(r.predicted, c.unit),
                        ref,
                        err,
                        c.confidence,
                        _short_profiles(r.profiles),
                        c.source,
                    ]
                )
            else:
                rows.append([c.id, "-", ref, "failed", c.confidence, "-", c.source])
                notes.append(f"  {c.id}: {r.message}")
        text = f"{paper}"
        if rows:
            head = ["case", "predicted", "reference", "error", "conf", "profiles", "source"]
            text += "\n" + _table(head, rows, {1, 2, 3})
        for msg, ids in skipped.items():
            shown = ", ".join(ids[:3]) + (f", ... ({len(ids)} cases)" if len(ids) > 3 else "")
            notes.append(f"  {msg}: {shown}")
        if notes:
            text += "\n" + "\n".join(notes)
        blocks.append(text)
    return "\n\n".join(blocks)


def _stats(rs: Sequence[CaseResult]) -> dict[str, Any]:
    errs = [abs(r.error) for r in rs if r.counts and r.error is not None]
    return {
        "cases": len(rs),
        "counted": len(errs),
        "fitted": sum(1 for r in rs if r.status == "ok" and r.fitted),
        "skipped": sum(1 for r in rs if r.status == "skipped"),
        "failed": sum(1 for r in rs if r.status == "failed"),
        "dropped": sum(1 for r in rs if r.status == "dropped"),
        "median_abs_error": statistics.median(errs) if errs else None,
        "max_abs_error": max(errs) if errs else None,
        "within_25pct": sum(1 for e in errs if e <= 0.25),
    }


def summary(results: Sequence[CaseResult]) -> dict[str, dict[str, Any]]:
    """Per paper and ``overall``: counts, median and max |relative error| of counted cases."""
    out = {}
    for paper in dict.fromkeys(r.paper for r in results):
        out[paper] = _stats([r for r in results if r.paper == paper])
    out["overall"] = _stats(results)
    return out


def group_summary(results: Sequence[CaseResult]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per paper whose cases name a ``group`` (e.g. a system kind), the same
    statistics as :func:`summary` per group, in the order groups first appear."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for paper in dict.fromkeys(r.paper for r in results):
        mine = [r for r in results if r.paper == paper and r.case.group is not None]
        groups = dict.fromkeys(r.case.group for r in mine)
        if groups:
            out[paper] = {g: _stats([r for r in mine if r.case.group == g]) for g in groups}
    return out


def group_table(results: Sequence[CaseResult]) -> str:
    """:func:`group_summary` as a table; empty when no case names a group."""
    rows = []
    for paper, groups in group_summary(results).items():
        for g, st in groups.items():
            med, mx = st["median_abs_error"], st["max_abs_error"]
            rows.append(
                [
                    paper,
                    g,
                    str(st["counted"]),
                    "-" if med is None else f"{med * 100:.1f}%",
                    "-" if mx is None else f"{mx * 100:.1f}%",
                ]
            )
    if not rows:
        return ""
    head = ["paper", "group", "counted", "median |err|", "max |err|"]
    return "per group (cases that name one):\n" + _table(head, rows, {2, 3, 4})


def summary_table(results: Sequence[CaseResult]) -> str:
    s = summary(results)
    rows = []
    for paper, st in s.items():
        med = st["median_abs_error"]
        mx = st["max_abs_error"]
        rows.append(
            [
                paper,
                st["cases"],
                st["counted"],
                st["fitted"],
                st["skipped"],
                st["failed"],
                st["dropped"],
                "-" if med is None else f"{med * 100:.1f}%",
                "-" if mx is None else f"{mx * 100:.1f}%",
                f"{st['within_25pct']}/{st['counted']}",
            ]
        )
    head = [
        "paper",
        "cases",
        "counted",
        "fitted",
        "skipped",
        "failed",
        "dropped",
        "median |err|",
        "max |err|",
        "|err|<=25%",
    ]
    return (
        "summary: |predicted - reference| / |reference| over counted cases, 0 inside a "
        "reference range (fitted-from, skipped, failed and dropped cases excluded)\n"
        + _table(head, [[str(x) for x in r] for r in rows], set(range(1, len(head))))
    )


def plot_scatter(path: Path, results: Sequence[CaseResult], title: str) -> bool:
    """Predicted vs reference on log-log axes with y = x; False when nothing to plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [
        r
        for r in results
        if r.status == "ok" and r.predicted and r.predicted > 0 and r.case.reference > 0
    ]
    if not pts:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 6.0))
    markers = {"high": "o", "medium": "s", "low": "^"}
    papers = list(dict.fromkeys(r.paper for r in pts))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, paper in enumerate(papers):
        for conf, mk in markers.items():
            sel = [r for r in pts if r.paper == paper and r.case.confidence == conf]
            if not sel:
                continue
            ax.scatter(
                [r.case.reference for r in sel],
                [r.predicted for r in sel],
                marker=mk,
                color=colors[i % len(colors)],
                facecolors=[("none" if r.fitted else colors[i % len(colors)]) for r in sel],
                label=f"{paper} ({conf})",
                s=36,
            )
    lo = min(min(r.case.reference, r.predicted) for r in pts) / 1.5
    hi = max(max(r.case.reference, r.predicted) for r in pts) * 1.5
    ax.plot([lo, hi], [lo, hi], "k-", lw=1, label="y = x")
    ax.plot([lo, hi], [lo * 2, hi * 2], "k:", lw=0.8, label="x2 / x0.5")
    ax.plot([lo, hi], [lo / 2, hi / 2], "k:", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("reference (measured)")
    ax.set_ylabel("predicted (simcluster)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    from simcluster.report.outdir import save_figure

    save_figure(fig, path)
    plt.close(fig)
    return True

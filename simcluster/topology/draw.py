"""Drawing a cluster as a PNG (matplotlib, Agg backend).

Vertices are coloured by kind, links coloured by kind with width growing with
bandwidth. Big clusters show their first few nodes, the switches those nodes
reach, and say so in the title.
"""

from __future__ import annotations

import math
from pathlib import Path

from simcluster.errors import UserError
from simcluster.topology.cluster import Cluster

__all__ = ["draw_topology", "MAX_DRAWN_NODES", "MAX_DRAWN_SWITCHES"]

MAX_DRAWN_NODES = 8
MAX_DRAWN_SWITCHES = 16

VERTEX_COLORS = {
    "gpu": "#76b900",
    "cpu": "#1f77b4",
    "nic": "#ff7f0e",
    "pcie": "#8c564b",
    "switch": "#7f7f7f",
}
LINK_COLORS = {
    "nvlink": "#4d8f00",
    "nvswitch": "#9acd32",
    "pcie": "#8c564b",
    "qpi": "#d62728",
    "memory": "#9467bd",
    "infiniband": "#1f3f9f",
    "ethernet": "#17becf",
}
_ROW = {"rank": 0.0, "nvswitch": 1.0, "pcie_switch": 2.0, "nic": 2.7, "socket": 3.6}
_ROW_CPU = {"rank": 0.0, "socket": 1.6, "pcie_switch": 2.4, "nic": 3.2}
_SWITCH_ROW = {"leaf": 6.5, "spine": 9.0, "core": 11.5}


def draw_topology(cluster: Cluster, path: str) -> None:
    """Write a PNG picture of ``cluster`` to ``path``.

    At most :data:`MAX_DRAWN_NODES` nodes and :data:`MAX_DRAWN_SWITCHES`
    switches per fabric level are drawn; the title says when the picture is
    partial.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.patches import FancyArrowPatch, Rectangle
    except ImportError:  # pragma: no cover - depends on the environment
        raise UserError("drawing a topology needs matplotlib (pip install matplotlib)") from None

    t = cluster.template
    k = min(cluster.num_nodes, MAX_DRAWN_NODES)
    fab = cluster.fabric

    # vertices of the first k nodes: rows by role, x by barycentre of the row below
    pos: dict[str, tuple[float, float]] = {}
    kind: dict[str, str] = {}
    tkind = {vid: a["kind"] for vid, a in t.vertices}
    rows: dict[str, list[str]] = {}
    for vid, a in t.vertices:
        rows.setdefault(a["role"], []).append(vid)
    rows_y = _ROW_CPU if t.rank_kind == "cpu" else _ROW
    width = max(3.0, 0.6 * max(len(v) for v in rows.values()))
    unit = width / max(1, len(rows.get("rank", [])))
    tadj: dict[str, list[str]] = {}
    for u, v, _a in t.edges:
        tadj.setdefault(u, []).append(v)
        tadj.setdefault(v, []).append(u)
    local: dict[str, tuple[float, float]] = {}
    order = ["rank", "nvswitch", "pcie_switch", "socket", "nic"]
    for role in sorted(rows, key=lambda r: order.index(r) if r in order else len(order)):
        vids = rows[role]
        y = rows_y.get(role, 2.5)
        per_slot: dict[str, int] = {}
        for i, vid in enumerate(vids):
            below = [local[w][0] for w in tadj.get(vid, []) if w in local and w not in vids]
            if not below:
                x = (i + 0.5) * width / len(vids)
            elif role == "nic":
                slot = next(w for w in tadj[vid] if w in local and w not in vids)
                j = per_slot[slot] = per_slot.get(slot, -1) + 1
                x = min(local[slot][0] + (0.35 + 0.3 * j) * unit, width)
            else:
                x = sum(below) / len(below)
            local[vid] = (x, y)
    gap = 0.8
    for n in range(k):
        x0 = n * (width + gap)
        for vid, (x, y) in local.items():
            gid = f"n{n}.{vid}"
            pos[gid] = (x0 + x, y)
            kind[gid] = tkind[vid]
    total_w = k * (width + gap) - gap

    # fabric switches reached from the drawn NICs, level by level
    fedges = list(fab.edges(cluster._endpoint_vertex))
    adj: dict[str, list[str]] = {}
    for u, v, _a in fedges:
        adj.setdefault(u, []).append(v)
        adj.setdefault(v, []).append(u)
    drawn = set(pos)
    levels: list[tuple[str, list[str], int]] = []
    frontier = [v for v in pos if kind[v] == "nic"]
    for role in ("leaf", "spine", "core"):
        found: set[str] = set()
        for v in frontier:
            for w in adj.get(v, []):
                if w.startswith(role) and w not in drawn:
                    found.add(w)
        if not found:
            break
        ordered = sorted(found, key=lambda s: int(s[len(role) :]))
        levels.append((role, ordered[:MAX_DRAWN_SWITCHES], len(ordered)))
        frontier = ordered[:MAX_DRAWN_SWITCHES]
        drawn.update(frontier)
    for role, vids, _total in levels:
        for i, vid in enumerate(vids):
            pos[vid] = ((i + 0.5) * total_w / len(vids), _SWITCH_ROW[role])
            kind[vid] = "switch"

    edges = []
    for n in range(k):
        p = f"n{n}."
        for u, v, a in t.edges:
            edges.append((p + u, p + v, a))
    for u, v, a in fedges:
        if u in pos and v in pos:
            edges.append((u, v, a))

    fig_w = min(4 + 2.2 * k * width / 3.0, 40)
    fig, ax = plt.subplots(figsize=(fig_w, 8))
    bws = [a["bandwidth"] for _, _, a in edges] or [1.0]
    lo, hi = math.log10(min(bws)), math.log10(max(bws))
    for u, v, a in edges:
        (x1, y1), (x2, y2) = pos[u], pos[v]
        frac = 0.5 if hi == lo else (math.log10(a["bandwidth"]) - lo) / (hi - lo)
        style = dict(
            color=LINK_COLORS.get(a["kind"], "k"), linewidth=0.6 + 3.4 * frac, alpha=0.8, zorder=1
        )
        if y1 == y2 and abs(x2 - x1) > 1.5 * unit:
            # links inside one row (NVLink mesh) bow below the row so they stay apart
            if x1 > x2:
                (x1, y1), (x2, y2) = (x2, y2), (x1, y1)
            rad = min(0.5, 1.6 / abs(x2 - x1)) * (1 if y1 <= 0 else -0.5)
            ax.add_patch(
                FancyArrowPatch(
                    (x1, y1), (x2, y2), arrowstyle="-", connectionstyle=f"arc3,rad={rad}", **style
                )
            )
        else:
            ax.plot([x1, x2], [y1, y2], **style)
    for kd, color in VERTEX_COLORS.items():
        pts = [pos[v] for v in pos if kind[v] == kd]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(
                xs, ys, s=90, color=color, edgecolors="black", linewidths=0.5, zorder=2, label=kd
            )
    for n in range(k):
        x0 = n * (width + gap)
        ax.add_patch(
            Rectangle(
                (x0 - 0.15, -1.2),
                width + 0.3,
                5.2,
                fill=False,
                linestyle="--",
                edgecolor="#999999",
                zorder=0,
            )
        )
        ax.text(x0 + width / 2, -1.35, f"node {n}", ha="center", va="top", fontsize=8)
    if k <= 2 or len(pos) <= 60:
        for v, (x, y) in pos.items():
            ax.text(x, y + 0.3, v.split(".")[-1], ha="center", fontsize=6, zorder=3)

    notes = []
    if k < cluster.num_nodes:
        notes.append(f"showing {k} of {cluster.num_nodes} nodes")
    for role, vids, total in levels:
        if len(vids) < total:
            notes.append(f"{len(vids)} of {total} reachable {role}s")
    title = (
        f"{cluster.name}: {cluster.num_nodes} nodes x {cluster.ranks_per_node} "
        f"{cluster.rank_kind.upper()}s = {cluster.num_ranks} ranks"
    )
    if notes:
        title += "\n(" + "; ".join(notes) + ")"
    ax.set_title(title, fontsize=10)
    kinds_used = sorted({a["kind"] for _, _, a in edges})
    handles = [
        Line2D([0], [0], color=LINK_COLORS.get(kd, "k"), linewidth=2.5, label=kd)
        for kd in kinds_used
    ]
    leg1 = ax.legend(loc="upper left", fontsize=7, title="vertices", title_fontsize=7)
    ax.add_artist(leg1)
    ax.legend(
        handles=handles,
        loc="upper right",
        fontsize=7,
        title="links (width ~ log bw)",
        title_fontsize=7,
    )
    ax.set_axis_off()
    ax.set_ylim(-2.0, 13)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    from simcluster.atomic import save_figure

    try:
        save_figure(fig, path)
    finally:
        plt.close(fig)

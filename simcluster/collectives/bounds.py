"""Lower bounds on the tuner's estimate, from the group shape alone.

``auto`` picks the candidate (algorithm, protocol) whose lowered phases have
the least :func:`~simcluster.collectives.registry.estimate_phases` time. A
candidate whose *lower bound* already exceeds the best estimate found cannot
win, so it is never lowered (at 1,048,576 GPUs, lowering the ring that the
double binary tree beats costs seconds). The bounds read only what the
lowerings' closed-form latencies read: how many ranks and nodes each group
has, the protocols' step latencies, and the largest link capacity a flow of
the algorithm can get. They never change which candidate wins.

Bounds exist under protocols (the latency of every step is a profile
constant); without them a bound is 0 (always lowered). Seconds.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simcluster.collectives.base import CollectiveCall, CommContext
from simcluster.collectives.protocols import family_of

__all__ = ["BOUNDS", "lower_bound", "lower_bounds"]

#: relative slack for rounding: the bound is computed in another order than the estimate
_SLACK = 1e-9


def _group_nodes(ctx: CommContext, group: tuple[int, ...]) -> tuple[int, int]:
    """(distinct nodes, most ranks on one node) of a group, cached per group."""
    key = ("group_nodes", group)
    hit = ctx.shapes.get(key)
    if hit is None:
        nodes = np.asarray(ctx.cluster.rank_node)[np.asarray(group, dtype=np.int64)]
        _, counts = np.unique(nodes, return_counts=True)
        hit = ctx.shapes[key] = (int(counts.size), int(counts.max()))
    return hit


def _fastest(ctx: CommContext) -> tuple[float, float]:
    """(fastest inter-node link, fastest link) of the context, bytes/s; cached."""
    hit = ctx.shapes.get(("fastest",))
    if hit is None:
        cap, inter = ctx.capacity, ctx.inter_node_link
        c_inter = float(cap[inter].max()) if inter.any() else float(cap.max())
        hit = ctx.shapes[("fastest",)] = (c_inter, float(cap.max()))
    return hit


def _latencies(ctx: CommContext, fam: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per protocol of ``ctx.protocols``, for algorithm family ``fam``: (the smaller of
    the NVLink and PCIe step latencies, the network step latency, the base
    latency), seconds; cached per context."""
    key = ("bound_latencies", fam)
    hit = ctx.shapes.get(key)
    if hit is None:
        ps = list(ctx.protocols.values())
        nv = np.array([p.hop(fam, "nvlink") for p in ps])
        pc = np.array([p.hop(fam, "pcie") for p in ps])
        net = np.array([p.hop(fam, "net") for p in ps])
        base = np.array([p.base_latency_s[fam] for p in ps])
        hit = ctx.shapes[key] = (np.minimum(nv, pc), net, base)
    return hit


def _steps(op: str, p: int) -> int:
    return 2 * (p - 1) if op == "allreduce" else p - 1


def ring(ctx: CommContext, call: CollectiveCall) -> np.ndarray | None:
    """Per protocol (``ctx.protocols`` order): a lower bound of the ring's
    estimate, its start-up latency alone.

    A ring over p ranks on k >= 2 nodes crosses nodes on at least k of its p
    hops; the protocol ring latency (``ring._ring_latency_sum``) is linear in
    that count and grows with the mean intra-node step latency, which is at
    least the smaller of the NVLink and PCIe step latencies, so its least value
    is at k or at p crossings.
    """
    if not ctx.protocols:
        return None
    key = ("ring_bound", call.op, call.groups)  # it reads neither the size nor the root
    hit = ctx.shapes.get(key)
    if hit is None:
        hit = ctx.shapes[key] = _ring(ctx, call)
    return hit


def _ring(ctx: CommContext, call: CollectiveCall) -> np.ndarray:
    ps = list(ctx.protocols.values())
    lo, net, base = _latencies(ctx, family_of("ring"))
    over = np.array([p.net_overhead_s for p in ps])
    best = np.zeros(len(ps))
    for g in call.groups:
        p = len(g)
        if p < 2:
            continue
        steps = _steps(call.op, p)
        if steps == 0:
            continue
        k, _ = _group_nodes(ctx, tuple(g))
        if k == 1:
            lat = steps * lo
        else:
            a = np.maximum(lo, over)

            def f(inter: int, a=a, steps=steps, p=p) -> np.ndarray:
                n_inter = steps * (inter - 1) / (p - 1)
                return (steps - n_inter) * a + n_inter * net

            lat = np.minimum(f(k), f(p))
        best = np.maximum(best, lat)
    return (best + base) * (1 - _SLACK)


def tree(ctx: CommContext, call: CollectiveCall) -> np.ndarray | None:
    """Per protocol: a lower bound of the double binary tree's estimate.

    Each of its two phases lasts at least the pipeline depth (chain steps at
    no less than the smaller intra-node step latency, ``height`` tree levels
    at the network one) plus the time to move one flow's wire bytes at the
    largest capacity such a flow can get: an inter-node link's for the tree
    edges (``nbytes / (2 x channels)`` each, with no more channels than
    ``tree.tree_channels`` gives: NICs per node, at most the most ranks on a
    node), any link's for a one-node chain.
    """
    if not ctx.protocols or call.op != "allreduce":
        return None
    fam = family_of("tree")
    lo, net, base = _latencies(ctx, fam)
    wire = ctx.shapes.get(("bound_wire", fam))
    if wire is None:
        ps = ctx.protocols.values()
        wire = ctx.shapes[("bound_wire", fam)] = np.array(
            [1.0 / p.bandwidth_fraction[fam] for p in ps]
        )
    c_inter, c_any = _fastest(ctx)
    phase = np.zeros(len(ctx.protocols))
    for g in call.groups:
        if len(g) < 2:
            continue
        m, biggest = _group_nodes(ctx, tuple(g))
        height = max(m - 1, 0).bit_length()
        depth = (biggest - 1) * lo + height * net
        if m > 1:
            channels = max(1, min(ctx.nics_per_node, biggest))
            move = call.nbytes / (2 * channels) * wire / c_inter
        else:
            move = call.nbytes * wire / c_any
        phase = np.maximum(phase, depth + move)
    return (2 * phase + base) * (1 - _SLACK)


#: (op, algorithm) -> lower bound of its estimate per protocol (None: no bound)
BOUNDS: dict[tuple[str, str], Callable[[CommContext, CollectiveCall], np.ndarray | None]] = {
    ("allreduce", "ring"): ring,
    ("allreduce", "tree"): tree,
}


def lower_bounds(
    ctx: CommContext, call: CollectiveCall, cands: list[tuple[str, str | None]]
) -> list[float]:
    """:func:`lower_bound` of every (algorithm, protocol) in ``cands``, each
    algorithm's bound computed once for all its protocols."""
    per_name: dict[str, np.ndarray | None] = {}
    out = []
    for name, protocol in cands:
        if name not in per_name:
            fn = BOUNDS.get((call.op, name))
            per_name[name] = None if fn is None else fn(ctx, call)
        b = per_name[name]
        out.append(0.0 if b is None or protocol is None else float(b[_index(ctx, protocol)]))
    return out


def _index(ctx: CommContext, protocol: str) -> int:
    return list(ctx.protocols).index(protocol)


def lower_bound(ctx: CommContext, call: CollectiveCall, name: str, protocol: str | None) -> float:
    """A lower bound (s) of the estimate of ``call`` lowered by ``name`` under
    ``protocol``; 0.0 where none is known."""
    return lower_bounds(ctx, call, [(name, protocol)])[0]

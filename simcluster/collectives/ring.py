"""Ring algorithms: allreduce, allgather, reduce-scatter.

For P ranks and n bytes, ring allreduce runs 2(P-1) steps of n/P bytes to the
next rank; ring allgather and reduce-scatter run P-1 steps. On a uniform ring
of per-message latency alpha and bandwidth B, allreduce takes
``2(P-1) * alpha + 2(P-1)/P * n / B``.

Across nodes with several NICs the data is split over as many channels (rings)
as NICs; channel c enters and leaves each node through a different GPU, so
every NIC carries one ring (as NCCL's channels do).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.collectives.channels import node_rings
from simcluster.network.flow import FlowBatch

__all__ = [
    "ring_orders",
    "ring_phase",
    "protocol_ring_latency",
    "allreduce",
    "allgather",
    "reduce_scatter",
    "ring_batch",
    "allreduce_batch",
    "allgather_batch",
    "reduce_scatter_batch",
]


def ring_orders(ctx: CommContext, group: tuple[int, ...]) -> list[list[int]]:
    """One rank order per channel.

    A group of whole nodes follows the node's NVLink rings
    (:func:`~simcluster.collectives.channels.node_rings`): inside one node, one
    channel per ring; across nodes, one channel per NIC rail (as many as NICs,
    at most the GPUs per node), each channel entering and leaving a node
    through GPUs on NICs no other channel uses where possible (``_rail_cuts``);
    every other node walks its ring backwards so
    that the hop into the next node leaves through the NIC of the GPU it
    enters (same rail). Other groups rotate each node's ranks by the channel.
    """
    by_node = ctx.split_by_node(group)
    rings = _node_rings(ctx)
    R = ctx.cluster.ranks_per_node
    n = len(group)
    contiguous = (  # whole nodes in order, checked as one array
        n % R == 0
        and group[0] % R == 0
        and np.array_equal(np.asarray(group), np.arange(group[0], group[0] + n))
    )
    whole = getattr(ctx.cluster, "template", None) is not None and (
        contiguous
        or all(
            len(ranks) == R and ranks == list(range(ranks[0], ranks[0] + R)) and ranks[0] % R == 0
            for ranks in by_node
        )
    )
    if whole and len(by_node) == 1:
        base = by_node[0][0]
        return [[base + i for i in ring] for ring in rings]
    if len(by_node) <= 1:
        return [list(group)]
    per_node = min(len(ranks) for ranks in by_node)
    channels = max(1, min(ctx.nics_per_node, per_node))
    orders = []
    m = len(by_node)
    cuts = _rail_cuts(ctx, rings, channels) if whole else []
    if whole:  # as the loop below, node by node, as arrays
        starts = np.array([ranks[0] for ranks in by_node], dtype=np.int64)[:, None]
        flip = ((np.arange(m) % 2 == 1) & (m % 2 == 0))[:, None]
        for r, k in cuts:
            local = np.array(rings[r][k:] + rings[r][:k], dtype=np.int64)
            orders.append((starts + np.where(flip, local[::-1], local)).ravel().tolist())
        return orders
    for c in range(channels):
        order: list[int] = []
        for j, ranks in enumerate(by_node):
            if whole:
                r, k = cuts[c]
                ring = rings[r]
                local = ring[k:] + ring[:k]
                if j % 2 == 1 and m % 2 == 0:
                    local = local[::-1]
                order.extend(ranks[0] + i for i in local)
            else:
                k = (c * len(ranks)) // channels
                order.extend(ranks[k:] + ranks[:k])
        orders.append(order)
    return orders


def _rail_cuts(ctx: CommContext, rings: list[list[int]], channels: int) -> list[tuple[int, int]]:
    """Per channel: (ring index, entry position), spreading NICs and rings.

    Channel c walks a node ring from position k to k - 1; its traffic leaves
    and enters nodes through the NICs of those two GPUs
    (:attr:`Cluster.rank_nic`). Each channel takes, over all rings and cuts,
    the one whose entry and exit NICs have carried the fewest channels so far,
    then one that enters and leaves through the same NIC (one rail for the
    whole ring, whatever the node count), then the least used ring, then ring
    and position order.
    """
    nic = ctx.cluster.template.rank_nic or [0] * ctx.cluster.ranks_per_node
    used_in: dict[int, int] = {}
    used_out: dict[int, int] = {}
    ring_uses = [0] * len(rings)
    out = []
    for _c in range(channels):
        best = min(
            (
                used_in.get(nic[ring[k]], 0) + used_out.get(nic[ring[k - 1]], 0),
                nic[ring[k]] != nic[ring[k - 1]],
                ring_uses[r],
                r,
                k,
            )
            for r, ring in enumerate(rings)
            for k in range(len(ring))
        )
        r, k = best[-2:]
        ring = rings[r]
        used_in[nic[ring[k]]] = used_in.get(nic[ring[k]], 0) + 1
        used_out[nic[ring[k - 1]]] = used_out.get(nic[ring[k - 1]], 0) + 1
        ring_uses[r] += 1
        out.append((r, k))
    return out


def _node_rings(ctx: CommContext) -> list[list[int]]:
    hit = ctx.shapes.get(("node_rings",))
    if hit is None:
        template = getattr(ctx.cluster, "template", None)
        R = ctx.cluster.ranks_per_node
        hit = [list(range(R))] if template is None else node_rings(template)
        ctx.shapes[("node_rings",)] = hit
    return hit


def _node_arcs(ctx: CommContext):
    """The node rings' directed hops merged: (src, dst, rings using it) as local
    rank arrays, or None when no hop carries two rings (nothing to merge).

    Several channels on one NVLink (a fully connected 4-GPU board's 6 rings
    load each NVLink twice) become one flow carrying their bytes: alone, the
    collective takes the same time with half the flows; against other traffic
    on that NVLink the merged flow holds one max-min share, not two.
    """
    key = ("node_arcs",)
    if key in ctx.shapes:
        return ctx.shapes[key]
    rings = _node_rings(ctx)
    count: dict[tuple[int, int], int] = {}
    for ring in rings:
        for i, a in enumerate(ring):
            e = (a, ring[(i + 1) % len(ring)])
            count[e] = count.get(e, 0) + 1
    hit = None
    if len(rings) > 1 and max(count.values()) > 1:
        arcs = list(count)  # first appearance, ring by ring
        hit = (
            np.array([a for a, _ in arcs], dtype=np.int64),
            np.array([b for _, b in arcs], dtype=np.int64),
            np.array([count[e] for e in arcs], dtype=np.float64),
            len(rings),
        )
    ctx.shapes[key] = hit
    return hit


def _whole_node(ctx: CommContext, group: tuple[int, ...]) -> int | None:
    """First rank of the node when ``group`` is exactly one whole node in order."""
    R = ctx.cluster.ranks_per_node
    if len(group) != R or group[0] % R or getattr(ctx.cluster, "template", None) is None:
        return None
    return group[0] if group == tuple(range(group[0], group[0] + R)) else None


def ring_phase(ctx: CommContext, group: tuple[int, ...], step_bytes: float, steps: int) -> Phase:
    """Flows of ``steps`` ring steps of ``step_bytes`` per rank (split over channels)."""
    p = len(group)
    if p < 2 or steps == 0:
        return []
    orders = ring_orders(ctx, group)
    share = step_bytes / len(orders)
    flows = []
    base = _whole_node(ctx, group)
    arcs = _node_arcs(ctx) if base is not None else None
    if arcs is not None:  # one node's rings, parallel channels on one NVLink merged
        ls, ld, cnt, _ = arcs
        lat = protocol_ring_latency(ctx, orders[0], steps) if ctx.active is not None else None
        for a, b, k in zip(ls.tolist(), ld.tolist(), cnt.tolist(), strict=True):
            if lat is not None:
                flows.append(ctx.flow_with_latency(base + a, base + b, share * steps * k, lat))
            else:
                flows.append(ctx.flow(base + a, base + b, share * steps * k, steps))
        return flows
    for order in orders:
        if ctx.active is not None:
            # NCCL as modelled by the protocols: rings cross nodes on one rail (PXN)
            latency = protocol_ring_latency(ctx, order, steps)
            nbytes = share * steps
            for i, src in enumerate(order):
                flows.append(ctx.rail_flow(src, order[(i + 1) % p], nbytes, latency))
            continue
        for i, src in enumerate(order):
            dst = order[(i + 1) % p]
            flows.append(ctx.flow(src, dst, share * steps, steps))
    return flows


def protocol_ring_latency(ctx: CommContext, order: list[int], steps: int) -> np.ndarray:
    """Latency of ``steps`` pipelined ring steps, per protocol (s, a vector).

    As NCCL's tuning model: of the ``steps`` steps, ``steps * (k - 1) / (p - 1)``
    cross the network when ``k`` of the ring's ``p`` hops leave a node (that is
    2(nodes - 1) for an allreduce), at the protocol's ``net`` step latency;
    the others take the mean latency of the ring's intra-node hops, at least
    the protocol's ``net_overhead_s`` when the ring crosses nodes. A ring of one
    rank per node takes the tree's ``net`` step latency, as NCCL's tuner does
    when ranks per node is 1 (the network latency is then fully exposed).
    """
    act = ctx.active
    p = len(order)
    classes = tuple(ctx.hop_class(src, order[(i + 1) % p]) for i, src in enumerate(order))
    key = ("ring_latency", act["family"], classes, steps)
    hit = ctx.shapes.get(key)
    if hit is not None:
        return hit
    intra = [act[c] for c in classes if c != "net"]
    inter = p - len(intra)
    hit = ctx.shapes[key] = _ring_latency(act, intra, inter, p, steps)
    return hit


def _ring_latency(act: dict, intra: list, inter: int, p: int, steps: int) -> np.ndarray:
    return _ring_latency_sum(act, sum(intra) if intra else 0, len(intra), inter, p, steps)


def _ring_latency_sum(act: dict, total, n_intra: int, inter: int, p: int, steps: int):
    """:func:`_ring_latency` from the sum (``total``) of the ``n_intra`` intra-node
    hop latencies, added in ring order."""
    if inter == 0:
        return steps * (total / n_intra)
    if not n_intra:
        # every hop leaves its node (one rank per node): NCCL's ppn == 1 case
        return steps * act["net_ppn1"]
    n_inter = steps * (inter - 1) / (p - 1)
    a_intra = np.maximum(total / n_intra, act["overhead"])
    return (steps - n_inter) * a_intra + n_inter * act["net"]


def _protocol_ring_latency_arrays(
    ctx: CommContext, src: np.ndarray, dst: np.ndarray, steps: int
) -> np.ndarray:
    """:func:`protocol_ring_latency` of the ring whose hops are ``src -> dst``."""
    act = ctx.active
    cls = ctx.hop_classes(src, dst)
    key = ("ring_latency_arrays", act["family"], cls.tobytes(), steps)
    hit = ctx.shapes.get(key)
    if hit is not None:
        return hit
    intra = cls[cls != 2]
    p = int(cls.size)
    total = 0
    if intra.size:
        # added one hop after the other in ring order, as sum() does
        total = np.add.accumulate(np.stack([act["nvlink"], act["pcie"]])[intra], axis=0)[-1]
    hit = _ring_latency_sum(act, total, int(intra.size), p - int(intra.size), p, steps)
    ctx.shapes[key] = hit
    return hit


def ring_batch(ctx: CommContext, call: CollectiveCall, part: Callable) -> list[FlowBatch]:
    """:func:`ring_phase` of every group at once, as one flow batch (the same
    flows, in the same order, as lowering each group and merging the phases).

    ``part(p)`` gives a group of ``p`` ranks its ``(step_bytes, steps)``. Under
    protocols the batch's latency holds one column per protocol.
    """
    srcs, dsts, nbytes, steps_of, lats = [], [], [], [], []
    for g in call.groups:
        p = len(g)
        if p < 2:
            continue
        step_bytes, steps = part(p)
        if steps == 0:
            continue
        orders = ring_orders(ctx, tuple(g))
        share = step_bytes / len(orders)
        base = _whole_node(ctx, tuple(g))
        arcs = _node_arcs(ctx) if base is not None else None
        if arcs is not None:  # as ring_phase: parallel channels on one NVLink merged
            ls, ld, cnt, _ = arcs
            srcs.append(base + ls)
            dsts.append(base + ld)
            nbytes.append(share * steps * cnt)
            steps_of.append(np.full(ls.size, float(steps)))
            if ctx.active is not None:
                first = np.asarray(orders[0], dtype=np.int64)
                lat = _protocol_ring_latency_arrays(ctx, first, np.roll(first, -1), steps)
                lats.append(np.broadcast_to(lat, (ls.size, lat.size)))
            continue
        for order in orders:
            src = np.asarray(order, dtype=np.int64)
            dst = np.roll(src, -1)
            srcs.append(src)
            dsts.append(dst)
            nbytes.append(np.full(p, share * steps))
            steps_of.append(np.full(p, float(steps)))
            if ctx.active is not None:
                lat = _protocol_ring_latency_arrays(ctx, src, dst, steps)
                lats.append(np.broadcast_to(lat, (p, lat.size)))
    if not srcs:
        return []
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    n = src.size
    if ctx.active is not None:
        # NCCL as modelled by the protocols: rings cross nodes on one rail (PXN)
        entry_flow, entry_link = ctx.pxn_routes(src, dst)
        latency = np.concatenate(lats)
    else:
        entry_flow, entry_link = ctx.cluster.routes(src, dst)
        path = ctx.path_latencies(entry_flow, entry_link, n)
        latency = np.concatenate(steps_of) * (path + ctx.per_message_overhead)
    return [FlowBatch(entry_flow, entry_link, np.concatenate(nbytes), latency)]


def allreduce_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`allreduce` of every group at once, as arrays."""
    return ring_batch(ctx, call, lambda p: (call.nbytes / p, 2 * (p - 1)))


def allgather_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`allgather` of every group at once, as arrays."""
    return ring_batch(ctx, call, lambda p: (call.nbytes, p - 1))


def reduce_scatter_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`reduce_scatter` of every group at once, as arrays."""
    return ring_batch(ctx, call, lambda p: (call.nbytes / p, p - 1))


def allreduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    p = len(group)
    return [ring_phase(ctx, group, call.nbytes / p, 2 * (p - 1))] if p > 1 else []


def allgather(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    p = len(group)
    return [ring_phase(ctx, group, call.nbytes, p - 1)] if p > 1 else []


def reduce_scatter(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    p = len(group)
    return [ring_phase(ctx, group, call.nbytes / p, p - 1)] if p > 1 else []

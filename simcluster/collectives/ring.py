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

from simcluster.collectives.base import CollectiveCall, CommContext, Phase

__all__ = [
    "ring_orders",
    "ring_phase",
    "protocol_ring_latency",
    "allreduce",
    "allgather",
    "reduce_scatter",
]


def ring_orders(ctx: CommContext, group: tuple[int, ...]) -> list[list[int]]:
    """One rank order per channel; channel c rotates each node's ranks by c."""
    by_node = ctx.split_by_node(group)
    if len(by_node) <= 1:
        return [list(group)]
    per_node = min(len(ranks) for ranks in by_node)
    channels = max(1, min(ctx.nics_per_node, per_node))
    orders = []
    for c in range(channels):
        order: list[int] = []
        for ranks in by_node:
            k = (c * len(ranks)) // channels
            order.extend(ranks[k:] + ranks[:k])
        orders.append(order)
    return orders


def ring_phase(ctx: CommContext, group: tuple[int, ...], step_bytes: float, steps: int) -> Phase:
    """Flows of ``steps`` ring steps of ``step_bytes`` per rank (split over channels)."""
    p = len(group)
    if p < 2 or steps == 0:
        return []
    orders = ring_orders(ctx, group)
    share = step_bytes / len(orders)
    flows = []
    for order in orders:
        if ctx.active is not None:
            latency = protocol_ring_latency(ctx, order, steps)
            for i, src in enumerate(order):
                dst = order[(i + 1) % p]
                flows.append(ctx.flow_with_latency(src, dst, share * steps, latency))
            continue
        for i, src in enumerate(order):
            dst = order[(i + 1) % p]
            flows.append(ctx.flow(src, dst, share * steps, steps))
    return flows


def protocol_ring_latency(ctx: CommContext, order: list[int], steps: int) -> float:
    """Latency of ``steps`` pipelined ring steps under the active protocol (s).

    As NCCL's tuning model: of the ``steps`` steps, ``steps * (k - 1) / (p - 1)``
    cross the network when ``k`` of the ring's ``p`` hops leave a node (that is
    2(nodes - 1) for an allreduce), at the protocol's ``net`` step latency;
    the others take the mean latency of the ring's intra-node hops, at least
    the protocol's ``net_overhead_s`` when the ring crosses nodes.
    """
    proto, fam = ctx.active
    p = len(order)
    intra: list[float] = []
    inter = 0
    for i, src in enumerate(order):
        c = ctx.hop_class(src, order[(i + 1) % p])
        if c == "net":
            inter += 1
        else:
            intra.append(proto.hop(fam, c))
    if inter == 0:
        return steps * (sum(intra) / len(intra))
    n_inter = steps * (inter - 1) / (p - 1) if p > 1 else 0.0
    a_intra = max(sum(intra) / len(intra), proto.net_overhead_s) if intra else 0.0
    if not intra:
        n_inter = steps
    return (steps - n_inter) * a_intra + n_inter * proto.hop(fam, "net")


def allreduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    p = len(group)
    return [ring_phase(ctx, group, call.nbytes / p, 2 * (p - 1))] if p > 1 else []


def allgather(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    p = len(group)
    return [ring_phase(ctx, group, call.nbytes, p - 1)] if p > 1 else []


def reduce_scatter(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    p = len(group)
    return [ring_phase(ctx, group, call.nbytes / p, p - 1)] if p > 1 else []

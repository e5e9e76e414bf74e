"""Two-level hierarchical allreduce.

intra-node reduce-scatter (ring in every node at once) -> inter-node allreduce
of each 1/g shard (one ring per local index, across nodes, all at once) ->
intra-node allgather. Needs the same number of group ranks on every node.
"""

from __future__ import annotations

from simcluster.collectives import ring
from simcluster.collectives.base import CollectiveCall, CommContext, Phase

__all__ = ["allreduce"]


def allreduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    nodes = ctx.split_by_node(group)
    g = len(nodes[0])
    if any(len(r) != g for r in nodes):
        raise ValueError("hierarchical allreduce needs the same number of ranks on every node")
    n = call.nbytes
    rs = [f for ranks in nodes for f in ring.ring_phase(ctx, tuple(ranks), n / g / g, g - 1)]
    m = len(nodes)
    inter = [
        f
        for j in range(g)
        for f in ring.ring_phase(ctx, tuple(r[j] for r in nodes), n / g / m, 2 * (m - 1))
    ]
    ag = [f for ranks in nodes for f in ring.ring_phase(ctx, tuple(ranks), n / g / g, g - 1)]
    return [p for p in (rs, inter, ag) if p]

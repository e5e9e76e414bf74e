"""Leader-based allreduce: intra-node reduce to a leader, leaders' ring
allreduce across nodes, intra-node broadcast from the leader.

The leader of a node is its first rank in the group (local rank 0), as in the
PRUNEX paper's leader/follower process groups. The node's reduce and broadcast run
as NCCL runs them on the node's communicator, over every channel ring
(:mod:`simcluster.collectives.chain`).
"""

from __future__ import annotations

from simcluster.collectives import chain, ring
from simcluster.collectives.base import CollectiveCall, CommContext, Phase

__all__ = ["allreduce"]


def allreduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    nodes = ctx.split_by_node(group)
    n = call.nbytes
    reduce = [
        f for ranks in nodes for f in chain.channel_chains(ctx, tuple(ranks), 0, n, reverse=True)
    ]
    leaders = tuple(r[0] for r in nodes)
    m = len(leaders)
    inter = ring.ring_phase(ctx, leaders, n / m, 2 * (m - 1)) if m > 1 else []
    bcast = [
        f for ranks in nodes for f in chain.channel_chains(ctx, tuple(ranks), 0, n, reverse=False)
    ]
    return [p for p in (reduce, inter, bcast) if p]

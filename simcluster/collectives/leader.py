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


def _node_chains(ctx: CommContext, ranks: list[int], nbytes: float, reverse: bool) -> Phase:
    """The node's reduce to (``reverse``) or broadcast from its leader as NCCL runs one
    on the node's communicator: over every channel ring of the node, cut open at the
    leader (:func:`~simcluster.collectives.chain.root_chains`)."""
    if len(ranks) < 2:
        return []
    chains = chain.root_chains(ctx, tuple(ranks), 0)
    share = nbytes / len(chains)
    return [f for c in chains for f in chain.chain_phase(ctx, c, share, reverse)]


def allreduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    nodes = ctx.split_by_node(group)
    n = call.nbytes
    reduce = [f for ranks in nodes for f in _node_chains(ctx, ranks, n, reverse=True)]
    leaders = tuple(r[0] for r in nodes)
    m = len(leaders)
    inter = ring.ring_phase(ctx, leaders, n / m, 2 * (m - 1)) if m > 1 else []
    bcast = [f for ranks in nodes for f in _node_chains(ctx, ranks, n, reverse=False)]
    return [p for p in (reduce, inter, bcast) if p]

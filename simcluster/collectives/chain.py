"""Pipelined chain broadcast and reduce (NCCL's ring broadcast / reduce).

The buffer is cut into chunks that stream along a chain of the group's ranks
starting (broadcast) or ending (reduce) at the root. Every link of the chain
carries the whole buffer; the last rank gets the first chunk after P-1
message latencies. Folded into one phase: each hop is a flow of n bytes whose
start-up latency is the chain's depth, so time = (P-1)*alpha + n/B on a
uniform chain.
"""

from __future__ import annotations

from simcluster.collectives.base import CollectiveCall, CommContext, Phase

__all__ = ["chain_phase", "broadcast", "reduce"]


def chain_phase(ctx: CommContext, chain: list[int], nbytes: float, reverse: bool) -> Phase:
    """Concurrent flows along ``chain`` (towards its end, or its start if reverse)."""
    if len(chain) < 2:
        return []
    hops = list(zip(chain[:-1], chain[1:], strict=True))
    if reverse:
        hops = [(b, a) for a, b in reversed(hops)]
    depth = sum(ctx.alpha(a, b) for a, b in hops)
    return [ctx.flow_with_latency(a, b, nbytes, depth) for a, b in hops]


def _chain_from_root(group: tuple[int, ...], root: int) -> list[int]:
    return list(group[root:]) + list(group[:root])


def broadcast(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    phase = chain_phase(ctx, _chain_from_root(group, call.root), call.nbytes, reverse=False)
    return [phase] if phase else []


def reduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    phase = chain_phase(ctx, _chain_from_root(group, call.root), call.nbytes, reverse=True)
    return [phase] if phase else []

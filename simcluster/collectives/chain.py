"""Pipelined chain broadcast and reduce (NCCL's ring broadcast / reduce).

The buffer is cut into chunks that stream along a chain of the group's ranks
starting (broadcast) or ending (reduce) at the root. Every link of the chain
carries the whole buffer; the last rank gets the first chunk after P-1
message latencies. Folded into one phase: each hop is a flow of n bytes whose
start-up latency is the chain's depth, so time = (P-1)*alpha + n/B on a
uniform chain.
"""

from __future__ import annotations

import numpy as np

from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.network.flow import FlowBatch

__all__ = ["chain_phase", "broadcast", "reduce", "broadcast_batch", "reduce_batch"]


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


def _batch(ctx: CommContext, call: CollectiveCall, reverse: bool) -> list[FlowBatch]:
    """:func:`broadcast` (or :func:`reduce` if ``reverse``) of every group at once,
    as one flow batch: the same flows, in the same order, with the same depth
    (the hops' latencies added one after the other, as ``sum`` does)."""
    srcs, dsts, lats = [], [], []
    for g in call.groups:
        chain = np.asarray(_chain_from_root(tuple(g), call.root), dtype=np.int64)
        if chain.size < 2:
            continue
        a, b = chain[:-1], chain[1:]
        if reverse:
            a, b = b[::-1], a[::-1]
        if ctx.active is not None:
            hops = np.stack([ctx.active[c] for c in ("nvlink", "pcie", "net")])
            alpha = hops[ctx.hop_classes(a, b)]
        else:
            f, link = ctx.cluster.routes(a, b)
            alpha = ctx.path_latencies(f, link, a.size) + ctx.per_message_overhead
        depth = np.add.accumulate(alpha, axis=0)[-1]
        srcs.append(a)
        dsts.append(b)
        lats.append(np.broadcast_to(depth, (a.size, *np.shape(depth))))
    if not srcs:
        return []
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    entry_flow, entry_link = ctx.cluster.routes(src, dst)
    nbytes = np.full(src.size, float(call.nbytes))
    return [FlowBatch(entry_flow, entry_link, nbytes, np.concatenate(lats))]


def broadcast_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`broadcast` of every group at once, as arrays."""
    return _batch(ctx, call, reverse=False)


def reduce_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`reduce` of every group at once, as arrays."""
    return _batch(ctx, call, reverse=True)

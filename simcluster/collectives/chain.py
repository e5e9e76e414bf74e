"""Pipelined chain broadcast and reduce (NCCL's ring broadcast / reduce).

The buffer is cut into chunks that stream along a chain of the group's ranks
starting (broadcast) or ending (reduce) at the root. Every link of the chain
carries the whole buffer; the last rank gets the first chunk after P-1
message latencies. Folded into one phase: each hop is a flow of n bytes whose
start-up latency is the chain's depth, so time = (P-1)*alpha + n/B on a
uniform chain.

NCCL runs broadcast and reduce on its rings, split over all its channels as an
allreduce is (NVIDIA/nccl ``src/device/broadcast.h``, ``runRing``:
``ncclCollCbdPart`` gives each channel its own part of the buffer, which moves along
that channel's ring from the root and stops at the rank before it; the tuner's bus
bandwidth is ``nChannels`` times a channel's, ``src/graph/tuning.cc``). So the chains are the
channel rings of :func:`~simcluster.collectives.ring.ring_orders` (a node's NVLink
rings, one ring per NIC rail across nodes), each cut open at the root and carrying
n / channels bytes; a hop between nodes takes NCCL's PXN route under protocols, as
the rings' hops do.
"""

from __future__ import annotations

import numpy as np

from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.collectives.ring import _whole_node, ring_orders
from simcluster.network.flow import FlowBatch

__all__ = [
    "chain_phase",
    "root_chains",
    "channel_chains",
    "broadcast",
    "reduce",
    "broadcast_batch",
    "reduce_batch",
]


def chain_phase(ctx: CommContext, chain: list[int], nbytes: float, reverse: bool) -> Phase:
    """Concurrent flows along ``chain`` (towards its end, or its start if reverse)."""
    if len(chain) < 2:
        return []
    hops = list(zip(chain[:-1], chain[1:], strict=True))
    if reverse:
        hops = [(b, a) for a, b in reversed(hops)]
    depth = sum(ctx.alpha(a, b) for a, b in hops)
    if ctx.active is not None:  # under protocols a hop between nodes stays on its rail
        return [ctx.rail_flow(a, b, nbytes, depth) for a, b in hops]
    return [ctx.flow_with_latency(a, b, nbytes, depth) for a, b in hops]


def root_chains(ctx: CommContext, group: tuple[int, ...], root: int) -> list[list[int]]:
    """One chain per channel: each channel ring of the group cut open at the root
    (``group[root]``), in ring order."""
    r = group[root]
    out = []
    for order in ring_orders(ctx, group):
        k = order.index(r)
        out.append(list(order[k:]) + list(order[:k]))
    return out


def channel_chains(
    ctx: CommContext, group: tuple[int, ...], root: int, nbytes: float, reverse: bool
) -> Phase:
    """A broadcast from (or, ``reverse``, a reduce to) ``group[root]`` as NCCL runs it:
    every channel ring of the group cut open at the root (:func:`root_chains`), each
    carrying ``nbytes`` / channels."""
    if len(group) < 2:
        return []
    chains = root_chains(ctx, group, root)
    share = nbytes / len(chains)
    return [f for c in chains for f in chain_phase(ctx, c, share, reverse)]


def broadcast(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    phase = channel_chains(ctx, group, call.root, call.nbytes, reverse=False)
    return [phase] if phase else []


def reduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    phase = channel_chains(ctx, group, call.root, call.nbytes, reverse=True)
    return [phase] if phase else []


def _batch(ctx: CommContext, call: CollectiveCall, reverse: bool) -> list[FlowBatch]:
    """:func:`broadcast` (or :func:`reduce` if ``reverse``) of every group at once,
    as one flow batch: the same flows, in the same order, with the same depth
    (the hops' latencies added one after the other, as ``sum`` does)."""
    srcs, dsts, lats, sizes = [], [], [], []
    # a whole node's hops depend only on local ranks and on the root's local index:
    # built once per local root, then offset by each node's first rank
    whole: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]] = {}
    for g in call.groups:
        g = tuple(g)
        if len(g) < 2:
            continue
        base = _whole_node(ctx, g)
        local = None if base is None else g[call.root] - base
        hit = whole.get(local) if local is not None else None
        if hit is not None:
            a0, b0, lat0, size0, base0 = hit
            srcs.append(a0 + (base - base0))
            dsts.append(b0 + (base - base0))
            lats.append(lat0)
            sizes.append(size0)
            continue
        ga, gb, glat, gsize = _group_hops(ctx, root_chains(ctx, g, call.root), call.nbytes,
                                          reverse)  # fmt: skip
        if local is not None:
            whole[local] = (ga, gb, glat, gsize, base)
        srcs.append(ga)
        dsts.append(gb)
        lats.append(glat)
        sizes.append(gsize)
    if not srcs:
        return []
    src, dst = np.concatenate(srcs), np.concatenate(dsts)
    if ctx.active is not None:  # as chain_phase: hops between nodes on their rail (PXN)
        entry_flow, entry_link = ctx.pxn_routes(src, dst)
    else:
        entry_flow, entry_link = ctx.cluster.routes(src, dst)
    return [FlowBatch(entry_flow, entry_link, np.concatenate(sizes), np.concatenate(lats))]


def _group_hops(ctx: CommContext, chains: list[list[int]], nbytes: float, reverse: bool):
    """One group's chains as arrays: hop sources, destinations, start-up latencies (the
    chain's depth on every hop; one column per protocol under protocols) and bytes."""
    srcs, dsts, lats, sizes = [], [], [], []
    hops = None
    if ctx.active is not None:  # each protocol's step latency per hop class
        hops = np.stack([ctx.active[k] for k in ("nvlink", "pcie", "net")])
    for c in chains:
        chain = np.asarray(c, dtype=np.int64)
        a, b = chain[:-1], chain[1:]
        if reverse:
            a, b = b[::-1], a[::-1]
        if hops is not None:
            alpha = hops[ctx.hop_classes(a, b)]
        else:
            f, link = ctx.cluster.routes(a, b)
            alpha = ctx.path_latencies(f, link, a.size) + ctx.per_message_overhead
        depth = np.add.accumulate(alpha, axis=0)[-1]
        srcs.append(a)
        dsts.append(b)
        lats.append(np.broadcast_to(depth, (a.size, *np.shape(depth))))
        sizes.append(np.full(a.size, float(nbytes) / len(chains)))
    return np.concatenate(srcs), np.concatenate(dsts), np.concatenate(lats), np.concatenate(sizes)


def broadcast_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`broadcast` of every group at once, as arrays."""
    return _batch(ctx, call, reverse=False)


def reduce_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`reduce` of every group at once, as arrays."""
    return _batch(ctx, call, reverse=True)

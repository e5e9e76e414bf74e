"""Point-to-point sends: every group is a (src, dst) pair, all sent at once."""

from __future__ import annotations

import itertools

import numpy as np

from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.network.flow import FlowBatch

__all__ = ["send", "send_batch", "alltoall", "alltoall_batch"]


def send(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    if len(group) != 2:
        raise ValueError(f"p2p groups are (src, dst) pairs, got {group}")
    src, dst = group
    return [[ctx.flow(src, dst, call.nbytes)]]


def send_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`send` for every group at once: one phase, built as arrays."""
    if not call.groups:
        return []
    flat = getattr(call.groups, "flat", None)  # a program.Groups: its ranks as an array
    if flat is None:
        flat = np.fromiter(itertools.chain.from_iterable(call.groups), dtype=np.int64)
    if flat.size != 2 * len(call.groups):
        bad = next(g for g in call.groups if len(g) != 2)
        raise ValueError(f"p2p groups are (src, dst) pairs, got {bad}")
    return [ctx.flow_batch(flat[0::2], flat[1::2], call.nbytes, memo=True)]


def alltoall_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """All-to-all as NCCL runs it (grouped sends): every rank of a group sends
    ``call.nbytes`` to every other rank of its group at once, one phase."""
    src, dst = [], []
    for g in call.groups:
        ranks = np.asarray(g, dtype=np.int64)
        a, b = np.meshgrid(ranks, ranks, indexing="ij")
        off = a != b
        src.append(a[off])
        dst.append(b[off])
    if not src or sum(x.size for x in src) == 0:
        return []
    return [ctx.flow_batch(np.concatenate(src), np.concatenate(dst), call.nbytes)]


def alltoall(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    """:func:`alltoall_batch` of one group, as flows."""
    return (
        [[ctx.flow(s, d, call.nbytes) for s in group for d in group if s != d]]
        if len(group) > 1
        else []
    )

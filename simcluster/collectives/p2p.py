"""Point-to-point sends: every group is a (src, dst) pair, all sent at once."""

from __future__ import annotations

import itertools

import numpy as np

from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.network.flow import FlowBatch

__all__ = ["send", "send_batch"]


def send(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    if len(group) != 2:
        raise ValueError(f"p2p groups are (src, dst) pairs, got {group}")
    src, dst = group
    return [[ctx.flow(src, dst, call.nbytes)]]


def send_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`send` for every group at once: one phase, built as arrays."""
    if not call.groups:
        return []
    flat = np.fromiter(itertools.chain.from_iterable(call.groups), dtype=np.int64)
    if flat.size != 2 * len(call.groups):
        bad = next(g for g in call.groups if len(g) != 2)
        raise ValueError(f"p2p groups are (src, dst) pairs, got {bad}")
    return [ctx.flow_batch(flat[0::2], flat[1::2], call.nbytes)]

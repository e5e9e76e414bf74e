"""Point-to-point sends: every group is a (src, dst) pair, all sent at once."""

from __future__ import annotations

from simcluster.collectives.base import CollectiveCall, CommContext, Phase

__all__ = ["send"]


def send(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    if len(group) != 2:
        raise ValueError(f"p2p groups are (src, dst) pairs, got {group}")
    src, dst = group
    return [[ctx.flow(src, dst, call.nbytes)]]

"""NCCL's NVLS allreduce: the NVSwitch reduces and multicasts (NVLink SHARP).

On an NVSwitch whose topology sets ``multicast`` (HGX H100 / H200), NCCL's
single-node allreduce can run in the switch: each GPU reduces its 1/P shard
with ``multimem`` loads (the switch reads that shard from every GPU) and writes
the result back once (the switch copies it to every GPU). Per GPU that is
``n + n/P`` bytes up to the switch and ``n/P + n`` bytes down, against
``2(P-1)/P * n`` each way for a ring, whatever P.

Flows: GPU i sends ``(P+1)/P * n / efficiency`` bytes to GPU i+1, so each
GPU's up-link and down-link carry exactly one such flow; ``efficiency`` is the
profile's ``network.protocols.NVLS.efficiency`` (NCCL's ``nvlsEfficiency``),
the latency its ``latency_s`` (NCCL's NVLS latency on NVLink). Only NCCL's
Simple protocol runs NVLS. Units: bytes, seconds.
"""

from __future__ import annotations

import numpy as np

from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.errors import UserError

__all__ = ["available", "allreduce"]


def available(ctx: CommContext, groups) -> bool:
    """Can every group run NVLS: profile numbers, a multicast NVSwitch node, and
    each group of 2+ ranks inside one node (NCCL disables NVLS across nodes
    without CollNet)."""
    template = getattr(ctx.cluster, "template", None)
    if ctx.nvls is None or template is None or not getattr(template, "multicast", False):
        return False
    R = ctx.cluster.ranks_per_node
    return all(
        len(g) >= 2 and g[0] // R == g[-1] // R == min(g) // R == max(g) // R for g in groups
    )


def allreduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    if not available(ctx, (group,)):
        raise UserError(
            "allreduce algorithm 'nvls' needs a network profile with protocols.NVLS and "
            "ranks of one NVSwitch node whose topology sets nvswitch.multicast: true"
        )
    p = len(group)
    nvls = ctx.nvls
    assert nvls is not None
    nbytes = call.nbytes * (p + 1) / p / nvls.efficiency
    lat = nvls.latency_s
    if ctx.active is not None:  # one latency per protocol; only Simple is offered
        lat = np.full(ctx.active["overhead"].shape, lat)
    return [
        [ctx.flow_with_latency(src, group[(i + 1) % p], nbytes, lat) for i, src in enumerate(group)]
    ]

"""Recursive halving-doubling allreduce (Rabenseifner) for power-of-two groups.

log2(P) reduce-scatter rounds exchanging n/2, n/4, ... bytes with partners at
distance P/2, P/4, ..., then log2(P) allgather rounds in reverse. Each round is
one phase of pairwise exchanges.
"""

from __future__ import annotations

from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.errors import UserError

__all__ = ["allreduce"]


def allreduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    p = len(group)
    if p < 2:
        return []
    if p & (p - 1):
        raise UserError(  # a scenario choice, not a model bug: one line, exit 2
            f"algorithm halving-doubling needs a power-of-two group, got {p} ranks; "
            "choose ring, tree or auto for this size"
        )
    phases: list[Phase] = []
    size = call.nbytes
    dist = p // 2
    rounds = []
    while dist >= 1:
        size /= 2
        rounds.append((dist, size))
        dist //= 2
    for dist, chunk in rounds + rounds[::-1]:
        phases.append([ctx.flow(group[i], group[i ^ dist], chunk) for i in range(p)])
    return phases

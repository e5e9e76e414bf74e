"""Recursive halving-doubling allreduce (Rabenseifner).

``halving-doubling`` (power-of-two groups): log2(P) reduce-scatter rounds
exchanging n/2, n/4, ... bytes with partners at distance P/2, P/4, ..., then
log2(P) allgather rounds in reverse. ``rabenseifner``: Open MPI's version for any
group size (see :func:`rabenseifner`). Each round is one phase of pairwise
exchanges.
"""

from __future__ import annotations

from collections.abc import Sequence

from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.errors import UserError

__all__ = ["allreduce", "rabenseifner"]


def allreduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    p = len(group)
    if p < 2:
        return []
    if p & (p - 1):
        raise UserError(  # a scenario choice, not a model bug: one line, exit 2
            f"algorithm halving-doubling needs a power-of-two group, got {p} ranks; "
            "choose ring, tree or auto for this size"
        )
    return _halving_doubling(ctx, group, call.nbytes, [p >> k for k in range(1, p.bit_length())])


def _halving_doubling(
    ctx: CommContext, ranks: Sequence[int], nbytes: float, distances: list[int]
) -> list[Phase]:
    """A reduce-scatter by recursive halving over the power-of-two ``ranks``, rank i
    exchanging n/2, n/4, ... bytes with rank i ^ d for each of ``distances`` in turn,
    then the allgather back: the same rounds in reverse, one phase each."""
    rounds = []
    size = nbytes
    for d in distances:
        size /= 2
        rounds.append((d, size))
    return [
        [ctx.flow(ranks[i], ranks[i ^ d], chunk) for i in range(len(ranks))]
        for d, chunk in rounds + rounds[::-1]
    ]


def rabenseifner(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    """Open MPI's reduce-scatter + allgather allreduce for any group size.

    Open MPI's ``ompi_coll_base_allreduce_intra_redscat_allgather``
    (``ompi/mca/coll/base/coll_base_allreduce.c``; the tuned component's algorithm 6,
    which its fixed decision rules pick since v4.1.0 for commutative operations above
    a few KB on 4 to 63 ranks, ``coll_tuned_decision_fixed.c``). With p' the largest
    power of two <= P and r = P - p':

    1. the first 2r ranks pair up (2i, 2i+1): each sends the other half of its
       vector (n/2 both ways), then the odd rank sends its reduced half to the even
       one (n/2) and drops out;
    2. the p' remaining ranks (virtual rank v is rank 2v for v < r, else v + r) run
       a reduce-scatter by recursive vector halving and distance doubling (n/2, n/4,
       ... with partners at distance 1, 2, 4, ...), then 3. an allgather in reverse;
    4. each even rank of step 1 sends the whole result (n) to its odd partner.

    On one switch with per-message latency alpha and bandwidth B that is
    ``2 log2(p') alpha + 2 (1 - 1/p') n / B``, plus ``3 alpha + 2 n / B`` when r > 0:
    a group of 12 moves 3.75 n per rank on its critical path where 8 moves 1.75 n
    and 16 moves 1.875 n. Power-of-two groups run the same rounds as
    ``halving-doubling`` with the partners in the opposite order.
    """
    p = len(group)
    if p < 2:
        return []
    p2 = 1 << (p.bit_length() - 1)
    rem = p - p2
    n = call.nbytes
    phases: list[Phase] = []
    if rem:
        pairs = [(group[2 * i], group[2 * i + 1]) for i in range(rem)]
        phases.append(
            [ctx.flow(a, b, n / 2) for a, b in pairs] + [ctx.flow(b, a, n / 2) for a, b in pairs]
        )
        phases.append([ctx.flow(b, a, n / 2) for a, b in pairs])
    real = [group[2 * v] if v < rem else group[v + rem] for v in range(p2)]
    phases += _halving_doubling(ctx, real, n, [1 << k for k in range(p2.bit_length() - 1)])
    if rem:
        phases.append([ctx.flow(a, b, n) for a, b in pairs])
    return phases

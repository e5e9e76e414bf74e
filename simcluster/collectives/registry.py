"""Algorithm registry, NCCL-like automatic choice, and lowering to phases.

``lower(ctx, call)`` picks the algorithm (the call's, or the cheapest
candidate for ``auto``) and returns the phases of every group merged phase by
phase, so that concurrent groups contend for links within each phase.

The automatic choice, like NCCL's tuner, compares the candidates' predicted
times for this size and group shape: each candidate's phases are timed in
isolation with max-min rates fixed at their start (a static estimate); ties
go to the first candidate (ring).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simcluster.collectives import chain, halving_doubling, hierarchical, leader, p2p, ring, tree
from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.network.flow import FlowBatch
from simcluster.registry import Registry

__all__ = ["ALGORITHMS", "AUTO_CANDIDATES", "lower", "estimate_phases", "algorithms_for"]

Lowering = Callable[[CommContext, CollectiveCall, tuple[int, ...]], list[Phase]]


def _algorithms(op: str, table: dict[str, Lowering]) -> Registry[Lowering]:
    reg: Registry[Lowering] = Registry(f"{op} algorithm")
    for name, fn in table.items():
        reg.add(name, fn)
    return reg


#: op -> its algorithms by name (each a :class:`simcluster.registry.Registry` whose kind
#: is ``"<op> algorithm"``, so schedule options can name it with ``Registered``)
ALGORITHMS: dict[str, Registry[Lowering]] = {
    "allreduce": _algorithms(
        "allreduce",
        {
            "ring": ring.allreduce,
            "tree": tree.allreduce,
            "hierarchical": hierarchical.allreduce,
            "leader": leader.allreduce,
            "halving-doubling": halving_doubling.allreduce,
        },
    ),
    "allgather": _algorithms("allgather", {"ring": ring.allgather}),
    "reduce_scatter": _algorithms("reduce_scatter", {"ring": ring.reduce_scatter}),
    "broadcast": _algorithms("broadcast", {"chain": chain.broadcast}),
    "reduce": _algorithms("reduce", {"chain": chain.reduce}),
    "p2p": _algorithms("p2p", {"direct": p2p.send}),
}

#: Lowerings that build every group's flows as arrays in one call (many groups).
BATCH_LOWERINGS: dict[tuple[str, str], Callable[[CommContext, CollectiveCall], list[FlowBatch]]] = {
    ("p2p", "direct"): p2p.send_batch,
}

#: What ``auto`` chooses among, in tie-break order (NCCL's ring and tree).
AUTO_CANDIDATES: dict[str, tuple[str, ...]] = {"allreduce": ("ring", "tree")}


def algorithms_for(op: str) -> list[str]:
    return sorted(ALGORITHMS[op])


def estimate_phases(ctx: CommContext, phases: list[FlowBatch] | list[Phase]) -> float:
    """Seconds for the phases in isolation, rates fixed at each phase's start."""
    total = 0.0
    for phase in phases:
        batch = phase if isinstance(phase, FlowBatch) else FlowBatch.from_flows(phase)
        if batch.num_flows == 0:
            continue
        rates = batch.static_rates(ctx.capacity)
        with np.errstate(divide="ignore", invalid="ignore"):
            move = np.where(batch.nbytes > 0, batch.nbytes / rates, 0.0)
        total += float((batch.latency + move).max())
    return total


def _merge(per_group: list[list[Phase]]) -> list[Phase]:
    depth = max((len(p) for p in per_group), default=0)
    return [[f for phases in per_group if k < len(phases) for f in phases[k]] for k in range(depth)]


def _shape(ctx: CommContext, call: CollectiveCall, name: str) -> list[FlowBatch]:
    """Phases of ``call`` for one byte, as arrays; cached per cluster context.

    Every algorithm's bytes are linear in the message size, so the flows,
    routes and latencies are computed once per (op, groups, algorithm, root).
    """
    key = (call.op, call.groups, name, call.root)
    hit = ctx.shapes.get(key)
    if hit is None:
        unit = CollectiveCall(call.op, call.groups, 1.0, name, call.root)
        batched = BATCH_LOWERINGS.get((call.op, name))
        if batched is not None:
            hit = batched(ctx, unit)
        else:
            fn = ALGORITHMS[call.op][name]
            phases = _merge([fn(ctx, unit, tuple(g)) for g in call.groups])
            hit = [FlowBatch.from_flows(p) for p in phases if p]
        ctx.shapes[key] = hit
    return hit


def _lower_with(ctx: CommContext, call: CollectiveCall, name: str) -> list[FlowBatch]:
    return [b.scaled(call.nbytes) for b in _shape(ctx, call, name)]


def lower(ctx: CommContext, call: CollectiveCall) -> tuple[str, list[FlowBatch]]:
    """(algorithm used, phases as flow batches) for ``call``."""
    table = ALGORITHMS[call.op]
    if call.algorithm != "auto":
        table.lookup(call.algorithm)  # unknown name: UnknownNameError
        return call.algorithm, _lower_with(ctx, call, call.algorithm)
    candidates = AUTO_CANDIDATES.get(call.op, (next(iter(table)),))
    if len(candidates) == 1 or all(len(g) <= 2 for g in call.groups):
        return candidates[0], _lower_with(ctx, call, candidates[0])
    best: tuple[float, str, list[FlowBatch]] | None = None
    for name in candidates:
        phases = _lower_with(ctx, call, name)
        t = estimate_phases(ctx, phases)
        if best is None or t < best[0] * (1 - 1e-9):
            best = (t, name, phases)
    assert best is not None
    return best[1], best[2]

"""Algorithm registry, NCCL-like automatic choice, and lowering to phases.

``lower(ctx, call)`` picks the algorithm (the call's, or the cheapest
candidate for ``auto``) and returns the phases of every group merged phase by
phase, so that concurrent groups contend for links within each phase.

The automatic choice, like NCCL's tuner, compares the candidates' predicted
times for this size and group shape: each candidate's phases are timed in
isolation with max-min rates fixed at their start (a static estimate), the
tree's edges at no more than NCCL's per-channel tree bandwidth where the
profile gives it (``tree.TUNER_RATE_CAP``); ties go to the first candidate
(ring). A candidate whose lower bound from the group
shape (``bounds.py``) exceeds the best estimate is not lowered.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from simcluster.collectives import (
    chain,
    halving_doubling,
    hierarchical,
    leader,
    nccl24,
    nvls,
    p2p,
    ring,
    tree,
)
from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.collectives.bounds import lower_bounds
from simcluster.collectives.protocols import family_of, tree_correction
from simcluster.errors import UnknownNameError
from simcluster.network.flow import FlowBatch, one_value
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
            "rabenseifner": halving_doubling.rabenseifner,
            "nvls": nvls.allreduce,
        },
    ),
    "allgather": _algorithms("allgather", {"ring": ring.allgather}),
    "reduce_scatter": _algorithms("reduce_scatter", {"ring": ring.reduce_scatter}),
    "broadcast": _algorithms("broadcast", {"chain": chain.broadcast}),
    "reduce": _algorithms("reduce", {"chain": chain.reduce}),
    "p2p": _algorithms("p2p", {"direct": p2p.send}),
    "alltoall": _algorithms("alltoall", {"direct": p2p.alltoall}),
}

#: Lowerings that build every group's flows as arrays in one call (many groups).
BATCH_LOWERINGS: dict[tuple[str, str], Callable[[CommContext, CollectiveCall], list[FlowBatch]]] = {
    ("p2p", "direct"): p2p.send_batch,
    ("alltoall", "direct"): p2p.alltoall_batch,
    ("allreduce", "ring"): ring.allreduce_batch,
    ("allgather", "ring"): ring.allgather_batch,
    ("reduce_scatter", "ring"): ring.reduce_scatter_batch,
    ("allreduce", "tree"): tree.allreduce_batch,
    ("broadcast", "chain"): chain.broadcast_batch,
    ("reduce", "chain"): chain.reduce_batch,
}

#: Batch lowerings that route through the context's route memo (an SpMV layer's
#: exchange: ~65,000 node pairs, a different set every call). Without protocols their
#: phases are kept neither as shapes nor by the engine (see :func:`kept`): lowering
#: one again is a memo lookup, while keeping every call's arrays (~8 MB an exchange)
#: to the end of the run made each later call's arrays fresh memory, whose first
#: touches cost more than the lookups saved.
UNKEPT_LOWERINGS: frozenset[tuple[str, str]] = frozenset({("p2p", "direct")})

#: estimates within this relative margin of the least count as ties (earliest wins)
_TIE = 1e-9

#: What ``auto`` chooses among, in tie-break order (NCCL's ring and tree).
AUTO_CANDIDATES: dict[str, tuple[str, ...]] = {"allreduce": ("ring", "tree")}
#: Candidates ``auto`` adds where they can run (:func:`nvls.available`).
AUTO_WHERE_AVAILABLE: dict[str, tuple[str, ...]] = {"allreduce": ("nvls",)}
#: Algorithms that run under one protocol only, with their own bandwidth and
#: latency numbers (the protocol's fraction and base latency do not apply).
SINGLE_PROTOCOL: dict[str, str] = {"nvls": "Simple"}


def algorithms_for(op: str) -> list[str]:
    return sorted(ALGORITHMS[op])


def estimate_phases(ctx: CommContext, phases: list[FlowBatch] | list[Phase]) -> float:
    """Seconds for the phases in isolation, rates fixed at each phase's start."""
    total = 0.0
    for phase in phases:
        batch = phase if isinstance(phase, FlowBatch) else FlowBatch.from_flows(phase)
        if batch.num_flows == 0:
            continue
        rates = _tuner_rates(ctx, batch)
        with np.errstate(divide="ignore", invalid="ignore"):
            move = np.where(batch.nbytes > 0, batch.nbytes / rates, 0.0)
        total += float((batch.latency + move).max())
    return total


def _tuner_rates(ctx: CommContext, batch: FlowBatch) -> np.ndarray:
    """Static max-min rates, capped where the lowering set NCCL's tuner cap
    (:data:`tree.TUNER_RATE_CAP`: the tree's per-channel bandwidth)."""
    rates = batch.static_rates(ctx.capacity)
    cap = batch._cache.get(tree.TUNER_RATE_CAP)
    return rates if cap is None else np.minimum(rates, cap)


def _merge(per_group: list[list[Phase]]) -> list[Phase]:
    depth = max((len(p) for p in per_group), default=0)
    return [[f for phases in per_group if k < len(phases) for f in phases[k]] for k in range(depth)]


def _batch(flows: Phase) -> tuple[FlowBatch, np.ndarray]:
    """A phase's flows as a batch, and their latencies as given (scalars or
    one vector per flow while lowering under protocols)."""
    n = len(flows)
    lengths = np.fromiter((len(f.links) for f in flows), dtype=np.int64, count=n)
    entry_flow = np.repeat(np.arange(n, dtype=np.int64), lengths)
    entry_link = np.fromiter(
        (link for f in flows for link in f.links), dtype=np.int64, count=int(lengths.sum())
    )
    nbytes = np.fromiter((f.nbytes for f in flows), dtype=np.float64, count=n)
    lat = np.array([f.latency for f in flows], dtype=np.float64)
    return FlowBatch(entry_flow, entry_link, nbytes, np.zeros(n)), lat


def kept(ctx: CommContext, call: CollectiveCall) -> bool:
    """Whether ``call``'s lowering is worth keeping for later identical calls: not for
    the :data:`UNKEPT_LOWERINGS` on a network profile without protocols."""
    name = call.algorithm
    if name == "auto":
        name = AUTO_CANDIDATES.get(call.op, (next(iter(ALGORITHMS[call.op])),))[0]
    return bool(ctx.protocols) or (call.op, name) not in UNKEPT_LOWERINGS


def _shape(
    ctx: CommContext, call: CollectiveCall, name: str, protocol: str | None = None
) -> list[FlowBatch]:
    """Phases of ``call`` for one byte, as arrays; cached per cluster context.

    Every algorithm's bytes are linear in the message size, so the flows,
    routes and latencies are computed once per (op, groups, algorithm, root)
    and, with protocols, for all of them in one lowering. Under a protocol
    the flows carry ``1 / bandwidth_fraction`` wire bytes per payload byte and
    the first phase also pays the protocol's base latency; the protocols of
    one shape share its links, so their static max-min rates are computed once.
    """
    unkept = protocol is None and (call.op, name) in UNKEPT_LOWERINGS
    key = (call.op, call.groups, name, call.root, protocol)
    hit = None if unkept else ctx.shapes.get(key)  # never kept: no hash of its groups
    if hit is not None:
        return hit
    unit = CollectiveCall(call.op, call.groups, 1.0, name, call.root)
    with ctx.lowering(None if protocol is None else name):
        batched = BATCH_LOWERINGS.get((call.op, name))
        if batched is not None:
            pairs = [(b, b.latency) for b in batched(ctx, unit)]
        else:
            fn = ALGORITHMS[call.op][name]
            phases = _merge([fn(ctx, unit, tuple(g)) for g in call.groups])
            pairs = [_batch(p) if protocol is not None else (FlowBatch.from_flows(p), None)
                     for p in phases if p]  # fmt: skip
    if protocol is None:
        hit = [b for b, _ in pairs]
        if not unkept:
            ctx.shapes[key] = hit
        return hit
    fam = family_of(name)
    for i, (pname, proto) in enumerate(ctx.protocols.items()):
        wire = 1.0 / proto.bandwidth_fraction[fam]
        base = proto.base_latency_s[fam]
        if name in SINGLE_PROTOCOL:  # its own numbers (e.g. NVLS), already in the flows
            wire, base = 1.0, 0.0
        out = []
        for k, (b, lat) in enumerate(pairs):
            lat = np.asarray(lat, dtype=np.float64)
            col = lat[:, i] if lat.ndim == 2 else lat
            v = FlowBatch(b.entry_flow, b.entry_link, b.nbytes * wire, col + base * (k == 0))
            v._cache = b._cache  # same links: rates computed once for every protocol
            out.append(v)
        ctx.shapes[(*key[:-1], pname)] = out
    return ctx.shapes[key]


def _lower_with(
    ctx: CommContext, call: CollectiveCall, name: str, protocol: str | None = None
) -> list[FlowBatch]:
    out = [b.scaled(call.nbytes) for b in _shape(ctx, call, name, protocol)]
    delay = _tree_delay(ctx, call, name, protocol)
    if delay > 0:  # the first phase starts later; its flows' bytes and links are unchanged
        i = next((k for k, b in enumerate(out) if b.num_flows), None)
        if i is not None:
            out[i] = out[i].delayed(delay)
    return out


def _tree_delay(
    ctx: CommContext,
    call: CollectiveCall,
    name: str,
    protocol: str | None,
    estimate: float | None = None,
) -> float:
    """Seconds NCCL's size correction of the tree allreduce adds (network profile's
    ``tree_correction``, :func:`~simcluster.collectives.protocols.tree_correction`):
    the tuner divides the tree's bandwidth by a factor ``f <= 1`` at mid sizes, so the
    time to move the bytes, estimated as the tuner does (the estimate at the call's size,
    ``estimate`` when the caller has it, less the one at 0 bytes), grows by ``1 / f - 1``
    of itself. It is added as a delay, not as bytes: the links carry what they carried."""
    if call.op != "allreduce" or protocol is None or not ctx.tree_correction:
        return 0.0
    if family_of(name) != "tree":
        return 0.0
    f = tree_correction(ctx.tree_correction, protocol, call.nbytes)
    if f >= 1.0:
        return 0.0
    if estimate is None:
        estimate = _estimate_at(ctx, call, name, protocol, call.nbytes)
    move = estimate - _estimate_at(ctx, call, name, protocol, 0.0)
    return max(move, 0.0) * (1.0 / f - 1.0)


def _protocols(ctx: CommContext, call: CollectiveCall, name: str = "") -> list[str | None]:
    """Protocols to consider for ``call`` run as ``name``: none without profile
    protocols; an algorithm of :data:`SINGLE_PROTOCOL` only its own."""
    if not ctx.protocols:
        return [None]
    only = SINGLE_PROTOCOL.get(name)
    if only is not None:
        return [only] if call.protocol in ("auto", only) and only in ctx.protocols else []
    if call.protocol == "auto":
        return list(ctx.protocols)
    if call.protocol not in ctx.protocols:
        raise UnknownNameError("protocol", call.protocol, [*ctx.protocols, "auto"])
    return [call.protocol]


def _label(name: str, protocol: str | None) -> str:
    return name if protocol is None else f"{name}/{protocol}"


def lower(ctx: CommContext, call: CollectiveCall) -> tuple[str, list[FlowBatch]]:
    """(algorithm used, phases as flow batches) for ``call``.

    The algorithm reads ``ring/LL128`` when the network profile has protocols.
    ``auto`` (algorithm, protocol or both) takes the candidate with the least
    estimated time, as NCCL's tuner does; estimates within ``_TIE`` (relative)
    of the least go to the earliest candidate. Candidates are lowered in
    order of their :func:`~simcluster.collectives.bounds.lower_bound`, and
    one whose bound exceeds the best estimate so far is not lowered at all.
    """
    table = ALGORITHMS[call.op]
    if call.algorithm != "auto":
        table.lookup(call.algorithm)  # unknown name: UnknownNameError
    if ctx.selection == nccl24.SELECTION and nccl24.supports(call.op) and ctx.protocols:
        name, proto = _nccl24_choice(ctx, call)
        _protocols(ctx, call, name)  # a protocol the profile lacks: UnknownNameError
        return _label(name, proto), _lower_with(ctx, call, name, proto)
    if call.algorithm != "auto":
        names: tuple[str, ...] = (call.algorithm,)
    else:
        names = AUTO_CANDIDATES.get(call.op, (next(iter(table)),))
        if all(len(g) <= 2 for g in call.groups):
            names = names[:1]
        elif call.op in AUTO_WHERE_AVAILABLE and nvls.available(ctx, call.groups):
            names = names + AUTO_WHERE_AVAILABLE[call.op]
    protocols = _protocols(ctx, call, names[0])
    if len(names) == 1 and len(protocols) == 1:
        return _label(names[0], protocols[0]), _lower_with(ctx, call, names[0], protocols[0])
    cands = [(name, proto) for name in names for proto in _protocols(ctx, call, name)]
    if not cands:  # e.g. an algorithm of one protocol asked to run another
        raise UnknownNameError("protocol", call.protocol, [SINGLE_PROTOCOL[names[0]]])
    # cands are in tie-break order
    bounds = lower_bounds(ctx, call, cands)
    found: dict[int, float] = {}
    t_min = np.inf
    for i in sorted(range(len(cands)), key=bounds.__getitem__):
        if bounds[i] > t_min * (1 + _TIE):
            break  # this one and every later one cannot win: never lowered
        t = _estimate_shape(ctx, call, *cands[i])
        found[i] = t
        t_min = min(t_min, t)
    win = min(i for i, t in found.items() if t <= t_min * (1 + _TIE))
    return _label(*cands[win]), _lower_with(ctx, call, *cands[win])


def _nccl24_choice(ctx: CommContext, call: CollectiveCall) -> tuple[str, str]:
    """(algorithm, protocol) as NCCL 2.4 chooses (:mod:`nccl24`), from the first group
    of 2+ ranks (the groups of one call are alike); its channels are the ring's."""
    group = next((tuple(g) for g in call.groups if len(g) > 1), tuple(call.groups[0]))
    nodes = len(ctx.split_by_node(group))
    channels = len(ring.ring_orders(ctx, group)) if len(group) > 1 else 1
    R = ctx.cluster.ranks_per_node
    has_template = getattr(ctx.cluster, "template", None) is not None
    nvlink = has_template and R > 1 and bool(ctx._local_nvlink_only[~np.eye(R, dtype=bool)].any())
    name, proto = nccl24.choose(
        call.op, call.nbytes, len(group), nodes, channels, nvlink, ctx.one_process,
        call.algorithm, call.protocol,
    )  # fmt: skip
    if name is None:
        name = next(iter(ALGORITHMS[call.op]))
    return name, proto


def _envelope(ctx: CommContext, batch: FlowBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(latency, unit bytes, static rate) of the flows of a unit-byte phase that
    can be its slowest at some size: per distinct latency, the flow with the
    most seconds per byte (all flows when latencies are many). Cached."""
    # the protocols of one shape share its cache (links, rates): key by batch too
    key = ("envelope", id(ctx.capacity), id(batch))
    hit = batch._cache.get(key)
    if hit is None:
        rates = _tuner_rates(ctx, batch)
        lat = np.asarray(batch.latency, dtype=np.float64)
        if lat.shape != rates.shape:  # (a per-flow latency needs no broadcast)
            lat = np.broadcast_to(lat, rates.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            per_byte = np.where(batch.nbytes > 0, batch.nbytes / rates, 0.0)
        if one_value(lat):
            values, group = lat[:1], np.zeros(lat.size, dtype=np.intp)  # np.unique's answer
        else:
            values, group = np.unique(lat, return_inverse=True)
        if values.size * 64 < lat.size:
            order = np.lexsort((per_byte, group))  # by group, then seconds per byte
            if values.size == 1:  # one group: its last flow
                keep = order[-1:]
            else:
                last = np.flatnonzero(np.r_[group[order][1:] != group[order][:-1], True])
                keep = order[last]
        else:
            keep = np.arange(lat.size)
        hit = (lat[keep].copy(), batch.nbytes[keep].copy(), rates[keep].copy())
        batch._cache[key] = hit
    return hit


#: envelopes of at most this many flows are estimated in Python floats
_FEW = 8


def _envelope_rows(ctx: CommContext, batch: FlowBatch) -> list[tuple[float, float, float]] | None:
    """:func:`_envelope` as (latency, unit bytes, rate) rows when it has at most
    :data:`_FEW` flows (numpy's fixed cost per call outweighs the arithmetic), else None.
    Cached."""
    key = ("envelope_rows", id(ctx.capacity), id(batch))
    hit = batch._cache.get(key, False)
    if hit is False:
        lat, unit, rates = _envelope(ctx, batch)
        rows = list(zip(lat.tolist(), unit.tolist(), rates.tolist(), strict=True))
        hit = batch._cache[key] = rows if len(rows) <= _FEW else None
    return hit


def _slowest(rows: list[tuple[float, float, float]], nbytes: float) -> float:
    """``max(latency + nbytes x unit / rate)`` over ``rows`` (0 s to move 0 bytes), the
    same IEEE operations as the array form in :func:`_estimate_shape` (a zero rate
    gives inf, a NaN anywhere gives NaN, as numpy's do)."""
    best = -math.inf
    for lat, unit, rate in rows:
        b = unit * nbytes
        if b > 0:
            t = lat + (b / rate if rate != 0 else math.inf)
        else:
            t = lat + 0.0
        if t != t:
            return math.nan
        if t > best:
            best = t
    return best


def _estimate_shape(
    ctx: CommContext, call: CollectiveCall, name: str, protocol: str | None
) -> float:
    """:func:`estimate_phases` of ``call`` lowered by ``name`` under ``protocol``,
    from the cached envelope of its unit-byte shape (the same arithmetic on the
    flows that can be slowest), plus the tree allreduce's size correction
    (:func:`_tree_delay`)."""
    t = _estimate_at(ctx, call, name, protocol, call.nbytes)
    return t + _tree_delay(ctx, call, name, protocol, t)


def _estimate_at(
    ctx: CommContext, call: CollectiveCall, name: str, protocol: str | None, size: float
) -> float:
    """:func:`_estimate_shape` for ``size`` bytes instead of ``call.nbytes``, without
    the size correction."""
    total = 0.0
    for b in _shape(ctx, call, name, protocol):
        if b.num_flows == 0:
            continue
        rows = _envelope_rows(ctx, b)
        if rows is not None:
            total += _slowest(rows, size)
            continue
        lat, unit, rates = _envelope(ctx, b)
        nbytes = unit * size
        with np.errstate(divide="ignore", invalid="ignore"):
            move = np.where(nbytes > 0, nbytes / rates, 0.0)
        total += float((lat + move).max())
    return total

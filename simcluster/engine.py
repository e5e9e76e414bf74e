"""The discrete-event engine: runs rank programs over a network backend.

Each rank class gets one SimPy process per stream; a stream runs its ops in
program order, each after its dependencies. A compute op holds its stream for
its duration. A collective op arrives at a rendezvous; when every class that
holds an op with that id has arrived, the collective is lowered to phases
(:mod:`simcluster.collectives`) and its phases run one after another on the
network backend. Every op leaves a span in the :class:`Trace`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import simpy
from simpy.events import NORMAL

from simcluster.collectives import CollectiveCall, CommContext, lower
from simcluster.collectives.registry import kept
from simcluster.errors import SimclusterError
from simcluster.network import make_network
from simcluster.program import _TIMED_STREAMS, Op, ProgramError, RankClass

__all__ = ["Engine", "Span", "Trace", "SimulationError"]


class SimulationError(SimclusterError, RuntimeError):
    """The programs cannot finish (a collective some class never reaches)."""


class Span(NamedTuple):
    """One op's execution: who, where, what, when (seconds)."""

    rank_class: str
    stream: str
    op: str
    category: str
    start: float
    end: float
    bytes: float = 0.0
    algorithm: str = ""


def _span_key(row: tuple) -> tuple:
    return (row[4], row[0], row[1], row[2])  # start, rank_class, stream, op


@dataclass
class Trace:
    """Everything one simulation produced.

    rows: one tuple per executed op, in :class:`Span` field order (the engine
    appends plain tuples; :attr:`spans` and :meth:`class_spans` build Span
    objects on first use, sorted by start, class, stream, op).
    """

    rows: list[tuple] = field(default_factory=list, repr=False)
    end_time: float = 0.0
    inter_node_bytes: float = 0.0
    flows: int = 0
    rate_updates: int = 0
    events: int = 0
    classes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    _by_class: dict[str, list[tuple]] | None = field(default=None, repr=False)
    _spans: list[Span] | None = field(default=None, repr=False)
    _net_spans: dict[str, float] | None = field(default=None, repr=False)

    @property
    def spans(self) -> list[Span]:
        """Every op's span, sorted by start time (then class, stream, op)."""
        if self._spans is None:
            self._spans = [Span._make(r) for r in sorted(self.rows, key=_span_key)]
        return self._spans

    def class_spans(self, name: str) -> list[Span]:
        """The spans of one rank class (or ``<network>``), sorted like :attr:`spans`."""
        if self._by_class is None:
            index: dict[str, list[tuple]] = {}
            for r in self.rows:
                rows = index.get(r[0])
                if rows is None:
                    rows = index[r[0]] = []
                rows.append(r)
            self._by_class = index
        return [Span._make(r) for r in sorted(self._by_class.get(name, ()), key=_span_key)]

    def busy_time(self, name: str, stream: str) -> float:
        """Seconds a stream of a class spent executing ops (spans never overlap)."""
        return sum(s.end - s.start for s in self.class_spans(name) if s.stream == stream)

    def by_algorithm(self) -> dict[str, float]:
        """Seconds of collectives per algorithm label (``ring/LL128``), summed."""
        out: dict[str, float] = {}
        for row in self.rows:
            if row[0] == "<network>":
                out[row[7]] = out.get(row[7], 0.0) + (row[5] - row[4])
        return dict(sorted(out.items()))

    def by_category(self, name: str, net: bool = False) -> dict[str, float]:
        """Seconds per category of a class's ops, as the class books them.

        A collective is booked from the class's arrival to the call's end, so
        it holds the wait for the call's last participant; ``net`` books it
        from that last arrival instead (the call's own span on the network: what
        a timer started after the group has met would see). Compute ops are the
        same either way. Both come from :meth:`category_seconds`.
        """
        booked, netted = self.category_seconds(name)
        return netted if net else booked

    def category_seconds(self, name: str) -> tuple[dict[str, float], dict[str, float]]:
        """``(booked, net)`` seconds per category of a class's ops in one pass over its
        spans (see :meth:`by_category`)."""
        if self._net_spans is None:
            self._net_spans = {r[2]: r[5] - r[4] for r in self.rows if r[0] == "<network>"}
        span = self._net_spans
        booked: dict[str, float] = {}
        netted: dict[str, float] = {}
        for s in self.class_spans(name):
            d = s.end - s.start
            booked[s.category] = booked.get(s.category, 0.0) + d
            if s.bytes > 0 and s.op in span:
                d = min(d, span[s.op])
            netted[s.category] = netted.get(s.category, 0.0) + d
        return booked, netted


class _Rendezvous:
    __slots__ = ("call", "expected", "arrived", "done", "category", "opid", "at")

    def __init__(self, env: simpy.Environment, op: Op, expected: int) -> None:
        self.call: CollectiveCall = op.call  # type: ignore[assignment]
        self.expected = expected
        self.arrived = 0
        self.done = env.event()
        self.category = op.category
        self.opid = op.id
        self.at = 0.0  # when it ended (s)


def _succeed_exactly_at(env: simpy.Environment, event: simpy.Event, when: float) -> None:
    """Trigger ``event`` at simulated time ``when`` (>= now) exactly: scheduled
    with ``when`` itself, not ``now + (when - now)``, which may round."""
    event._ok = True
    event._value = None
    heapq.heappush(env._queue, (when, NORMAL, next(env._eid), event))


def _until(env: simpy.Environment, when: float) -> Iterator[simpy.Event]:
    """In a process: wait until simulated time ``when`` exactly (no wait when it
    is not later than now)."""
    if when > env.now:
        wake = env.event()
        _succeed_exactly_at(env, wake, when)
        yield wake


def _succeed_at(env: simpy.Environment, event: simpy.Event, when: float) -> None:
    """Trigger ``event`` at simulated time ``when`` (>= now) without a process.

    Event.succeed() fires at the current time; this schedules the same outcome
    ``when - now`` seconds ahead, the way a Timeout is scheduled.
    """
    event._ok = True
    event._value = None
    env.schedule(event, delay=when - env.now)


class Engine:
    """Simulate rank programs on a cluster.

    ctx: routes, link capacities and per-message costs.
    network_model: ``maxmin`` (contention) or ``closed-form``.
    """

    def __init__(self, ctx: CommContext, network_model: str = "maxmin") -> None:
        self.ctx = ctx
        self.network_model = network_model
        self._lowered: dict[CollectiveCall, tuple[str, list]] = {}

    def lowered(self, call: CollectiveCall) -> tuple[str, list]:
        """(algorithm, phases) for a call, cached: identical calls lower once (but
        for those :func:`~simcluster.collectives.registry.kept` refuses).

        Calls that differ only in size share their flows' routes through the
        context's shape cache (see :func:`simcluster.collectives.lower`).
        """
        if not kept(self.ctx, call):  # an SpMV exchange's (~8 MB, lowered by lookup): no
            return lower(self.ctx, call)  # hash of its tens of thousands of pairs either
        hit = self._lowered.get(call)
        if hit is None:
            hit = self._lowered[call] = lower(self.ctx, call)
        return hit

    def run(self, classes: Sequence[RankClass], capacity: np.ndarray | None = None) -> Trace:
        """Run every class's program to completion; returns the trace.

        capacity: bytes/s per link for this run instead of the context's (a
        noisy network); collectives are still lowered and chosen on the
        context's nominal capacities, as NCCL's tuner knows only those.
        """
        env = simpy.Environment()
        cap = self.ctx.capacity if capacity is None else capacity
        net = make_network(self.network_model, env, cap, self.ctx.inter_node_link)
        trace = Trace(classes={c.name: c.ranks for c in classes})
        rows = trace.rows
        for c in classes:
            c.validate()
        # Which classes take part in each collective id.
        rdv: dict[str, _Rendezvous] = {}
        for c in classes:
            for op in c.ops:
                if op.call is None:
                    continue
                r = rdv.get(op.id)
                if r is None:
                    rdv[op.id] = _Rendezvous(env, op, 1)
                elif r.call is not op.call and r.call != op.call:
                    raise ProgramError(f"collective {op.id!r} is called differently by classes")
                else:
                    r.expected += 1

        def run_collective(r: _Rendezvous):
            start = env.now
            algorithm, phases = self.lowered(r.call)
            for phase in phases:
                yield net.transfer(phase)
            rows.append(
                (
                    "<network>",
                    "collective",
                    r.opid,
                    r.category,
                    start,
                    env.now,
                    r.call.nbytes,
                    algorithm,
                )
            )
            r.at = env.now
            r.done.succeed()

        finished = [0]

        def stream_proc(cls: RankClass, ops: list[tuple[Op, tuple[str, ...]]], done: dict):
            # ``t``: when this stream is free. Compute ops advance it without
            # events; only collectives and waits on other streams meet the clock.
            t = now = env.now  # ``now`` changes only across a yield
            name = cls.name
            append = rows.append
            for op, waits in ops:
                if waits:
                    for d in waits:
                        ev = done[d]
                        if ev.callbacks is not None:  # not yet processed
                            yield ev
                            now = env.now
                start = now if now > t else t  # max(t, now), without the call
                if op.call is not None:  # a collective
                    if start > now:
                        yield env.timeout(start - now)
                    r = rdv[op.id]
                    r.arrived += 1
                    if r.arrived == r.expected:
                        env.process(run_collective(r))
                    yield r.done
                    t = now = env.now
                    append((name, op.stream, op.id, op.category, start, t, op.call.nbytes, ""))
                    continue
                t = start + op.duration
                opid = op.id
                append((name, op.stream, opid, op.category, start, t, 0.0, ""))
                ev = done.get(opid)
                if ev is not None:  # another stream waits for this op: fire it at t
                    _succeed_at(env, ev, t)
            if t > now:
                yield env.timeout(t - now)
            finished[0] += 1

        # folded classes: per-rank end of ops others wait for, by (class, op id)
        times: dict[tuple[int, str], np.ndarray] = {}

        def folded_proc(cls: RankClass, ops: list[tuple[Op, tuple[str, ...]]], done: dict):
            """:func:`stream_proc` for every rank of a class with per-rank factors at
            once: per rank, ``t`` is when its stream is free and ``now`` when its own
            process would last have resumed; SimPy waits for the last rank only."""
            factors = cls.factors
            timed = _timed_index(cls.ops)
            name = cls.name
            lo = int(np.argmin(cls.ranks))  # the rows are the lowest rank's
            key = id(done)  # one per class: classes may share op ids
            now = np.full(len(cls.ranks), env.now)
            t = now.copy()
            for op, waits in ops:
                for d in waits:
                    ev = done[d]
                    if ev.callbacks is not None:
                        yield ev
                    at = times.get((key, d))
                    now = np.maximum(now, rdv[d].at if at is None else at)
                start = np.maximum(t, now)
                if op.is_collective:
                    # each rank's timeout lands at now + (start - now)
                    arrive = np.where(start > now, now + (start - now), now)
                    yield from _until(env, float(arrive.max()))
                    r = rdv[op.id]
                    r.arrived += 1
                    if r.arrived == r.expected:
                        env.process(run_collective(r))
                    yield r.done
                    t = np.full(len(cls.ranks), env.now)
                    now = t.copy()
                    rows.append(
                        (name, op.stream, op.id, op.category, float(start[lo]), env.now,
                         op.call.nbytes, "")
                    )  # fmt: skip
                    continue
                k = timed.get(op.id)
                t = start + (op.duration if k is None else op.duration * factors[:, k])
                rows.append(
                    (name, op.stream, op.id, op.category, float(start[lo]), float(t[lo]), 0.0, "")
                )
                ev = done.get(op.id)
                if ev is not None:  # fired when the last rank's would be: now + (t - now)
                    at = times[(key, op.id)] = now + (t - now)
                    _succeed_exactly_at(env, ev, max(float(at.max()), env.now))
            end = np.where(t > now, now + (t - now), now)
            yield from _until(env, float(end.max()))
            finished[0] += 1

        num_streams = 0
        for cls in classes:
            stream_of = {op.id: op.stream for op in cls.ops}
            streams: dict[str, list[tuple[Op, tuple[str, ...]]]] = {}
            done: dict[str, simpy.Event] = {}
            for op in cls.ops:
                # Ops on one stream run in order: only other streams' ops are waited for.
                waits = ()
                if op.deps:
                    waits = tuple(d for d in op.deps if stream_of[d] != op.stream)
                    for d in waits:
                        if d not in done:
                            done[d] = rdv[d].done if d in rdv else env.event()
                ops = streams.get(op.stream)
                if ops is None:
                    ops = streams[op.stream] = []
                ops.append((op, waits))
            proc = stream_proc if cls.factors is None else folded_proc
            for ops in streams.values():
                env.process(proc(cls, ops, done))
                num_streams += 1
        env.run()
        stuck = [r.opid for r in rdv.values() if not r.done.triggered]
        if stuck or finished[0] != num_streams:
            raise SimulationError(
                "programs did not finish; collectives waiting for participants: "
                + ", ".join(stuck[:5])
            )
        trace.end_time = env.now
        trace.inter_node_bytes = net.inter_node_bytes
        trace.flows = net.flows_started
        trace.rate_updates = net.rate_updates
        # SimPy numbers every scheduled event; the next id is the count so far.
        eid = getattr(env, "_eid", None)
        trace.events = next(eid) if eid is not None else 0
        return trace


def _timed_index(ops: list[Op]) -> dict[str, int]:
    """Column of each timed op in :attr:`RankClass.factors` (as :func:`perturb` counts)."""
    timed = [op.id for op in ops if op.duration > 0 and op.stream in _TIMED_STREAMS]
    return {opid: k for k, opid in enumerate(timed)}

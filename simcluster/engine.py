"""The discrete-event engine: runs rank programs over a network backend.

Each rank class gets one SimPy process per stream; a stream runs its ops in
program order, each after its dependencies. A compute op holds its stream for
its duration. A collective op arrives at a rendezvous; when every class that
holds an op with that id has arrived, the collective is lowered to phases
(:mod:`simcluster.collectives`) and its phases run one after another on the
network backend. Every op leaves a span in the :class:`Trace`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import simpy

from simcluster.collectives import CollectiveCall, CommContext, lower
from simcluster.network import make_network
from simcluster.program import Op, ProgramError, RankClass

__all__ = ["Engine", "Span", "Trace", "SimulationError"]


class SimulationError(RuntimeError):
    """The programs cannot finish (a collective some class never reaches)."""


@dataclass(frozen=True, slots=True)
class Span:
    """One op's execution: who, where, what, when (seconds)."""

    rank_class: str
    stream: str
    op: str
    category: str
    start: float
    end: float
    bytes: float = 0.0
    algorithm: str = ""


@dataclass
class Trace:
    """Everything one simulation produced."""

    spans: list[Span] = field(default_factory=list)
    end_time: float = 0.0
    inter_node_bytes: float = 0.0
    flows: int = 0
    rate_updates: int = 0
    events: int = 0
    classes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def class_spans(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.rank_class == name]

    def busy_time(self, name: str, stream: str) -> float:
        """Seconds a stream of a class spent executing ops (spans never overlap)."""
        return sum(
            s.end - s.start for s in self.spans if s.rank_class == name and s.stream == stream
        )

    def by_category(self, name: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.class_spans(name):
            out[s.category] = out.get(s.category, 0.0) + (s.end - s.start)
        return out


class _Rendezvous:
    __slots__ = ("call", "expected", "arrived", "done", "category", "opid")

    def __init__(self, env: simpy.Environment, op: Op, expected: int) -> None:
        self.call: CollectiveCall = op.call  # type: ignore[assignment]
        self.expected = expected
        self.arrived = 0
        self.done = env.event()
        self.category = op.category
        self.opid = op.id


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
        """(algorithm, phases) for a call, cached: identical calls lower once.

        Calls that differ only in size share their flows' routes through the
        context's shape cache (see :func:`simcluster.collectives.lower`).
        """
        hit = self._lowered.get(call)
        if hit is None:
            hit = lower(self.ctx, call)
            self._lowered[call] = hit
        return hit

    def run(self, classes: Sequence[RankClass]) -> Trace:
        """Run every class's program to completion; returns the trace."""
        env = simpy.Environment()
        net = make_network(self.network_model, env, self.ctx.capacity, self.ctx.inter_node_link)
        trace = Trace(classes={c.name: c.ranks for c in classes})
        for c in classes:
            c.validate()
        # Which classes take part in each collective id.
        holders: dict[str, int] = {}
        calls: dict[str, CollectiveCall] = {}
        for c in classes:
            for op in c.ops:
                if op.is_collective:
                    holders[op.id] = holders.get(op.id, 0) + 1
                    prev = calls.setdefault(op.id, op.call)  # type: ignore[arg-type]
                    if prev != op.call:
                        raise ProgramError(f"collective {op.id!r} is called differently by classes")
        rdv = {}
        for c in classes:
            for op in c.ops:
                if op.is_collective and op.id not in rdv:
                    rdv[op.id] = _Rendezvous(env, op, holders[op.id])

        def run_collective(r: _Rendezvous):
            start = env.now
            algorithm, phases = self.lowered(r.call)
            for phase in phases:
                yield net.transfer(phase)
            trace.spans.append(
                Span(
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
            r.done.succeed()

        def stream_proc(cls: RankClass, ops: list[Op], done: dict[str, simpy.Event]):
            for op in ops:
                waits = [done[d] for d in op.deps if not done[d].triggered]
                if waits:
                    yield env.all_of(waits)
                start = env.now
                if op.is_collective:
                    r = rdv[op.id]
                    r.arrived += 1
                    if r.arrived == r.expected:
                        env.process(run_collective(r))
                    yield r.done
                    trace.spans.append(
                        Span(
                            cls.name, op.stream, op.id, op.category, start, env.now, op.call.nbytes
                        )
                    )
                else:
                    if op.duration > 0:
                        yield env.timeout(op.duration)
                    trace.spans.append(
                        Span(cls.name, op.stream, op.id, op.category, start, env.now)
                    )
                done[op.id].succeed()

        all_done: list[simpy.Event] = []
        for cls in classes:
            done = {op.id: env.event() for op in cls.ops}
            all_done.extend(done.values())
            streams: dict[str, list[Op]] = {}
            for op in cls.ops:
                streams.setdefault(op.stream, []).append(op)
            for ops in streams.values():
                env.process(stream_proc(cls, ops, done))
        env.run()
        stuck = [r.opid for r in rdv.values() if not r.done.triggered]
        if stuck or not all(e.triggered for e in all_done):
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
        trace.spans.sort(key=lambda s: (s.start, s.rank_class, s.stream, s.op))
        return trace

"""Processor sharing of one host's cores by its ranks' compute and collectives.

A live gloo run puts P processes on a host of C cores. The static model prices a
compute phase at the sharing factor measured with all P processes computing at once,
and a collective at the sweep's cost, measured with its g processes in the call and
nothing else running. Here the cores are shared, at each moment, by the tasks that
want one; with n tasks active each runs ``slowdown(n) = max(1, n / C)`` times slower
than alone (it gets ``min(1, C / n)`` of a core):

- a rank computing is one task;
- a rank blocked at a collective's rendezvous (waiting for a late rank) is none;
- a collective whose members have all arrived is split as the gloo model prices it:
  its chain of messages (per-message and wake-up costs, ``chain`` of its seconds)
  runs one thread at a time, one task; its bytes (the rest) are copied and reduced on
  every member still in the call, one task each;
- its members leave it one by one, in the order they arrived, evenly over the last
  ``tail`` of its work (the last arrival at the end; ``tail`` from the run's own
  sweep, :func:`simcluster.network.gloo.exit_spread`); a member that has left goes
  on with its program, and when that is compute it takes a core from the call.

Every duration handed in is the static model's, i.e. at a reference number of
active tasks: compute at ``ref`` = P; a collective as in the sweep (its members
alone on the host, each blocking once it has left). A compute task progresses at
``slowdown(ref) / slowdown(n)`` reference seconds per second (``ref`` 0: a fixed
duration, replayed as measured), so when all P processes compute the prediction is
the static one; a collective's work is set so that the sweep's own arrangement
takes its seconds exactly (:func:`sweep_work`).

Units: seconds throughout. The simulation is event-driven and exact for the
piecewise-constant rates (no time step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from simcluster.engine import SimulationError

__all__ = ["Task", "slowdown", "sweep_work", "simulate"]


def slowdown(n: float, cores: float) -> float:
    """How many times slower than alone a task runs with ``n`` tasks active on
    ``cores`` cores (processor sharing, at most one core per task): ``max(1, n / C)``."""
    if cores <= 0:
        raise ValueError(f"host sharing: cores must be > 0, got {cores}")
    return max(1.0, n / cores)


@dataclass(frozen=True)
class Task:
    """One op of a rank's program.

    kind: ``compute`` or ``collective``; seconds: its duration at the reference
    (``ref`` active tasks for compute, 0: a fixed duration; for a collective the
    sweep's arrangement, ``ref`` of its processes in the call, 0: its ``group``,
    see :func:`sweep_work`); phase: for the caller; key: the collective's id, the same on
    every member (with ``group``, its ranks); tail: fraction of the collective's work
    over which its members leave; chain: fraction of its seconds that is its chain of
    messages (one task), the rest its bytes (a task per member in the call).
    """

    kind: str
    seconds: float
    phase: str
    key: str
    ref: int = 0
    group: tuple[int, ...] = ()
    tail: float = 0.0
    chain: float = 0.0


def _per_work(inside: int, others: float, g: int, chain: float, cores: float) -> float:
    """Seconds per reference second of a collective of ``g`` members with ``inside``
    of them in the call and ``others`` other tasks active: its chain (reference: one
    task alone) and its bytes (reference: its g members alone)."""
    n = others + chain + (1.0 - chain) * inside
    return slowdown(n, cores) * (chain + (1.0 - chain) / slowdown(g, cores))


def sweep_work(
    seconds: float,
    group: int,
    cores: float,
    tail: float = 0.0,
    chain: float = 0.0,
    swept: int | None = None,
) -> float:
    """Reference seconds of work of a collective of ``group`` members that took
    ``seconds`` in the sweep: its ``swept`` members (default ``group``) alone on the
    host, leaving one by one over the last ``tail`` of its work and each blocking
    once out (the sweep's next call follows a barrier), so those still in the call
    share the cores with fewer and fewer. ``swept`` > ``group``: seconds priced from
    constants measured with more processes in the call (a subgroup's collective
    priced from a whole-world sweep), whose contention they already hold."""
    g = max(1, int(group))
    m = max(1, int(swept or g))
    per_work = (1.0 - tail) * _per_work(m, 0.0, g, chain, cores)
    for j in range(m):  # the j-th stretch of the tail: m - j members still inside
        per_work += tail / m * _per_work(m - j, 0.0, g, chain, cores)
    return seconds / per_work if per_work > 0 else 0.0


@dataclass
class _Coll:
    members: tuple[int, ...]
    work: float
    chain: float
    arrived: dict[int, float] = field(default_factory=dict)
    #: each member's op for this call (a member that left early may be ops further on)
    ops: dict[int, Task] = field(default_factory=dict)
    done: float = 0.0
    #: (work done when it leaves, member), in order; empty until all have arrived
    exits: list[tuple[float, int]] = field(default_factory=list)


def simulate(
    programs: Mapping[int, Sequence[Task]], cores: float
) -> tuple[dict[int, list[tuple[str, str, float, float]]], float]:
    """Run every rank's program to its end on a host of ``cores`` cores.

    Returns per rank ``(phase, key, start, end)`` per op and the end time. A
    collective's span runs from the rank's arrival to the call's end (its last
    member leaving: what a live run's least time over the ranks measures from the
    last arrival); the members that left earlier went on with their programs.
    Raises :class:`~simcluster.engine.SimulationError` when the programs'
    collectives do not pair up.
    """
    pc = dict.fromkeys(programs, 0)  # index of each rank's current op
    spans: dict[int, list[tuple[str, str, float, float]]] = {r: [] for r in programs}
    left: dict[int, float] = {}  # computing rank -> remaining reference seconds
    began: dict[int, float] = {}
    colls: dict[tuple[str, tuple[int, ...]], _Coll] = {}
    now = 0.0
    tol = 1e-12

    def enter(r: int) -> None:
        """Rank ``r`` starts its current op (or has finished its program)."""
        while pc[r] < len(programs[r]):
            op = programs[r][pc[r]]
            if op.kind == "compute":
                if op.seconds <= 0:
                    spans[r].append((op.phase, op.key, now, now))
                    pc[r] += 1
                    continue
                left[r], began[r] = op.seconds, now
                return
            ck = (op.key, op.group)
            c = colls.get(ck)
            if c is None:
                work = sweep_work(op.seconds, len(op.group), cores, op.tail, op.chain, op.ref)
                c = colls[ck] = _Coll(op.group, work, op.chain)
            if r not in c.members or r in c.arrived:
                raise SimulationError(f"host sharing: rank {r} is not a member of {op.key!r} once")
            c.arrived[r] = now
            c.ops[r] = op
            if len(c.arrived) == len(c.members):
                order = sorted(c.members, key=lambda m: (c.arrived[m], m))
                g = len(order)
                c.exits = [((1.0 - op.tail + op.tail * (j + 1) / g) * c.work, m)
                           for j, m in enumerate(order)]  # fmt: skip
                c.exits[-1] = (c.work, order[-1])
                leave(ck)  # members of a call of no work go on at once
            return

    def leave(ck: tuple[str, tuple[int, ...]]) -> None:
        """Members whose share of the call's work is done leave it and go on."""
        c = colls[ck]
        gone = []
        while c.exits and c.exits[0][0] - c.done <= tol * max(1.0, c.work):
            gone.append(c.exits.pop(0)[1])
            pc[gone[-1]] += 1
        if not c.exits:
            del colls[ck]
            for m in c.members:
                op = c.ops[m]
                spans[m].append((op.phase, op.key, c.arrived[m], now))
        for m in gone:
            enter(m)

    for r in sorted(programs):
        enter(r)
    while True:
        running = [(ck, c) for ck, c in colls.items() if c.exits]
        if not left and not running:
            break
        inside = {ck: c.chain + (1.0 - c.chain) * len(c.exits) for ck, c in running}
        n = len(left) + sum(inside.values())
        rate_r = {}
        for r in left:
            ref = programs[r][pc[r]].ref
            rate_r[r] = slowdown(ref, cores) / slowdown(n, cores) if ref > 0 else 1.0
        rate_c = {
            ck: 1.0 / _per_work(len(c.exits), n - inside[ck], len(c.members), c.chain, cores)
            for ck, c in running
        }
        dt = min(
            [left[r] / rate_r[r] for r in left]
            + [(c.exits[0][0] - c.done) / rate_c[ck] for ck, c in running]
        )
        now += max(dt, 0.0)
        done_r = []
        for r in list(left):
            left[r] -= dt * rate_r[r]
            if left[r] <= tol * max(1.0, now):
                op = programs[r][pc[r]]
                del left[r]
                spans[r].append((op.phase, op.key, began.pop(r), now))
                pc[r] += 1
                done_r.append(r)
        for ck, c in running:
            c.done += dt * rate_c[ck]
        for ck, _ in running:
            leave(ck)
        for r in done_r:
            enter(r)
    if colls or any(pc[r] < len(programs[r]) for r in programs):
        waiting = [k for k, _ in colls]
        raise SimulationError(
            "host sharing: programs did not finish; collectives waiting for members: "
            + ", ".join(waiting[:5])
        )
    return spans, now

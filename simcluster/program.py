"""Per-rank programs as data: ops with ids, streams, durations and dependencies.

A :class:`RankClass` is a set of ranks that run the same program. Schedules
emit one class per distinct role (all ranks for DDP; leaders and followers for
H-SADMM); the engine simulates each class once (rank collapse). A collective op
is one global event: every class whose program holds an op with that id takes
part, and it starts when all of them have reached it. :func:`expand` gives the
uncollapsed equivalent (one class per rank), used to check the collapse.

Durations are seconds, sizes bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from simcluster.errors import SimclusterError

__all__ = [
    "OPS",
    "CollectiveCall",
    "Groups",
    "Op",
    "RankClass",
    "ProgramError",
    "STREAMS",
    "compute",
    "collective",
    "expand",
    "perturb",
]

#: Collective operations and what ``nbytes`` means for each.
OPS = {
    "allreduce": "buffer bytes on every rank",
    "allgather": "bytes each rank contributes (output is group size x nbytes)",
    "reduce_scatter": "input buffer bytes on every rank",
    "broadcast": "buffer bytes",
    "reduce": "buffer bytes",
    "p2p": "bytes from groups[i][0] to groups[i][1]",
    "alltoall": "bytes each rank sends to every other rank of its group",
}


class Groups(tuple):
    """A :attr:`CollectiveCall.groups` tuple that also holds its ranks as one
    int64 array (:attr:`flat`, the groups back to back) and computes its hash
    once. It equals, and hashes as, the plain tuple of the same groups; made
    where the ranks already are arrays (tens of thousands of p2p pairs), it
    spares the lowering a pass over the tuples and the caches a rehash."""

    flat: np.ndarray

    def __new__(cls, groups, flat: np.ndarray | None = None) -> Groups:
        self = super().__new__(cls, groups)
        if flat is None:
            flat = np.fromiter((r for g in self for r in g), dtype=np.int64)
        self.flat = flat
        return self

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = tuple.__hash__(self)
        return h


@dataclass(frozen=True)
class CollectiveCall:
    """One collective launched on every group of ``groups`` at once.

    Like torch.distributed: each rank calls the op on its own group (its node's
    intra-node group, say); every group runs the same op concurrently.
    groups: tuple of rank tuples; ranks within a group in ring order.
    nbytes: see :data:`OPS`.
    algorithm: name in the algorithm registry, or ``auto``.
    root: index within each group of the root (broadcast, reduce).
    protocol: LL / LL128 / Simple, or ``auto`` (the cheapest the network
        profile offers; ignored by a profile without protocols).
    """

    op: str
    groups: tuple[tuple[int, ...], ...]
    nbytes: float
    algorithm: str = "auto"
    root: int = 0
    protocol: str = "auto"

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown collective op {self.op!r}; known: {sorted(OPS)}")
        if self.nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {self.nbytes}")

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(r for g in self.groups for r in g)


#: compute kernels, collectives, device-to-host copies, host-to-device copies, CPU threads,
#: a framework's control thread (Horovod's background loop: cycle waits and negotiation),
#: a data loader's worker processes (making the next batches while the step runs)
STREAMS = ("compute", "comm", "copy", "h2d", "cpu", "ctrl", "loader")


class ProgramError(SimclusterError, ValueError):
    """A program that cannot run: unknown dependency, cycle, bad stream."""


@dataclass(frozen=True, slots=True)
class Op:
    """One operation on one stream of a rank.

    id: unique within the program (collective ids are global, see module doc).
    stream: one of :data:`STREAMS`; ops on a stream run in program order.
    duration: seconds of stream occupancy (compute, copy and cpu ops).
    deps: ids of earlier ops of the same program that must end first.
    call: the collective, for collective ops (then duration is unused).
    category: breakdown key (``forward``, ``backward``, ``optimizer``, ...).
    """

    id: str
    stream: str = "compute"
    duration: float = 0.0
    deps: tuple[str, ...] = ()
    call: CollectiveCall | None = None
    category: str = ""

    @property
    def is_collective(self) -> bool:
        return self.call is not None


_new = object.__new__
#: setters of Op's slots in field order: :func:`_op` fills them the way the frozen
#: dataclass's generated ``__init__`` does (``object.__setattr__``), at about 40 % of
#: its cost (a program has thousands of ops; ``tests/test_schedules.py`` checks it)
_OP_SLOTS = tuple(
    Op.__dict__[name].__set__ for name in ("id", "stream", "duration", "deps", "call", "category")
)


def _op(
    id: str,
    stream: str,
    duration: float,
    deps: tuple[str, ...],
    call: CollectiveCall | None,
    category: str,
) -> Op:
    """``Op(id, stream, duration, deps, call, category)``, without the generated ``__init__``."""
    op = _new(Op)
    s_id, s_stream, s_duration, s_deps, s_call, s_category = _OP_SLOTS
    s_id(op, id)
    s_stream(op, stream)
    s_duration(op, duration)
    s_deps(op, deps)
    s_call(op, call)
    s_category(op, category)
    return op


def compute(
    id: str, duration: float, category: str, deps: Sequence[str] = (), stream: str = "compute"
) -> Op:
    """A kernel (or copy, or CPU task) of ``duration`` seconds."""
    return _op(id, stream, float(duration), tuple(deps), None, category)


def collective(
    id: str, call: CollectiveCall, category: str, deps: Sequence[str] = (), stream: str = "comm"
) -> Op:
    """A collective on ``call.groups``, run on ``stream``."""
    return _op(id, stream, 0.0, tuple(deps), call, category)


@dataclass
class RankClass:
    """Ranks that run one program (simulated once)."""

    name: str
    ranks: tuple[int, ...]
    ops: list[Op] = field(default_factory=list)
    #: per-rank duration factors of the timed ops (compute and cpu ops with a
    #: duration, in program order), shape ``(len(ranks), timed ops)``; None: every
    #: rank runs ``ops`` as written. The engine runs such a class once, with one
    #: clock per rank (see :func:`perturb`, ``fold=True``).
    factors: np.ndarray | None = field(default=None, repr=False)

    def add(self, op: Op) -> Op:
        self.ops.append(op)
        return op

    def validate(self) -> None:
        """Every dependency names an earlier op (so there is no cycle); streams known."""
        seen: set[str] = set()
        for op in self.ops:
            if op.stream not in STREAMS:
                raise ProgramError(f"{self.name}: op {op.id!r} on unknown stream {op.stream!r}")
            if op.id in seen:
                raise ProgramError(f"{self.name}: duplicate op id {op.id!r}")
            for d in op.deps:
                if d not in seen:
                    later = any(o.id == d for o in self.ops)
                    why = "a later op (cycle or order error)" if later else "no op"
                    raise ProgramError(
                        f"{self.name}: op {op.id!r} depends on {d!r}, which is {why}"
                    )
            seen.add(op.id)


def expand(classes: Sequence[RankClass]) -> list[RankClass]:
    """One class per rank, with the same programs: the uncollapsed simulation."""
    out = []
    for cls in classes:
        for i, r in enumerate(cls.ranks):
            f = None if cls.factors is None else cls.factors[i : i + 1]
            out.append(
                replace(cls, name=f"{cls.name}#{r}", ranks=(r,), ops=list(cls.ops), factors=f)
            )
    return out


#: streams whose op durations are kernels or CPU work a slow device stretches
_TIMED_STREAMS = ("compute", "cpu")


def _scaled_ops(ops: list[Op], factors: np.ndarray | float) -> list[Op]:
    out = []
    k = 0
    for op in ops:
        if op.duration > 0 and op.stream in _TIMED_STREAMS:
            f = factors if isinstance(factors, float) else float(factors[k])
            k += 1
            out.append(replace(op, duration=op.duration * f))
        else:
            out.append(op)
    return out


#: separates the per-step draws' seeds from the per-kernel ones
_STEP_SEED = 0x57E9


def rank_draws(
    rank: int, timed: int, jitter_cv: float, step_cv: float, seed: int, step: int
) -> np.ndarray:
    """Duration factors of one rank's ``timed`` ops in one step (mean 1 each).

    Per-kernel jitter: a lognormal factor per op with coefficient of variation
    ``jitter_cv``, seeded by (seed, rank), and (seed, rank, step) after the first
    step. Per-step jitter: one lognormal factor with coefficient of variation
    ``step_cv`` for all of them, seeded by (seed, rank, step, a tag of its own).
    """
    if jitter_cv > 0:
        sigma2 = math.log1p(jitter_cv**2)
        rng = np.random.default_rng([seed, rank] if step == 0 else [seed, rank, step])
        out = rng.lognormal(-sigma2 / 2, math.sqrt(sigma2), timed)
    else:
        out = np.ones(timed)
    if step_cv > 0:
        sigma2 = math.log1p(step_cv**2)
        rng = np.random.default_rng([seed, rank, step, _STEP_SEED])
        out *= rng.lognormal(-sigma2 / 2, math.sqrt(sigma2))
    return out


def perturb(
    classes: Sequence[RankClass],
    stragglers: frozenset[int] = frozenset(),
    slowdown: float = 1.0,
    jitter_cv: float = 0.0,
    seed: int = 0,
    fold: bool = False,
    transient: frozenset[int] = frozenset(),
    transient_slowdown: float = 1.0,
    step: int = 0,
    step_cv: float = 0.0,
) -> list[RankClass]:
    """Heterogeneous ranks: slower stragglers, per-kernel and per-step jitter.

    stragglers: ranks whose compute and CPU ops take ``slowdown`` times longer.
        Each class splits into its regular and its straggling ranks, so the
        rank collapse stays exact.
    transient: ranks slowed in this step only, by ``transient_slowdown``
        (times the straggler slowdown for a rank that is both); they split
        off like stragglers (``~transient``, ``~slow~transient``).
    jitter_cv: coefficient of variation of a lognormal factor (mean 1) drawn
        for every timed op of every rank, seeded by (seed, rank), and by
        (seed, rank, step) for steps after the first. Every rank
        then runs its own program: the collapse is off.
    step_cv: coefficient of variation of a lognormal factor (mean 1) drawn once
        per rank and step and applied to all of that rank's timed ops: noise that
        slows a whole step of one rank (the OS, a busy neighbour, clocks), which
        per-kernel jitter averages away within a step. Seeded by (seed, rank, step)
        apart from the kernel draws, so adding it leaves those unchanged. Like
        jitter, every rank then runs its own program.
    fold: with jitter, keep each class whole and give it the per-rank factors
        (:attr:`RankClass.factors`, the same draws) instead of one class per rank.
    """

    def factor(r: int) -> float:
        f = float(slowdown) if r in stragglers else 1.0
        return f * float(transient_slowdown) if r in transient else f

    out: list[RankClass] = []
    for cls in classes:
        if cls.factors is not None:  # folded by its schedule (spmv): scale the factors
            keys = {r: (r in stragglers, r in transient) for r in cls.ranks}
            out += _perturb_folded(cls, keys, factor, jitter_cv, seed, step, fold, step_cv)
            continue
        if jitter_cv <= 0 and step_cv <= 0:
            groups: dict[tuple[bool, bool], list[int]] = {}
            for r in cls.ranks:
                groups.setdefault((r in stragglers, r in transient), []).append(r)
            for key in sorted(groups):  # regular, ~transient, ~slow, ~slow~transient
                ranks = tuple(groups[key])
                if key == (False, False):
                    out.append(replace(cls, ranks=ranks, ops=list(cls.ops)))
                    continue
                suffix = "~slow" * key[0] + "~transient" * key[1]
                ops = _scaled_ops(cls.ops, factor(ranks[0]))
                out.append(replace(cls, name=f"{cls.name}{suffix}", ranks=ranks, ops=ops))
            continue
        timed = sum(1 for op in cls.ops if op.duration > 0 and op.stream in _TIMED_STREAMS)

        def draws(r: int, timed: int = timed) -> np.ndarray:
            out = rank_draws(r, timed, jitter_cv, step_cv, seed, step)
            f = factor(r)
            return out * f if f != 1.0 else out

        if fold:
            table = np.empty((len(cls.ranks), timed))
            for i, r in enumerate(cls.ranks):
                table[i] = draws(r)
            out.append(replace(cls, ops=list(cls.ops), factors=table))
            continue
        for r in cls.ranks:
            out.append(
                replace(cls, name=f"{cls.name}#{r}", ranks=(r,), ops=_scaled_ops(cls.ops, draws(r)))
            )
    return out


def _perturb_folded(
    cls: RankClass,
    keys: dict[int, tuple[bool, bool]],
    factor: Callable[[int], float],
    jitter_cv: float,
    seed: int,
    step: int,
    fold: bool,
    step_cv: float = 0.0,
) -> list[RankClass]:
    """:func:`perturb` for a class that already has per-rank factors.

    ``keys`` gives each rank's (straggler, transient) flags and ``factor`` its
    slowdown. Its factors are multiplied by the same draws :func:`perturb` makes
    (seeded by (seed, rank), and (seed, rank, step) after the first step; one per
    timed op) and by the rank's slowdown; without jitter the class splits as
    :func:`perturb` splits an unfolded one, with jitter it stays whole (``fold``)
    or becomes one class per rank.
    """
    assert cls.factors is not None
    base = cls.factors
    if jitter_cv <= 0 and step_cv <= 0:
        groups: dict[tuple[bool, bool], list[int]] = {}
        for i, r in enumerate(cls.ranks):
            groups.setdefault(keys[r], []).append(i)
        out = []
        for key in sorted(groups):  # regular, ~transient, ~slow, ~slow~transient
            idx = groups[key]
            ranks = tuple(cls.ranks[i] for i in idx)
            table = base[idx] * factor(ranks[0])
            suffix = "~slow" * key[0] + "~transient" * key[1]
            out.append(
                replace(
                    cls, name=f"{cls.name}{suffix}", ranks=ranks, ops=list(cls.ops), factors=table
                )
            )
        return out
    table = np.empty_like(base)
    for i, r in enumerate(cls.ranks):
        table[i] = rank_draws(r, base.shape[1], jitter_cv, step_cv, seed, step)
    table = base * table * np.array([factor(r) for r in cls.ranks])[:, None]
    if fold:
        return [replace(cls, ops=list(cls.ops), factors=table)]
    return [
        replace(
            cls, name=f"{cls.name}#{r}", ranks=(r,), ops=list(cls.ops), factors=table[i : i + 1]
        )
        for i, r in enumerate(cls.ranks)
    ]

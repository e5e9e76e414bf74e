"""Tensor fusion with sparsification: the SSFusion paper's schedule and baselines.

Gradients are fused into buffers in backward order (``buffer_mb``; SSFusion
sizes buffers with Cupcake's FindOptFusion, which we stand in for with a size
threshold; ``tensors_per_buffer`` groups a fixed number of tensors instead, as the
OMGS baseline in the authors' repository does). Each buffer is communicated as
soon as its last gradient is ready:

- ``fusion-dense``: dense allreduce per buffer (Horovod-like tensor fusion);
- ``fusion-pertensor``: every tensor sparsified (DGC, density 0.01) right after
  its backward, the buffer's values + indices allgathered;
- ``fusion-multitensor``: the whole buffer sparsified at once (one top-k over
  the buffer, OMGS / Cupcake style), allgathered; reports the tensor-missing
  rate (tensors of which no entry survives), under the gradient model below;
- ``ssfusion``: overlap-maximised selective sparsification (section IV-B):
  in every buffer but the first, the smallest tensors are excluded from
  sparsification until the previous buffer's communication time covers this
  buffer's backward + sparsification time (equation 2); the largest tensor
  stays sparsified. Buffers are optimised from the last to the first (Fig. 7(b)),
  so the previous buffer's communication is its Step-1 one (every tensor
  sparsified), and -O / -I keep the selection plain SSFusion makes.
  Density-aware compensation lowers the density of the sparsified tensors so
  the buffer sends as many entries as if all were sparsified, never below
  0.001; exclusions stop where that compensation reaches its floor (option
  ``exclusion``), because the paper's equation 2 takes an exclusion to leave the
  buffer's communication unchanged. Dense tensors travel whole in the allgather;
- ``ssfusion-o``: plus offloading the sparsification of large tensors to CPU
  threads (device-to-host copy, CPU kernel, host-to-device copy of the
  selected entries) where it finishes before the buffer's GPU work (backward
  plus the GPU sparsification left on the GPU) does (section IV-C);
- ``ssfusion-oi``: plus splitting each buffer at the tensor that minimises
  T1 + T2 into an allreduce part (the dense tensors before the split) and an
  allgather part (the rest), interleaving the two collectives (section IV-D).

Sparsification costs come from the device profile's ``sparsify`` kernel: on the
paper's cloud cluster (``a100-80gb-pcie`` and ``a100-80gb-pcie-derived``, which the
scenarios use: compute transferred from the measured H100 profile) the paper's own
per-call DGC times (Table III: 0.85 ms for a 10 KB tensor on the GPU, 1.49 ms on the
CPU; the authors' DGC adjusts its threshold in a loop that reads the selected count
back to the host, several syncs per call), which are
what makes per-tensor sparsification of hundreds of small tensors expensive and
selective sparsification worth doing. In -O's offload timeline only the tensors
that stay sparsified on the GPU add GPU sparsification time (the dense ones have
none).

Communication times used in these decisions come from the study's offline
estimate of a collective alone on the cluster (``BuildContext.estimate``), as
SSFusion measures alpha and beta offline.

Gradient model for the tensor-missing rate (a stated model, not a
measurement): entries of tensor l are i.i.d. normal with standard deviation
proportional to 1/sqrt(fan-in of l) (Kaiming-scaled gradients). A buffer-level
top-k keeps entries above the threshold t solving sum_l n_l P(|x_l| > t) = k; a
tensor is missing when its expected kept entries fall below one half.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import Field

from simcluster.program import CollectiveCall, RankClass, collective, compute
from simcluster.schedules.base import (
    BuildContext,
    Iteration,
    Options,
    Schedule,
    algorithm_name,
    register,
)
from simcluster.schedules.frameworks import (
    HOROVOD_CYCLE_MS,
    fused_copy_time,
    horovod_cycle_wait,
)
from simcluster.schedules.training import (
    ENTRY_BYTES,
    MB,
    Bucket,
    GradTensor,
    grad_tensors,
    group_by_count,
    group_tensors,
    micro_steps,
    optimizer_step,
    selected,
    tensor_backward_times,
)

__all__ = [
    "FusionOptions",
    "overlap_max_selection",
    "selective_flags",
    "dense_budget",
    "compensated_density",
    "interleave_split",
    "split_bytes",
    "offload_selection",
    "tensor_missing_rate",
    "DENSITY_FLOOR",
]

DENSITY_FLOOR = 0.001  # the paper's lower bound on density


# -- the decisions, as pure functions (tested on toy cases) ---------------------------------


def overlap_max_selection(
    t_backward: Sequence[float],
    t_sparsify: Sequence[float],
    sizes: Sequence[int],
    t_prev_comm: float,
    max_dense: float | None = None,
) -> list[bool]:
    """Which tensors of a buffer to sparsify (equation 2).

    Starting from the smallest tensor, exclude tensors from sparsification until
    ``t_prev_comm >= sum(t_backward) + sum(t_sparsify of the sparsified)``; the
    largest tensor is never excluded. Section IV-B, Step-2 (iii) excludes until
    equation 2 holds and gives no other stop, so a buffer whose bare backward
    already outlasts ``t_prev_comm`` is treated like any other buffer where the
    equation cannot be met: exclusions go on to the largest tensor (or to
    ``max_dense``). Within the budget density-aware compensation keeps the
    buffer's communication unchanged, the premise of Step-2, so each exclusion
    only shortens the buffer's computation.
    ``max_dense`` (entries, None = no limit): the excluded tensors may hold at
    most this many entries in all; the exclusion stops before the tensor that
    would pass it (see :func:`dense_budget`). Returns one flag per tensor, input
    order.
    """
    n = len(sizes)
    flags = [True] * n
    order = sorted(range(n), key=lambda j: (sizes[j], j))

    def busy() -> float:
        return sum(t_backward) + sum(t for t, f in zip(t_sparsify, flags, strict=True) if f)

    dense = 0
    for j in order[:-1]:
        if t_prev_comm >= busy():
            break
        if max_dense is not None and dense + sizes[j] > max_dense:
            break
        flags[j] = False
        dense += sizes[j]
    return flags


def dense_budget(total: int, density: float, floor: float = DENSITY_FLOOR) -> float:
    """Most entries a buffer of ``total`` entries may leave unsparsified, comm unchanged.

    Section IV-B assumes an exclusion leaves the buffer's communication time
    unchanged ("the computation time will decrease, while the communication time
    remains unchanged"), which density-aware sparsification provides only while the
    sparsified tensors can absorb the dense entries: the buffer still sends
    ``density x total`` entries as long as the compensated density stays at or above
    its floor, (density x total - D) / (total - D) >= floor, i.e.
    D <= (density - floor) / (1 - floor) x total. Past that, every further exclusion
    adds its whole tensor to the buffer's allgather, which equation 2 does not see.
    """
    if density <= floor:
        return 0.0
    return (density - floor) / (1.0 - floor) * total


def selective_flags(
    t_backward: Sequence[Sequence[float]],
    t_sparsify: Sequence[Sequence[float]],
    sizes: Sequence[Sequence[int]],
    t_comm_initial: Sequence[float],
    budgets: Sequence[float | None] | None = None,
) -> list[list[bool]]:
    """Which tensors of every buffer to sparsify: equation 2 buffer by buffer (section IV-B).

    Buffer lists are in communication order (buffer 0 is sent first).
    ``t_comm_initial[i]``: seconds of buffer i's communication in Step-1's
    initialisation, every tensor sparsified at the nominal density. The paper
    selects "from the last buffer to the first one" (Fig. 7(b)), so when buffer i
    is optimised buffer i-1 is still in its Step-1 state: equation 2 compares
    buffer i's computation with ``t_comm_initial[i-1]``, never with a previous
    buffer's communication after its own exclusions (nor after -O / -I, which
    section IV builds on top of this selection). The first buffer keeps every
    tensor sparsified (equation 2 holds for 2 <= i <= M). ``budgets[i]``: buffer i's
    :func:`dense_budget` (None: no limit).
    """
    flags = [[True] * len(sizes[0])] if sizes else []
    for i in range(1, len(sizes)):
        cap = budgets[i] if budgets is not None else None
        flags.append(
            overlap_max_selection(
                t_backward[i], t_sparsify[i], sizes[i], t_comm_initial[i - 1], cap
            )
        )
    return flags


def compensated_density(
    sizes: Sequence[int], sparsified: Sequence[bool], density: float, floor: float = DENSITY_FLOOR
) -> float:
    """Density for the sparsified tensors so the buffer sends density x all entries.

    Dense tensors already send every entry; the sparsified ones make up the rest
    of the budget, never below ``floor`` and never above ``density``.
    """
    total = sum(sizes)
    dense = sum(s for s, f in zip(sizes, sparsified, strict=True) if not f)
    sparse = total - dense
    if sparse == 0:
        return density
    wanted = (density * total - dense) / sparse
    return min(density, max(floor, wanted))


def interleave_split(
    cost: Sequence[float],
    t_allreduce: Callable[[int], float],
    t_allgather: Callable[[int], float],
) -> tuple[int, float]:
    """The split l' (0..n) minimising T1 + T2 for one buffer, and that minimum.

    cost[j]: backward + sparsification seconds of tensor j (buffer order).
    The allreduce part holds the dense tensors among the first l'; the
    allgather part holds everything else. t_allreduce(j) / t_allgather(j) give
    the seconds of each part for a split at j.
    T1 = sum(cost[:l']), T2 = max(T_AR, sum(cost[l':])) + T_AG.
    """
    best = (0, math.inf)
    n = len(cost)
    for split in range(n + 1):
        t1 = sum(cost[:split])
        t2 = max(t_allreduce(split), sum(cost[split:])) + t_allgather(split)
        if t1 + t2 < best[1] - 1e-15:
            best = (split, t1 + t2)
    return best


def offload_selection(
    t_backward: Sequence[float],
    t_gpu: Sequence[float],
    t_cpu: Sequence[float],
    t_d2h: Sequence[float],
    t_h2d: Sequence[float],
    candidates: Sequence[int],
) -> list[int]:
    """Tensors (indices, buffer order) whose sparsification goes to the CPU.

    Candidates are tried largest first (the caller orders them). A tensor is
    offloaded when, with it and the ones already chosen, every offloaded
    tensor's CPU result is back on the GPU before the buffer's computation on
    the GPU ends, so that offloading never delays the buffer (section IV-C,
    Fig. 8: "precedes Buffer_2's computation completion ... without delaying
    training"). The buffer's computation is its backward plus the GPU
    sparsification of the tensors that stay on the GPU, as sections IV-B and
    IV-D define a buffer's computation time; step 1 of IV-C writes only the
    sum of backward times, which we read as that shorthand. The CPU takes
    tasks in the order gradients become ready. ``t_gpu`` is 0 for a tensor
    that is not sparsified.
    """
    chosen: list[int] = []

    def feasible(sel: set[int]) -> bool:
        t = 0.0
        cpu_free = 0.0
        back: list[float] = []
        for j in range(len(t_backward)):
            t += t_backward[j]
            if j in sel:
                start = max(t + t_d2h[j], cpu_free)
                cpu_free = start + t_cpu[j]
                back.append(cpu_free + t_h2d[j])
            else:
                t += t_gpu[j]
        return all(b <= t for b in back)

    for j in candidates:
        if feasible(set(chosen) | {j}):
            chosen.append(j)
    return sorted(chosen)


def split_bytes(
    sizes: Sequence[int], kept: Sequence[int], sparsified: Sequence[bool], split: int
) -> tuple[float, float]:
    """(allreduce bytes, allgather bytes per rank) of a buffer split after ``split`` tensors.

    Dense tensors before the split go to the allreduce; sparsified tensors send
    their kept entries (value + index) and dense tensors after the split their
    whole values through the allgather. ``split = 0`` is plain SSFusion (all
    allgather).
    """
    ar = ag = 0.0
    for j, (n, k, f) in enumerate(zip(sizes, kept, sparsified, strict=True)):
        if f:
            ag += ENTRY_BYTES * k
        elif j < split:
            ar += 4.0 * n
        else:
            ag += 4.0 * n
    return ar, ag


def _norm_tail(x: float) -> float:
    """P(|X| > x) for a standard normal X."""
    return math.erfc(x / math.sqrt(2.0))


def tensor_missing_rate(sizes: Sequence[int], scales: Sequence[float], density: float) -> float:
    """Fraction of tensors with < 0.5 expected entries kept by a buffer-level top-k.

    sizes: entries per tensor; scales: each tensor's gradient standard deviation.
    """
    k = density * sum(sizes)
    lo, hi = 0.0, 100.0 * max(scales)
    for _ in range(200):  # bisection on the threshold
        mid = (lo + hi) / 2
        kept = sum(n * _norm_tail(mid / s) for n, s in zip(sizes, scales, strict=True))
        lo, hi = (mid, hi) if kept > k else (lo, mid)
    t = (lo + hi) / 2
    missing = sum(1 for n, s in zip(sizes, scales, strict=True) if n * _norm_tail(t / s) < 0.5)
    return missing / len(sizes)


# -- the schedules --------------------------------------------------------------------------


class FusionOptions(Options):
    buffer_mb: float = Field(64.0, gt=0, le=4096, description="fusion buffer size, MiB")
    tensors_per_buffer: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="0: buffers filled up to buffer_mb; N: N gradient tensors per buffer in "
        "backward order, whatever their size (the OMGS baseline in the SSFusion authors' "
        "repository, omgs/hv_distributed_optimizer_omgs.py, groups 10 layers' tensors)",
    )
    framework: Literal["horovod", "none"] = Field(
        "horovod",
        description="horovod: cycle wait, negotiation and fusion-buffer copies per buffer "
        "(SSFusion runs on Horovod 0.28.1, section V); none: collectives alone",
    )
    cycle_time_ms: float = Field(
        HOROVOD_CYCLE_MS, gt=0, le=1000, description="Horovod cycle time, ms (1 since v0.21)"
    )
    density: float = Field(0.01, gt=0, le=1, description="fraction of entries kept")
    method: Literal["exact", "dgc", "gaussian", "random", "threshold"] = "dgc"
    algorithm: algorithm_name("allreduce", "allgather") = "auto"
    exclusion: Literal["compensated", "unbounded"] = Field(
        "compensated",
        description="SSFusion's equation-2 exclusions: compensated = only while density-aware "
        "sparsification keeps the buffer's sent entries at density x total (the paper's "
        "'communication time remains unchanged'); unbounded = until equation 2 holds, "
        "whatever the excluded tensors add to the allgather",
    )


def _fan_in(model, layer_index: int) -> float:
    shape = model.layers[layer_index].shape
    if "cin" in shape:
        groups = int(shape.get("groups", 1))
        return max(
            1.0, int(shape["cin"]) / groups * int(shape.get("kh", 1)) * int(shape.get("kw", 1))
        )
    if "in_features" in shape:
        return float(shape["in_features"])
    return 1.0


class _Fusion(Schedule):
    """Buffers, per-tensor costs and the shared step skeleton."""

    Options = FusionOptions
    mode = "dense"  # dense | pertensor | multitensor | selective
    offload = False
    interleave = False

    def buffers(self, ctx: BuildContext) -> list[Bucket]:
        o: FusionOptions = self.options  # type: ignore[assignment]
        if o.tensors_per_buffer:
            return group_by_count(grad_tensors(ctx.model), o.tensors_per_buffer)
        cap = o.buffer_mb * MB
        return group_tensors(grad_tensors(ctx.model), cap, cap, 4)

    def _gather_time(self, ctx: BuildContext, nbytes: float) -> float:
        o: FusionOptions = self.options  # type: ignore[assignment]
        return ctx.estimate(CollectiveCall("allgather", (ctx.ranks,), nbytes, o.algorithm))

    def _reduce_time(self, ctx: BuildContext, nbytes: float) -> float:
        if nbytes <= 0:
            return 0.0
        o: FusionOptions = self.options  # type: ignore[assignment]
        return ctx.estimate(CollectiveCall("allreduce", (ctx.ranks,), nbytes, o.algorithm))

    def build(self, ctx: BuildContext) -> Iteration:
        o: FusionOptions = self.options  # type: ignore[assignment]
        p = ctx.profile
        buffers = self.buffers(ctx)
        tb = tensor_backward_times(ctx.model, p, ctx.batch, ctx.precision)
        plans = self.plan_buffers(ctx, buffers, tb)
        prog = RankClass("all", ctx.ranks)
        last_tensor = {b.tensors[-1].layer: b for b in buffers}
        pending: dict[int, list[str]] = {b.index: [] for b in buffers}
        by_layer: dict[int, list[GradTensor]] = {}
        for b in buffers:
            for t in b.tensors:
                by_layer.setdefault(t.layer, []).append(t)
        buffer_of = {t.index: b for b in buffers for t in b.tensors}
        comm_ops: list[str] = []
        horovod = o.framework == "horovod" and ctx.gpus > 1
        # Horovod's controller: a bit-vector allreduce over the response cache's entries
        negotiation = (
            horovod_cycle_wait(o.cycle_time_ms)
            + ctx.estimate(
                CollectiveCall("allreduce", (ctx.ranks,), float(-(-len(tb) // 8)), o.algorithm)
            )
            if horovod
            else 0.0
        )

        def negotiate(name: str, deps: tuple[str, ...], nbytes: float) -> tuple[str, ...]:
            """Cycle wait + negotiation on the control thread, then copy into the buffer."""
            if not horovod:
                return deps
            neg = prog.add(compute(f"negotiate.{name}", negotiation, "negotiation", deps, "ctrl"))
            t = fused_copy_time(p, nbytes)
            op = prog.add(compute(f"fuse_in.{name}", t, "framework", (neg.id,), "comm"))
            return (op.id,)

        def unfuse(name: str, nbytes: float) -> None:
            """Copy the collective's output out of the fusion buffer (Horovod's stream)."""
            if horovod:
                t = fused_copy_time(p, nbytes)
                comm_ops.append(
                    prog.add(compute(f"fuse_out.{name}", t, "framework", (), "comm")).id
                )

        def on_grad(i: int, grad_op: str) -> None:
            for t in by_layer[i]:
                b = buffer_of[t.index]
                plan = plans[b.index]
                if t.index in plan["offloaded"]:
                    d2h = prog.add(
                        compute(
                            f"d2h.{t.index}",
                            p.kernel_time("memcpy", nbytes=4 * t.numel, kind="d2h_pinned"),
                            "offload",
                            (grad_op,),
                            stream="copy",
                        )
                    )
                    cpu = prog.add(
                        compute(
                            f"cpu_sparsify.{t.index}",
                            p.kernel_time(
                                "sparsify",
                                numel=t.numel,
                                density=plan["density"],
                                method=o.method,
                                where="host",
                            ),
                            "offload",
                            (d2h.id,),
                            stream="cpu",
                        )
                    )
                    kept = selected(t.numel, plan["density"])
                    h2d = prog.add(
                        compute(
                            f"h2d.{t.index}",
                            p.kernel_time("memcpy", nbytes=ENTRY_BYTES * kept, kind="h2d_pinned"),
                            "offload",
                            (cpu.id,),
                            stream="h2d",
                        )
                    )
                    pending[b.index].append(h2d.id)
                elif t.index in plan["gpu_sparsified"]:
                    t_s = p.kernel_time(
                        "sparsify", numel=t.numel, density=plan["density"], method=o.method
                    )
                    op = prog.add(compute(f"sparsify.{t.index}", t_s, "sparsification", (grad_op,)))
                    pending[b.index].append(op.id)
                else:
                    pending[b.index].append(grad_op)
                if plan.get("split") is not None and t.index == plan["split_after"]:
                    call = CollectiveCall("allreduce", (ctx.ranks,), plan["ar_bytes"], o.algorithm)
                    deps = negotiate(f"ar{b.index}", tuple(pending[b.index]), plan["ar_bytes"])
                    comm_ops.append(
                        prog.add(collective(f"allreduce.{b.index}", call, "allreduce", deps)).id
                    )
                    unfuse(f"ar{b.index}", plan["ar_bytes"])
            b = last_tensor.get(i)
            if b is None or ctx.gpus < 2:
                return
            plan = plans[b.index]
            deps = tuple(pending[b.index])
            if plan["whole"] == "sparsify_buffer":
                t_s = p.kernel_time("sparsify", numel=b.numel, density=o.density, method=o.method)
                deps = (
                    prog.add(compute(f"sparsify.buf{b.index}", t_s, "sparsification", deps)).id,
                )
            deps = negotiate(str(b.index), deps, plan["ag_bytes"] + plan["dense_ar_bytes"])
            if plan["ag_bytes"] > 0:
                call = CollectiveCall("allgather", (ctx.ranks,), plan["ag_bytes"], o.algorithm)
                comm_ops.append(
                    prog.add(collective(f"allgather.{b.index}", call, "allgather", deps)).id
                )
            if plan["dense_ar_bytes"] > 0:
                call = CollectiveCall(
                    "allreduce", (ctx.ranks,), plan["dense_ar_bytes"], o.algorithm
                )
                comm_ops.append(
                    prog.add(collective(f"allreduce.{b.index}", call, "allreduce", deps)).id
                )
            unfuse(str(b.index), ctx.gpus * plan["ag_bytes"] + plan["dense_ar_bytes"])

        micro_steps(
            prog, ctx.model, p, ctx.batch, ctx.precision, ctx.accumulation, on_grad, ctx.input_load
        )
        last = prog.ops[-1].id
        for b in buffers:
            plan = plans[b.index]
            if plan["decompress_numel"] and ctx.gpus > 1:
                t = p.kernel_time("scatter_add", numel=ctx.gpus * plan["decompress_numel"])
                t += p.elementwise_time(8 * b.numel)
                last = prog.add(
                    compute(
                        f"decompress.{b.index}",
                        t,
                        "decompress",
                        tuple(comm_ops) if b.index == len(buffers) - 1 else (),
                    )
                ).id
        deps = (last, *comm_ops[-1:])
        optimizer_step(prog, p, ctx.model.params, ctx.precision, deps, ctx.optimizer)
        extra = {
            "buffers": len(buffers),
            "sparsified_tensors": sum(
                len(pl["gpu_sparsified"]) + len(pl["offloaded"]) for pl in plans.values()
            ),
            "offloaded_tensors": sum(len(pl["offloaded"]) for pl in plans.values()),
            "tensors": sum(len(b.tensors) for b in buffers),
            "densities": [round(pl["density"], 6) for pl in plans.values()],
        }
        if self.mode == "multitensor":
            extra["tensor_missing_rate"] = self.missing_rate(ctx, buffers)
        return Iteration([prog], samples=ctx.gpus * ctx.batch * ctx.accumulation, extra=extra)

    def missing_rate(self, ctx: BuildContext, buffers: list[Bucket]) -> float:
        o: FusionOptions = self.options  # type: ignore[assignment]
        missing = total = 0.0
        for b in buffers:
            sizes = [t.numel for t in b.tensors]
            scales = [1.0 / math.sqrt(_fan_in(ctx.model, t.layer)) for t in b.tensors]
            missing += tensor_missing_rate(sizes, scales, o.density) * len(sizes)
            total += len(sizes)
        return missing / total

    # Each subclass decides, per buffer: which tensors are sparsified on the GPU or
    # the CPU, at what density, and what travels by allgather / allreduce.
    def plan_buffers(self, ctx: BuildContext, buffers: list[Bucket], tb: dict[int, float]) -> dict:
        o: FusionOptions = self.options  # type: ignore[assignment]
        plans = {}
        for b in buffers:
            if self.mode == "dense":
                plans[b.index] = self._plan(dense_ar=4.0 * b.numel)
            elif self.mode == "pertensor":
                kept = sum(selected(t.numel, o.density) for t in b.tensors)
                plans[b.index] = self._plan(
                    gpu={t.index for t in b.tensors},
                    density=o.density,
                    ag=ENTRY_BYTES * kept,
                    decompress=kept,
                )
            else:  # multitensor
                kept = selected(b.numel, o.density)
                plans[b.index] = self._plan(
                    whole="sparsify_buffer",
                    density=o.density,
                    ag=ENTRY_BYTES * kept,
                    decompress=kept,
                )
        return plans

    @staticmethod
    def _plan(
        gpu=frozenset(),
        offloaded=frozenset(),
        density=1.0,
        ag=0.0,
        dense_ar=0.0,
        decompress=0,
        whole=None,
        split=None,
        split_after=None,
        ar=0.0,
    ) -> dict:
        return {
            "gpu_sparsified": set(gpu),
            "offloaded": set(offloaded),
            "density": density,
            "ag_bytes": float(ag),
            "dense_ar_bytes": float(dense_ar),
            "decompress_numel": decompress,
            "whole": whole,
            "split": split,
            "split_after": split_after,
            "ar_bytes": float(ar),
        }


class _Selective(_Fusion):
    """SSFusion's selective sparsification, optionally with -O and -I."""

    mode = "selective"

    def plan_buffers(self, ctx: BuildContext, buffers: list[Bucket], tb: dict[int, float]) -> dict:
        o: FusionOptions = self.options  # type: ignore[assignment]
        p = ctx.profile
        plans = {}
        t_b_all = [[tb[t.index] for t in b.tensors] for b in buffers]
        sizes_all = [[t.numel for t in b.tensors] for b in buffers]
        t_gpu_all = [
            [p.kernel_time("sparsify", numel=n, density=o.density, method=o.method) for n in sizes]
            for sizes in sizes_all
        ]
        t_comm_initial = [
            self._gather_time(ctx, ENTRY_BYTES * sum(selected(n, o.density) for n in sizes))
            for sizes in sizes_all
        ]
        budgets = [
            dense_budget(sum(sizes), o.density) if o.exclusion == "compensated" else None
            for sizes in sizes_all
        ]
        flags_all = selective_flags(t_b_all, t_gpu_all, sizes_all, t_comm_initial, budgets)
        for b in buffers:
            sizes = sizes_all[b.index]
            t_b = t_b_all[b.index]
            flags = flags_all[b.index]
            density = compensated_density(sizes, flags, o.density)
            t_gpu = [
                p.kernel_time("sparsify", numel=n, density=density, method=o.method) for n in sizes
            ]
            offloaded: list[int] = []
            if self.offload:
                cand = sorted(
                    (j for j in range(len(sizes)) if flags[j]), key=lambda j: (-sizes[j], j)
                )
                t_cpu = [
                    p.kernel_time(
                        "sparsify", numel=n, density=density, method=o.method, where="host"
                    )
                    for n in sizes
                ]
                t_d2h = [p.kernel_time("memcpy", nbytes=4 * n, kind="d2h_pinned") for n in sizes]
                t_h2d = [
                    p.kernel_time(
                        "memcpy", nbytes=ENTRY_BYTES * selected(n, density), kind="h2d_pinned"
                    )
                    for n in sizes
                ]
                # only the sparsified tensors have a GPU sparsification to move or to wait for
                t_gpu_sel = [t if f else 0.0 for t, f in zip(t_gpu, flags, strict=True)]
                offloaded = offload_selection(t_b, t_gpu_sel, t_cpu, t_d2h, t_h2d, cand)
            kept = [selected(n, density) if f else 0 for n, f in zip(sizes, flags, strict=True)]
            idx = [t.index for t in b.tensors]
            gpu = {idx[j] for j in range(len(sizes)) if flags[j] and j not in offloaded}
            off = {idx[j] for j in offloaded}
            cost = [t_b[j] + (t_gpu[j] if idx[j] in gpu else 0.0) for j in range(len(sizes))]
            if self.interleave:
                parts = [split_bytes(sizes, kept, flags, k) for k in range(len(sizes) + 1)]
                split, _ = interleave_split(
                    cost,
                    lambda k, parts=parts: self._reduce_time(ctx, parts[k][0]),
                    lambda k, parts=parts: self._gather_time(ctx, parts[k][1]),
                )
                ar, ag = parts[split]
            else:
                ar, ag = split_bytes(sizes, kept, flags, 0)
            plans[b.index] = self._plan(
                gpu=gpu,
                offloaded=off,
                density=density,
                ag=ag,
                decompress=sum(kept),
                split=split if self.interleave and ar > 0 else None,
                split_after=idx[split - 1] if self.interleave and split > 0 else None,
                ar=ar,
            )
        return plans


@register
class FusionDense(_Fusion):
    name = "fusion-dense"
    summary = "tensor fusion with dense allreduce per buffer (Horovod-like)"
    mode = "dense"


@register
class FusionPerTensor(_Fusion):
    name = "fusion-pertensor"
    summary = "sparsify every tensor (DGC), fuse, allgather per buffer"
    mode = "pertensor"


@register
class FusionMultiTensor(_Fusion):
    name = "fusion-multitensor"
    summary = "fuse, sparsify each buffer as a whole, allgather (OMGS/Cupcake style)"
    mode = "multitensor"


@register
class SSFusion(_Selective):
    name = "ssfusion"
    summary = "SSFusion: overlap-maximised selective sparsification of fused buffers"


@register
class SSFusionO(_Selective):
    name = "ssfusion-o"
    summary = "SSFusion + offloading large tensors' sparsification to CPU threads"
    offload = True


@register
class SSFusionOI(_Selective):
    name = "ssfusion-oi"
    summary = "SSFusion-O + interleaved allreduce (dense) / allgather (sparse) per buffer"
    offload = True
    interleave = True

"""PyTorch DistributedDataParallel (or apex DDP): dense gradients allreduced in buckets.

Per iteration on every rank: forward and backward (with gradient accumulation,
syncing only on the last micro-step). Gradients are grouped into buckets in
backward order (PyTorch: first bucket ``first_bucket_mb``, then
``bucket_cap_mb``; apex: buckets of at least ``message_size`` elements). As
each gradient is ready the framework copies it into its bucket on the compute
stream; a bucket's allreduce is launched on the communication stream when its
last copy is done, so it overlaps the rest of backward. After backward the
compute stream waits for each allreduce in bucket order and copies the results
back into the gradients, then the optimizer steps. The copies and casts are the
frameworks' own kernels, timed by the device profile
(:mod:`simcluster.schedules.frameworks`).

With ``broadcast_buffers`` (torch's default) the BatchNorm buffers are
broadcast from rank 0 before each forward (one flatten, broadcast and copy back
per dtype). ``implementation: colossalai`` is ColossalAI's data-parallel gradient handler
instead: no bucket overlaps backward; after it every gradient is flattened into
one buffer, allreduced in one collective and copied back (the node-based
paper's baseline, which it ran in ColossalAI).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from simcluster.program import RankClass
from simcluster.schedules.base import (
    BuildContext,
    Iteration,
    Options,
    Schedule,
    algorithm_name,
    register,
)
from simcluster.schedules.frameworks import (
    APEX_MESSAGE_SIZE,
    apex_buckets,
    buffer_broadcast,
    colossalai_backward,
    ddp_backward,
)
from simcluster.schedules.training import (
    MB,
    grad_tensors,
    make_buckets,
    optimizer_step,
)

__all__ = ["DDP", "DDPOptions", "first_bucket_mb"]


class DDPOptions(Options):
    bucket_cap_mb: float = Field(25.0, gt=0, le=4096, description="bucket cap, MiB")
    first_bucket_mb: float = Field(
        1.0,
        gt=0,
        le=4096,
        description="first bucket cap, MiB (default: 1 MiB while bucket_cap_mb is left at its "
        "default, else bucket_cap_mb, as torch 2.x does)",
    )
    algorithm: algorithm_name("allreduce") = "auto"
    gradient_dtype: Literal["fp32", "fp16", "bf16"] = Field(
        "fp32", description="dtype on the wire (fp16/bf16 = a compression comm hook)"
    )
    implementation: Literal["torch", "apex", "colossalai"] = Field(
        "torch",
        description="torch.nn.parallel.DistributedDataParallel, apex's DDP, or ColossalAI's "
        "data-parallel gradient handler (one flat allreduce after backward)",
    )
    gradient_as_bucket_view: bool = Field(
        False, description="torch DDP: gradients are views of the buckets (no copy-out)"
    )
    broadcast_buffers: bool = Field(
        True,
        description="torch DDP: broadcast module buffers (BatchNorm statistics) from rank 0 "
        "before every forward, as DistributedDataParallel does by default",
    )
    buffer_algorithm: algorithm_name("broadcast") = "auto"
    message_size: int = Field(
        APEX_MESSAGE_SIZE, gt=0, description="apex: elements per bucket (at least)"
    )


def first_bucket_mb(o: DDPOptions) -> float:
    """The first bucket's cap, MiB, as torch 2.x sets it (``torch/nn/parallel/distributed.py``,
    the first-bucket optimisation): 1 MiB while ``bucket_cap_mb`` is left at its default,
    the same cap as the others once ``bucket_cap_mb`` is given; an explicit
    ``first_bucket_mb`` wins."""
    given = o.model_fields_set
    if "bucket_cap_mb" in given and "first_bucket_mb" not in given:
        return o.bucket_cap_mb
    return o.first_bucket_mb


@register
class DDP(Schedule):
    name = "ddp"
    summary = "PyTorch DDP: bucketed dense allreduce overlapped with backward"
    Options = DDPOptions

    def build(self, ctx: BuildContext) -> Iteration:
        o: DDPOptions = self.options  # type: ignore[assignment]
        p = ctx.profile
        prog = RankClass("all", ctx.ranks)
        if o.implementation == "torch" and o.broadcast_buffers:
            buffer_broadcast(prog, ctx, (ctx.ranks,), o.buffer_algorithm)
        wire = 4 if o.gradient_dtype == "fp32" else 2
        if o.implementation == "colossalai":
            deps = colossalai_backward(prog, ctx, (ctx.ranks,), o.algorithm)
            optimizer_step(prog, p, ctx.model.params, ctx.precision, deps, ctx.optimizer)
            return Iteration([prog], samples=ctx.gpus * ctx.batch * ctx.accumulation)
        apex = o.implementation == "apex"
        if apex:
            buckets = apex_buckets(grad_tensors(ctx.model), o.message_size)
        else:
            buckets = make_buckets(ctx.model, o.bucket_cap_mb * MB, first_bucket_mb(o) * MB, wire)
        deps = ddp_backward(
            prog,
            ctx,
            buckets,
            (ctx.ranks,),
            wire,
            o.algorithm,
            apex=apex,
            gradient_as_bucket_view=o.gradient_as_bucket_view,
        )
        optimizer_step(prog, p, ctx.model.params, ctx.precision, deps, ctx.optimizer)
        return Iteration([prog], samples=ctx.gpus * ctx.batch * ctx.accumulation)

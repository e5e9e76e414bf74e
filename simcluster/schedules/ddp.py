"""PyTorch DistributedDataParallel: dense gradients allreduced in buckets.

Per iteration on every rank: forward and backward (with gradient accumulation,
syncing only on the last micro-step). Gradients are grouped into buckets in
backward order (first bucket ``first_bucket_mb``, then ``bucket_cap_mb``); each
bucket's allreduce is launched on the communication stream as soon as its last
gradient is ready, so it overlaps the rest of backward. The optimizer step
waits for the last allreduce.
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
from simcluster.schedules.training import MB, bucketed_allreduce, micro_steps, optimizer_step

__all__ = ["DDP", "DDPOptions"]


class DDPOptions(Options):
    bucket_cap_mb: float = Field(25.0, gt=0, le=4096, description="bucket cap, MiB")
    first_bucket_mb: float = Field(1.0, gt=0, le=4096, description="first bucket cap, MiB")
    algorithm: algorithm_name("allreduce") = "auto"
    gradient_dtype: Literal["fp32", "fp16", "bf16"] = Field(
        "fp32", description="dtype on the wire (fp16/bf16 = a compression comm hook)"
    )


@register
class DDP(Schedule):
    name = "ddp"
    summary = "PyTorch DDP: bucketed dense allreduce overlapped with backward"
    Options = DDPOptions

    def build(self, ctx: BuildContext) -> Iteration:
        o: DDPOptions = self.options  # type: ignore[assignment]
        prog = RankClass("all", ctx.ranks)
        ready = micro_steps(
            prog, ctx.model, ctx.profile, ctx.batch, ctx.precision, ctx.accumulation
        )
        backward_done = prog.ops[-1].id
        wire = 4 if o.gradient_dtype == "fp32" else 2
        synced = bucketed_allreduce(
            prog,
            ctx.model,
            (ctx.ranks,),
            ready,
            o.bucket_cap_mb * MB,
            o.first_bucket_mb * MB,
            wire,
            o.algorithm,
            "allreduce",
        )
        deps = (backward_done, *synced[-1:])
        optimizer_step(prog, ctx.profile, ctx.model.params, ctx.precision, deps, ctx.optimizer)
        return Iteration([prog], samples=ctx.gpus * ctx.batch * ctx.accumulation)

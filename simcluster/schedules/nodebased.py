"""Node-based communication (the node-based paper, section III, Algorithm 2).

Every step each node's replicas allreduce their gradients among themselves
(the intra-node group, bucketed and overlapped with backward as in DDP) and
step their optimizers. Every K' steps, and at the last step of each epoch, all
replicas average their parameters with one allreduce over every rank (the
inter-node group). With K steps per epoch that is floor(K/K') + 1 averagings
per epoch (K/K' when K' divides K), as in the paper.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from simcluster.errors import ConfigError
from simcluster.program import CollectiveCall, RankClass, collective
from simcluster.schedules.base import (
    BuildContext,
    Iteration,
    Options,
    RunShape,
    Schedule,
    Segment,
    algorithm_name,
    register,
)
from simcluster.schedules.frameworks import colossalai_backward, ddp_backward
from simcluster.schedules.training import MB, make_buckets, optimizer_step

__all__ = ["NodeBased", "NodeBasedOptions", "averagings_per_epoch"]


def averagings_per_epoch(steps: int, k_prime: int) -> int:
    """Inter-node parameter averagings in an epoch of ``steps`` steps."""
    k = min(k_prime, steps)
    return steps // k + (1 if steps % k else 0)


class NodeBasedOptions(Options):
    k_prime: int = Field(10, ge=1, description="steps between inter-node averagings (K')")
    replicas_per_node: int | None = Field(
        None, ge=1, description="replicas in an intra-node group (default: GPUs per node)"
    )
    bucket_cap_mb: float = Field(25.0, gt=0, le=4096)
    implementation: Literal["torch", "colossalai"] = Field(
        "torch",
        description="intra-node gradient sync as torch DDP (buckets overlapping backward) or "
        "ColossalAI's gradient handler (one flat allreduce after backward)",
    )
    algorithm: algorithm_name("allreduce") = Field(
        "auto", description="allreduce algorithm for both groups"
    )


@register
class NodeBased(Schedule):
    name = "nodebased"
    summary = "intra-node gradient allreduce every step, inter-node averaging every K' steps"
    Options = NodeBasedOptions

    def groups(self, ctx: BuildContext) -> tuple[tuple[int, ...], ...]:
        o: NodeBasedOptions = self.options  # type: ignore[assignment]
        per = o.replicas_per_node or ctx.ranks_per_node
        if ctx.ranks_per_node % per:
            raise ConfigError(
                None,
                "schedules.options.replicas_per_node",
                per,
                f"must divide the {ctx.ranks_per_node} GPUs per node",
            )
        return tuple(
            tuple(node[i : i + per]) for node in ctx.node_groups() for i in range(0, len(node), per)
        )

    def step(self, ctx: BuildContext, average: bool) -> Iteration:
        o: NodeBasedOptions = self.options  # type: ignore[assignment]
        prog = RankClass("all", ctx.ranks)
        if o.implementation == "colossalai":
            deps = colossalai_backward(
                prog, ctx, self.groups(ctx), o.algorithm, "intra_allreduce", "intra"
            )
        else:
            buckets = make_buckets(ctx.model, o.bucket_cap_mb * MB, 1 * MB, 4)
            deps = ddp_backward(
                prog, ctx, buckets, self.groups(ctx), 4, o.algorithm, "intra_allreduce", "intra"
            )
        opt = optimizer_step(
            prog, ctx.profile, ctx.model.params, ctx.precision, deps, ctx.optimizer
        )
        if average and ctx.gpus > 1:
            call = CollectiveCall(
                "allreduce", (ctx.ranks,), float(4 * ctx.model.params), o.algorithm
            )
            prog.add(collective("param_average", call, "inter_allreduce", (opt,)))
        return Iteration([prog], samples=ctx.gpus * ctx.batch * ctx.accumulation)

    def build(self, ctx: BuildContext) -> Iteration:
        return self.step(ctx, average=False)

    def plan(self, ctx: BuildContext, run: RunShape) -> list[Segment]:
        o: NodeBasedOptions = self.options  # type: ignore[assignment]
        n_avg = averagings_per_epoch(run.steps, o.k_prime)
        plain = run.steps - n_avg
        segs = []
        if plain:
            segs.append(Segment("step", self.step(ctx, False), plain * run.epochs, 1, plain=True))
        if n_avg > 1:
            segs.append(
                Segment("averaging step", self.step(ctx, True), (n_avg - 1) * run.epochs, 1)
            )
        last = self.step(ctx.with_batch(run.last_batch), True)
        segs.append(Segment("last step (averaging)", last, run.epochs, 1))
        return segs

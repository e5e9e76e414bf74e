"""H-SADMM (the PRUNEX paper, Algorithm 1 and sections 3-4) and its flat ablation.

One outer iteration: every GPU runs E local epochs of SGD with the proximal
term (no communication); then the consensus:

1. every rank forms theta + u; intra-node allreduce of it (full size);
2. every rank updates z_i and projects it onto the sparsity set (group norms +
   top-k per conv layer), deriving the masks;
3. leaders OR their element masks with an allreduce (mask sync);
4. leaders compress z with the global mask and allreduce the compacted
   buffers across nodes, bucketed at ``bucket_mb``; then decompress;
5. intra-node broadcast of z from the leader; dual updates and residual norms.

The kept fraction of each conv layer's structures follows a trajectory from
1 (masks start all ones) down to ``keep`` over ``ramp`` outer iterations.
After ``t_freeze`` outer iterations the masks are frozen: no projection (a
cached mask is applied) and no mask sync. ``hsadmm-flat`` (the paper's PruneX
(AR) ablation) runs the same algorithm with one dense allreduce over every
worker: no leaders and no shrinkage.

The leaders' inter-node allreduce runs on one NIC per node (the one next to
local rank 0), as NCCL builds it for a communicator with one GPU per node: it
keeps only the communicator's GPUs in a node's topology (``ncclTopoTrimSystem``,
src/graph/paths.cc), so the leader's GPU has no NVLink peers and its total
bandwidth is its PCIe link (``getTotalBw`` in src/graph/search.cc; ``PCI_BW``
12 GB/s for Gen3 x16, src/graph/topo.h), and ``ncclTopoCompute`` stops at the
first ring whose channels x bandwidth reach that total, found on the GPU's own
NIC (NVIDIA/nccl 5067397c; the same code in v2.25.1-1, the version the paper
ran, section 5.1.1: ``getTotalBw`` and the stop at ``nChannels*bwInter >=
totalBw`` in search.cc, ``PCI_BW`` and ``NET_BW`` 12 in topo.h, and
``ncclTopoSelectNets`` offering the GPU's local NIC first). The topology's NIC
affinity gives the same single NIC; a second rail could add at most up to the
GPU's own PCIe rate. So per rail the leaders move 2(M-1)/M x C bytes for M
nodes and compact buffer C, where a ring over all P GPUs of the same nodes
(DDP's) moves 2(P-1)/P x S / 2 over each of the two rails for dense buffer S:
at C/S = 1/2 the leaders' step costs (M-1)/M / ((P-1)/P) of DDP's allreduce at
any per-rail bandwidth (0.95 at 16 nodes, 64 GPUs): on Puhti, halving the bytes
per node saves 5 % per rail.

Frequency and payload (Algorithm 1, section 4.2): one consensus per outer
iteration, after the local epochs; the leaders' inter-node allreduce runs in
every round, the mask sync (line 18) only before ``t_freeze``. The paper's text
of Algorithm 1 has lost its layout (line 18 is indented deeper than lines
19-25, all after "if k <= T_freeze"); section 4.5 settles it: after the freeze
the compacted shapes "become invariant" and the buffers are reused. The payload is
fp32: the paper's dense message, "~220 MB" for ResNet-152 (Fig. 6a), is its
58.2 M parameters at 4 bytes (233 MB, 222 MiB).

Intra-node granularity (``intra_granularity``): the paper buckets only the
leaders' inter-node allreduce (section 4.4.2: payloads coalesced into ~32 MB
buffers "to amortize per-call latency and kernel-launch overheads" instead of
"numerous small layer-wise collectives"), and calls the intra-node allreduce
"latency-bound rather than bandwidth-bound" (section 4.2), which one 233 MB
allreduce over NVLink is not. ``tensor`` reads that as one intra-node allreduce
(step 1) and one broadcast (step 5) per parameter tensor, in model order, each
paying its own collective latency (the network profile's protocol constants;
no host-side per-call cost is modelled); ``flat`` (the default) is one call
over the whole state. The z update waits for the intra-node sum either way
(Eq. 9 is formed from it). The authors' repository (github.com/Alirezalm/PruneX,
named in the paper) was not retrievable here, so the paper's text is the source.

Mask sync (line 18, section 4.3): the leaders OR their masks with one allreduce.
The mask has the weight's shape: section 4.4.1 derives the kept filters and
channels from it by ``any`` over the spatial dimensions and the other channel
axis, line 11 multiplies z_i by it element-wise, and section 4.5 applies the
frozen masks element-wise. So ``mask_sync: element`` (the default) sends one entry
per weight element of every pruned layer (58.0 M for ResNet-152), at
``mask_entry_bytes`` each: 1 for the "boolean mask tensors" of section 4.3
(torch.bool, which torch sends to NCCL as uint8; ``ProcessGroupNCCL::getNcclReduceOp``
refuses ``ReduceOp.BOR`` and maps SUM on bool to ``ncclMax``, an OR); the paper
names the sync "bitwise" but does not say whether the masks are bit-packed (0.125).
``structure`` sends one entry per channel or filter.

Replicated node state (sections 4.1.2, 4.2): every worker of a node holds z_i and
v_i and computes the z update (Eq. 9) and the projection itself ("each worker uses
the aggregated dense candidate"), so followers run them too, beside the leader;
only the leader syncs masks, compresses and joins the inter-node allreduce.

Layers are pruned when they are convolutions with more than 3 input channels
(the stem sees the image), which is our reading of "sparsity applied to
convolutional layers only".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from simcluster.program import CollectiveCall, RankClass, collective, compute
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
from simcluster.schedules.training import MB, micro_steps, optimizer_step

__all__ = [
    "HSADMM",
    "HSADMMFlat",
    "HSADMMOptions",
    "PrunedLayer",
    "pruned_layers",
    "kept_fraction",
    "compacted_numel",
    "param_tensor_bytes",
]

Sparsity = Literal["filter", "channel", "kernel_shape", "combined"]


@dataclass(frozen=True)
class PrunedLayer:
    """A conv layer under structured sparsity: weight shape and structure count."""

    index: int
    cout: int
    cin: int  # input channels per group
    kernel: int  # kh * kw
    bias: int

    @property
    def numel(self) -> int:
        return self.cout * self.cin * self.kernel

    def structures(self, sparsity: Sparsity) -> int:
        """Mask entries (one per filter / channel / kernel position)."""
        return {
            "filter": self.cout,
            "channel": self.cin,
            "kernel_shape": self.kernel,
            "combined": self.cout + self.cin,
        }[sparsity]

    def kept(self, sparsity: Sparsity, fraction: float) -> int:
        """Weight elements kept when ``fraction`` of the structures survive."""

        def keep(n: int) -> int:
            return max(1, min(n, round(n * fraction)))

        if sparsity == "filter":
            return keep(self.cout) * self.cin * self.kernel
        if sparsity == "channel":
            return self.cout * keep(self.cin) * self.kernel
        if sparsity == "kernel_shape":
            return self.cout * self.cin * keep(self.kernel)
        return keep(self.cout) * keep(self.cin) * self.kernel


def pruned_layers(model) -> list[PrunedLayer]:
    """Conv layers the projection acts on (input channels > 3)."""
    out = []
    for i, layer in enumerate(model.layers):
        if layer.op != "conv":
            continue
        s = layer.shape
        groups = int(s.get("groups", 1))
        cin = int(s["cin"]) // groups
        if int(s["cin"]) <= 3:
            continue
        kernel = int(s["kh"]) * int(s["kw"])
        weight = int(s["cout"]) * cin * kernel
        out.append(PrunedLayer(i, int(s["cout"]), cin, kernel, layer.params - weight))
    return out


def kept_fraction(k: int, keep: float, ramp: int) -> float:
    """Fraction of structures kept at outer iteration ``k`` (0-based)."""
    return 1.0 - (1.0 - keep) * min(1.0, k / ramp)


def compacted_numel(model, sparsity: Sparsity, fraction: float) -> int:
    """Elements of the compacted consensus buffer: pruned convs shrink, the rest is dense."""
    layers = pruned_layers(model)
    full = sum(pl.numel for pl in layers)
    kept = sum(pl.kept(sparsity, fraction) for pl in layers)
    return model.params - full + kept


def chunked_allreduce(
    prog: RankClass,
    name: str,
    groups: tuple[tuple[int, ...], ...],
    total_bytes: float,
    cap_bytes: float,
    algorithm: str,
    deps: tuple[str, ...],
) -> str:
    """Allreduce ``total_bytes`` as buckets of at most ``cap_bytes``; the last op's id.

    The ops are named ``<name>.b<k>`` and booked under category ``name``.
    """
    chunks = [cap_bytes] * int(total_bytes // cap_bytes)
    if total_bytes % cap_bytes:
        chunks.append(total_bytes % cap_bytes)
    last = deps[-1]
    for b, nbytes in enumerate(chunks):
        call = CollectiveCall("allreduce", groups, nbytes, algorithm)
        last = prog.add(collective(f"{name}.b{b}", call, name, deps)).id
    return last


def param_tensor_bytes(model, dtype_bytes: int = 4) -> list[float]:
    """Bytes of every trainable tensor, in registration (model) order."""
    return [float(dtype_bytes * n) for layer in model.layers for n in layer.param_tensors]


class HSADMMOptions(Options):
    keep: float = Field(0.5, gt=0, le=1, description="kept fraction of structures")
    sparsity: Sparsity = "channel"
    local_epochs: int = Field(5, ge=1, le=1000, description="E: local epochs per outer iteration")
    t_freeze: int = Field(10, ge=0, description="outer iterations before masks freeze")
    ramp: int = Field(5, ge=1, description="outer iterations for the kept fraction to reach keep")
    bucket_mb: float = Field(
        32.0, ge=0.25, le=4096,
        description="inter-node bucket size, MiB (from 256 KiB: a smaller one cuts a model "
        "into more allreduces than a run can hold)",
    )  # fmt: skip
    intra_algorithm: algorithm_name("allreduce", "broadcast") = "auto"
    inter_algorithm: algorithm_name("allreduce") = "auto"
    intra_granularity: Literal["flat", "tensor"] = Field(
        "flat",
        description="intra-node allreduce of theta + u and broadcast of z: one collective "
        "over the flat state (flat) or one per parameter tensor (tensor, layer-wise)",
    )
    mask_sync: Literal["element", "structure"] = Field(
        "element",
        description="entries of the leaders' mask OR: one per weight element of each "
        "pruned layer (the mask has the weight's shape, sections 4.3-4.4.1) or one per "
        "structure (channel / filter)",
    )
    mask_entry_bytes: float = Field(
        1.0,
        gt=0,
        le=8,
        description="bytes per mask entry on the wire: 1 = torch.bool (NCCL sends it as "
        "uint8), 0.125 = bit-packed, 4 = a float mask",
    )


class _ADMMBase(Schedule):
    """Local step, run plan and the pieces both variants share."""

    Options = HSADMMOptions

    def build(self, ctx: BuildContext) -> Iteration:
        """One local SGD step with the proximal term: no communication."""
        prog = RankClass("all", ctx.ranks)
        p = ctx.profile
        micro_steps(
            prog, ctx.model, p, ctx.batch, ctx.precision, ctx.accumulation, None, ctx.input_load
        )
        prox = prog.add(
            compute("proximal", p.elementwise_time(4 * 4 * ctx.model.params), "proximal")
        )
        optimizer_step(prog, p, ctx.model.params, ctx.precision, (prox.id,), ctx.optimizer)
        return Iteration([prog], samples=ctx.gpus * ctx.batch * ctx.accumulation)

    def consensus(self, ctx: BuildContext, fraction: float, frozen: bool) -> Iteration:
        raise NotImplementedError

    def outer_iterations(self, epochs: float) -> int:
        o: HSADMMOptions = self.options  # type: ignore[assignment]
        return max(1, math.ceil(epochs / o.local_epochs))

    def plan(self, ctx: BuildContext, run: RunShape) -> list[Segment]:
        o: HSADMMOptions = self.options  # type: ignore[assignment]
        segs = [
            Segment(
                "local step" if s.label == "step" else f"local {s.label}",
                s.iteration,
                s.count,
                s.steps,
                plain=s.plain,
            )
            for s in super().plan(ctx, run)
        ]
        counts: dict[tuple[float, bool], int] = {}
        for k in range(self.outer_iterations(run.epochs)):
            key = (round(kept_fraction(k, o.keep, o.ramp), 12), k >= o.t_freeze)
            counts[key] = counts.get(key, 0) + 1
        for (fraction, frozen), count in counts.items():
            label = f"consensus keep={fraction:.2f}" + (" frozen" if frozen else "")
            segs.append(Segment(label, self.consensus(ctx, fraction, frozen), count, 0))
        return segs

    def _projection(self, ctx: BuildContext, fraction: float, frozen: bool) -> float:
        """Seconds to project z (or apply the frozen masks) and derive masks."""
        o: HSADMMOptions = self.options  # type: ignore[assignment]
        p = ctx.profile
        layers = pruned_layers(ctx.model)
        if frozen:
            return sum(p.kernel_time("mask_apply", numel=pl.numel) for pl in layers)
        return sum(
            p.kernel_time(
                "projection", numel=pl.numel, groups=pl.structures(o.sparsity), kind=o.sparsity
            )
            for pl in layers
        )


@register
class HSADMM(_ADMMBase):
    name = "hsadmm"
    summary = "PRUNEX H-SADMM: intra-node consensus, leaders' compacted inter-node allreduce"

    def consensus(self, ctx: BuildContext, fraction: float, frozen: bool) -> Iteration:
        o: HSADMMOptions = self.options  # type: ignore[assignment]
        p = ctx.profile
        n = ctx.model.params
        nodes = ctx.node_groups()
        leaders = tuple(g[0] for g in nodes)
        followers = tuple(r for g in nodes for r in g[1:])
        layers = pruned_layers(ctx.model)
        compact = compacted_numel(ctx.model, o.sparsity, fraction)
        lead = RankClass("leader", leaders)
        follow = RankClass("follower", followers)
        both = (lead, follow) if followers else (lead,)

        for prog in both:
            prog.add(compute("theta_plus_u", p.elementwise_time(3 * 4 * n), "dual"))
        per_tensor = o.intra_granularity == "tensor"
        sizes = param_tensor_bytes(ctx.model) if per_tensor else []
        summed = "theta_plus_u"  # Eq. (9) needs the node's sum of theta + u
        if followers and per_tensor:
            for k, nbytes in enumerate(sizes):
                call = CollectiveCall("allreduce", nodes, nbytes, o.intra_algorithm)
                for prog in both:
                    prog.add(
                        collective(f"intra_allreduce.t{k}", call, "intra_allreduce", (summed,))
                    )
            summed = f"intra_allreduce.t{len(sizes) - 1}"
        elif followers:
            call = CollectiveCall("allreduce", nodes, 4.0 * n, o.intra_algorithm)
            for prog in both:
                prog.add(collective("intra_allreduce", call, "intra_allreduce", (summed,)))
            summed = "intra_allreduce"
        # every worker holds z_i (section 4.1.2) and projects it itself (section 4.2;
        # line 27's u update needs it): z update and projection on every rank
        t_project = self._projection(ctx, fraction, frozen)
        for prog in both:
            prog.add(compute("z_update", p.elementwise_time(3 * 4 * n), "dual", (summed,)))
            prog.add(compute("projection", t_project, "projection"))
        multi_node = len(leaders) > 1
        if not frozen and multi_node:
            mask_bytes = o.mask_entry_bytes * float(
                sum(
                    pl.numel if o.mask_sync == "element" else pl.structures(o.sparsity)
                    for pl in layers
                )
            )
            call = CollectiveCall("allreduce", (leaders,), mask_bytes, o.inter_algorithm)
            lead.add(collective("mask_sync", call, "mask_sync", ("projection",)))
            lead.add(
                compute("mask_merge", p.kernel_time("mask_merge", numel=mask_bytes), "projection")
            )
        kept_conv = [pl.kept(o.sparsity, fraction) for pl in layers]
        t_compress = sum(p.kernel_time("compress", numel=k) for k in kept_conv)
        lead.add(compute("compress", t_compress, "compress"))
        last = "compress"
        if multi_node:
            last = chunked_allreduce(
                lead,
                "inter_allreduce",
                (leaders,),
                4.0 * compact,
                o.bucket_mb * MB,
                o.inter_algorithm,
                ("compress",),
            )
        t_decompress = sum(
            p.kernel_time("decompress", numel=pl.numel, kept=k)
            for pl, k in zip(layers, kept_conv, strict=True)
        )
        lead.add(compute("decompress", t_decompress, "compress", (last,)))
        received = "decompress"
        if followers and per_tensor:
            for k, nbytes in enumerate(sizes):
                call = CollectiveCall("broadcast", nodes, nbytes, o.intra_algorithm)
                lead.add(collective(f"broadcast.t{k}", call, "broadcast", (received,)))
                follow.add(collective(f"broadcast.t{k}", call, "broadcast"))
            received = f"broadcast.t{len(sizes) - 1}"
        elif followers:
            call = CollectiveCall("broadcast", nodes, 4.0 * n, o.intra_algorithm)
            lead.add(collective("broadcast_z", call, "broadcast", (received,)))
            follow.add(collective("broadcast_z", call, "broadcast"))
            received = "broadcast_z"
        for prog in both:
            prog.add(compute("dual_update", p.elementwise_time(4 * 4 * n), "dual", (received,)))
        if multi_node:
            call = CollectiveCall("allreduce", (leaders,), 16.0, o.inter_algorithm)
            lead.add(collective("residuals", call, "residuals", ("dual_update",)))
        extra = {
            "kept_fraction": fraction,
            "frozen": frozen,
            "compacted_bytes": 4 * compact,
            "dense_bytes": 4 * n,
        }
        return Iteration(list(both), samples=0, label="consensus", extra=extra)


@register
class HSADMMFlat(_ADMMBase):
    name = "hsadmm-flat"
    summary = "PRUNEX (AR) ablation: flat dense allreduce over all workers, no shrinkage"

    def consensus(self, ctx: BuildContext, fraction: float, frozen: bool) -> Iteration:
        o: HSADMMOptions = self.options  # type: ignore[assignment]
        p = ctx.profile
        n = ctx.model.params
        prog = RankClass("all", ctx.ranks)
        prog.add(compute("theta_plus_u", p.elementwise_time(3 * 4 * n), "dual"))
        last = "theta_plus_u"
        if ctx.gpus > 1:
            last = chunked_allreduce(
                prog,
                "flat_allreduce",
                (ctx.ranks,),
                4.0 * n,
                o.bucket_mb * MB,
                o.inter_algorithm,
                ("theta_plus_u",),
            )
        prog.add(compute("z_update", p.elementwise_time(3 * 4 * n), "dual", (last,)))
        prog.add(compute("projection", self._projection(ctx, fraction, frozen), "projection"))
        prog.add(compute("dual_update", p.elementwise_time(4 * 4 * n), "dual"))
        extra = {"kept_fraction": fraction, "frozen": frozen, "dense_bytes": 4 * n}
        return Iteration([prog], samples=0, label="consensus", extra=extra)

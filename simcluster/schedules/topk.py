"""Top-K SGD (the PRUNEX paper's gradient-compression baseline).

Per trainable layer, as soon as its gradient exists: add the error-feedback
residual, keep the largest ``density`` fraction of entries (timed with the
profile's ``sparsify`` kernel) and allgather the values (fp32) and the indices
across all workers on the communication stream, as two calls. After backward,
each layer's received entries are scatter-added and averaged, then the
optimizer steps. Every layer is its own pair of allgathers, every step.

Wire format (``index_dtype``): ``torch.topk`` returns its indices as int64
(PyTorch documentation, ``torch.topk``: "indices" is a LongTensor), and the
paper's cited Top-K/DGC baseline [21] sends them so unless told otherwise: its
reference code (github synxlin/deep-gradient-compression, ``dgc/compression.py``)
has ``int32_indices=False`` by default (``configs/dgc/int32.py`` opts in) and
allgathers the values and the indices as two tensors (its ``communicate``: one
``allgather_async`` per tensor of the pair). PRUNEX (section 5.1) says only that
each worker sends the top 1 % of entries per layer, so the default is that
reference: 4 + 8 bytes per entry in two allgathers; ``int32`` halves the index
bytes (what ``calibrate/live``'s own Top-K pattern does, packed in one buffer).

Overlap: the PRUNEX paper (section 5.1, "Top-K SGD (Gradient Compression
Baseline)") says only that each worker sends the top 1 % of entries per layer;
it does not say whether the allgathers wait for the end of backward. The
schedule launches each layer's allgathers as soon as that layer is sparsified
(overlapping the rest of backward) and decompresses after backward, as the
reference code of the baseline the paper cites [21] does: its
``DistributedOptimizer`` (``dgc/horovod/optimizer.py``) compresses and starts an
asynchronous allgather from each parameter's gradient hook and decompresses in
``synchronize()`` before the optimizer step. This is not the reading that would
match the paper's 3.71x (waiting for the end of backward costs more);
``launch: after_backward`` runs that other reading.

Gather API (``gather_output``): PyTorch's list form ``torch.distributed.all_gather
(tensor_list, tensor)`` with NCCL gathers into one flat buffer and then, on the
communication stream, copies each rank's chunk into its own output tensor: one
``copy_`` kernel per rank (``ProcessGroupNCCL::allgather``, "Copy the flattened
output tensors to the outputs"). Values and indices are two such calls, so a
layer pays ``2 x world size`` copy kernels, each with the profile's launch cost;
``tensor`` (``all_gather_into_tensor``) pays none. The default is ``list``, the
documented form of ``all_gather`` in ``torch.distributed`` (which PRUNEX's
baselines run on, section 4.1.1); the paper does not say which it used.
"""

from __future__ import annotations

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
from simcluster.schedules.training import micro_steps, optimizer_step, selected

__all__ = ["TopK", "TopKOptions", "VALUE_BYTES", "INDEX_BYTES"]

#: bytes of one fp32 value
VALUE_BYTES = 4
#: bytes of one index by ``index_dtype``
INDEX_BYTES = {"int64": 8, "int32": 4}


class TopKOptions(Options):
    density: float = Field(0.01, gt=0, le=1, description="fraction of entries kept per layer")
    method: Literal["exact", "dgc", "gaussian", "random", "threshold"] = "exact"
    algorithm: algorithm_name("allgather") = "auto"
    index_dtype: Literal["int64", "int32"] = Field(
        "int64",
        description="dtype of the allgathered indices: int64 as torch.topk returns them "
        "(the DGC reference code's default), or int32",
    )
    launch: Literal["hook", "after_backward"] = Field(
        "hook",
        description="sparsify and allgather each layer from its gradient hook (overlapping "
        "backward, the DGC reference code) or all of them after backward",
    )
    gather_output: Literal["list", "tensor"] = Field(
        "list",
        description="torch.distributed.all_gather into a list (a copy kernel per rank, "
        "values and indices) or all_gather_into_tensor (none)",
    )


@register
class TopK(Schedule):
    name = "topk"
    summary = "Top-K SGD: per-layer top 1% values+indices allgathered every step"
    Options = TopKOptions

    def build(self, ctx: BuildContext) -> Iteration:
        o: TopKOptions = self.options  # type: ignore[assignment]
        prog = RankClass("all", ctx.ranks)
        p = ctx.profile
        gathered: dict[int, str] = {}
        ib = INDEX_BYTES[o.index_dtype]

        pending: list[int] = []

        def on_grad(i: int, grad_op: str) -> None:
            if o.launch == "after_backward":
                pending.append(i)
            else:
                sparsify_and_gather(i, grad_op)

        def sparsify_and_gather(i: int, grad_op: str) -> None:
            numel = ctx.model.layers[i].params
            k = selected(numel, o.density)
            t = p.elementwise_time(3 * 4 * numel)  # residual add and store
            t += p.kernel_time("sparsify", numel=numel, density=o.density, method=o.method)
            sel = prog.add(compute(f"topk.{i}", t, "sparsification", (grad_op,)))
            if ctx.gpus > 1:
                last = sel.id
                for part, nbytes in (("values", VALUE_BYTES), ("indices", ib)):
                    call = CollectiveCall("allgather", (ctx.ranks,), float(k * nbytes), o.algorithm)
                    op = collective(f"allgather.{part}.{i}", call, "allgather", (last,))
                    last = prog.add(op).id
                    if o.gather_output == "list":  # a copy_ per rank out of the flat buffer
                        t = ctx.gpus * p.elementwise_time(2 * nbytes * k)
                        op = compute(
                            f"gather_copy.{part}.{i}", t, "allgather", (last,), stream="comm"
                        )
                        last = prog.add(op).id
                gathered[i] = last

        micro_steps(
            prog, ctx.model, p, ctx.batch, ctx.precision, ctx.accumulation, on_grad, ctx.input_load
        )
        backward_end = prog.ops[-1].id
        for i in pending:  # launch: after_backward, in gradient-ready order
            sparsify_and_gather(i, backward_end)
        last = prog.ops[-1].id
        for i, op in gathered.items():
            k = selected(ctx.model.layers[i].params, o.density)
            numel = ctx.model.layers[i].params
            t = p.kernel_time("scatter_add", numel=ctx.gpus * k) + p.elementwise_time(8 * numel)
            last = prog.add(compute(f"decompress.{i}", t, "decompress", (op,))).id
        optimizer_step(prog, p, ctx.model.params, ctx.precision, (last,), ctx.optimizer)
        return Iteration([prog], samples=ctx.gpus * ctx.batch * ctx.accumulation)

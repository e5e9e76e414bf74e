"""What data-parallel frameworks add around their collectives, timed by the device profile.

Every cost here is a kernel the framework launches, timed with the profile's
measured (or derived, or spec) ``elementwise`` / ``memcpy`` kernels, each launch
paying the profile's own launch cost; or a wait the framework's design imposes.

PyTorch DDP (``torch/csrc/distributed/c10d/reducer.cpp``, read for PyTorch 1.8-2.x):

* copy-in: when a gradient is ready, the Reducer's autograd hook copies it into
  its bucket's flat buffer scaled by 1 / world size (``copy_grad_to_bucket``:
  one ``mul_out`` kernel per tensor, read 4 B + write 4 B per fp32 element) on
  the compute stream; with ``gradient_as_bucket_view`` the gradient already
  lives in the bucket and an in-place ``div_`` (same bytes) replaces the copy;
* a compression hook (fp16 / bf16 on the wire) casts the bucket down before its
  allreduce (read 4 B, write 2 B) and up after it (read 2 B, write 4 B);
* copy-out: at the end of backward (``finalize_backward``) the compute stream
  waits for each bucket's allreduce, in bucket order, and copies the bucket's
  views back into ``param.grad`` (one ``copy_`` per tensor, 8 B per fp32
  element) unless ``gradient_as_bucket_view``; the optimizer runs after.

* host costs: the hook and the collective call run on the host thread that also launches
  backward's kernels. Measured on one-rank DDP (``calibrate/ddp_overhead.py``), a step
  whose host is its critical path (amp on an H200) grows by about 24 us per gradient
  tensor and 0.19 ms per bucket (the profile's ``ddp_hook_s`` / ``ddp_bucket_s``,
  :data:`simcluster.compute.profile.DDP_HOOK_S`). Stated model: the step is host-bound
  through backward, so each tensor's copy-in costs the larger of its kernel and
  ``ddp_hook_s`` and each bucket adds ``ddp_bucket_s`` on the compute stream before its
  allreduce. Where the GPU is the bottleneck the host hides part of it (fp32 on the
  H200: +3.5-5.4 ms measured for ResNet-50 at batch 64 where this model adds 5.5 ms at
  25 MiB and 11.4 ms at 1 MiB; BERT-large +3.6-3.9 ms where it adds 18.8 and 39.7 ms;
  ``bench/ddp_overhead_model.py``);

* buffer broadcast (``broadcast_buffers=True``, the default): before every
  training forward DDP broadcasts the module buffers (BatchNorm's running mean
  and variance, fp32, and ``num_batches_tracked``, int64) from rank 0
  (``_sync_buffers`` -> ``_broadcast_coalesced``); ``broadcast_coalesced``
  (``torch/csrc/distributed/c10d/comm.cpp``) packs the tensors of one dtype
  into a flat bucket (one ``cat``), broadcasts it, waits for it on the compute
  stream and copies it back with one ``copy_`` per tensor, so the forward
  starts after all that.

apex DDP (``apex/parallel/distributed.py``, ``DistributedDataParallel``):
buckets close once they hold at least ``message_size`` elements (default
10,000,000), in the order gradients become ready, with no small first bucket;
each bucket is flattened (one ``cat`` kernel) and, after its allreduce,
unflattened by one ``copy_`` per tensor.

ColossalAI's data-parallel gradient handler (legacy engine,
``colossalai/engine/gradient_handler/utils.py``: ``bucket_allreduce``, called by
``DataParallelGradientHandler.handle_gradient`` from ``engine.step()``): nothing
runs during backward; after it, per gradient dtype, every gradient is flattened
into one buffer (``_flatten_dense_tensors``: one ``cat`` kernel, read + write
4 B per fp32 element), divided in place by the world size (8 B), allreduced in
ONE collective, and copied back tensor by tensor (``copy_``, 8 B per element);
the optimizer runs after. So the whole allreduce is exposed.

Horovod (docs/tensor-fusion.rst; release notes of v0.21.0, PR #2468): a
background thread runs a cycle every ``cycle_time_ms`` (1 ms since v0.21.0,
5 ms before); a tensor that becomes ready waits for the next cycle, whose
negotiation (the coordinator's gather of ready tensors and broadcast of the
response; with the response cache, a bit-vector allreduce) decides what runs;
fused tensors are copied into the fusion buffer (one batched D2D memcpy kernel
per buffer since v0.21.0) and out of it after the collective, both on
Horovod's GPU stream. A tensor's wait for the next cycle is uniform on
[0, cycle) when readiness is unrelated to the cycle phase: its mean, half a
cycle, is what a step pays per negotiated buffer (stated model).
"""

from __future__ import annotations

from collections.abc import Sequence

from simcluster.compute.profile import DeviceProfile
from simcluster.program import CollectiveCall, RankClass, collective, compute
from simcluster.schedules.training import (
    Bucket,
    GradTensor,
    grad_tensors,
    micro_steps,
    torch_buckets,
)

__all__ = [
    "APEX_MESSAGE_SIZE",
    "HOROVOD_CYCLE_MS",
    "HOROVOD_FUSION_MB",
    "apex_buckets",
    "bn_buffers",
    "buffer_broadcast",
    "cast_time",
    "colossalai_backward",
    "ddp_backward",
    "hook_time",
    "horovod_cycle_wait",
    "per_tensor_copy_time",
    "fused_copy_time",
]

#: apex.parallel.DistributedDataParallel's default ``message_size``, elements
APEX_MESSAGE_SIZE = 10_000_000
#: Horovod's default cycle time (ms) since v0.21.0 (5 ms before; release notes, PR #2468)
HOROVOD_CYCLE_MS = 1.0
#: Horovod's default fusion threshold (MiB) since v0.21.0 (64 MiB before; same source)
HOROVOD_FUSION_MB = 128.0


def per_tensor_copy_time(
    profile: DeviceProfile, tensors: Sequence[GradTensor], bytes_per_elem: float
) -> float:
    """Seconds of one elementwise kernel per tensor moving ``bytes_per_elem`` per element
    (read + write), each paying its launch."""
    return sum(profile.elementwise_time(bytes_per_elem * t.numel) for t in tensors)


def hook_time(profile: DeviceProfile, tensors: Sequence[GradTensor]) -> float:
    """Seconds of torch DDP's per-tensor hook: each tensor's scale-and-copy kernel (8 B
    per fp32 element) or the profile's host cost per tensor, whichever is longer."""
    hook = profile.ddp_hook_s
    return sum(max(profile.elementwise_time(8 * t.numel), hook) for t in tensors)


def fused_copy_time(profile: DeviceProfile, nbytes: float) -> float:
    """Seconds of one batched copy kernel reading and writing ``nbytes`` (0 when empty)."""
    return profile.elementwise_time(2.0 * nbytes) if nbytes > 0 else 0.0


def cast_time(profile: DeviceProfile, numel: int, from_bytes: int, to_bytes: int) -> float:
    """Seconds of a dtype cast of ``numel`` elements (0 when the dtypes match)."""
    if from_bytes == to_bytes:
        return 0.0
    return profile.elementwise_time(numel * (from_bytes + to_bytes))


def apex_buckets(tensors: Sequence[GradTensor], message_size: int) -> list[Bucket]:
    """apex DDP's buckets: a bucket closes once it holds >= ``message_size`` elements
    (torch's closing rule, :func:`torch_buckets`, counted in elements, no small first)."""
    return torch_buckets(tensors, message_size, message_size, 1)


def horovod_cycle_wait(cycle_time_ms: float) -> float:
    """Mean seconds a ready tensor waits for Horovod's next cycle: half a cycle."""
    return 0.5 * cycle_time_ms * 1e-3


def ddp_backward(
    prog: RankClass,
    ctx,
    buckets: Sequence[Bucket],
    groups: tuple[tuple[int, ...], ...],
    wire_bytes: int,
    algorithm: str,
    category: str = "allreduce",
    prefix: str = "allreduce",
    apex: bool = False,
    gradient_as_bucket_view: bool = False,
) -> tuple[str, ...]:
    """Append the micro-steps and DDP's bucket sync on ``groups``; returns what the
    optimizer waits for.

    ctx: the schedule's BuildContext (model, profile, batch, precision, accumulation).
    Per tensor the Reducer's copy into its bucket (torch) or per bucket apex's flatten
    and division, the cast of a compression hook, the allreduce once the bucket's last
    copy is done; after backward, per bucket in order, the cast back and the copy out.
    No sync (and no copies) when every group is a single rank.
    """
    p = ctx.profile
    sync = any(len(g) > 1 for g in groups)
    by_layer: dict[int, list[GradTensor]] = {}
    closes: dict[int, list[Bucket]] = {}
    for b in buckets:
        for t in b.tensors:
            by_layer.setdefault(t.layer, []).append(t)
        closes.setdefault(b.tensors[-1].layer, []).append(b)
    reduced: list[tuple[Bucket, str]] = []

    def launch(b: Bucket) -> None:
        t = cast_time(p, b.numel, 4, wire_bytes)
        if apex:  # flatten (one cat) and divide by the world size
            t += fused_copy_time(p, 4 * b.numel) + p.elementwise_time(8 * b.numel)
        else:  # torch: the bucket's c10d call on the host thread (host-bound model)
            t += p.ddp_bucket_s
        if t > 0:
            prog.add(compute(f"{prefix}.prep{b.index}", t, "framework"))
        call = CollectiveCall("allreduce", groups, float(b.nbytes(wire_bytes)), algorithm)
        dep = (prog.ops[-1].id,)
        reduced.append((b, prog.add(collective(f"{prefix}.b{b.index}", call, category, dep)).id))

    def on_grad(i: int, grad_op: str) -> None:
        if not sync:
            return
        if not apex:  # the Reducer's hook: scale-and-copy (or in-place div) per tensor
            t = hook_time(p, by_layer.get(i, ()))
            prog.add(compute(f"{prefix}.copy_in{i}", t, "framework"))
        for b in closes.get(i, ()):
            launch(b)

    micro_steps(
        prog, ctx.model, p, ctx.batch, ctx.precision, ctx.accumulation, on_grad, ctx.input_load
    )
    deps: tuple[str, ...] = (prog.ops[-1].id,)
    for b, op_id in reduced:  # finalize_backward: wait, cast back, copy out
        t = cast_time(p, b.numel, wire_bytes, 4)
        if apex or not gradient_as_bucket_view:
            t += per_tensor_copy_time(p, b.tensors, 8)
        if t > 0:
            op = compute(f"{prefix}.copy_out{b.index}", t, "framework", (op_id,))
            deps = (prog.add(op).id,)
        else:
            deps = (*deps, op_id)
    return deps


def colossalai_backward(
    prog: RankClass,
    ctx,
    groups: tuple[tuple[int, ...], ...],
    algorithm: str,
    category: str = "allreduce",
    prefix: str = "allreduce",
) -> tuple[str, ...]:
    """Append the micro-steps and ColossalAI's after-backward gradient sync on ``groups``
    (module docstring): flatten, divide, one allreduce of every fp32 gradient, copy back.
    Returns what the optimizer waits for. No sync when every group is a single rank."""
    p = ctx.profile
    micro_steps(
        prog, ctx.model, p, ctx.batch, ctx.precision, ctx.accumulation, None, ctx.input_load
    )
    if not any(len(g) > 1 for g in groups):
        return (prog.ops[-1].id,)
    numel = ctx.model.params
    t = fused_copy_time(p, 4.0 * numel) + p.elementwise_time(8.0 * numel)
    prep = prog.add(compute(f"{prefix}.flatten", t, "framework", (prog.ops[-1].id,)))
    call = CollectiveCall("allreduce", groups, float(4 * numel), algorithm)
    red = prog.add(collective(f"{prefix}.all", call, category, (prep.id,)))
    t = per_tensor_copy_time(p, grad_tensors(ctx.model), 8)
    out = prog.add(compute(f"{prefix}.unflatten", t, "framework", (red.id,)))
    return (out.id,)


def bn_buffers(model) -> tuple[list[int], int]:
    """A model's BatchNorm buffers: the fp32 tensors' element counts (running mean and
    running variance, ``c`` each per layer) and the number of int64
    ``num_batches_tracked`` scalars (one per layer)."""
    floats: list[int] = []
    count = 0
    for layer in model.layers:
        if (layer.shape or {}).get("kind") == "batchnorm":
            c = int(layer.shape["c"])
            floats += [c, c]
            count += 1
    return floats, count


def buffer_broadcast(
    prog: RankClass, ctx, groups: tuple[tuple[int, ...], ...], algorithm: str
) -> None:
    """Append DDP's pre-forward buffer broadcast from each group's rank 0 (module
    docstring): per dtype one flatten, one broadcast, one copy back per tensor, all
    before the forward on the compute stream. Nothing without BatchNorm buffers or
    when every group is a single rank."""
    if not any(len(g) > 1 for g in groups):
        return
    floats, count = bn_buffers(ctx.model)
    p = ctx.profile
    for dtype, sizes, width in (("fp32", floats, 4), ("int64", [1] * count, 8)):
        if not sizes:
            continue
        nbytes = float(width * sum(sizes))
        flat = prog.add(
            compute(f"buffers.flatten_{dtype}", fused_copy_time(p, nbytes), "framework")
        )
        call = CollectiveCall("broadcast", groups, nbytes, algorithm)
        cast = prog.add(collective(f"buffers.broadcast_{dtype}", call, "broadcast", (flat.id,)))
        t = sum(p.elementwise_time(2 * width * n) for n in sizes)
        prog.add(compute(f"buffers.copy_{dtype}", t, "framework", (cast.id,)))

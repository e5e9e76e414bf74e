"""Forward / backward / gradient-bucket machinery shared by the schedules.

:func:`forward_backward` appends one micro-step to a program: a forward op per
layer in order, then per layer in reverse a backward op (input gradient plus
weight gradient; the first layer computes no input gradient). After each
trainable layer's backward op it calls ``on_grad(layer_index, op_id)`` so a
schedule can put its own ops (sparsification, a bucket's allreduce) right
behind the gradient on the compute stream. It returns, for every trainable
layer, the id of the op after which its gradients are ready.

Gradients are grouped in backward order into buckets (DDP, :func:`torch_buckets`) or
fusion buffers (Horovod, SSFusion, :func:`group_tensors`); :func:`bucketed_allreduce` is
DDP's overlap of bucket allreduces with the rest of backward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from simcluster.compute.input_pipeline import InputLoad
from simcluster.compute.profile import DeviceProfile
from simcluster.program import CollectiveCall, RankClass, collective, compute

__all__ = [
    "ENTRY_BYTES",
    "MB",
    "selected",
    "Bucket",
    "GradTensor",
    "backward_order",
    "grad_tensors",
    "group_tensors",
    "group_by_count",
    "forward_backward",
    "load_batches",
    "make_buckets",
    "torch_buckets",
    "micro_steps",
    "optimizer_step",
    "bucketed_allreduce",
    "tensor_backward_times",
    "layer_backward_time",
]

OnGrad = Callable[[int, str], None]

#: bytes in a MiB (bucket and buffer caps are given in MiB)
MB = 1024 * 1024
#: bytes on the wire per selected gradient entry: fp32 value + int32 index
ENTRY_BYTES = 8


def selected(numel: int, density: float) -> int:
    """Entries a sparsifier keeps out of ``numel`` at ``density`` (at least one)."""
    return max(1, round(numel * density))


class GradTensor(NamedTuple):
    """One parameter's gradient: owning layer index, element count, position.

    A named tuple: a model has hundreds of these per program built, and a frozen
    dataclass took about twice as long to make."""

    layer: int
    numel: int
    index: int  # position in backward order


@dataclass(frozen=True)
class Bucket:
    """Gradient tensors reduced together, in the order they become ready.

    layers: indices (into model.layers) of the layers that own the tensors.
    numel: gradient elements in the bucket.
    """

    index: int
    tensors: tuple[GradTensor, ...]

    @property
    def layers(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(t.layer for t in self.tensors))

    @property
    def numel(self) -> int:
        return sum(t.numel for t in self.tensors)

    def nbytes(self, dtype_bytes: int) -> int:
        return self.numel * dtype_bytes


def backward_order(model) -> tuple[int, ...]:
    """Layer indices in the order backward reaches them: reverse forward order, or the
    order measured in a trace (``model.backward_order``, a trace workload's)."""
    measured = getattr(model, "backward_order", ())
    return tuple(measured) if measured else tuple(range(len(model.layers) - 1, -1, -1))


def grad_tensors(model) -> list[GradTensor]:
    """Every parameter tensor's gradient in the order backward produces them."""
    out: list[GradTensor] = []
    for i in backward_order(model):
        for numel in reversed(model.layers[i].param_tensors):
            out.append(GradTensor(i, numel, len(out)))
    return out


def group_tensors(
    tensors: Sequence[GradTensor], cap_bytes: float, first_cap_bytes: float, dtype_bytes: int
) -> list[Bucket]:
    """Greedy buckets: a tensor joins the current bucket unless that passes the cap."""
    buckets: list[Bucket] = []
    current: list[GradTensor] = []
    numel = 0
    cap = first_cap_bytes
    for t in tensors:
        if current and (numel + t.numel) * dtype_bytes > cap:
            buckets.append(Bucket(len(buckets), tuple(current)))
            current, numel, cap = [], 0, cap_bytes
        current.append(t)
        numel += t.numel
    if current:
        buckets.append(Bucket(len(buckets), tuple(current)))
    return buckets


def group_by_count(tensors: Sequence[GradTensor], count: int) -> list[Bucket]:
    """Buckets of ``count`` consecutive tensors (the last may hold fewer), input order."""
    if count < 1:
        raise ValueError(f"group_by_count: count must be >= 1, got {count}")
    return [
        Bucket(i, tuple(tensors[k : k + count]))
        for i, k in enumerate(range(0, len(tensors), count))
    ]


def torch_buckets(
    tensors: Sequence[GradTensor], cap_bytes: float, first_cap_bytes: float, dtype_bytes: int
) -> list[Bucket]:
    """PyTorch DDP's bucket assignment (``compute_bucket_assignment_by_size`` in
    ``torch/csrc/distributed/c10d/reducer.cpp``): a tensor always joins the open bucket,
    which closes once it holds at least its limit (``first_cap_bytes`` for the first,
    ``cap_bytes`` after). So every bucket but the last reaches its cap, and a tensor at
    or above the cap closes the bucket it joins."""
    buckets: list[Bucket] = []
    current: list[GradTensor] = []
    numel = 0
    cap = first_cap_bytes
    for t in tensors:
        current.append(t)
        numel += t.numel
        if numel * dtype_bytes >= cap:
            buckets.append(Bucket(len(buckets), tuple(current)))
            current, numel, cap = [], 0, cap_bytes
    if current:
        buckets.append(Bucket(len(buckets), tuple(current)))
    return buckets


def make_buckets(model, cap_bytes: float, first_cap_bytes: float, dtype_bytes: int) -> list[Bucket]:
    """PyTorch DDP's buckets (:func:`torch_buckets`) over the gradients in backward order:
    a first bucket of ``first_cap_bytes``, then ``cap_bytes``."""
    return torch_buckets(grad_tensors(model), cap_bytes, first_cap_bytes, dtype_bytes)


def layer_backward_time(
    profile: DeviceProfile, layer, index: int, batch: int, precision: str
) -> float:
    """Seconds of one layer's backward: weight gradient, plus the input gradient
    for every layer but the first (nothing upstream needs it)."""
    t = profile.layer_time(layer, batch, precision, "bwd_weight")
    if index > 0:
        t += profile.layer_time(layer, batch, precision, "bwd_input")
    return t


def tensor_backward_times(
    model, profile: DeviceProfile, batch: int, precision: str
) -> dict[int, float]:
    """Backward seconds attributed to each gradient tensor (by its share of the layer).

    Keys are :attr:`GradTensor.index`. Parameter-free layers' backward time goes
    to the next tensor produced after them.
    """
    out: dict[int, float] = {}
    pending = 0.0
    tensors = grad_tensors(model)
    by_layer: dict[int, list[GradTensor]] = {}
    for t in tensors:
        by_layer.setdefault(t.layer, []).append(t)
    for i in backward_order(model):
        pending += layer_backward_time(profile, model.layers[i], i, batch, precision)
        if i in by_layer:
            owned = by_layer[i]
            total = sum(x.numel for x in owned)
            for x in owned:
                out[x.index] = pending * x.numel / total
            pending = 0.0
    return out


def forward_backward(
    prog: RankClass,
    model,
    profile: DeviceProfile,
    batch: int,
    precision: str,
    prefix: str,
    deps: tuple[str, ...] = (),
    on_grad: OnGrad | None = None,
) -> dict[int, str]:
    """Append one micro-step; returns {layer index: op id after which its grads exist}."""
    first = True
    for i, layer in enumerate(model.layers):
        t = profile.layer_time(layer, batch, precision, "fwd")
        prog.add(compute(f"{prefix}fwd.{i}", t, "forward", deps if first else ()))
        first = False
    ready: dict[int, str] = {}
    for i in backward_order(model):
        layer = model.layers[i]
        t = layer_backward_time(profile, layer, i, batch, precision)
        op = prog.add(compute(f"{prefix}bwd.{i}", t, "backward"))
        if layer.params > 0:
            ready[i] = op.id
            if on_grad is not None:
                on_grad(i, op.id)
    return ready


def optimizer_step(
    prog: RankClass,
    profile: DeviceProfile,
    num_params: int,
    precision: str,
    deps: tuple[str, ...],
    optimizer: str = "sgd",
) -> str:
    """Append the optimizer step (``sgd`` with momentum, ``adam``, ``adamw``, ``lamb``);
    returns its op id."""
    t = profile.optimizer_time(num_params, precision, optimizer)
    return prog.add(compute("optimizer", t, "optimizer", deps)).id


def micro_steps(
    prog: RankClass,
    model,
    profile: DeviceProfile,
    batch: int,
    precision: str,
    accumulation: int,
    on_grad: OnGrad | None = None,
    input_load: InputLoad | None = None,
) -> dict[int, str]:
    """Append ``accumulation`` micro-steps; returns the gradient-ready ops of the last one.

    Only the last micro-step's gradients are synchronised (``on_grad`` fires
    for it alone): no sync on accumulation steps. ``input_load`` (the context's) makes
    each micro-step's batch first: see :func:`load_batches`.
    """
    ready: dict[int, str] = {}
    for k in range(accumulation):
        prefix = f"m{k}." if accumulation > 1 else ""
        if k == 0:
            load_batches(prog, batch, accumulation, input_load)
        elif input_load is not None and input_load.workers == 0:
            prog.add(compute(f"{prefix}input", input_load.batch_seconds(batch), "input"))
        hook = on_grad if k == accumulation - 1 else None
        ready = forward_backward(prog, model, profile, batch, precision, prefix, on_grad=hook)
    return ready


def load_batches(
    prog: RankClass, batch: int, accumulation: int, input_load: InputLoad | None
) -> None:
    """The input pipeline's share of a step (nothing when ``input_load`` is None).

    ``workers == 0``: the training process makes the first micro-step's batch before
    anything else of the step, ``batch * per_sample_s`` seconds on the compute stream
    (the GPU idles meanwhile), op ``input`` put first in the program (the loader's
    ``next()`` opens a training-loop iteration); each later micro-step's batch is made
    right before its forward (:func:`micro_steps`). ``workers > 0``: the workers make the
    step's ``batch * accumulation`` samples on the ``loader`` stream while the step runs
    (op ``loader``, no dependency), so the step lasts at least their time, and no longer
    when they keep up.
    """
    if input_load is None:
        return
    first = "m0.input" if accumulation > 1 else "input"
    if input_load.workers == 0:
        op = compute(first, input_load.batch_seconds(batch), "input")
        prog.ops.insert(0, op)
        return
    t = input_load.step_floor(batch * accumulation)
    prog.add(compute("loader", t, "input_workers", stream="loader"))


def bucketed_allreduce(
    prog: RankClass,
    model,
    groups: tuple[tuple[int, ...], ...],
    ready: dict[int, str],
    cap_bytes: float,
    first_cap_bytes: float,
    wire_bytes: int,
    algorithm: str,
    category: str,
    prefix: str = "allreduce",
) -> list[str]:
    """DDP's bucket allreduces on ``groups``, each after its last gradient; op ids."""
    if all(len(g) < 2 for g in groups):
        return []
    ids = []
    for b in make_buckets(model, cap_bytes, first_cap_bytes, wire_bytes):
        call = CollectiveCall("allreduce", groups, float(b.nbytes(wire_bytes)), algorithm)
        dep = ready[b.layers[-1]]
        ids.append(prog.add(collective(f"{prefix}.b{b.index}", call, category, (dep,))).id)
    return ids

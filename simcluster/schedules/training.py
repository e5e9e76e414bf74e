"""Forward / backward / gradient-bucket machinery shared by the schedules.

:func:`forward_backward` appends one micro-step to a program: a forward op per
layer in order, then per layer in reverse a backward op (input gradient plus
weight gradient; the first layer computes no input gradient). It returns, for
every trainable layer, the id of the op after which its gradients are ready.

:func:`make_buckets` groups parameter tensors into gradient buckets in
backward order, as PyTorch DDP does (a small first bucket, then buckets up to
the cap); :func:`bucket_ready_ops` tells which backward op completes each.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcluster.compute.profile import DeviceProfile
from simcluster.program import RankClass, compute

__all__ = [
    "Bucket",
    "forward_backward",
    "make_buckets",
    "optimizer_step",
    "micro_steps",
]


@dataclass(frozen=True)
class Bucket:
    """Parameter tensors whose gradients are reduced together.

    layers: indices (into model.layers) of the layers that own the tensors, in
        the order their gradients become ready.
    numel: gradient elements in the bucket.
    """

    index: int
    layers: tuple[int, ...]
    numel: int

    def nbytes(self, dtype_bytes: int) -> int:
        return self.numel * dtype_bytes


def forward_backward(
    prog: RankClass,
    model,
    profile: DeviceProfile,
    batch: int,
    precision: str,
    prefix: str,
    deps: tuple[str, ...] = (),
) -> dict[int, str]:
    """Append one micro-step; returns {layer index: op id after which its grads exist}."""
    first = True
    for i, layer in enumerate(model.layers):
        t = profile.layer_time(layer, batch, precision, "fwd")
        prog.add(compute(f"{prefix}fwd.{i}", t, "forward", deps if first else ()))
        first = False
    ready: dict[int, str] = {}
    for i in range(len(model.layers) - 1, -1, -1):
        layer = model.layers[i]
        t = profile.layer_time(layer, batch, precision, "bwd_weight")
        if i > 0:
            t += profile.layer_time(layer, batch, precision, "bwd_input")
        op = prog.add(compute(f"{prefix}bwd.{i}", t, "backward"))
        if layer.params > 0:
            ready[i] = op.id
    return ready


def make_buckets(model, cap_bytes: float, first_cap_bytes: float, dtype_bytes: int) -> list[Bucket]:
    """Buckets in backward order: tensors fill a bucket until adding one would pass the cap."""
    buckets: list[Bucket] = []
    layers: list[int] = []
    numel = 0
    cap = first_cap_bytes
    for i in range(len(model.layers) - 1, -1, -1):
        layer = model.layers[i]
        for tensor in reversed(layer.param_tensors):
            if numel and (numel + tensor) * dtype_bytes > cap:
                buckets.append(Bucket(len(buckets), tuple(layers), numel))
                layers, numel, cap = [], 0, cap_bytes
            if not layers or layers[-1] != i:
                layers.append(i)
            numel += tensor
    if numel:
        buckets.append(Bucket(len(buckets), tuple(layers), numel))
    return buckets


def optimizer_step(
    prog: RankClass, profile: DeviceProfile, num_params: int, precision: str, deps: tuple[str, ...]
) -> str:
    """Append the SGD-with-momentum step; returns its op id."""
    op = prog.add(
        compute("optimizer", profile.optimizer_time(num_params, precision), "optimizer", deps)
    )
    return op.id


def micro_steps(
    prog: RankClass, model, profile: DeviceProfile, batch: int, precision: str, accumulation: int
) -> dict[int, str]:
    """Append ``accumulation`` micro-steps; returns the gradient-ready ops of the last one.

    Only the last micro-step's gradients are reduced (no sync on accumulation steps).
    """
    ready: dict[int, str] = {}
    for k in range(accumulation):
        prefix = f"m{k}." if accumulation > 1 else ""
        ready = forward_backward(prog, model, profile, batch, precision, prefix)
    return ready

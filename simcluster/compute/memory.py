"""Memory per GPU: what one training rank keeps on its device, in bytes.

A memory-accounting model of PyTorch training (each rule states what it counts):

* ``weights``: fp32 parameters, 4 B each; under autocast also the half-precision copies
  of the weights of convolutions, linears and LSTMs, which autocast caches for the
  forward pass (2 B each). Native AMP keeps no other master copy: the optimizer updates
  the fp32 parameters.
* ``gradients``: one fp32 gradient per parameter, 4 B.
* ``optimizer_state``: fp32 state per parameter: SGD momentum 4 B, Adam / AdamW m and v
  8 B, LAMB m and v 8 B (:data:`OPTIMIZER_STATE_BYTES`).
* ``activations``: what autograd keeps for backward of one micro-batch: every layer's
  input at the width the precision runs that op class in
  (:func:`simcluster.compute.precision.activation_bytes`), plus attention's output (the
  fused kernel keeps it for its backward), dropout's mask (1 B per element) and the
  loss's fp32 copy of the last layer's output (cross-entropy keeps its log-softmax;
  autocast runs losses in fp32). ReLU, residual adds, dropout and copies keep no input
  of their own (in-place ReLU's backward reads its output, which the next layer keeps
  as its input; an add needs nothing; dropout keeps only its mask).
* ``comm_buffers``: per schedule (:func:`comm_buffer_bytes`): DDP-style dense allreduce
  keeps its buckets as a second copy of the gradients (``gradient_as_bucket_view`` off,
  PyTorch's default) at the wire dtype; fusion schedules one fusion buffer plus the
  compressed selection (value + int32 index, 8 B per kept entry) and what an allgather
  of every rank's selection receives; Top-K and the sparsifying fusion schedules an
  error-feedback residual (4 B per parameter); H-SADMM its consensus and dual variables
  (8 B per parameter).
* ``workspace``: cuDNN scratch for convolutions, taken as the largest convolution's
  input + output activations at the micro-batch (an assumption: PyTorch lets cuDNN pick
  algorithms whose workspace fits in free memory; this is of the order they use).
  cuBLAS's workspace (a few MiB) is not counted.

Not counted: the CUDA context and the caching allocator's fragmentation (a few hundred
MB to a few GB in practice), so a configuration reported just under the device's
memory may still not fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simcluster.compute.precision import HALF_OPS, activation_bytes, is_amp

__all__ = [
    "OPTIMIZER_STATE_BYTES",
    "MemoryEstimate",
    "memory_per_gpu",
    "comm_buffer_bytes",
]

#: bytes of optimizer state per parameter (fp32)
OPTIMIZER_STATE_BYTES: dict[str, int] = {"sgd": 4, "adam": 8, "adamw": 8, "lamb": 8}

_MIB = 1024 * 1024
_WIRE = {"fp32": 4, "fp16": 2, "bf16": 2}
#: bytes per kept entry of a compressed gradient: fp32 value + int32 index
_ENTRY = 8
#: element-wise kinds whose backward keeps no input of their own
_NO_INPUT_KEPT = frozenset({"relu", "add", "dropout", "copy"})


class MemoryEstimate(dict):
    """Bytes per part (``weights``, ``gradients``, ...); :attr:`total` is their sum."""

    @property
    def total(self) -> float:
        return float(sum(self.values()))


def _variant(layer) -> str | None:
    return layer.shape.get("kind") if layer.op in ("norm", "elementwise", "pool") else None


def _activations(model, batch: int, key: str) -> tuple[float, float]:
    """(bytes kept for backward, largest convolution's input + output bytes) at ``batch``."""
    kept = 0.0
    largest = 0.0
    for layer in model.layers:
        a = activation_bytes(key, layer.op, _variant(layer))
        if layer.op == "embedding":
            kept += layer.in_elems * 8 * batch  # int64 indices
        elif layer.op == "elementwise" and layer.shape.get("kind") in _NO_INPUT_KEPT:
            pass
        else:
            kept += layer.in_elems * a * batch
        if layer.op == "attention":
            kept += layer.out_elems * a * batch
        if layer.op == "elementwise" and layer.shape.get("kind") == "dropout":
            kept += layer.out_elems * batch  # bool mask
        if layer.op == "conv":
            largest = max(largest, (layer.in_elems + layer.out_elems) * a * batch)
    if model.layers:
        kept += model.layers[-1].out_elems * 4 * batch  # the loss's fp32 log-softmax
    return kept, largest


def comm_buffer_bytes(
    schedule: str, options: Mapping[str, Any], model, gpus: int, key: str = "fp32"
) -> float:
    """Bytes of communication buffers a rank of ``schedule`` keeps (module docstring)."""
    params = float(model.params)
    if gpus < 2 and not schedule.startswith("hsadmm"):
        return 0.0  # a single rank syncs nothing (DDP builds no reducer buckets)
    if schedule in ("ddp", "nodebased", "hsadmm", "hsadmm-flat"):
        wire = _WIRE.get(str(options.get("gradient_dtype", "fp32")), 4)
        extra = 8 * params if schedule.startswith("hsadmm") else 0.0
        return params * wire + extra
    density = float(options.get("density", 0.01))
    own = density * params * _ENTRY
    if schedule == "topk":
        # fp32 value + the index dtype Top-K sends (int64 by default, as torch.topk returns)
        entry = 4 + (4 if options.get("index_dtype") == "int32" else 8)
        largest = max((layer.params for layer in model.layers), default=0)
        return 4 * params + density * params * entry + gpus * density * largest * entry
    if schedule.startswith("fusion") or schedule.startswith("ssfusion"):
        buffer = float(options.get("buffer_mb", 64.0)) * _MIB
        if schedule == "fusion-dense":
            return buffer
        gathered = gpus * density * min(buffer / 4, params) * _ENTRY
        return 4 * params + buffer + own + gathered
    return params * 4  # another schedule: assume one dense copy of the gradients


def memory_per_gpu(
    model,
    batch: int,
    key: str,
    optimizer: str,
    schedule: str,
    options: Mapping[str, Any],
    gpus: int,
) -> MemoryEstimate:
    """Bytes one rank keeps on its GPU, by part (module docstring for the rules)."""
    params = float(model.params)
    half_weights = sum(
        layer.params for layer in model.layers if layer.op in HALF_OPS
    ) * 2.0 if is_amp(key) else 0.0  # fmt: skip
    acts, largest = _activations(model, batch, key)
    return MemoryEstimate(
        weights=4 * params + half_weights,
        gradients=4 * params,
        optimizer_state=OPTIMIZER_STATE_BYTES[optimizer] * params,
        activations=acts,
        comm_buffers=comm_buffer_bytes(schedule, options, model, gpus, key),
        workspace=largest,
    )

"""Forward, input-gradient and weight-gradient time of one zoo layer.

:func:`build_layer` turns a :class:`simcluster.workload.model.Layer` into a real torch
module and inputs of the layer's shape (``Layer.shape``) at a batch size;
:func:`time_layer` times the three passes the simulator asks for:

* ``fwd``: the forward call with autograd recording, as in training;
* ``bwd_all``, ``bwd_input``, ``bwd_weight``: ``torch.autograd.grad`` of the output
  w.r.t. inputs and parameters, inputs only, parameters only. The runner splits the full
  backward in proportion to the two direct measurements, so that ``bwd_input +
  bwd_weight`` is what a training step pays for the layer even when one kernel produces
  both gradients (BatchNorm), and each part still comes from its own measurement.

Memory as in training: calls rotate over several copies of the layer, its inputs and
its weights (and of the forward graph, for the backward passes), up to ``ROTATE_BYTES``
or ``ROTATE_MAX`` copies, so that data and weights come from memory rather than a cache
kept hot by the loop (in a training step the other layers push a layer's weights out),
and every call's results are kept until the sample ends, so each call writes to freshly
allocated memory as a training step does (activations are kept for the backward pass).

Times are seconds per call, the median of the timer's samples.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .timing import Measurement, Timer

__all__ = [
    "LayerBench",
    "build_layer",
    "time_layer",
    "amp_context",
    "math_mode",
    "amp_dtype",
    "CALIBRATION_PRECISIONS",
]

#: precisions a measured profile can hold (keys of ``device.compute``):
#: ``fp32`` strict IEEE fp32 (TF32 off for cuBLAS matmuls and cuDNN convolutions),
#: ``tf32`` fp32 tensors with TF32 tensor-core math on for both, ``amp`` autocast to fp16
#: on CUDA (bf16 on a CPU, which has no fp16 autocast), ``amp_bf16`` autocast to bf16.
#: Note: PyTorch's own default is a mix (cuDNN TF32 on, matmul TF32 off); profiles measured
#: before ``tf32`` existed (h200-measured, 2026-11-26 04:00) took ``fp32`` in that mix.
CALIBRATION_PRECISIONS = ("fp32", "tf32", "amp", "amp_bf16")

#: rotate over copies of the layer (inputs and weights) until they hold this many bytes
#: (at most ROTATE_MAX copies)
ROTATE_BYTES = 64 << 20
ROTATE_MAX = 4


@dataclass
class LayerBench:
    """A runnable layer: ``forward(*inputs)`` with trainable ``params``."""

    forward: Callable[..., torch.Tensor]
    inputs: list[torch.Tensor]
    params: list[torch.Tensor]

    def copies(self) -> list[list[torch.Tensor]]:
        """Fresh copies of the inputs (same values, new memory, same requires_grad)."""
        return [x.detach().clone().requires_grad_(x.requires_grad) for x in self.inputs]  # type: ignore[return-value]

    @property
    def grad_inputs(self) -> list[torch.Tensor]:
        return [x for x in self.inputs if x.requires_grad]


def amp_context(device: torch.device, precision: str):
    """``torch.autocast`` for ``amp`` (fp16 on CUDA, bf16 on the CPU) and ``amp_bf16``
    (bf16), else a no-op."""
    if precision == "amp_bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    if precision != "amp":
        return nullcontext()
    dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    return torch.autocast(device_type=device.type, dtype=dtype)


def amp_dtype(device: torch.device, precision: str) -> torch.dtype | None:
    """The half-precision dtype autocast computes in at ``precision`` (None: no autocast)."""
    if precision == "amp_bf16":
        return torch.bfloat16
    if precision == "amp":
        return torch.float16 if device.type == "cuda" else torch.bfloat16
    return None


def _as_activation(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A floating-point layer input as a mixed-precision network hands it on: in the
    autocast dtype (convolutions and linears write half-precision outputs, and norms,
    activations, pools and residual adds pass that dtype on). Index inputs stay as they are.
    Assumption: every layer's producer wrote half precision; the first layer's fp32 input
    and the fp32 residual stream a post-norm transformer keeps after LayerNorm are not
    modelled, so their layers are timed on half the bytes they really read."""
    if not x.is_floating_point():
        return x
    return x.detach().to(dtype).requires_grad_(x.requires_grad)


@contextmanager
def math_mode(precision: str) -> Iterator[None]:
    """TF32 tensor-core math on (``tf32``) or off (every other precision) for cuBLAS
    matmuls and cuDNN convolutions while the block runs; the previous flags come back
    after. Under autocast the half-precision kernels are unaffected; the ops autocast
    keeps in fp32 then run strict, as with ``fp32``. No effect on a CPU."""
    on = precision == "tf32"
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _x(shape: tuple[int, ...], device: torch.device, grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape, device=device).requires_grad_(grad)


def _shuffle(x: torch.Tensor) -> torch.Tensor:
    """ShuffleNet's concat + channel shuffle: a copy that transposes two channel groups."""
    b, c = x.shape[0], x.shape[1]
    if x.dim() == 4 and c % 2 == 0:
        return x.view(b, 2, c // 2, *x.shape[2:]).transpose(1, 2).contiguous().view_as(x)
    return x.clone()


def build_layer(layer, batch: int, device: torch.device) -> LayerBench:
    """A torch module and random inputs shaped like ``layer`` at ``batch`` samples."""
    s = layer.shape
    op = layer.op
    b = batch
    if op == "conv":
        m = nn.Conv2d(s["cin"], s["cout"], (s["kh"], s["kw"]), s["stride"], s.get("pad", 0),
                      groups=s.get("groups", 1), bias=bool(s.get("bias", False)))  # fmt: skip
        m = m.to(device)
        return LayerBench(m, [_x((b, s["cin"], s["hin"], s["win"]), device)], list(m.parameters()))
    if op == "linear":
        m = nn.Linear(s["in_features"], s["out_features"], bias=bool(s.get("bias", True)))
        m = m.to(device)
        tokens = s.get("tokens", 1)
        shape = (b, s["in_features"]) if tokens == 1 else (b, tokens, s["in_features"])
        return LayerBench(m, [_x(shape, device)], list(m.parameters()))
    if op == "norm":
        if s.get("kind") == "layernorm":
            m = nn.LayerNorm(s["dim"]).to(device)
            return LayerBench(m, [_x((b, s["tokens"], s["dim"]), device)], list(m.parameters()))
        m = nn.BatchNorm2d(s["c"]).to(device).train()
        return LayerBench(m, [_x((b, s["c"], s["h"], s["w"]), device)], list(m.parameters()))
    if op == "pool":
        x = _x((b, s["c"], s["hin"], s["win"]), device)
        kind = s.get("kind", "max")
        if kind == "adaptive_avg":
            return LayerBench(lambda t: F.adaptive_avg_pool2d(t, (s["hout"], s["wout"])), [x], [])
        fn = F.max_pool2d if kind == "max" else F.avg_pool2d
        return LayerBench(lambda t: fn(t, s["k"], s["stride"], s.get("pad", 0)), [x], [])
    if op == "elementwise":
        kind = s.get("kind", "relu")
        if "c" in s:
            shape = (b, s["c"], s["h"], s["w"])
        else:
            shape = (b, s["elems"])
        if kind == "add":
            xs = [_x(shape, device) for _ in range(max(int(s.get("inputs", 2)), 2))]

            def add(*ts: torch.Tensor) -> torch.Tensor:
                out = ts[0] + ts[1]
                for t in ts[2:]:
                    out = out + t
                return out

            return LayerBench(add, xs, [])
        fns: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
            "relu": F.relu,
            "gelu": lambda t: F.gelu(t, approximate="tanh"),
            "tanh": torch.tanh,
            "sigmoid": torch.sigmoid,
            "dropout": lambda t: F.dropout(t, 0.1, training=True),
            "copy": _shuffle,
        }
        return LayerBench(fns.get(kind, F.relu), [_x(shape, device)], [])
    if op == "attention":
        h, seq, hd = s["heads"], s["seq"], s["head_dim"]
        qkv = [_x((b, h, seq, hd), device) for _ in range(3)]
        causal = bool(s.get("causal", False))
        return LayerBench(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), qkv, []
        )
    if op == "embedding":
        m = nn.Embedding(s["rows"], s["dim"]).to(device)
        idx = torch.randint(0, s["rows"], (b, s["tokens"]), device=device)
        return LayerBench(m, [idx], list(m.parameters()))
    if op == "lstm":
        m = nn.LSTM(s["input_size"], s["hidden"], batch_first=True).to(device)
        x = _x((b, s["seq"], s["input_size"]), device)
        return LayerBench(lambda t: m(t)[0], [x], list(m.parameters()))
    raise ValueError(f"no benchmark for op class {op!r}")


def time_layer(
    layer, batch: int, device: torch.device, timer: Timer, precision: str = "fp32"
) -> dict[str, Measurement]:
    """Timer samples of ``fwd``, ``bwd_all`` (inputs + weights), ``bwd_input`` and
    ``bwd_weight`` (the last two only where both gradients exist; ``bwd_weight`` alone
    for a layer whose input takes no gradient, e.g. an embedding's indices).
    """
    with math_mode(precision):
        return _time_layer(layer, batch, device, timer, precision)


def _time_layer(
    layer, batch: int, device: torch.device, timer: Timer, precision: str
) -> dict[str, Measurement]:
    ctx = amp_context(device, precision)
    half = amp_dtype(device, precision)

    def built() -> LayerBench:
        b = build_layer(layer, batch, device)
        if half is not None:
            b.inputs = [_as_activation(x, half) for x in b.inputs]
        return b

    bench = built()
    nbytes = sum(x.numel() * x.element_size() for x in [*bench.inputs, *bench.params])
    n_copies = max(1, min(ROTATE_MAX, math.ceil(ROTATE_BYTES / max(nbytes, 1))))
    # whole copies of the layer: its inputs and its weights, as a training step reaches a
    # layer's weights after the other layers have pushed them out of the caches
    benches = [bench] + [built() for _ in range(n_copies - 1)]
    kept: list[object] = []
    turn = itertools.count()

    def forward(b: LayerBench) -> torch.Tensor:
        with ctx:
            return b.forward(*b.inputs)

    def fwd() -> None:
        kept.append(forward(benches[next(turn) % n_copies]))

    out = {"fwd": timer.measure(fwd, kept.clear)}
    graphs = []
    for b in benches:
        y = forward(b)
        graphs.append((y, torch.randn_like(y), b.grad_inputs, b.params))

    def backward(wrt_which: str) -> Callable[[], None]:
        def run() -> None:
            y, g, xs, ps = graphs[next(turn) % n_copies]
            wrt = {"all": xs + ps, "input": xs, "weight": ps}[wrt_which]
            kept.append(torch.autograd.grad(y, wrt, g, retain_graph=True))

        return run

    out["bwd_all"] = timer.measure(backward("all"), kept.clear)
    if bench.params and bench.grad_inputs:  # a tied weight (params == 0) is still computed
        out["bwd_input"] = timer.measure(backward("input"), kept.clear)
        out["bwd_weight"] = timer.measure(backward("weight"), kept.clear)
    elif bench.params:
        out["bwd_weight"] = timer.measure(backward("all"), kept.clear)
    return out


def layer_key(layer, batch: int) -> tuple:
    """Identity of a benchmark: op, shape and batch (names differ, shapes repeat)."""
    shape = tuple(sorted((k, v) for k, v in layer.shape.items()))
    return (layer.op, shape, layer.params > 0, batch)

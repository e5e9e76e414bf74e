"""Layer tables: the :class:`Layer` and :class:`Model` records and the helpers that build them.

Units used throughout the workload package:

* parameter counts and activation sizes are **elements** (multiply by the dtype
  size in bytes to get bytes);
* compute is **FLOPs per sample, forward pass only**, with one multiply-add
  counted as 2 FLOPs;
* memory sizes returned by methods named ``*_bytes`` are **bytes**.

A "sample" is one image for vision models and one sequence of ``input_size``
tokens for sequence models.

The helpers below (``conv2d``, ``linear``, ``batchnorm2d`` ...) compute a layer's
parameter tensors, FLOPs and activation sizes from its hyper-parameters; the
architecture modules only describe the architecture and never type in totals.
Per-element FLOP costs of cheap ops are the constants in :data:`ELEMENTWISE_FLOPS`
and :data:`NORM_FLOPS_PER_ELEM`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from simcluster.errors import SimclusterError

__all__ = [
    "OP_CLASSES",
    "ELEMENTWISE_FLOPS",
    "NORM_FLOPS_PER_ELEM",
    "LSTM_GATE_FLOPS_PER_UNIT",
    "ShapeError",
    "FrozenDict",
    "Layer",
    "Model",
    "FMap",
    "Tape",
    "conv2d",
    "batchnorm2d",
    "activation",
    "add",
    "pool2d",
    "adaptive_avgpool2d",
    "linear",
    "tied_linear",
    "layernorm",
    "elementwise",
    "embedding",
    "attention",
    "lstm",
]

#: The op classes a :class:`Layer` may belong to.
OP_CLASSES: tuple[str, ...] = (
    "conv",
    "linear",
    "norm",
    "elementwise",
    "pool",
    "attention",
    "embedding",
    "lstm",
)

#: FLOPs per output element of element-wise ops (approximate instruction counts).
ELEMENTWISE_FLOPS: Mapping[str, int] = {
    "relu": 1,
    "gelu": 8,  # tanh approximation: a few multiplies, adds and a tanh
    "tanh": 4,
    "sigmoid": 4,
    "dropout": 1,  # multiply by the mask
    "add": 1,  # per input beyond the first, see :func:`add`
    "copy": 0,  # split / concat / channel shuffle: memory traffic only
}

#: FLOPs per element of a normalisation layer (mean, variance, normalise, scale, shift).
NORM_FLOPS_PER_ELEM = 5

#: Element-wise FLOPs per hidden unit per time step of an LSTM cell:
#: two bias adds on 4 gates (8), 4 gate non-linearities (4), ``c = f*c + i*g`` (3),
#: ``h = o * tanh(c)`` (2).
LSTM_GATE_FLOPS_PER_UNIT = 17


class ShapeError(SimclusterError, ValueError):
    """An input too small (or otherwise unfit) for a layer: the output would be empty."""


class FrozenDict(dict):
    """A read-only, hashable ``dict``; ``json.dumps`` serialises it like a plain dict."""

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("FrozenDict is read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]
    __ior__ = _readonly  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self


@dataclass(frozen=True)
class Layer:
    """One row of a model's layer table.

    Attributes
    ----------
    name: dotted name in the style of the reference implementation, e.g. ``layer1.0.conv1``.
    op: op class, one of :data:`OP_CLASSES`.
    params: trainable parameters (elements).
    param_tensors: element count of each trainable tensor in registration order
        (e.g. ``(weight, bias)``); sums to ``params``.
    flops: forward FLOPs per sample (one multiply-add = 2 FLOPs).
    in_elems: input activation elements per sample (all inputs together).
    out_elems: output activation elements per sample.
    shape: op-specific hyper-parameters and dimensions (a read-only, JSON-serialisable dict).
    """

    name: str
    op: str
    params: int
    param_tensors: tuple[int, ...]
    flops: float
    in_elems: int
    out_elems: int
    shape: FrozenDict

    def __post_init__(self) -> None:
        if self.op not in OP_CLASSES:
            raise ValueError(f"layer {self.name!r}: unknown op class {self.op!r}")
        if sum(self.param_tensors) != self.params:
            raise ValueError(f"layer {self.name!r}: param_tensors do not sum to params")
        if not isinstance(self.shape, FrozenDict):
            object.__setattr__(self, "shape", FrozenDict(self.shape))

    def to_dict(self) -> dict[str, Any]:
        """The row as plain JSON-serialisable Python values."""
        return {
            "name": self.name,
            "op": self.op,
            "params": self.params,
            "param_tensors": list(self.param_tensors),
            "flops": self.flops,
            "in_elems": self.in_elems,
            "out_elems": self.out_elems,
            "shape": {k: list(v) if isinstance(v, tuple) else v for k, v in self.shape.items()},
        }


@dataclass(frozen=True)
class Model:
    """A model's layer table at one input size.

    Attributes
    ----------
    name: registry name, e.g. ``resnet50``.
    input_size: image side in pixels, or sequence length in tokens for sequence models.
    num_classes: classifier outputs; the vocabulary size for language models.
    layers: the layers in forward execution order.
    """

    name: str
    input_size: int
    num_classes: int
    layers: tuple[Layer, ...]

    @property
    def params(self) -> int:
        """Trainable parameters (elements); shared (tied) tensors counted once."""
        return sum(layer.params for layer in self.layers)

    @property
    def flops(self) -> float:
        """Forward FLOPs per sample."""
        return float(sum(layer.flops for layer in self.layers))

    @property
    def activation_elems(self) -> int:
        """Sum of all layers' output activation elements per sample."""
        return sum(layer.out_elems for layer in self.layers)

    def gradient_bytes(self, dtype_bytes: int = 4) -> int:
        """Bytes of one full gradient (one value per trainable parameter)."""
        if isinstance(dtype_bytes, bool) or not isinstance(dtype_bytes, int) or dtype_bytes <= 0:
            raise ValueError(f"dtype_bytes must be a positive integer, got {dtype_bytes!r}")
        return self.params * dtype_bytes

    def trainable_layers(self) -> tuple[Layer, ...]:
        """Layers that own trainable parameters (``params > 0``), in execution order."""
        return tuple(layer for layer in self.layers if layer.params > 0)


# ----------------------------------------------------------------------------- helpers


class FMap(NamedTuple):
    """A per-sample feature map: channels x height x width."""

    c: int
    h: int
    w: int

    @property
    def elems(self) -> int:
        return self.c * self.h * self.w


T = TypeVar("T")


class Tape:
    """Collects layers in execution order.

    ``x = tape.push(conv2d(...))`` appends the layer and returns the output feature map;
    ``tape.add(layer)`` appends a layer that has no feature-map output.
    """

    def __init__(self) -> None:
        self.layers: list[Layer] = []

    def push(self, made: tuple[Layer, T]) -> T:
        layer, out = made
        self.layers.append(layer)
        return out

    def add(self, layer: Layer) -> Layer:
        self.layers.append(layer)
        return layer


def _make(
    name: str,
    op: str,
    tensors: tuple[int, ...],
    flops: float,
    in_elems: int,
    out_elems: int,
    **shape: Any,
) -> Layer:
    return Layer(
        name, op, sum(tensors), tensors, float(flops), in_elems, out_elems, FrozenDict(shape)
    )


def _out_side(name: str, side: int, k: int, stride: int, pad: int) -> int:
    out = (side + 2 * pad - k) // stride + 1
    if out < 1:
        raise ShapeError(
            f"layer {name!r}: input side {side} too small for kernel {k}, "
            f"stride {stride}, padding {pad}"
        )
    return out


def conv2d(
    name: str,
    x: FMap,
    cout: int,
    k: int,
    stride: int = 1,
    pad: int = 0,
    groups: int = 1,
    bias: bool = False,
) -> tuple[Layer, FMap]:
    """2-D convolution with a square ``k`` x ``k`` kernel. FLOPs: 2 per MAC plus the bias add."""
    if x.c % groups or cout % groups:
        raise ValueError(f"layer {name!r}: channels {x.c}->{cout} not divisible by {groups}")
    hout = _out_side(name, x.h, k, stride, pad)
    wout = _out_side(name, x.w, k, stride, pad)
    out = FMap(cout, hout, wout)
    weight = cout * (x.c // groups) * k * k
    tensors = (weight, cout) if bias else (weight,)
    flops = 2 * weight * hout * wout + (out.elems if bias else 0)
    layer = _make(
        name, "conv", tensors, flops, x.elems, out.elems,
        cin=x.c, cout=cout, kh=k, kw=k, stride=stride, pad=pad, groups=groups,
        hin=x.h, win=x.w, hout=hout, wout=wout, bias=bias,
    )  # fmt: skip
    return layer, out


def batchnorm2d(name: str, x: FMap) -> tuple[Layer, FMap]:
    """BatchNorm over channels with affine weight and bias (running stats are buffers)."""
    flops = NORM_FLOPS_PER_ELEM * x.elems
    layer = _make(name, "norm", (x.c, x.c), flops, x.elems, x.elems,
                  kind="batchnorm", c=x.c, h=x.h, w=x.w)  # fmt: skip
    return layer, x


def elementwise(name: str, elems: int, kind: str, inputs: int = 1, **shape: Any) -> Layer:
    """A parameter-free element-wise op over ``elems`` output elements.

    ``kind`` selects the per-element cost from :data:`ELEMENTWISE_FLOPS`; ``inputs`` is the
    number of same-sized inputs (an ``add`` of ``n`` inputs costs ``n - 1`` FLOPs/element).
    """
    per = ELEMENTWISE_FLOPS[kind] * (max(inputs - 1, 1) if kind == "add" else 1)
    return _make(name, "elementwise", (), per * elems, inputs * elems, elems,
                 kind=kind, elems=elems, inputs=inputs, **shape)  # fmt: skip


def activation(name: str, x: FMap, kind: str = "relu") -> tuple[Layer, FMap]:
    """An element-wise activation (or dropout / copy) on a feature map."""
    return elementwise(name, x.elems, kind, c=x.c, h=x.h, w=x.w), x


def add(name: str, x: FMap, inputs: int = 2) -> tuple[Layer, FMap]:
    """Element-wise sum of ``inputs`` feature maps shaped like ``x`` (e.g. a residual add)."""
    return elementwise(name, x.elems, "add", inputs, c=x.c, h=x.h, w=x.w), x


def pool2d(
    name: str, x: FMap, k: int, stride: int, pad: int = 0, kind: str = "max"
) -> tuple[Layer, FMap]:
    """Max or average pooling with a square window; ``k*k`` FLOPs per output element."""
    out = FMap(x.c, _out_side(name, x.h, k, stride, pad), _out_side(name, x.w, k, stride, pad))
    layer = _make(name, "pool", (), k * k * out.elems, x.elems, out.elems,
                  kind=kind, c=x.c, k=k, stride=stride, pad=pad,
                  hin=x.h, win=x.w, hout=out.h, wout=out.w)  # fmt: skip
    return layer, out


def adaptive_avgpool2d(name: str, x: FMap, side: int = 1) -> tuple[Layer, FMap]:
    """Adaptive average pooling to ``side`` x ``side``; one FLOP per input and output element."""
    out = FMap(x.c, side, side)
    layer = _make(name, "pool", (), x.elems + out.elems, x.elems, out.elems,
                  kind="adaptive_avg", c=x.c, hin=x.h, win=x.w, hout=side, wout=side)  # fmt: skip
    return layer, out


def linear(
    name: str, in_features: int, out_features: int, tokens: int = 1, bias: bool = True
) -> Layer:
    """Fully connected layer applied to ``tokens`` vectors per sample."""
    weight = in_features * out_features
    tensors = (weight, out_features) if bias else (weight,)
    flops = tokens * (2 * weight + (out_features if bias else 0))
    return _make(name, "linear", tensors, flops, tokens * in_features, tokens * out_features,
                 in_features=in_features, out_features=out_features, tokens=tokens,
                 bias=bias)  # fmt: skip


def tied_linear(name: str, in_features: int, out_features: int, tokens: int = 1) -> Layer:
    """A bias-free linear layer whose weight is owned (and counted) by another layer."""
    flops = tokens * 2 * in_features * out_features
    return _make(name, "linear", (), flops, tokens * in_features, tokens * out_features,
                 in_features=in_features, out_features=out_features, tokens=tokens,
                 bias=False, tied=True)  # fmt: skip


def layernorm(name: str, dim: int, tokens: int) -> Layer:
    """LayerNorm over the last ``dim`` elements of ``tokens`` vectors, with weight and bias."""
    elems = tokens * dim
    return _make(name, "norm", (dim, dim), NORM_FLOPS_PER_ELEM * elems, elems, elems,
                 kind="layernorm", dim=dim, tokens=tokens)  # fmt: skip


def embedding(name: str, rows: int, dim: int, tokens: int) -> Layer:
    """Table lookup of ``tokens`` rows from a ``rows`` x ``dim`` table (0 FLOPs)."""
    return _make(name, "embedding", (rows * dim,), 0, tokens, tokens * dim,
                 rows=rows, dim=dim, tokens=tokens)  # fmt: skip


def attention(name: str, heads: int, seq: int, dim: int, causal: bool = False) -> Layer:
    """Score (``Q K^T``) and context (``P V``) batched matmuls plus softmax of one block.

    FLOPs are ``4 * seq * seq * dim`` per sample (two matmuls of ``seq*seq*dim`` MACs);
    inputs are Q, K and V (``3 * seq * dim``), the output is the context (``seq * dim``).
    """
    if dim % heads:
        raise ValueError(f"layer {name!r}: dim {dim} not divisible by {heads} heads")
    return _make(name, "attention", (), 4 * seq * seq * dim, 3 * seq * dim, seq * dim,
                 heads=heads, seq=seq, dim=dim, head_dim=dim // heads,
                 causal=causal)  # fmt: skip


def lstm(name: str, input_size: int, hidden: int, seq: int) -> Layer:
    """One unidirectional LSTM layer run over ``seq`` steps (PyTorch parameterisation).

    Tensors: ``weight_ih (4h x in)``, ``weight_hh (4h x h)``, ``bias_ih (4h)``, ``bias_hh (4h)``.
    FLOPs per step: the two gate matmuls plus :data:`LSTM_GATE_FLOPS_PER_UNIT` per unit.
    """
    gates = 4 * hidden
    tensors = (gates * input_size, gates * hidden, gates, gates)
    per_step = 2 * gates * (input_size + hidden) + LSTM_GATE_FLOPS_PER_UNIT * hidden
    return _make(name, "lstm", tensors, seq * per_step, seq * input_size, seq * hidden,
                 input_size=input_size, hidden=hidden, seq=seq)  # fmt: skip

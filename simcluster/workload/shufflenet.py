"""ShuffleNet V2 layer tables (torchvision-style; x1.0 by default).

Stem: 3x3 stride-2 convolution (3 -> 24) + BatchNorm + ReLU, 3x3 stride-2 max pool.
Three stages of inverted-residual units (4, 8, 4 units); the first unit of a stage has
stride 2 and two branches (``branch1``: depthwise 3x3 + 1x1 on the full input;
``branch2``: 1x1, depthwise 3x3, 1x1), later units split the channels in half and run
``branch2`` on one half. Every unit ends with a concat + channel shuffle, recorded as one
zero-FLOP ``copy`` element-wise layer (it moves memory). Then ``conv5`` (1x1 to 1024),
a global average pool and ``fc``. Convolutions carry no bias.

Units: parameters and activations in elements, compute in forward FLOPs per image.
"""

from __future__ import annotations

from .model import (
    FMap,
    Layer,
    Tape,
    activation,
    adaptive_avgpool2d,
    batchnorm2d,
    conv2d,
    linear,
    pool2d,
)

__all__ = ["SHUFFLENET_V2_WIDTHS", "shufflenet_v2_layers"]

_REPEATS = (4, 8, 4)

#: width multiplier -> output channels of (conv1, stage2, stage3, stage4, conv5)
SHUFFLENET_V2_WIDTHS: dict[str, tuple[int, int, int, int, int]] = {
    "x0.5": (24, 48, 96, 192, 1024),
    "x1.0": (24, 116, 232, 464, 1024),
    "x1.5": (24, 176, 352, 704, 1024),
    "x2.0": (24, 244, 488, 976, 2048),
}

# A branch is a sequence of ("conv", cout, k, stride, depthwise) / ("bn",) / ("relu",)
# steps, numbered like the entries of an nn.Sequential.
_Step = tuple


def _sequential(t: Tape, prefix: str, x: FMap, steps: list[_Step]) -> FMap:
    for i, step in enumerate(steps):
        name = f"{prefix}{i}"
        if step[0] == "conv":
            _, cout, k, stride, dw = step
            x = t.push(conv2d(name, x, cout, k, stride, pad=k // 2, groups=x.c if dw else 1))
        elif step[0] == "bn":
            x = t.push(batchnorm2d(name, x))
        else:
            x = t.push(activation(name, x))
    return x


def _unit(t: Tape, prefix: str, x: FMap, cout: int, stride: int) -> FMap:
    """One inverted-residual unit; returns the shuffled output feature map."""
    half = cout // 2
    if stride > 1:
        b1 = [("conv", x.c, 3, stride, True), ("bn",), ("conv", half, 1, 1, False), ("bn",)]
        y1 = _sequential(t, f"{prefix}branch1.", x, b1 + [("relu",)])
        x2 = x
    else:
        y1 = FMap(half, x.h, x.w)
        x2 = FMap(x.c - half, x.h, x.w)
    b2 = [("conv", half, 1, 1, False), ("bn",), ("relu",), ("conv", half, 3, stride, True)]
    b2 += [("bn",), ("conv", half, 1, 1, False), ("bn",), ("relu",)]
    y2 = _sequential(t, f"{prefix}branch2.", x2, b2)
    out = FMap(y1.c + y2.c, y2.h, y2.w)
    t.add(activation(f"{prefix}shuffle", out, "copy")[0])
    return out


def shufflenet_v2_layers(
    input_size: int, num_classes: int, width: str = "x1.0"
) -> tuple[Layer, ...]:
    """Layer table of ShuffleNet V2 ``width`` on ``input_size`` x ``input_size`` RGB images."""
    chans = SHUFFLENET_V2_WIDTHS[width]
    t = Tape()
    stem = [("conv", chans[0], 3, 2, False), ("bn",), ("relu",)]
    x = _sequential(t, "conv1.", FMap(3, input_size, input_size), stem)
    x = t.push(pool2d("maxpool", x, 3, 2, 1))
    for s, (n, cout) in enumerate(zip(_REPEATS, chans[1:4], strict=True), start=2):
        for u in range(n):
            x = _unit(t, f"stage{s}.{u}.", x, cout, 2 if u == 0 else 1)
    x = _sequential(t, "conv5.", x, [("conv", chans[4], 1, 1, False), ("bn",), ("relu",)])
    x = t.push(adaptive_avgpool2d("mean", x, 1))
    t.add(linear("fc", x.elems, num_classes))
    return tuple(t.layers)

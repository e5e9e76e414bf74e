"""ResNet family (torchvision-style) layer tables: ResNet-18 ... 152 and Wide ResNet-50-2.

Two stems are available:

* ``imagenet``: 7x7 stride-2 convolution (3 -> 64) + BatchNorm + ReLU + 3x3 stride-2 max pool;
* ``cifar``: 3x3 stride-1 convolution (3 -> 64) + BatchNorm + ReLU, no max pool.

Blocks follow torchvision: basic blocks (two 3x3 convolutions) for ResNet-18/34 and
bottleneck blocks (1x1, 3x3, 1x1; stride on the 3x3; expansion 4) for the deeper ones.
A projection shortcut (1x1 convolution + BatchNorm) is used when the shape changes.
Convolutions carry no bias; BatchNorm layers have weight and bias. The head is a global
average pool and a fully connected layer to ``num_classes``.

Units: parameters and activations in elements, compute in forward FLOPs per image.
"""

from __future__ import annotations

from .model import (
    FMap,
    Layer,
    Tape,
    activation,
    adaptive_avgpool2d,
    add,
    batchnorm2d,
    conv2d,
    linear,
    pool2d,
)

__all__ = ["RESNET_DEPTHS", "resnet_layers"]

#: depth -> (block kind, blocks per stage)
RESNET_DEPTHS: dict[int, tuple[str, tuple[int, int, int, int]]] = {
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)),
}

_STAGE_PLANES = (64, 128, 256, 512)
_EXPANSION = {"basic": 1, "bottleneck": 4}


def _conv_bn(t: Tape, prefix: str, idx: str, x: FMap, cout: int, k: int, stride: int = 1) -> FMap:
    """``{prefix}conv{idx}`` + ``{prefix}bn{idx}`` with 'same' padding."""
    x = t.push(conv2d(f"{prefix}conv{idx}", x, cout, k, stride, pad=k // 2))
    return t.push(batchnorm2d(f"{prefix}bn{idx}", x))


def _stem(t: Tape, x: FMap, stem: str) -> FMap:
    if stem == "imagenet":
        x = _conv_bn(t, "", "1", x, 64, 7, stride=2)
        x = t.push(activation("relu", x))
        return t.push(pool2d("maxpool", x, 3, 2, 1))
    if stem == "cifar":
        x = _conv_bn(t, "", "1", x, 64, 3)
        return t.push(activation("relu", x))
    raise ValueError(f"unknown ResNet stem {stem!r}")


def _block(t: Tape, prefix: str, x: FMap, kind: str, planes: int, width: int, stride: int) -> FMap:
    """One residual block; ``width`` is the inner width of a bottleneck."""
    inp = x
    cout = planes * _EXPANSION[kind]
    if kind == "basic":
        convs = [(planes, 3, stride), (planes, 3, 1)]
    else:
        convs = [(width, 1, 1), (width, 3, stride), (cout, 1, 1)]
    for i, (c, k, s) in enumerate(convs, start=1):
        x = _conv_bn(t, prefix, str(i), x, c, k, s)
        if i < len(convs):
            x = t.push(activation(f"{prefix}relu{i}", x))
    if stride != 1 or inp.c != cout:
        sc = t.push(conv2d(f"{prefix}downsample.0", inp, cout, 1, stride))
        t.push(batchnorm2d(f"{prefix}downsample.1", sc))
    x = t.push(add(f"{prefix}add", x))
    return t.push(activation(f"{prefix}relu{len(convs)}", x))


def resnet_layers(
    depth: int,
    input_size: int,
    num_classes: int,
    stem: str = "imagenet",
    width_per_group: int = 64,
) -> tuple[Layer, ...]:
    """Layer table of a ResNet of ``depth`` on ``input_size`` x ``input_size`` RGB images.

    ``width_per_group=128`` gives the Wide ResNet-*-2 variants (bottleneck inner width doubled).
    """
    kind, blocks = RESNET_DEPTHS[depth]
    t = Tape()
    x = _stem(t, FMap(3, input_size, input_size), stem)
    for stage, (n, planes) in enumerate(zip(blocks, _STAGE_PLANES, strict=True), start=1):
        width = planes * width_per_group // 64
        for b in range(n):
            stride = 2 if stage > 1 and b == 0 else 1
            x = _block(t, f"layer{stage}.{b}.", x, kind, planes, width, stride)
    x = t.push(adaptive_avgpool2d("avgpool", x, 1))
    t.add(linear("fc", x.elems, num_classes))
    return tuple(t.layers)

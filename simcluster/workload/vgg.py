"""VGG-16 / VGG-19 layer tables (torchvision-style, no BatchNorm).

``features`` is a stack of 3x3 convolutions (padding 1, with bias) each followed by ReLU,
with 2x2 stride-2 max pools between the five stages; then an adaptive average pool to
7x7 and the classifier ``Linear(512*7*7, 4096), ReLU, Dropout, Linear(4096, 4096), ReLU,
Dropout, Linear(4096, num_classes)``. Layer names follow torchvision's ``nn.Sequential``
indices (``features.0``, ``classifier.6``, ...). The input side must be at least 32.

Units: parameters and activations in elements, compute in forward FLOPs per image.
"""

from __future__ import annotations

from .model import FMap, Layer, Tape, activation, adaptive_avgpool2d, conv2d, linear, pool2d

__all__ = ["VGG_CONFIGS", "vgg_layers"]

#: depth -> (convolutions per stage); stage widths are 64, 128, 256, 512, 512.
VGG_CONFIGS: dict[int, tuple[int, ...]] = {
    11: (1, 1, 2, 2, 2),
    13: (2, 2, 2, 2, 2),
    16: (2, 2, 3, 3, 3),
    19: (2, 2, 4, 4, 4),
}

_STAGE_WIDTHS = (64, 128, 256, 512, 512)
_HIDDEN = 4096


def vgg_layers(depth: int, input_size: int, num_classes: int) -> tuple[Layer, ...]:
    """Layer table of VGG-``depth`` on ``input_size`` x ``input_size`` RGB images."""
    t = Tape()
    x = FMap(3, input_size, input_size)
    i = 0
    for convs, width in zip(VGG_CONFIGS[depth], _STAGE_WIDTHS, strict=True):
        for _ in range(convs):
            x = t.push(conv2d(f"features.{i}", x, width, 3, 1, pad=1, bias=True))
            x = t.push(activation(f"features.{i + 1}", x))
            i += 2
        x = t.push(pool2d(f"features.{i}", x, 2, 2))
        i += 1
    x = t.push(adaptive_avgpool2d("avgpool", x, 7))
    features = x.elems
    for j, (fin, fout) in enumerate(((features, _HIDDEN), (_HIDDEN, _HIDDEN))):
        t.add(linear(f"classifier.{3 * j}", fin, fout))
        t.add(activation(f"classifier.{3 * j + 1}", FMap(fout, 1, 1))[0])
        t.add(activation(f"classifier.{3 * j + 2}", FMap(fout, 1, 1), "dropout")[0])
    t.add(linear("classifier.6", _HIDDEN, num_classes))
    return tuple(t.layers)

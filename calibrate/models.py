"""Real ``nn.Module`` models for the whole-model check, built like the zoo's layer tables.

:func:`torch_model` builds the ResNets of :mod:`simcluster.workload.resnet`
(torchvision-style blocks, ImageNet or CIFAR stem) so that the simulator's sum of
per-layer times can be compared with the time torch needs for the whole model.
:func:`time_model` measures forward + backward of such a module (seconds).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable

import torch
import torch.nn as nn

from .layers import amp_context, math_mode
from .timing import Timer

__all__ = ["torch_model", "small_cnn", "time_model", "time_host_ahead", "simulated_time"]


class _Block(nn.Module):
    def __init__(self, kind: str, cin: int, planes: int, width: int, stride: int) -> None:
        super().__init__()
        cout = planes * (1 if kind == "basic" else 4)
        if kind == "basic":
            convs = [(cin, planes, 3, stride), (planes, planes, 3, 1)]
        else:
            convs = [(cin, width, 1, 1), (width, width, 3, stride), (width, cout, 1, 1)]
        layers: list[nn.Module] = []
        for i, (ci, co, k, s) in enumerate(convs):
            layers += [nn.Conv2d(ci, co, k, s, k // 2, bias=False), nn.BatchNorm2d(co)]
            if i < len(convs) - 1:
                layers.append(nn.ReLU(inplace=True))
        self.body = nn.Sequential(*layers)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


def torch_model(name: str, num_classes: int | None = None) -> nn.Module:
    """A ResNet of the zoo (``resnet18``, ``resnet50-cifar``, ``wide_resnet50_2`` ...)."""
    from simcluster.workload.resnet import RESNET_DEPTHS
    from simcluster.workload.zoo import MODELS

    key = name.strip().lower()
    if key not in MODELS or not (key.startswith("resnet") or key.startswith("wide_resnet")):
        raise ValueError(f"no torch module for {name!r}; the whole-model check builds ResNets")
    classes = num_classes or MODELS[key].default_num_classes
    depth = 50 if key.startswith("wide") else int(key.removeprefix("resnet").split("-")[0])
    stem = "cifar" if key.endswith("-cifar") else "imagenet"
    width_per_group = 128 if key.startswith("wide") else 64
    kind, blocks = RESNET_DEPTHS[depth]
    if stem == "imagenet":
        layers: list[nn.Module] = [
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        ]
    else:
        layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True)]
    cin = 64
    for stage, (n, planes) in enumerate(zip(blocks, (64, 128, 256, 512), strict=True), start=1):
        width = planes * width_per_group // 64
        for b in range(n):
            stride = 2 if stage > 1 and b == 0 else 1
            block = _Block(kind, cin, planes, width, stride)
            layers.append(block)
            cin = planes * (1 if kind == "basic" else 4)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def small_cnn(num_classes: int = 10) -> nn.Module:
    """A small CNN for 32 x 32 images: three conv-BN-ReLU stages (32, 64, 128 channels,
    the last two with stride 2), global average pool, linear. About 0.1 M parameters;
    the model ``python -m calibrate.trace --module calibrate.models:small_cnn`` traces."""
    layers: list[nn.Module] = []
    cin = 3
    for cout, stride in ((32, 1), (64, 2), (128, 2)):
        layers += [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                   nn.ReLU(inplace=True)]  # fmt: skip
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def time_model(
    module: nn.Module,
    batch: int,
    input_size: int,
    device: torch.device,
    timer: Timer,
    rounds: int = 3,
    precision: str = "fp32",
) -> dict:
    """Forward + backward of ``module`` on a random batch (seconds per iteration), at
    ``precision`` (see :data:`calibrate.layers.CALIBRATION_PRECISIONS`).

    The backward starts from a fixed output gradient (no loss), as the layer table has no
    loss layer. Each round takes ``timer.reps`` samples after ``timer.warmup`` warm-up
    iterations; the estimate is the median of the quietest round (smallest round median).
    """
    module = module.to(device).train()
    x = torch.randn(batch, 3, input_size, input_size, device=device)
    with torch.no_grad():
        g = torch.ones_like(module(x))

    def step() -> None:
        module.zero_grad(set_to_none=True)
        with amp_context(device, precision):
            y = module(x)
        y.float().backward(g)

    with math_mode(precision):
        rounds_s = [timer.measure(step).samples for _ in range(rounds)]
        ahead = time_host_ahead(step, timer, rounds) if timer.cuda else {}
    medians = [statistics.median(r) for r in rounds_s]
    return {
        "estimate_s": min(medians),
        "median_all_s": statistics.median([s for r in rounds_s for s in r]),
        "rounds_s": rounds_s,
        **ahead,
    }


def time_host_ahead(step: Callable[[], object], timer: Timer, rounds: int = 3) -> dict:
    """The same step timed with the host ahead of the GPU (:class:`Timer` ``host_ahead``,
    CUDA): ``gpu_s``, the GPU's seconds for the step's work back to back, and
    ``host_issue_s``, the host's seconds to issue it (median of the quietest round's
    samples; rounds as :func:`time_model`). The step as run lasts about the larger of
    the two where one of them dominates: which one says whether it is host-bound. A
    step of more kernels than CUDA's queue of pending launches holds (about a thousand)
    cannot be queued whole: its samples hold host gaps and are counted in
    ``host_behind``."""
    ahead = dataclasses.replace(timer, host_ahead=True)
    runs = [ahead.measure(step) for _ in range(rounds)]
    medians = [statistics.median(m.samples) for m in runs]
    k = medians.index(min(medians))
    return {
        "gpu_s": medians[k],
        "host_issue_s": statistics.median(runs[k].host or [0.0]),
        "gpu_rounds_s": [m.samples for m in runs],
        "host_behind": ahead.host_behind,
    }


def simulated_time(profile, model, batch: int, precision: str = "fp32") -> dict:
    """The simulator's forward + backward of ``model``: sum of ``profile.layer_time``.

    As in ``simcluster.schedules.training.forward_backward``: forward of every layer, the
    weight gradient of every layer, the input gradient of all but the first.
    """
    fwd = bwd = 0.0
    for i, layer in enumerate(model.layers):
        fwd += profile.layer_time(layer, batch, precision, "fwd")
        bwd += profile.layer_time(layer, batch, precision, "bwd_weight")
        if i > 0:
            bwd += profile.layer_time(layer, batch, precision, "bwd_input")
    return {"fwd_s": fwd, "bwd_s": bwd, "total_s": fwd + bwd}

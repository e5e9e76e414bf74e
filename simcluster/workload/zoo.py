"""The model registry and :func:`build_model`.

``MODELS`` maps a registry name to a :class:`ModelSpec` tuple
``(builder, default_input_size, default_num_classes, description)`` where
``builder(input_size, num_classes)`` returns the layer table in execution order.
``input_size`` is the image side in pixels for vision models and the sequence length in
tokens for sequence models; for language models ``num_classes`` is the vocabulary size.

Units of the built tables: parameters and activations in elements, forward FLOPs per
sample (one multiply-add = 2 FLOPs).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from functools import lru_cache, partial
from types import MappingProxyType
from typing import Any, NamedTuple

from ..errors import ConfigError, UnknownNameError
from .families import build_family, check_family, preset_layers
from .lstm import lstm_lm_layers
from .model import Layer, Model, ShapeError
from .resnet import RESNET_DEPTHS
from .shufflenet import shufflenet_v2_layers
from .transformer import (
    BERT_MAX_POSITIONS,
    GPT2_MAX_POSITIONS,
    VIT_PATCH,
)
from .vgg import vgg_layers

__all__ = ["ModelSpec", "MODELS", "build_model", "list_models", "input_size_rule"]

Builder = Callable[[int, int], tuple[Layer, ...]]


class ModelSpec(NamedTuple):
    """A registry entry: how to build a model and its defaults."""

    builder: Builder
    default_input_size: int
    default_num_classes: int
    description: str


IMAGENET_CLASSES = 1000
CIFAR_CLASSES = 10
BERT_VOCAB = 30522
GPT2_VOCAB = 50257
WIKITEXT2_VOCAB = 33278


def _registry() -> dict[str, ModelSpec]:
    reg: dict[str, ModelSpec] = {}
    for depth in RESNET_DEPTHS:
        reg[f"resnet{depth}"] = ModelSpec(
            partial(preset_layers, f"resnet{depth}"), 224, IMAGENET_CLASSES,
            f"ResNet-{depth}, ImageNet stem (7x7/2 conv + max pool)",
        )  # fmt: skip
    for depth in RESNET_DEPTHS:
        reg[f"resnet{depth}-cifar"] = ModelSpec(
            partial(preset_layers, f"resnet{depth}-cifar"), 32, CIFAR_CLASSES,
            f"ResNet-{depth}, CIFAR stem (3x3/1 conv, no max pool)",
        )  # fmt: skip
    reg["wide_resnet50_2"] = ModelSpec(
        partial(preset_layers, "wide_resnet50_2"), 224, IMAGENET_CLASSES,
        "Wide ResNet-50-2 (bottleneck width x2), ImageNet stem",
    )  # fmt: skip
    for depth in (16, 19):
        reg[f"vgg{depth}"] = ModelSpec(
            partial(vgg_layers, depth), 224, IMAGENET_CLASSES,
            f"VGG-{depth} without BatchNorm, 4096-4096 classifier",
        )  # fmt: skip
    reg["shufflenet_v2"] = ModelSpec(
        partial(shufflenet_v2_layers, width="x1.0"), 224, IMAGENET_CLASSES,
        "ShuffleNet V2 x1.0",
    )  # fmt: skip
    for v, label in (("b16", "B/16"), ("l16", "L/16")):
        reg[f"vit_{v}"] = ModelSpec(
            partial(preset_layers, f"vit_{v}"), 224, IMAGENET_CLASSES, f"Vision Transformer {label}"
        )
    for v in ("base", "large"):
        reg[f"bert_{v}"] = ModelSpec(
            partial(preset_layers, f"bert_{v}"), 128, BERT_VOCAB,
            f"BERT-{v} encoder with pooler, no MLM head (input: sequence length)",
        )  # fmt: skip
    for v, label in (("large", "large (774M)"), ("xl", "XL (1.5B)")):
        reg[f"gpt2_{v}"] = ModelSpec(
            partial(preset_layers, f"gpt2_{v}"), GPT2_MAX_POSITIONS, GPT2_VOCAB,
            f"GPT-2 {label} with tied LM head (input: sequence length)",
        )  # fmt: skip
    reg["lstm"] = ModelSpec(
        lstm_lm_layers, 35, WIKITEXT2_VOCAB,
        "2-layer LSTM language model, 650 embed/hidden, Wikitext-2 vocabulary",
    )  # fmt: skip
    return reg


#: Registry name -> :class:`ModelSpec` (read-only).
MODELS: Mapping[str, ModelSpec] = MappingProxyType(_registry())


def input_size_rule(name: str) -> str:
    """Human-readable rule for the valid ``input_size`` values of model ``name``."""
    if name.startswith("vgg"):
        return "image side in pixels, >= 32"
    if name.startswith("vit"):
        return f"image side in pixels, a positive multiple of {VIT_PATCH}"
    if name.startswith("bert"):
        return f"sequence length, 1..{BERT_MAX_POSITIONS}"
    if name.startswith("gpt2"):
        return f"sequence length, 1..{GPT2_MAX_POSITIONS}"
    if name == "lstm":
        return "sequence length, >= 1"
    return "image side in pixels, >= 1"


def list_models() -> list[str]:
    """Registered model names, sorted."""
    return sorted(MODELS)


def _positive_int(value: Any, path: str, allowed: str) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise ConfigError(None, path, value, "must be an integer", allowed) from None
    if number <= 0:
        raise ConfigError(None, path, value, "must be positive", allowed)
    return number


def build_model(
    name: str | Mapping[str, Any], input_size: int | None = None, num_classes: int | None = None
) -> Model:
    """Build (or fetch from cache) the layer table of registered model ``name``.

    ``name`` is a zoo name or a family mapping (:mod:`simcluster.workload.families`).
    ``input_size`` (pixels or tokens) and ``num_classes`` default to the registry's values.
    Raises :class:`~simcluster.errors.UnknownNameError` for an unknown name and
    :class:`~simcluster.errors.ConfigError` for an invalid ``input_size`` or ``num_classes``
    or mapping field.
    """
    if isinstance(name, Mapping):
        return _build_checked(tuple(check_family(name, input_size, num_classes).items()))
    key = name.strip().lower() if isinstance(name, str) else name
    if key not in MODELS:
        raise UnknownNameError("model", str(name), list_models(), path="workload.model")
    spec = MODELS[key]
    rule = input_size_rule(key)
    size = spec.default_input_size if input_size is None else input_size
    size = _positive_int(size, "workload.input_size", rule)
    classes = spec.default_num_classes if num_classes is None else num_classes
    classes = _positive_int(classes, "workload.num_classes", "integers >= 1")
    return _build(key, size, classes)


@lru_cache(maxsize=256)
def _build(name: str, input_size: int, num_classes: int) -> Model:
    try:
        layers = MODELS[name].builder(input_size, num_classes)
    except ShapeError as err:
        raise ConfigError(
            None, "workload.input_size", input_size, f"invalid for model {name!r}: {err}",
            input_size_rule(name),
        ) from None  # fmt: skip
    return Model(name, input_size, num_classes, layers)


@lru_cache(maxsize=256)
def _build_checked(items: tuple[tuple[str, Any], ...]) -> Model:
    label, size, classes, layers = build_family(dict(items), None, None)
    return Model(label, size, classes, layers)

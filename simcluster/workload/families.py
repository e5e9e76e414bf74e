"""Configurable architectures: a model given as a mapping ``{family: gpt|bert|vit|resnet, ...}``.

A scenario's ``workload.model`` may name a zoo model or describe one of four families:

* ``gpt``: ``layers``, ``hidden``, ``heads`` (required), ``seq`` (tokens), ``vocab``,
  ``mlp`` (default ``4 * hidden``), ``positions`` (rows of the position table, default
  ``max(seq, 1024)``): a GPT-2-style pre-norm causal decoder with a tied LM head;
* ``bert``: ``layers``, ``hidden``, ``heads``, ``seq``, ``vocab``, ``mlp``, ``positions``
  (default ``max(seq, 512)``), ``heads_out``: ``pooler`` (the zoo's), ``pretraining``
  (pooler + MLM + NSP heads) or ``none``;
* ``vit``: ``layers``, ``hidden``, ``heads``, ``mlp``, ``image`` (pixels), ``patch``,
  ``classes``;
* ``resnet``: ``depth`` (18, 34, 50, 101, 152), ``width`` (bottleneck width multiplier:
  ``2`` is Wide ResNet-*-2), ``stem`` (``imagenet`` or ``cifar``), ``image``, ``classes``.

The size field (``seq`` or ``image``) and the class field (``vocab`` or ``classes``)
default to the workload's ``input_size`` and ``num_classes`` when those are given, and
to the family's defaults otherwise. Sequence lengths go up to :data:`MAX_SEQ` tokens.

The zoo's transformers and ResNets are presets of these families (:data:`PRESETS`), built
by the same code, so a mapping with a zoo model's shape gives exactly the zoo's table.

Every field is checked: problems raise :class:`~simcluster.errors.ConfigError` with the
field path (``workload.model.hidden``), the value, what is allowed and near misses.
Units of the built tables as in :mod:`simcluster.workload.model`.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, did_you_mean
from .model import Layer, ShapeError
from .resnet import RESNET_DEPTHS, resnet_layers
from .transformer import BERT_HEADS, TransformerConfig, bert_from, gpt_from, vit_from

__all__ = [
    "FAMILIES",
    "MAX_SEQ",
    "PRESETS",
    "FamilySpec",
    "check_family",
    "family_layers",
    "family_label",
    "describe_families",
    "preset_layers",
    "build_family",
]

#: longest sequence a ``gpt`` or ``bert`` mapping may ask for (tokens)
MAX_SEQ = 32_768
_MAX_WIDTH = 65_536
_MAX_LAYERS = 1_024
_MAX_CLASSES = 10_000_000


@dataclass(frozen=True)
class _Field:
    """One mapping field: ``kind`` int or str; ints in ``lo..hi``; strs in ``choices``."""

    kind: str
    lo: int = 1
    hi: int = _MAX_WIDTH
    choices: tuple[Any, ...] = ()
    required: bool = False

    def allowed(self) -> str | list[str]:
        if self.choices:
            return [str(c) for c in self.choices]
        return f"an integer {self.lo}..{self.hi}"


def _transformer_fields(size: str, classes: str) -> dict[str, _Field]:
    return {
        "layers": _Field("int", 1, _MAX_LAYERS, required=True),
        "hidden": _Field("int", 1, _MAX_WIDTH, required=True),
        "heads": _Field("int", 1, 1024, required=True),
        "mlp": _Field("int", 1, 4 * _MAX_WIDTH),
        size: _Field("int", 1, MAX_SEQ),
        classes: _Field("int", 1, _MAX_CLASSES),
    }


_FIELDS: dict[str, dict[str, _Field]] = {
    "gpt": {**_transformer_fields("seq", "vocab"), "positions": _Field("int", 1, MAX_SEQ)},
    "bert": {
        **_transformer_fields("seq", "vocab"),
        "positions": _Field("int", 1, MAX_SEQ),
        "heads_out": _Field("str", choices=BERT_HEADS),
    },
    "vit": {
        **_transformer_fields("image", "classes"),
        "image": _Field("int", 1, 8192),
        "patch": _Field("int", 1, 1024),
    },
    "resnet": {
        "depth": _Field("int", choices=tuple(RESNET_DEPTHS), required=True),
        "width": _Field("int", 1, 16),
        "stem": _Field("str", choices=("imagenet", "cifar")),
        "image": _Field("int", 1, 8192),
        "classes": _Field("int", 1, _MAX_CLASSES),
    },
}


@dataclass(frozen=True)
class FamilySpec:
    """A family's size field (pixels or tokens) and class field, with their defaults."""

    size_field: str
    classes_field: str
    default_size: int
    default_classes: int


#: family -> its size and class fields and their defaults
FAMILIES: dict[str, FamilySpec] = {
    "gpt": FamilySpec("seq", "vocab", 1024, 50257),
    "bert": FamilySpec("seq", "vocab", 128, 30522),
    "vit": FamilySpec("image", "classes", 224, 1000),
    "resnet": FamilySpec("image", "classes", 224, 1000),
}

#: zoo name -> the family mapping it stands for (size and classes from the zoo's defaults)
PRESETS: dict[str, dict[str, Any]] = {
    **{f"resnet{d}": {"family": "resnet", "depth": d} for d in RESNET_DEPTHS},
    **{
        f"resnet{d}-cifar": {"family": "resnet", "depth": d, "stem": "cifar"} for d in RESNET_DEPTHS
    },
    "wide_resnet50_2": {"family": "resnet", "depth": 50, "width": 2},
    "vit_b16": {"family": "vit", "layers": 12, "hidden": 768, "heads": 12},
    "vit_l16": {"family": "vit", "layers": 24, "hidden": 1024, "heads": 16},
    "bert_base": {"family": "bert", "layers": 12, "hidden": 768, "heads": 12},
    "bert_large": {"family": "bert", "layers": 24, "hidden": 1024, "heads": 16},
    "gpt2_large": {"family": "gpt", "layers": 36, "hidden": 1280, "heads": 20, "positions": 1024},
    "gpt2_xl": {"family": "gpt", "layers": 48, "hidden": 1600, "heads": 25, "positions": 1024},
}
for _name in ("bert_base", "bert_large"):
    PRESETS[_name]["positions"] = 512

_PATH = "workload.model"


def _err(field: str, value: Any, problem: str, allowed: Any = None, near=()) -> ConfigError:
    return ConfigError(None, f"{_PATH}.{field}" if field else _PATH, value, problem, allowed, near)


def _int(field: str, value: Any, rule: _Field) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise _err(field, value, "must be an integer", rule.allowed()) from None
    if rule.choices and number not in rule.choices:
        raise _err(field, value, "not one of the allowed values", rule.allowed())
    if not rule.choices and not rule.lo <= number <= rule.hi:
        raise _err(field, value, "out of range", rule.allowed())
    return number


def check_family(
    spec: Mapping[str, Any], input_size: int | None = None, num_classes: int | None = None
) -> dict[str, Any]:
    """The validated mapping with every default filled in (a plain dict, sorted keys).

    ``input_size`` and ``num_classes`` are the workload's (``None`` when not given); they
    fill the family's size and class fields, and must agree with them when both are set.
    """
    if not isinstance(spec, Mapping):
        raise _err("", spec, "a model is a zoo name or a mapping", "a string or a mapping")
    family = spec.get("family")
    if family is None:
        raise _err("family", None, "missing required field", sorted(FAMILIES))
    if not isinstance(family, str) or family not in FAMILIES:
        raise _err(
            "family", family, "unknown model family", sorted(FAMILIES),
            did_you_mean(str(family), FAMILIES),
        )  # fmt: skip
    fields = _FIELDS[family]
    fam = FAMILIES[family]
    out: dict[str, Any] = {"family": family}
    for key, value in spec.items():
        if key == "family":
            continue
        if not isinstance(key, str) or key not in fields:
            allowed = ["family", *sorted(fields)]
            raise _err(str(key), key, f"unknown key for family {family!r}", allowed,
                       did_you_mean(str(key), allowed))  # fmt: skip
        rule = fields[key]
        if rule.kind == "str":
            if not isinstance(value, str) or value not in rule.choices:
                raise _err(key, value, "not one of the allowed values", rule.allowed(),
                           did_you_mean(str(value), rule.choices))  # fmt: skip
            out[key] = value
        else:
            out[key] = _int(key, value, rule)
    for key, rule in fields.items():
        if rule.required and key not in out:
            raise _err(key, None, f"missing required field of family {family!r}", rule.allowed())
    for field, given, default in (
        (fam.size_field, input_size, fam.default_size),
        (fam.classes_field, num_classes, fam.default_classes),
    ):
        if field in out and given is not None and out[field] != given:
            where = "input_size" if field == fam.size_field else "num_classes"
            raise _err(field, out[field], f"disagrees with workload.{where} ({given})",
                       "the same value, or leave one out")  # fmt: skip
        if field not in out:
            out[field] = given if given is not None else default
            if family == "resnet" and given is None and out.get("stem") == "cifar":
                out[field] = 32 if field == "image" else 10
            _int(field, out[field], fields[field])
    _fill_defaults(family, out)
    return dict(sorted(out.items()))


def _fill_defaults(family: str, out: dict[str, Any]) -> None:
    if family == "resnet":
        out.setdefault("width", 1)
        out.setdefault("stem", "imagenet")
        if out["width"] != 1 and RESNET_DEPTHS[out["depth"]][0] == "basic":
            raise _err("width", out["width"], f"ResNet-{out['depth']} has basic blocks, which "
                       "have no bottleneck width to widen", "1 for depth 18 or 34")  # fmt: skip
        return
    if out["hidden"] % out["heads"]:
        raise _err("heads", out["heads"], f"hidden size {out['hidden']} is not divisible by it",
                   "a divisor of hidden")  # fmt: skip
    out.setdefault("mlp", 4 * out["hidden"])
    if family == "vit":
        out.setdefault("patch", 16)
        if out["image"] % out["patch"]:
            raise _err("image", out["image"], f"not a multiple of the patch size {out['patch']}",
                       f"a multiple of {out['patch']}")  # fmt: skip
        return
    floor = 1024 if family == "gpt" else 512
    out.setdefault("positions", max(out["seq"], floor))
    if out["seq"] > out["positions"]:
        raise _err("seq", out["seq"], f"longer than the {out['positions']} position embeddings",
                   f"at most positions ({out['positions']})")  # fmt: skip
    if family == "bert":
        out.setdefault("heads_out", "pooler")


def describe_families() -> list[str]:
    """One line per family: its fields, required ones marked ``*``."""
    out = []
    for fam, fields in _FIELDS.items():
        parts = [f"{k}*" if r.required else k for k, r in fields.items()]
        out.append(f"{fam:<8} " + ", ".join(parts))
    return out


def family_label(spec: Mapping[str, Any]) -> str:
    """A short name for a checked mapping, e.g. ``gpt-16x1536-s2048``."""
    f = spec["family"]
    if f == "resnet":
        wide = f"-w{spec['width']}" if spec["width"] != 1 else ""
        cifar = "-cifar" if spec["stem"] == "cifar" else ""
        return f"resnet{spec['depth']}{wide}{cifar}"
    size = spec["seq"] if f in ("gpt", "bert") else spec["image"]
    tag = "s" if f in ("gpt", "bert") else "i"
    return f"{f}-{spec['layers']}x{spec['hidden']}-{tag}{size}"


def family_layers(spec: Mapping[str, Any]) -> tuple[Layer, ...]:
    """The layer table of a mapping checked by :func:`check_family`.

    Raises :class:`~simcluster.workload.model.ShapeError` when the input is too small.
    """
    f = spec["family"]
    if f == "resnet":
        return resnet_layers(spec["depth"], spec["image"], spec["classes"],
                             stem=spec["stem"], width_per_group=64 * spec["width"])  # fmt: skip
    cfg = TransformerConfig(spec["hidden"], spec["layers"], spec["heads"], spec["mlp"])
    if f == "vit":
        return vit_from(cfg, spec["patch"], spec["image"], spec["classes"])
    if f == "gpt":
        return gpt_from(cfg, spec["seq"], spec["vocab"], spec["positions"])
    return bert_from(cfg, spec["seq"], spec["vocab"], spec["positions"], spec["heads_out"])


def preset_layers(name: str, input_size: int, num_classes: int) -> tuple[Layer, ...]:
    """The zoo's table of preset ``name`` at ``input_size`` and ``num_classes``.

    A size the preset cannot take raises :class:`ShapeError` (the zoo reports it
    against ``workload.input_size``).
    """
    try:
        spec = check_family(PRESETS[name], input_size, num_classes)
    except ConfigError as err:
        raise ShapeError(err.problem) from None
    return family_layers(spec)


def build_family(spec: Mapping[str, Any], input_size: int | None, num_classes: int | None):
    """``(label, size, classes, layers)`` of a mapping model (checked here)."""
    full = check_family(spec, input_size, num_classes)
    fam = FAMILIES[full["family"]]
    try:
        layers = family_layers(full)
    except ShapeError as err:
        raise _err(fam.size_field, full[fam.size_field], f"invalid for this model: {err}") from None
    return family_label(full), full[fam.size_field], full[fam.classes_field], layers

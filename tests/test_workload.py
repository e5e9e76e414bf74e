"""Tests of the workload zoo: layer tables checked against well-known published counts."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster.errors import ConfigError, UnknownNameError
from simcluster.workload import MODELS, OP_CLASSES, Layer, Model, build_model, list_models, zoo

M = 1e6

# (name, published parameter count, relative tolerance); ImageNet models at 1000 classes.
PUBLISHED_PARAMS = [
    ("resnet18", 11.69 * M, 0.01),
    ("resnet34", 21.80 * M, 0.01),
    ("resnet50", 25.56 * M, 0.01),
    ("resnet101", 44.55 * M, 0.01),
    ("resnet152", 60.19 * M, 0.01),
    ("wide_resnet50_2", 68.88 * M, 0.01),
    ("vgg16", 138.36 * M, 0.01),
    ("vgg19", 143.67 * M, 0.01),
    ("shufflenet_v2", 2.28 * M, 0.01),
    ("vit_b16", 86.57 * M, 0.01),
    ("vit_l16", 304.33 * M, 0.01),
    ("bert_base", 109.5 * M, 0.01),
    ("bert_large", 335 * M, 0.015),
    ("gpt2_large", 774 * M, 0.01),
    ("gpt2_xl", 1558 * M, 0.01),
    ("lstm", 50.07 * M, 0.01),
]

# CIFAR-stem ResNets with 10 classes (the widely quoted pytorch-cifar counts).
CIFAR_PARAMS = [
    ("resnet18-cifar", 11.17 * M),
    ("resnet34-cifar", 21.28 * M),
    ("resnet50-cifar", 23.52 * M),
    ("resnet101-cifar", 42.51 * M),
    ("resnet152-cifar", 58.16 * M),
]

REQUIRED = {
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "resnet18-cifar", "resnet34-cifar", "resnet50-cifar", "resnet101-cifar", "resnet152-cifar",
    "wide_resnet50_2", "vgg16", "vgg19", "shufflenet_v2", "vit_b16", "vit_l16",
    "bert_base", "bert_large", "gpt2_large", "gpt2_xl", "lstm",
}  # fmt: skip


def test_registry_lists_required_models():
    assert REQUIRED <= set(list_models())
    assert list_models() == sorted(MODELS)
    for name, (builder, size, classes, description) in MODELS.items():
        assert callable(builder), name
        assert size > 0 and classes > 0 and description


@pytest.mark.parametrize("name,expected,rel", PUBLISHED_PARAMS)
def test_published_param_counts(name, expected, rel):
    model = build_model(name)
    assert model.params == pytest.approx(expected, rel=rel)


@pytest.mark.parametrize("name,expected", CIFAR_PARAMS)
def test_cifar_resnet_param_counts(name, expected):
    model = build_model(name, num_classes=10)
    assert model.input_size == 32
    assert model.params == pytest.approx(expected, rel=0.01)
    assert not any(layer.name == "maxpool" for layer in model.layers)
    conv1 = model.layers[0]
    assert (conv1.shape["kh"], conv1.shape["stride"]) == (3, 1)


def test_resnet50_forward_flops():
    # ~4.1 GMACs at 224x224, 2 FLOPs per multiply-add.
    assert build_model("resnet50", 224).flops == pytest.approx(8.2e9, rel=0.05)


def test_resnet50_shapes():
    model = build_model("resnet50")
    by_name = {layer.name: layer for layer in model.layers}
    conv = by_name["layer1.0.conv2"].shape
    assert (conv["cin"], conv["cout"], conv["hout"], conv["wout"]) == (64, 64, 56, 56)
    # stride on the 3x3 convolution of the bottleneck
    assert by_name["layer2.0.conv1"].shape["stride"] == 1
    assert by_name["layer2.0.conv2"].shape["stride"] == 2
    assert by_name["layer2.0.downsample.0"].shape["stride"] == 2
    assert by_name["fc"].shape["in_features"] == 2048
    assert by_name["fc"].param_tensors == (2048 * 1000, 1000)
    assert by_name["bn1"].param_tensors == (64, 64)
    assert model.layers[-1].name == "fc"


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_layer_table_invariants(name):
    model = build_model(name)
    names = [layer.name for layer in model.layers]
    assert len(names) == len(set(names)), "layer names are unique"
    for layer in model.layers:
        assert isinstance(layer, Layer)
        assert layer.op in OP_CLASSES
        assert sum(layer.param_tensors) == layer.params
        assert all(n > 0 for n in layer.param_tensors)
        assert layer.flops >= 0 and math.isfinite(layer.flops)
        assert layer.in_elems > 0 and layer.out_elems > 0
    trainable = model.trainable_layers()
    assert all(layer.params > 0 for layer in trainable)
    assert sum(layer.params for layer in trainable) == model.params
    assert model.flops == pytest.approx(sum(layer.flops for layer in model.layers))
    # parameter-free work is in the table too
    ops = {layer.op for layer in model.layers}
    assert "elementwise" in ops


def test_gradient_bytes():
    model = build_model("resnet18")
    assert model.gradient_bytes() == 4 * model.params
    assert model.gradient_bytes(2) == 2 * model.params
    with pytest.raises(ValueError):
        model.gradient_bytes(0)


def test_layers_json_serialisable_and_hashable():
    model = build_model("vit_b16")
    json.dumps([layer.to_dict() for layer in model.layers])
    json.dumps([dict(layer.shape) for layer in model.layers])
    json.dumps(model.layers[0].shape)
    assert hash(model) == hash(build_model("vit_b16"))
    with pytest.raises(TypeError):
        model.layers[0].shape["cin"] = 1  # read-only


@pytest.mark.parametrize(
    "name,small,large",
    [("resnet50", 224, 448), ("resnet18-cifar", 32, 64), ("shufflenet_v2", 224, 448),
     ("vgg16", 224, 448)],
)  # fmt: skip
def test_cnn_flops_scale_with_area(name, small, large):
    a, b = build_model(name, small), build_model(name, large)
    assert a.params == b.params
    assert b.flops / a.flops == pytest.approx(4.0, rel=0.03)


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=32, max_value=400))
def test_resnet_params_independent_of_input_and_flops_monotone(side):
    small, big = build_model("resnet18", side), build_model("resnet18", side + 32)
    assert small.params == big.params == build_model("resnet18").params
    assert big.flops > small.flops


@pytest.mark.parametrize("name", ["vit_b16", "vit_l16", "bert_base", "bert_large", "gpt2_large"])
def test_one_attention_layer_per_block(name):
    model = build_model(name)
    attn = [layer for layer in model.layers if layer.op == "attention"]
    depth = {"vit_b16": 12, "vit_l16": 24, "bert_base": 12, "bert_large": 24, "gpt2_large": 36}
    assert len(attn) == depth[name]
    for layer in attn:
        s = layer.shape
        assert layer.params == 0
        assert layer.flops == 4 * s["seq"] * s["seq"] * s["dim"]


def test_vit_sequence_and_position_embedding():
    model = build_model("vit_b16", 224)
    attn = next(layer for layer in model.layers if layer.op == "attention")
    assert attn.shape["seq"] == 14 * 14 + 1
    bigger = build_model("vit_b16", 384)
    assert bigger.params - model.params == (24 * 24 - 14 * 14) * 768


def test_gpt2_lm_head_is_tied():
    model = build_model("gpt2_large")
    wte = next(layer for layer in model.layers if layer.name == "transformer.wte")
    head = model.layers[-1]
    assert wte.params == 50257 * 1280
    assert head.op == "linear" and head.params == 0 and head.param_tensors == ()
    assert head.flops == 2 * 1024 * 1280 * 50257
    assert head not in model.trainable_layers()


def test_sequence_models_scale_with_length():
    a, b = build_model("bert_base", 128), build_model("bert_base", 256)
    assert a.params == b.params
    assert 2.0 < b.flops / a.flops < 2.5  # linear part doubles, attention quadruples
    lstm = build_model("lstm", 70)
    assert lstm.flops == pytest.approx(2 * build_model("lstm", 35).flops)


def test_num_classes_changes_head_only():
    a, b = build_model("resnet50", num_classes=1000), build_model("resnet50", num_classes=10)
    assert a.params - b.params == 2049 * 990
    assert build_model("lstm", num_classes=10000).params < build_model("lstm").params


def test_unknown_model_suggests_near_names():
    with pytest.raises(UnknownNameError) as info:
        build_model("resnet15")
    err = info.value
    assert err.kind == "model" and err.name == "resnet15"
    assert {"resnet152", "resnet18"} & set(err.suggestions)
    assert "did you mean" in str(err)


def test_name_lookup_is_case_insensitive():
    assert build_model("ResNet50") is build_model("resnet50")


@pytest.mark.parametrize(
    "name,size",
    [("resnet18", 0), ("resnet18", -8), ("resnet18", 2.5), ("resnet18", True),
     ("resnet18", "224"), ("vgg16", 16), ("vit_b16", 100), ("vit_b16", 8),
     ("bert_base", 513), ("gpt2_xl", 2048), ("lstm", 0)],
)  # fmt: skip
def test_invalid_input_size(name, size):
    with pytest.raises(ConfigError) as info:
        build_model(name, size)
    assert info.value.path == "workload.input_size"
    assert info.value.allowed


def test_invalid_num_classes():
    with pytest.raises(ConfigError) as info:
        build_model("resnet18", num_classes=0)
    assert info.value.path == "workload.num_classes"


def test_build_is_cached():
    # speed is a benchmark's business (bench/); here: the cache hands back the same table
    zoo._build.cache_clear()
    model = build_model("resnet152")
    assert build_model("resnet152", 224, 1000) is model
    assert isinstance(model, Model) and model.name == "resnet152"

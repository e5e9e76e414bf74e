"""Configurable architectures: family mappings, zoo presets, checks, scenarios."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simcluster.errors import ConfigError
from simcluster.scenario import load_scenario, parse_scenario
from simcluster.study import run_scenario
from simcluster.workload import build_model
from simcluster.workload.families import MAX_SEQ, PRESETS

ROOT = Path(__file__).resolve().parents[1]

SAME_SHAPE = [
    ("gpt2_large", {"family": "gpt", "layers": 36, "hidden": 1280, "heads": 20}),
    ("gpt2_xl", {"family": "gpt", "layers": 48, "hidden": 1600, "heads": 25, "seq": 1024}),
    ("bert_base", {"family": "bert", "layers": 12, "hidden": 768, "heads": 12}),
    ("bert_large", {"family": "bert", "layers": 24, "hidden": 1024, "heads": 16, "seq": 128}),
    ("vit_b16", {"family": "vit", "layers": 12, "hidden": 768, "heads": 12}),
    ("vit_l16", {"family": "vit", "layers": 24, "hidden": 1024, "heads": 16, "patch": 16}),
    ("resnet50", {"family": "resnet", "depth": 50}),
    ("resnet18-cifar", {"family": "resnet", "depth": 18, "stem": "cifar"}),
    ("wide_resnet50_2", {"family": "resnet", "depth": 50, "width": 2}),
]


@pytest.mark.parametrize("name, spec", SAME_SHAPE)
def test_mapping_with_a_zoo_shape_is_the_zoo_table(name, spec):
    zoo, mine = build_model(name), build_model(spec)
    assert mine.layers == zoo.layers
    assert (mine.params, mine.flops, mine.input_size, mine.num_classes) == (
        zoo.params, zoo.flops, zoo.input_size, zoo.num_classes,
    )  # fmt: skip


def test_every_preset_is_a_zoo_model_built_from_its_family():
    for name, spec in PRESETS.items():
        assert build_model(name).layers == build_model(spec).layers, name


def test_gpt_16x1536_closed_form_params():
    d, layers, seq, vocab = 1536, 16, 2048, 50257
    m = build_model({"family": "gpt", "layers": layers, "hidden": d, "heads": 16, "seq": seq})
    block = 12 * d * d + 13 * d  # qkv, proj, fc1, fc2 (+ biases) and two LayerNorms
    assert m.params == vocab * d + seq * d + layers * block + 2 * d
    assert m.name == "gpt-16x1536-s2048" and m.input_size == seq


def test_bert_pretraining_heads_add_mlm_and_nsp():
    base = {"family": "bert", "layers": 2, "hidden": 64, "heads": 4, "seq": 32, "vocab": 1000}
    pooler = build_model(base)
    pre = build_model({**base, "heads_out": "pretraining"})
    bare = build_model({**base, "heads_out": "none"})
    d, v = 64, 1000
    # transform dense + LayerNorm, decoder bias (weight tied), NSP classifier
    assert pre.params - pooler.params == (d * d + d) + 2 * d + v + (2 * d + 2)
    assert pooler.params - bare.params == d * d + d
    decoder = next(x for x in pre.layers if x.name == "cls.predictions.decoder")
    assert decoder.params == 0 and decoder.flops == 2 * 32 * d * v


def test_sequences_up_to_32k():
    m = build_model({"family": "gpt", "layers": 1, "hidden": 64, "heads": 2, "seq": MAX_SEQ})
    attn = next(x for x in m.layers if x.op == "attention")
    assert attn.flops == 4 * MAX_SEQ * MAX_SEQ * 64
    with pytest.raises(ConfigError) as info:
        build_model({"family": "gpt", "layers": 1, "hidden": 64, "heads": 2, "seq": MAX_SEQ + 1})
    assert info.value.path == "workload.model.seq" and "32768" in str(info.value)


@pytest.mark.parametrize(
    "spec, path, hint",
    [
        ({"family": "gtp", "layers": 2}, "workload.model.family", "'gpt'"),
        ({"layers": 2}, "workload.model.family", "bert, gpt"),
        ({"family": "gpt", "layer": 2, "hidden": 8, "heads": 2}, "workload.model.layer",
         "'layers'"),
        ({"family": "gpt", "hidden": 8, "heads": 2}, "workload.model.layers", "1..1024"),
        ({"family": "gpt", "layers": 2, "hidden": 10, "heads": 3}, "workload.model.heads",
         "divisor"),
        ({"family": "gpt", "layers": 2, "hidden": "big", "heads": 2}, "workload.model.hidden",
         "integer"),
        ({"family": "gpt", "layers": True, "hidden": 8, "heads": 2}, "workload.model.layers",
         "integer"),
        ({"family": "gpt", "layers": 2, "hidden": 8, "heads": 2, "seq": 2048, "positions": 1024},
         "workload.model.seq", "positions"),
        ({"family": "bert", "layers": 2, "hidden": 8, "heads": 2, "heads_out": "mlm"},
         "workload.model.heads_out", "pretraining"),
        ({"family": "vit", "layers": 2, "hidden": 8, "heads": 2, "image": 100},
         "workload.model.image", "multiple of 16"),
        ({"family": "resnet", "depth": 20}, "workload.model.depth", "18, 34, 50"),
        ({"family": "resnet", "depth": 34, "width": 2}, "workload.model.width", "1"),
        ({"family": "resnet", "depth": 50, "stem": "cifa"}, "workload.model.stem", "'cifar'"),
        ({"family": "resnet", "depth": 18, "image": 0}, "workload.model.image", "1..8192"),
        ({"family": ["gpt"], "layers": 2}, "workload.model.family", "bert, gpt"),
        ({"family": "resnet", "depth": 50, "stem": ["cifar"]}, "workload.model.stem", "cifar"),
    ],
)  # fmt: skip
def test_bad_fields_name_path_and_what_is_allowed(spec, path, hint):
    with pytest.raises(ConfigError) as info:
        build_model(spec)
    assert info.value.path == path
    assert hint in str(info.value)


def test_mapping_size_against_workload_input_size():
    spec = {"family": "gpt", "layers": 1, "hidden": 64, "heads": 2}
    assert build_model(spec, 256).input_size == 256
    with pytest.raises(ConfigError) as info:
        build_model({**spec, "seq": 512}, 256)
    assert "disagrees with workload.input_size" in str(info.value)


def _scenario(model, **workload) -> dict:
    return {
        "name": "fam",
        "topology": "puhti",
        "profile": "v100-sxm2-32gb",
        "workload": {"model": model, "batch_per_gpu": 8, "dataset_size": 4096, **workload},
        "schedules": [{"name": "ddp"}, {"name": "topk"}],
        "study": {"kind": "strong", "gpus": [1, 8]},
    }


@pytest.mark.parametrize(
    "zoo, spec, extra",
    [
        ("resnet18-cifar", {"family": "resnet", "depth": 18, "stem": "cifar"}, {}),
        ("bert_base", {"family": "bert", "layers": 12, "hidden": 768, "heads": 12},
         {"input_size": 128}),
    ],
)  # fmt: skip
def test_scenario_with_mapping_reproduces_zoo_numbers(zoo, spec, extra):
    a = run_scenario(parse_scenario(_scenario(zoo, **extra), "a.yaml")).records
    b = run_scenario(parse_scenario(_scenario(spec, **extra), "b.yaml")).records
    keys = ("iteration_time_s", "compute_s", "comm_s", "inter_node_bytes", "time_to_train_s")
    assert [[r[k] for k in keys] for r in a] == [[r[k] for k in keys] for r in b]


def test_dataset_size_default_yields_to_the_mapping_seq():
    d = _scenario({"family": "gpt", "layers": 1, "hidden": 64, "heads": 2, "seq": 2048})
    d["workload"] = {**d["workload"], "dataset": "wikitext103"}
    d["workload"].pop("dataset_size")
    sc = parse_scenario(d, "s.yaml")
    from simcluster.scenario import workload_model

    assert workload_model(sc.workload).input_size == 2048


def test_gpt_scenario_runs_ddp_on_1_to_32_v100():
    sc = load_scenario(ROOT / "scenarios" / "gpt-16x1536-v100.yaml")
    recs = run_scenario(sc).records
    assert [r["gpus"] for r in recs] == [1, 2, 4, 8, 16, 32]
    assert all(r["iteration_time_s"] > 0 for r in recs)
    one, many = recs[0], recs[-1]
    assert one["comm_s"] == 0 and many["inter_node_bytes"] > 0
    # weak scaling: the step can only get slower with more GPUs, never faster
    assert many["iteration_time_s"] >= one["iteration_time_s"]


def test_bad_mapping_in_a_scenario_exits_2_with_file_and_suggestion(tmp_path):
    d = _scenario({"family": "gpt", "layers": 2, "hiden": 64, "heads": 2})
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    proc = subprocess.run(
        [sys.executable, "-m", "simcluster.cli", "run", str(p), "--no-plots"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{p}: workload.model.hiden: unknown key" in proc.stderr
    assert "did you mean 'hidden'" in proc.stderr

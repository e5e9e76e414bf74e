"""Precisions as PyTorch runs them: fp32, tf32, amp (fp16 / bf16) and what a device has."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from simcluster.cli import main
from simcluster.compute import load_profile
from simcluster.compute.precision import activation_bytes, compute_key, peak_key
from simcluster.errors import ConfigError
from simcluster.scenario import parse_scenario
from simcluster.workload import build_model

ROOT = Path(__file__).resolve().parents[1]
PUHTI = ROOT / "scenarios" / "puhti64.yaml"


def scenario(profile: str, topology: str = "dgx-a100", **workload) -> dict:
    d = yaml.safe_load(PUHTI.read_text())
    d["profile"] = profile
    d["topology"] = topology
    d["schedules"] = [{"name": "ddp"}]
    d["study"] = {"kind": "single", "gpus": [1]}
    d["workload"].update(model="resnet50", input_size=64, batch_per_gpu=32, epochs=1)
    d["workload"].update(workload)
    return d


def test_compute_keys():
    assert compute_key("fp32") == "fp32"
    assert compute_key("tf32") == "tf32"
    assert compute_key("amp") == "amp"
    assert compute_key("amp", "bf16") == "amp_bf16"
    assert peak_key("tf32", "conv") == "tf32_tensor"
    assert peak_key("tf32", "norm") == "fp32"
    # fused attention runs its fp32 kernel with TF32 on or off; under autocast it is half
    assert peak_key("tf32", "attention") == "fp32"
    assert peak_key("tf32", "linear") == "tf32_tensor"
    assert peak_key("amp", "attention") == "fp16_tensor"
    assert peak_key("amp_bf16", "linear") == "bf16_tensor"
    # autocast: layer norm runs in fp32, the rest follows the half input
    assert activation_bytes("amp", "norm", "layernorm") == 4
    assert activation_bytes("amp", "norm", "batchnorm") == 2
    assert activation_bytes("amp", "elementwise") == 2
    assert activation_bytes("tf32", "conv") == 4


@pytest.mark.parametrize(
    ("workload", "field", "words"),
    [
        ({"precision": "tf32"}, "workload.precision", "TF32 tensor cores"),
        ({"precision": "amp", "amp_dtype": "bf16"}, "workload.amp_dtype", "BF16 tensor cores"),
    ],
)
@pytest.mark.parametrize("profile", ["v100-sxm2-32gb", "v100-sxm2-32gb-derived"])
def test_v100_has_no_tf32_or_bf16(profile, workload, field, words):
    with pytest.raises(ConfigError) as info:
        parse_scenario(scenario(profile, "dgx1-v100", **workload), "s.yaml")
    assert info.value.path == field
    assert words in str(info.value)
    assert "allowed: fp32, amp" in str(info.value)


def test_v100_tf32_exits_2(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario("v100-sxm2-32gb", "dgx1-v100", precision="tf32")))
    assert main(["run", str(path), "--no-plots", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "workload.precision" in err and "TF32" in err and "Traceback" not in err


def test_amp_dtype_needs_amp():
    with pytest.raises(ConfigError) as info:
        parse_scenario(scenario("a100-80gb-sxm", amp_dtype="bf16"), "s.yaml")
    assert info.value.path == "workload.amp_dtype"


@pytest.mark.parametrize("profile", ["a100-80gb-sxm", "h100-sxm"])
def test_precisions_run_on_a100_h100_and_order(profile):
    from simcluster.study import run_scenario

    times = {}
    for name, w in {
        "fp32": {"precision": "fp32"},
        "tf32": {"precision": "tf32"},
        "amp": {"precision": "amp"},
        "amp_bf16": {"precision": "amp", "amp_dtype": "bf16"},
    }.items():
        sc = parse_scenario(scenario(profile, **w), "s.yaml")
        times[name] = run_scenario(sc).records[0]["compute_s"]
    # tensor cores: tf32 beats strict fp32, half precision beats tf32
    assert times["fp32"] > times["tf32"] > times["amp"]
    assert times["amp_bf16"] == pytest.approx(times["amp"], rel=0.05)


def test_spec_amp_adds_weight_casts():
    prof = load_profile("a100-80gb-sxm")
    model = build_model("bert_large", 128, None)
    lin = next(x for x in model.layers if x.op == "linear" and x.params > 10**6)
    # forward at batch 1: weight traffic dominates; autocast reads fp32 weights and writes
    # the fp16 copy (6 B / weight) before the half GEMM reads it (2 B)
    t_amp = prof.layer_time(lin, 1, "amp", "fwd")
    t_bf16 = prof.layer_time(lin, 1, "amp_bf16", "fwd")
    assert t_amp == pytest.approx(t_bf16)
    assert t_amp > prof.elementwise_time(6 * lin.params)


def test_measured_profile_without_precision_key_names_it(tmp_path):
    data = json.loads((ROOT / "calibrate/profiles/h200-measured.json").read_text())
    data = copy.deepcopy(data)
    data.pop("samples")
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    prof = load_profile(str(path))
    assert prof.precision_problem("amp") is None
    problem = prof.precision_problem("amp_bf16")
    assert "device.compute.amp_bf16" in problem and "--precisions" in problem
    layer = build_model("resnet18", 32, 10).layers[0]
    with pytest.raises(ConfigError, match=r"device\.compute\.tf32"):
        prof.layer_time(layer, 8, "tf32", "fwd")


def test_measured_profile_accepts_new_precision_keys(tmp_path):
    data = json.loads((ROOT / "calibrate/profiles/h200-measured.json").read_text())
    data.pop("samples")
    data["device"]["compute"]["amp_bf16"] = copy.deepcopy(data["device"]["compute"]["amp"])
    data["device"]["compute"]["tf32"] = copy.deepcopy(data["device"]["compute"]["fp32"])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    prof = load_profile(str(path))
    layer = build_model("resnet18", 32, 10).layers[3]
    assert prof.layer_time(layer, 8, "amp_bf16", "fwd") == prof.layer_time(layer, 8, "amp", "fwd")
    assert prof.layer_time(layer, 8, "tf32", "fwd") == prof.layer_time(layer, 8, "fp32", "fwd")


def test_wave_utilisation_penalises_partial_waves():
    from simcluster.compute.measured import layer_features, wave_utilisation
    from simcluster.workload.model import linear

    big = linear("l", 1024, 128 * 132, tokens=128)  # 1 x 132 tiles at batch 1: one full wave
    assert wave_utilisation(big, 1, "fwd", 132) == 1.0
    assert wave_utilisation(big, 1, "fwd", 0) == 1.0  # unknown SM count: no wave model
    # 133 tiles on 132 SMs: two waves, the second almost empty
    odd = linear("l", 1024, 128 * 133, tokens=128)
    assert wave_utilisation(odd, 1, "fwd", 132) == pytest.approx(133 / 264)
    small = linear("l", 64, 64, tokens=1)  # one tile, K too short to split
    assert wave_utilisation(small, 1, "fwd", 132) == pytest.approx(1 / 132)
    f = layer_features(odd, 1, "fp32", "fwd", 0.0, 132)
    assert f["flops_wave"] == pytest.approx(f["flops"] * 264 / 133)
    norm = build_model("bert_base", 128, None).layers[4]
    assert norm.op == "norm" and wave_utilisation(norm, 8, "fwd", 132) == 1.0


def test_refit_fits_gemm_classes_on_flops_wave(tmp_path):
    from calibrate.refit import refit_profile

    data = json.loads((ROOT / "calibrate/profiles/h200-measured.json").read_text())
    keep = {"resnet18-cifar@32:32", "bert_base@32/4000:4", "lstm@16/4000:8"}
    data["samples"]["compute"] = [s for s in data["samples"]["compute"] if s["workload"] in keep]
    out = refit_profile(data, 132, "h200-sxm", "test")
    assert out["device"]["roofline"]["sm_count"] == 132
    lin = out["device"]["compute"]["fp32"]["linear"]["fwd"]
    assert lin["features"] == ["const", "flops_wave", "bytes", "bytes_spill"]
    assert out["device"]["compute"]["fp32"]["norm"]["fwd"]["features"][1] == "flops"
    assert lin["rel_err_median"] < 0.5
    out.pop("samples")
    path = tmp_path / "r.json"
    path.write_text(json.dumps(out))
    prof = load_profile(str(path))
    assert prof.sm_count == 132
    layer = build_model("bert_base", 128, None).layers[6]
    assert prof.layer_time(layer, 8, "fp32", "fwd") > 0


def test_transfer_error_both_ways(capsys):
    from calibrate.transfer_error import both_ways, main

    ratios = both_ways("h200-measured", "cpu-xeon-1core")
    assert list(ratios) == ["h200-measured -> cpu-xeon-1core", "cpu-xeon-1core -> h200-measured"]
    for r in ratios.values():
        conv = r[("layer", "fp32", "conv", "fwd")]
        assert conv and all(x > 0 for x in conv)
    assert main(["--both", "h200-measured", "cpu-xeon-1core"]) == 0
    assert "transfer error both ways" in capsys.readouterr().out


@pytest.mark.parametrize("key", ["fp32", "amp"])
def test_derived_gemms_never_beat_the_math_peak(key):
    prof = load_profile("v100-sxm2-32gb-derived")
    peak = {"fp32": 15.7e12, "amp": 125e12}[key]
    model = build_model("bert_large", 128, None)
    for layer in model.layers:
        if layer.op not in ("linear", "attention"):
            continue
        for pass_ in ("fwd", "bwd_input", "bwd_weight"):
            if pass_ == "bwd_weight" and layer.params == 0:
                continue
            t = prof.layer_time(layer, 64, key, pass_)
            assert t >= layer.flops * 64 / peak * (1 - 1e-9)


@pytest.mark.parametrize(
    ("target", "keys"),
    [
        ("v100-sxm2-32gb", ["fp32", "amp"]),
        ("a100-80gb-sxm", ["fp32", "tf32", "amp", "amp_bf16"]),
        ("h100-sxm", ["fp32", "tf32", "amp", "amp_bf16"]),
        ("a100-80gb-pcie", ["fp32", "tf32", "amp", "amp_bf16"]),
    ],
)
def test_committed_derived_profiles_match_the_transfer_model(target, keys):
    from simcluster.compute.transfer import derive_profile

    committed = json.loads((ROOT / f"calibrate/profiles/{target}-derived.json").read_text())
    source = committed["provenance"]["derived_from"]["name"]
    assert source in ("h200-measured", "h100-sxm-80gb-measured")  # a measured GPU
    assert f"--from {source} --target {target}" in committed["provenance"]["command"]
    fresh = derive_profile(source, target, f"{target}-derived")
    assert list(fresh["device"]["compute"]) == keys
    assert fresh["device"]["compute"] == committed["device"]["compute"]
    assert fresh["device"]["kernels"] == committed["device"]["kernels"]
    # the target spec's sourced per-call sparsification tables travel unchanged
    spec = json.loads((ROOT / f"calibrate/profiles/{target}.json").read_text())
    tables = spec["device"].get("sparsify_measured")
    assert fresh["device"].get("sparsify_measured") == tables
    assert committed["device"].get("sparsify_measured") == tables


@pytest.mark.parametrize(
    ("name", "source", "target"),
    [
        ("h200-sxm-from-h100", "h100-sxm-80gb-measured", "h200-sxm"),
        ("h100-sxm-from-h200", "h200-measured-2026-11-28", "h100-sxm"),
    ],
)
def test_cross_device_profiles_are_the_transfer_models_output(name, source, target):
    """The TRANSFER validation set's profiles (scenarios/references/transfer-steps.yaml)
    are what ``simcluster calibrate derive`` gives today, nothing edited by hand."""
    from simcluster.compute.transfer import derive_profile

    committed = json.loads((ROOT / f"calibrate/profiles/{name}.json").read_text())
    assert committed["provenance"]["derived_from"]["name"] == source
    fresh = derive_profile(source, target, name)
    assert fresh["device"]["compute"] == committed["device"]["compute"]
    assert fresh["device"]["kernels"] == committed["device"]["kernels"]
    assert list(fresh["device"]["compute"]) == ["fp32", "tf32", "amp", "amp_bf16"]


def test_transfer_scales_tf32_convs_of_a_default_fp32_profile():
    """h200-measured's fp32 convolutions ran on TF32 tensor cores (PyTorch's default)."""
    src = json.loads((ROOT / "calibrate/profiles/h200-measured.json").read_text())
    from simcluster.compute.transfer import derive_profile

    v100 = derive_profile("h200-measured", "v100-sxm2-32gb", "v100-from-h200")
    a100 = derive_profile("h200-measured", "a100-80gb-sxm", "a100-from-h200")

    def flops_coef(d, key, op):
        f = d["device"]["compute"][key][op]["fwd"]
        return f["coef"][f["features"].index("flops")]

    h200_tf32, h200_fp32 = 494.5e12, 67e12
    conv = flops_coef(src, "fp32", "conv:1x1")
    assert flops_coef(v100, "fp32", "conv:1x1") == pytest.approx(conv * h200_tf32 / 15.7e12, 1e-4)
    assert flops_coef(a100, "tf32", "conv:1x1") == pytest.approx(conv * h200_tf32 / 156e12, 1e-4)
    lin = flops_coef(src, "fp32", "linear")  # cuBLAS: strict fp32 by default
    assert flops_coef(v100, "fp32", "linear") == pytest.approx(lin * h200_fp32 / 15.7e12, 1e-4)
    assert flops_coef(a100, "tf32", "linear") == pytest.approx(lin * h200_fp32 / 156e12, 1e-4)


def test_anchor_cases_all_run():
    from simcluster.validation.cases import load_reference_file
    from simcluster.validation.runner import run_cases

    ref = load_reference_file(ROOT / "scenarios/references/anchors.yaml")
    results = run_cases([ref])
    assert len(results) == len(ref.cases) >= 8
    for r in results:
        assert r.status == "ok" and r.predicted > 0, (r.case.id, r.message)

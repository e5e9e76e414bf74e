"""Memory per GPU: every record carries it; over-memory warns, --strict-memory exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from simcluster.cli import main
from simcluster.compute.memory import memory_per_gpu
from simcluster.workload import build_model

GIB = 1024**3

GPT2XL = {
    "name": "gpt2xl-v100",
    "topology": "dgx1-v100",
    "profile": "v100-sxm2-32gb-derived",
    "workload": {
        "model": "gpt2_xl",
        "dataset": "wikitext103",
        "input_size": 1024,
        "batch_per_gpu": 256,
        "precision": "fp32",
    },
    "schedules": [{"name": "ddp"}],
    "study": {"kind": "single", "gpus": [8]},
}


def write(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_gpt2_xl_batch_256_fp32_on_v100_warns_and_strict_exits_2(tmp_path, capsys):
    path = Path(__file__).resolve().parents[1] / "scenarios" / "gpt2xl-v100-memory.yaml"
    assert yaml.safe_load(path.read_text())["workload"]["batch_per_gpu"] == 256
    out = tmp_path / "o"
    assert main(["run", str(path), "--no-plots", "--json", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    rec = json.loads(cap.out)["results"][0]
    assert rec["fits"] is False
    assert rec["memory_per_gpu_bytes"] > rec["device_memory_bytes"] == 32 * GIB
    assert "warning: ddp at 8 GPUs needs" in cap.err
    assert main(["run", str(path), "--no-plots", "--strict-memory", "--out", str(out)]) == 2
    cap = capsys.readouterr()
    assert "--strict-memory" in cap.err and "Traceback" not in cap.err
    assert "mem/GPU" in cap.out


def test_every_record_carries_memory(tmp_path, capsys):
    data = dict(GPT2XL, workload=dict(GPT2XL["workload"], model="gpt2_large", batch_per_gpu=1))
    data["study"] = {"kind": "strong", "gpus": [1, 8]}
    path = write(tmp_path, data)
    assert main(["run", str(path), "--no-plots", "--json", "--out", str(tmp_path / "o")]) == 0
    cap = capsys.readouterr()
    recs = json.loads(cap.out)["results"]
    assert all(r["memory_per_gpu_bytes"] > 0 and r["fits"] is True for r in recs)
    assert "warning" not in cap.err
    # the 8-GPU run keeps DDP's buckets too
    assert recs[1]["memory_per_gpu_bytes"] > recs[0]["memory_per_gpu_bytes"]


def test_published_16gb_runs_fit_in_16gb():
    """NVIDIA trained ResNet-50 at batch 112 (fp32) and 256 (amp) on 16 GB V100s."""
    model = build_model("resnet50", 224, 1000)
    for batch, key in ((112, "fp32"), (256, "amp")):
        est = memory_per_gpu(model, batch, key, "sgd", "ddp", {}, 8)
        assert 4 * GIB < est.total < 16 * GIB


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "lamb"])
def test_memory_grows_with_batch_and_shrinks_with_amp(optimizer):
    model = build_model("bert_base", 128, None)
    small = memory_per_gpu(model, 8, "fp32", optimizer, "ddp", {}, 8)
    big = memory_per_gpu(model, 16, "fp32", optimizer, "ddp", {}, 8)
    amp = memory_per_gpu(model, 16, "amp", optimizer, "ddp", {}, 8)
    assert big["activations"] == pytest.approx(2 * small["activations"])
    assert amp["activations"] < big["activations"]
    assert big["optimizer_state"] == {"sgd": 4, "adam": 8, "lamb": 8}[optimizer] * model.params


@pytest.mark.parametrize("profile", ["v100-sxm2-32gb", "v100-sxm2-32gb-derived"])
def test_optimizer_costs_follow_bytes_per_parameter(profile):
    from simcluster.compute import load_profile
    from simcluster.compute.profile import OPTIMIZER_PASSES

    prof = load_profile(profile)
    n = 300_000_000
    t = {o: prof.optimizer_time(n, "fp32", o) for o in OPTIMIZER_PASSES}
    assert t["sgd"] < t["adam"] == t["adamw"] < t["lamb"]
    # large steps are bandwidth-bound: time ~ bytes per parameter (20, 28, 48)
    assert t["adam"] / t["sgd"] == pytest.approx(28 / 20, rel=0.05)
    assert t["lamb"] / t["sgd"] == pytest.approx(48 / 20, rel=0.05)
    assert prof.optimizer_time(n, "amp", "sgd") > t["sgd"]  # GradScaler's unscale
    assert prof.optimizer_time(n, "amp_bf16", "sgd") == t["sgd"]  # bf16: no loss scaling

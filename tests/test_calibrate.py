"""Calibration: profile loading errors, fits, the transfer model, the CLI end to end."""

from __future__ import annotations

import copy
import json
import math
import sys

import numpy as np
import pytest

from simcluster.cli import main
from simcluster.compute import load_network_profile, load_profile
from simcluster.compute.measured import (
    COMPUTE_FEATURES,
    KERNEL_FEATURES,
    MEMCPY_KINDS,
    OP_CLASSES,
    PROJECTION_KINDS,
    MeasuredProfile,
    layer_features,
)
from simcluster.compute.profile import KERNEL_FAMILIES, PASSES, SPARSIFY_METHODS, DeviceProfile
from simcluster.compute.transfer import DeviceSpec, derive_profile_data, load_spec
from simcluster.errors import ConfigError
from simcluster.paths import project_root
from simcluster.workload import build_model

if str(project_root()) not in sys.path:
    sys.path.insert(0, str(project_root()))

from calibrate.collectives import network_profile  # noqa: E402
from calibrate.fit import fit_alpha_beta, fit_cost_model, nnls  # noqa: E402

# ----------------------------------------------------------------------------- helpers


def _fit(features, coef) -> dict:
    return {"features": list(features), "coef": list(coef)}


def synthetic_profile(
    const: float = 1e-5, s_per_flop: float = 1e-11, s_per_byte: float = 1e-10
) -> dict:
    """A complete measured profile whose every fit has the given per-term coefficients."""
    per_term = {"const": const, "flops": s_per_flop}

    def fit(features) -> dict:
        return _fit(features, [per_term.get(f, s_per_byte) for f in features])

    compute = {}
    for op in OP_CLASSES:
        compute[op] = {p: fit(COMPUTE_FEATURES) for p in PASSES}
        if op == "embedding":
            del compute[op]["bwd_input"]
    kernels: dict = {
        "sparsify": {
            w: {m: fit(KERNEL_FEATURES["sparsify"]) for m in SPARSIFY_METHODS}
            for w in ("device", "host")
        },
        "projection": {k: fit(KERNEL_FEATURES["projection"]) for k in PROJECTION_KINDS},
        "spmv": {k: fit(KERNEL_FEATURES[f"spmv.{k}"]) for k in ("spmv", "spmm")},
        "memcpy": {"d2d": fit(KERNEL_FEATURES["memcpy"]), **dict.fromkeys(MEMCPY_KINDS[1:], "d2d")},
    }
    for fam in KERNEL_FAMILIES:
        if fam not in kernels:
            kernels[fam] = fit(KERNEL_FEATURES[fam])
    return {
        "schema_version": 1,
        "name": "synthetic",
        "kind": "measured",
        "provenance": {"device_name": "synthetic test device"},
        "device": {
            "compute": {"fp32": compute},
            "kernels": kernels,
            "roofline": {
                "peak_flops": {"fp32": 1e11},
                "memory_bandwidth": 1e10,
                "launch_overhead_s": 1e-6,
            },
        },
    }


def spec(name="dev", flops=1e11, bw=1e10, launch=1e-6, tensor=None, link=None) -> DeviceSpec:
    peaks = {"fp32": flops}
    if tensor:
        peaks["fp16_tensor"] = tensor
    return DeviceSpec(name, peaks, bw, launch, bw / 4, launch, link)


KERNEL_CALLS = [
    *[("sparsify", {"numel": 1e6, "density": 0.01, "method": m, "where": w})
      for m in SPARSIFY_METHODS for w in ("device", "host")],
    *[("projection", {"numel": 589824, "groups": 256, "kind": k}) for k in PROJECTION_KINDS],
    ("mask_apply", {"numel": 1e6}),
    ("mask_merge", {"numel": 1e6}),
    ("compress", {"numel": 5e5}),
    ("decompress", {"numel": 1e6, "kept": 5e5}),
    ("scatter_add", {"numel": 1e5}),
    ("spmv", {"nnz": 1e6, "rows": 1e4, "batch": 1}),
    ("spmv", {"nnz": 1e6, "rows": 1e4, "batch": 32}),
    ("outer_update", {"nnz": 1e6, "batch": 32}),
    ("elementwise", {"nbytes": 1e8}),
    *[("memcpy", {"nbytes": 1e8, "kind": k}) for k in (*MEMCPY_KINDS, "h2d", "d2h")],
    ("optimizer", {"num_params": 1e7}),
]  # fmt: skip


def write(tmp_path, data: dict, name: str = "p.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


# ----------------------------------------------------------------------------- loading


def test_measured_profile_loads_and_implements_every_family(tmp_path):
    prof = load_profile(str(write(tmp_path, synthetic_profile())))
    assert isinstance(prof, MeasuredProfile) and isinstance(prof, DeviceProfile)
    assert prof.kind == "measured" and prof.describe() == "synthetic (measured)"
    seen = set()
    for family, params in KERNEL_CALLS:
        t = prof.kernel_time(family, **params)
        assert math.isfinite(t) and t > 0, (family, params)
        assert prof.source_of(family) == "measured"
        seen.add(family)
    assert seen == set(KERNEL_FAMILIES)
    assert prof.optimizer_time(1000, "fp32") > 0
    assert prof.memcpy_time(1e6, "h2d") == prof.memcpy_time(1e6, "d2d")  # CPU alias
    assert prof.elementwise_time(1e6) == pytest.approx(1e-5 + 2 * 1e-10 * 1e6)  # + spill
    model = build_model("resnet18-cifar")
    for layer in model.layers:
        for p in PASSES:
            t = prof.layer_time(layer, 32, "fp32", p)
            assert t >= 0
            if p == "bwd_weight" and layer.params == 0:
                assert t == 0
    conv = model.layers[0]
    f = layer_features(conv, 32, "fp32", "fwd")
    assert f["bytes_spill"] == f["bytes"]  # no cache_bytes in the profile: all of it spills
    assert prof.layer_time(conv, 32, "fp32", "fwd") == pytest.approx(
        1e-5 + 1e-11 * f["flops"] + 1e-10 * (f["bytes"] + f["bytes_spill"])
    )
    cached = layer_features(conv, 32, "fp32", "fwd", cache_bytes=f["bytes"] / 2)
    assert cached["bytes_spill"] == pytest.approx(f["bytes"] / 2)
    with pytest.raises(ValueError, match="unknown kernel family"):
        prof.kernel_time("fft", numel=1)


def test_amp_without_amp_fits_is_a_clear_error(tmp_path):
    prof = load_profile(str(write(tmp_path, synthetic_profile())))
    with pytest.raises(ConfigError, match=r"device\.compute\.amp.*--precisions fp32,amp"):
        prof.layer_time(build_model("resnet18-cifar").layers[0], 8, "amp", "fwd")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.update(schema_version=2), "schema_version"),
        (lambda d: d.pop("provenance"), "provenance"),
        (lambda d: d.pop("device"), "device"),
        (lambda d: d["device"].pop("compute"), "device.compute"),
        (lambda d: d["device"]["compute"]["fp32"].pop("conv"), "device.compute.fp32.conv"),
        (
            lambda d: d["device"]["compute"]["fp32"]["linear"].pop("bwd_input"),
            "device.compute.fp32.linear.bwd_input",
        ),
        (
            lambda d: d["device"]["compute"]["fp32"]["norm"]["fwd"].pop("coef"),
            "device.compute.fp32.norm.fwd.coef",
        ),
        (lambda d: d["device"]["kernels"].pop("spmv"), "device.kernels.spmv"),
        (
            lambda d: d["device"]["kernels"]["sparsify"]["host"].pop("dgc"),
            "device.kernels.sparsify.host.dgc",
        ),
        (
            lambda d: d["device"]["kernels"]["memcpy"].update(h2d_pinned="nope"),
            "device.kernels.memcpy.h2d_pinned",
        ),
        (
            lambda d: d["device"]["kernels"]["optimizer"].update(coef=[-1.0, 0.0]),
            "device.kernels.optimizer.coef",
        ),
        (
            lambda d: d["device"]["kernels"]["optimizer"].update(features=["const", "warp"]),
            "device.kernels.optimizer.features",
        ),
    ],
)
def test_profile_errors_name_file_and_field(tmp_path, edit, field):
    data = synthetic_profile()
    edit(data)
    path = write(tmp_path, data, "broken.json")
    with pytest.raises(ConfigError) as info:
        load_profile(str(path))
    msg = str(info.value)
    assert str(path) in msg
    assert f"{field}:" in msg


def test_cli_reports_a_broken_profile_without_traceback(tmp_path, capsys):
    data = synthetic_profile()
    data["schema_version"] = 7
    path = write(tmp_path, data, "old.json")
    assert main(["calibrate", "check", "--profile", str(path)]) == 2
    err = capsys.readouterr().err
    assert "old.json: schema_version: unsupported profile schema (got 7)" in err
    assert "Traceback" not in err


# ----------------------------------------------------------------------------- fits


def test_nnls_exact_fit_of_few_samples_takes_the_smallest_subset_whatever_the_rounding():
    """Two samples, three features: several subsets fit exactly; the choice must not
    hang on rounding noise (numpy builds differ in the last bits of lstsq)."""
    a = np.array([[1.0, 2.0e12, 3.0e9], [1.0, 5.0e12, 4.0e9]])
    b = a @ np.array([1e-4, 2e-14, 0.0])
    picks = []
    for eps in (0.0, 1e-16, -1e-16, 3e-16):
        x = nnls(a, b * (1 + eps * np.array([1.0, -1.0])))
        picks.append(tuple(x > 0))
        assert a @ x == pytest.approx(b, rel=1e-9)
    assert picks == [(True, True, False)] * 4  # const and the first feature: 2 of 3


def test_nnls_matches_known_solution_and_clips_negative():
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2, size=(40, 3))
    x = np.array([2.0, 0.0, 0.5])
    assert nnls(a, a @ x) == pytest.approx(x, abs=1e-9)
    b = a @ np.array([1.0, -1.0, 1.0])  # best unconstrained fit has a negative coefficient
    assert (nnls(a, b) >= 0).all()


def test_fit_recovers_synthetic_cost_model():
    rng = np.random.default_rng(1)
    c0, per_flop, per_byte = 2e-5, 1 / 150e9, 1 / 12e9
    rows = [
        {"flops": f, "bytes": b}
        for f, b in zip(10 ** rng.uniform(6, 11, 60), 10 ** rng.uniform(4, 9, 60), strict=True)
    ]
    t = [
        (c0 + per_flop * r["flops"] + per_byte * r["bytes"]) * rng.uniform(0.99, 1.01) for r in rows
    ]
    rec = fit_cost_model(rows, t, ["const", "flops", "bytes"])
    assert rec["coef"] == pytest.approx([c0, per_flop, per_byte], rel=0.03)
    assert rec["n"] == 60 and rec["rel_err_max"] < 0.03
    ab = fit_alpha_beta([8 * 8**i for i in range(8)], [5e-5 + 8 * 8**i / 2e9 for i in range(8)])
    assert ab["alpha_s"] == pytest.approx(5e-5, rel=1e-6)
    assert 1 / ab["beta_s_per_byte"] == pytest.approx(2e9, rel=1e-6)


def test_network_profile_from_sweep_fits():
    alphas = {"allreduce": 40e-6, "allgather": 20e-6, "broadcast": 20e-6}
    raw = {op: {n: [[a + n * 1e-9] * 3] for n in (8, 1024, 1 << 20)} for op, a in alphas.items()}
    from calibrate.collectives import fit_sweep

    fits = fit_sweep(raw, world=2)
    assert fits["allreduce"]["alpha_s"] == pytest.approx(40e-6, rel=1e-4)
    assert fits["allreduce"]["bus_bandwidth"] == pytest.approx(1e9, rel=1e-4)  # 2(p-1)/p = 1
    net = network_profile("n", {"world": {"world": 2, "backend": "gloo", "fits": fits}}, {},
                          {"memory": ("world", 4e9)})  # fmt: skip
    assert net["kind"] == "measured"
    assert net["network"]["per_message_overhead_s"] == pytest.approx(20e-6, rel=1e-3)
    assert net["network"]["link_efficiency"]["memory"] == pytest.approx(0.25, rel=1e-3)


# ----------------------------------------------------------------------------- transfer


def _times(data: dict, tmp_path, name: str) -> list[float]:
    prof = load_profile(str(write(tmp_path, data, name)))
    out = []
    for layer in build_model("resnet18-cifar").layers + build_model("bert_base", 32, 100).layers:
        out += [prof.layer_time(layer, 8, "fp32", p) for p in PASSES]
    out += [prof.kernel_time(f, **p) for f, p in KERNEL_CALLS if f != "memcpy"]
    out += [prof.memcpy_time(1e6, "d2d")]
    return out


def _labels() -> list[str]:
    """Op class (or kernel family) of each entry of :func:`_times`."""
    out = []
    for layer in build_model("resnet18-cifar").layers + build_model("bert_base", 32, 100).layers:
        out += [layer.op] * len(PASSES)
    return out + [f for f, _ in KERNEL_CALLS if f != "memcpy"] + ["memcpy"]


def test_transfer_to_the_same_spec_returns_the_same_times(tmp_path):
    data = synthetic_profile()
    s = spec(tensor=8e11, link=1e10)
    derived = derive_profile_data(data, s, s, "same")
    assert derived["kind"] == "derived"
    assert derived["provenance"]["derived_from"]["name"] == "synthetic"
    assert _times(derived, tmp_path, "d.json") == pytest.approx(_times(data, tmp_path, "m.json"))


@pytest.mark.parametrize(
    ("term", "target", "factor"),
    [
        ("bytes", spec(bw=2e10), 0.5),  # twice the bandwidth: memory-bound times halve
        ("flops", spec(flops=4e11), 0.25),  # four times the FLOP/s: compute-bound quarter
        ("const", spec(launch=3e-6), 3.0),  # three times the launch overhead
    ],
)
def test_transfer_scales_each_term_by_its_rate_ratio(tmp_path, term, target, factor, monkeypatch):
    # the terms alone: the math-peak floor of GEMM passes is tested in test_precision.py
    monkeypatch.setattr(MeasuredProfile, "math_peak", lambda self, op, precision: None)
    only = {"const": 0.0, "s_per_flop": 0.0, "s_per_byte": 0.0}
    only[{"bytes": "s_per_byte", "flops": "s_per_flop", "const": "const"}[term]] = {
        "bytes": 1e-10, "flops": 1e-11, "const": 1e-5,
    }[term]  # fmt: skip
    data = synthetic_profile(**only)
    derived = derive_profile_data(data, spec(), target, "t")
    before, after = _times(data, tmp_path, "m.json"), _times(derived, tmp_path, "d.json")
    pairs = [(a, b) for a, b in zip(before, after, strict=True) if a > 0]
    assert pairs
    if term == "flops":  # only compute ops have a flops term; sparsify.host etc. stay 0
        # memory-bound op classes (norm, element-wise, pool, embedding): their FLOPs stand
        # for elements and move with memory bandwidth, unchanged here
        labels = [lab for lab, a in zip(_labels(), before, strict=True) if a > 0]
        mem = {"norm", "elementwise", "pool", "embedding"}
        assert all(
            b == pytest.approx(a * (1.0 if lab in mem else factor))
            for lab, (a, b) in zip(labels, pairs, strict=True)
        )
    else:
        host = {"bytes": spec().host_bandwidth / target.host_bandwidth, "const": 1.0}[term]
        assert all(b == pytest.approx(a * factor) or b == pytest.approx(a * host) for a, b in pairs)


def test_transfer_synthesises_amp_and_host_links_from_the_target_sheet(tmp_path):
    data = synthetic_profile(const=0.0, s_per_flop=1e-11, s_per_byte=0.0)
    tgt = spec(tensor=8e11, link=16e9)
    derived = derive_profile_data(data, spec(), tgt, "t")
    prof = load_profile(str(write(tmp_path, derived)))
    conv = build_model("resnet18-cifar").layers[0]
    assert prof.layer_time(conv, 8, "amp", "fwd") == pytest.approx(
        prof.layer_time(conv, 8, "fp32", "fwd") / 8
    )
    assert prof.memcpy_time(16e9, "h2d") == pytest.approx(1.0 + 1e-6)
    assert prof.kernel_time("memcpy", nbytes=16e9, kind="h2d_pageable") == pytest.approx(2 + 1e-6)
    assert prof.source_of("memcpy") == "spec"
    assert "amp from fp32" in " ".join(derived["provenance"]["notes"])


def test_cpu_to_gpu_transfer_turns_constants_into_launches(tmp_path, monkeypatch):
    monkeypatch.setattr(MeasuredProfile, "math_peak", lambda self, op, precision: None)
    from dataclasses import replace

    data = synthetic_profile(const=80e-6, s_per_flop=0.0, s_per_byte=0.0)
    cpu, gpu = replace(spec(), processor="cpu"), spec(launch=5e-6)
    prof = load_profile(str(write(tmp_path, derive_profile_data(data, cpu, gpu, "g"))))
    conv = build_model("resnet18-cifar").layers[0]
    assert prof.layer_time(conv, 8, "fp32", "fwd") == pytest.approx(5e-6)  # one launch
    dgc = {"numel": 1e6, "density": 0.01, "method": "dgc"}
    assert prof.kernel_time("sparsify", **dgc) == pytest.approx(4 * 5e-6)  # four launches
    host = prof.kernel_time("sparsify", **dgc, where="host")
    assert host == pytest.approx(80e-6 * 5e-6 / 1e-6)  # host kernels keep the ratio rule


def test_cpu_to_v100_transfer_says_it_is_a_big_jump():
    data = synthetic_profile()
    v100, _ = load_spec("v100-sxm2-32gb")
    derived = derive_profile_data(data, spec(), v100, "v")
    assert "big jump" in derived["provenance"]["warning"]
    assert derived["provenance"]["target_rates"]["name"] == "v100-sxm2-32gb"


def test_derive_refuses_a_spec_profile_as_source(tmp_path):
    data = copy.deepcopy(synthetic_profile())
    data["kind"] = "spec"
    with pytest.raises(ConfigError, match="derive from a measured profile"):
        derive_profile_data(data, spec(), spec(), "x")


# ----------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One ``simcluster calibrate --tiny`` run (a few seconds), shared by the CLI tests."""
    out = tmp_path_factory.mktemp("cal") / "tiny.json"
    rc = main(["calibrate", "--device", "cpu", "--tiny", "--out", str(out), "--threads", "2"])
    assert rc == 0
    return out


def test_tiny_calibration_writes_loadable_profiles(tiny):
    data = json.loads(tiny.read_text())
    assert data["schema_version"] == 1 and data["kind"] == "measured"
    prov = data["provenance"]
    for key in ("device_name", "torch", "cpu_model", "date", "command", "threads", "timing"):
        assert prov[key] is not None, key
    assert prov["command"].startswith("simcluster calibrate --device cpu --out ")
    assert set(data["device"]["compute"]["fp32"]) >= set(OP_CLASSES)
    assert data["samples"]["compute"] and data["samples"]["kernels"]
    prof = load_profile(str(tiny))
    assert prof.kind == "measured"
    for family, params in KERNEL_CALLS:
        assert prof.kernel_time(family, **params) >= 0
    net = load_network_profile(str(tiny.with_name("tiny-network.json")))
    assert net.kind == "measured" and net.per_message_overhead_s > 0
    assert set(net.collectives["world"]) >= {"allreduce", "allgather", "broadcast"}


def test_calibrate_refuses_to_overwrite_without_force(tiny, capsys):
    before = tiny.read_text()
    assert main(["calibrate", "--tiny", "--out", str(tiny)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "exists; pass --force" in err
    assert tiny.read_text() == before


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["calibrate", "--device", "tpu", "--out", "x.json"], "--device: unknown device"),
        (["calibrate", "--out", "x.txt", "--tiny"], "ends in .json"),
        (["calibrate", "--tiny", "--quick", "--out", "x.json"], "exclude each other"),
        (["calibrate", "--tiny", "--models", "resnet19", "--out", "x.json"], "did you mean"),
        (["calibrate", "derive", "--from", "cpu"], "needs --from, --target and --out"),
        (["calibrate", "derive", "--target", "v100", "--from", "a", "--out", "y.json"],
         "unknown profile"),
        (["calibrate", "check"], "--profile: missing"),
        (["calibrate", "check", "--profile", "h100-sxm", "--layer-timing", "per-call"],
         "--layer-timing: not an option of `calibrate check`"),
        (["calibrate", "check", "--profile", "v100-sxm2-32gb", "--model", "vgg16"],
         "builds ResNets"),
    ],
)  # fmt: skip
def test_calibrate_cli_errors_exit_2(tmp_path, monkeypatch, capsys, argv, needle):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_derive_and_simulate_with_the_derived_profile(tiny, tmp_path, capsys):
    out = tmp_path / "v100-from-tiny.json"
    argv = ["calibrate", "derive", "--from", str(tiny), "--target", "v100-sxm2-32gb"]
    assert main([*argv, "--out", str(out)]) == 0
    assert "big jump" in capsys.readouterr().err
    prof = load_profile(str(out))
    assert prof.kind == "derived" and prof.describe() == "v100-from-tiny (derived from tiny)"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: s\ntopology: puhti\n"
        f"profile: {out}\nnetwork_profile: {tiny.with_name('tiny-network.json')}\n"
        "workload: {model: resnet18-cifar, dataset: cifar10, batch_per_gpu: 32}\n"
        "schedules: [{name: ddp}]\nstudy: {kind: strong, gpus: [4, 8]}\n"
    )
    assert main(["run", str(scenario), "--json", "--no-plots", "--out", str(tmp_path / "r")]) == 0
    records = json.loads(capsys.readouterr().out)["results"]
    assert records[0]["profile"] == "v100-from-tiny (derived from tiny)"
    assert records[0]["network_profile"] == "tiny-network (measured)"
    assert all(r["iteration_time_s"] > 0 for r in records)


def test_check_compares_simulated_and_measured(tiny, capsys):
    argv = ["calibrate", "check", "--profile", str(tiny), "--batch", "2", "--rounds", "1"]
    assert main([*argv, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["model"] == "resnet18-cifar" and res["measured_s"] > 0 and res["simulated_s"] > 0


# ----------------------------------------------------------------------------- committed


@pytest.mark.parametrize("name", ["cpu-xeon-1core", "v100-sxm2-32gb-derived", "h200-measured"])
def test_committed_profiles_load(name):
    prof = load_profile(name)
    assert prof.kind in ("measured", "derived")
    model = build_model("resnet152")
    t = sum(prof.layer_time(layer, 128, "fp32", "fwd") for layer in model.layers)
    assert 0 < t < 1e4


@pytest.mark.parametrize("name", ["gloo-localhost", "h200-measured"])
def test_committed_network_profile_loads(name):
    net = load_network_profile(name)
    assert net.kind == "measured" and 0 < net.per_message_overhead_s < 1e-2


def test_transfer_error_table_of_a_profile_against_its_own_fits(tmp_path, capsys):
    """Each sample predicted by the profile's own fits lies near 1; a spec sheet does not."""
    from calibrate.transfer_error import main

    out = tmp_path / "t.json"
    assert main(["h200-measured", "h200-measured", "h200-sxm", "--json", str(out)]) == 0
    assert "predicted / measured" in capsys.readouterr().out
    rows = {r["what"]: r for r in json.loads(out.read_text())["rows"]}
    conv = rows["layer fp32 conv fwd"]
    assert 0.8 < conv["h200-measured"]["median"] < 1.25
    assert conv["h200-sxm"]["median"] < 0.75  # the spec sheet is too fast per layer
    assert 0.8 < rows["kernel memcpy.d2d"]["h200-measured"]["median"] < 1.25


def test_gpu_full_plan_adds_large_activations_unless_models_are_named():
    from calibrate.runner import Workload, make_plan

    def names(plan):
        return {(w.model, w.input_size, w.batch) for w in plan.workloads}

    cpu, gpu = make_plan("full"), make_plan("full", gpu=True)
    extra = names(gpu) - names(cpu)
    assert ("resnet50", 224, 32) in extra and ("resnet18-cifar", 32, 256) in extra
    # a transformer at training-size token counts (batch x sequence >= 2,048)
    assert any(m.startswith("bert") and s * b >= 2048 for m, s, b in extra)
    mine = [Workload("resnet18-cifar", 32, None, 8)]
    assert names(make_plan("full", mine, gpu=True)) == names(make_plan("full", mine))
    assert names(make_plan("quick", gpu=True)) == names(make_plan("quick"))

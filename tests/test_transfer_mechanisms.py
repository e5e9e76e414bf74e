"""Transfer mechanisms between GPUs (simcluster/compute/transfer.py) and the amp re-fit
from bf16 twins (calibrate/refit.py --amp-from-bf16)."""

from __future__ import annotations

import copy
import dataclasses
import json
import sys

import pytest

from simcluster.compute.loader import read_profile_data
from simcluster.compute.transfer import (
    CUDNN_FP32_LANES,
    cudnn_fp32_rate,
    derive_profile_data,
)
from simcluster.errors import ConfigError
from simcluster.paths import project_root

sys.path.insert(0, str(project_root()))
from calibrate.refit import amp_min_bf16, refit_amp_from_bf16  # noqa: E402
from calibrate.refit import main as refit_main
from tests.test_calibrate import spec, synthetic_profile  # noqa: E402


def _coef(data: dict, key: str, op: str, feature: str, pass_: str = "fwd") -> float:
    fit = data["device"]["compute"][key][op][pass_]
    return fit["coef"][fit["features"].index(feature)]


def test_cudnn_fp32_rate_counts_at_most_64_lanes_per_sm():
    volta = dataclasses.replace(spec(flops=15.7e12), fp32_lanes_per_sm=64)
    hopper = dataclasses.replace(spec(flops=67e12), fp32_lanes_per_sm=128)
    unknown = spec(flops=67e12)
    assert CUDNN_FP32_LANES == 64
    assert cudnn_fp32_rate(volta) == pytest.approx(15.7e12)
    assert cudnn_fp32_rate(hopper) == pytest.approx(33.5e12)
    assert cudnn_fp32_rate(unknown) == pytest.approx(67e12)  # no lane count: plain peak


def test_fp32_convolutions_transfer_at_the_issue_limited_rate_and_matmuls_at_the_peak():
    data = synthetic_profile(const=0.0, s_per_flop=1e-12, s_per_byte=0.0)
    src = dataclasses.replace(spec(flops=4e11), fp32_lanes_per_sm=128)
    tgt = dataclasses.replace(spec(flops=1e11), fp32_lanes_per_sm=64)
    out = derive_profile_data(copy.deepcopy(data), src, tgt, "t")
    # linear (cuBLAS): FP32 peaks 4x apart -> 4x the time per FLOP
    assert _coef(out, "fp32", "linear", "flops") == pytest.approx(4e-12)
    # conv and lstm (cuDNN): 64 of the source's 128 lanes count -> 2x
    assert _coef(out, "fp32", "conv", "flops") == pytest.approx(2e-12)
    assert _coef(out, "fp32", "lstm", "flops", "bwd_weight") == pytest.approx(2e-12)


def test_memory_bound_op_classes_move_their_flops_terms_with_memory_bandwidth():
    data = synthetic_profile(const=0.0, s_per_flop=1e-12, s_per_byte=1e-11)
    out = derive_profile_data(copy.deepcopy(data), spec(bw=1e10), spec(bw=4e10, flops=1e12), "t")
    for op in ("norm", "elementwise", "pool"):
        assert _coef(out, "fp32", op, "flops") == pytest.approx(0.25e-12)  # bandwidth x4
        assert _coef(out, "fp32", op, "bytes") == pytest.approx(0.25e-11)
    assert _coef(out, "fp32", "conv", "flops") == pytest.approx(0.1e-12)  # FP32 peak x10


def _sample(precision: str, layer: str, fwd: float, bwd: float) -> dict:
    return {
        "workload": "w", "layer": layer, "batch": 2, "precision": precision, "op": "linear",
        "fwd_s": fwd, "bwd_input_s": bwd, "bwd_weight_s": None,
    }  # fmt: skip


def test_amp_min_bf16_takes_the_faster_twin_per_pass_and_leaves_the_rest():
    samples = [
        _sample("amp", "a", 3e-4, 1e-4),
        _sample("amp_bf16", "a", 1e-4, 2e-4),
        _sample("amp", "b", 5e-5, 5e-5),  # no bf16 twin: unchanged
        _sample("fp32", "a", 9e-4, 9e-4),
    ]
    out, counts = amp_min_bf16(samples)
    assert out[0]["fwd_s"] == 1e-4 and out[0]["bwd_input_s"] == 1e-4
    assert out[0]["bwd_weight_s"] is None
    assert out[1] == samples[1] and out[2] == samples[2] and out[3] == samples[3]
    assert counts == {"samples_paired": 1, "pass_times_from_bf16": 1}
    assert samples[0]["fwd_s"] == 3e-4  # the input is not modified


def _exact(fits: dict) -> dict:
    """Fits with the errors of exact fits (two samples, two features) rounded to 0: at
    1e-16 they are rounding noise that differs between runs of the same fit."""
    out = {}
    for key, passes in fits.items():
        out[key] = {}
        for p, fit in passes.items():
            fit = dict(fit)
            for e in ("rel_err_median", "rel_err_max"):
                if abs(fit.get(e, 1.0)) < 1e-12:
                    fit[e] = 0.0
            out[key][p] = fit
    return out


def test_committed_h100_amp_fits_are_the_refit_from_bf16_twins():
    """The committed H100 profile's amp fits are what the documented commands give: the
    refit from the bf16 twins, then the host floors (calibrate.refit --host-floor)."""
    from calibrate.refit import refit_host_floor

    committed = read_profile_data("h100-sxm-80gb-measured")
    prov = committed["provenance"]["refit_amp_from_bf16"]
    assert "--amp-from-bf16" in prov["command"]
    assert prov["pass_times_from_bf16"] > 0
    assert "--host-floor" in committed["provenance"]["refit_host_floor"]["command"]
    again = refit_amp_from_bf16(committed, read_profile_data("h100-sxm"), "x")
    again = refit_host_floor(again, "x")
    assert _exact(again["device"]["compute"]["amp"]) == _exact(
        committed["device"]["compute"]["amp"]
    )
    for key in ("fp32", "tf32", "amp_bf16"):
        assert again["device"]["compute"][key] == committed["device"]["compute"][key]


def test_amp_refit_refuses_a_device_whose_fp16_and_bf16_rates_differ(tmp_path, capsys):
    committed = read_profile_data("h100-sxm-80gb-measured")
    v100 = read_profile_data("v100-sxm2-32gb")  # no bf16 tensor cores
    with pytest.raises(ConfigError, match="equal fp16_tensor and bf16_tensor"):
        refit_amp_from_bf16(committed, v100, "x")
    src = tmp_path / "p.json"
    data = copy.deepcopy(committed)
    data["device"]["spec_profile"] = "v100-sxm2-32gb"
    src.write_text(json.dumps(data))
    rc = refit_main([str(src), "--amp-from-bf16", "--out", str(tmp_path / "o.json")])
    assert rc == 2
    assert "bf16_tensor" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()

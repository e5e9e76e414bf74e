"""Host-bound floors of per-call layer samples (calibrate/fit.py ``fit_host_floor``,
``calibrate.refit --host-floor``) and how a training step prices such a fit
(simcluster/compute/measured.py): closed-form checks."""

from __future__ import annotations

import pytest

from calibrate.fit import fit_cost_model, fit_host_floor
from calibrate.refit import main as refit
from calibrate.refit import refit_host_floor
from simcluster.compute.extrapolation import resolved
from simcluster.compute.loader import read_profile_data
from simcluster.compute.measured import Fit, MeasuredProfile
from simcluster.compute.transfer import _scale_fit
from simcluster.workload.families import preset_layers

FEATS = ("const", "flops", "bytes", "bytes_spill")
H = 50e-6  # s: the host's pace of one call
RATE = 1e-14  # s per FLOP of the GPU
ROOF = {"flops": 1e-15, "bytes": 1e-12}  # s per FLOP, s per byte


def _rows(xs):
    return [{"flops": x, "bytes": 0.0, "bytes_spill": 0.0} for x in xs]


def test_floor_and_rate_recovered_from_max_of_host_and_gpu() -> None:
    """Calls timed back to back: max(50 us, 1e-14 s/FLOP x FLOPs). Below 5 GFLOP every
    sample is the host's pace; the GPU's rate comes from the slower ones only."""
    xs = [1e8, 5e8, 1e9, 2e9, 4e9, 8e9, 1.6e10, 3.2e10]
    times = [max(H, RATE * x) for x in xs]
    rec = fit_host_floor(_rows(xs), times, FEATS, edge=True)
    assert rec["host_s"] == pytest.approx(H)
    coef = dict(zip(rec["features"], rec["coef"], strict=True))
    assert coef["flops"] == pytest.approx(RATE, rel=1e-6)
    assert coef["const"] == pytest.approx(0.0, abs=1e-12)
    assert rec["rel_err_max"] == pytest.approx(0.0, abs=1e-9)
    # the plain linear fit cannot: it puts part of the floor into every large call
    plain = fit_cost_model(_rows(xs), times, FEATS)
    assert plain["rel_err_max"] > 0.05


def test_samples_without_a_floor_keep_the_plain_fit() -> None:
    xs = [1e8, 1e9, 1e10, 1e11]
    times = [5e-6 + RATE * x for x in xs]
    rec = fit_host_floor(_rows(xs), times, FEATS, roofline=ROOF)
    assert "host_s" not in rec and "gpu" not in rec
    assert rec["coef"] == fit_cost_model(_rows(xs), times, FEATS)["coef"]


def test_samples_at_the_roofline_above_the_floor_take_it_with_one_parameter() -> None:
    """Calls at the host's pace until the GPU's work at its roofline (1e-15 s/FLOP) is
    longer: one parameter (the floor) over the roofline beats a fitted slope."""
    xs = [1e7, 1e8, 1e9, 1e10, 2e10, 4e10, 8e10, 1.6e11]
    times = [max(H, ROOF["flops"] * x) for x in xs]
    rec = fit_host_floor(_rows(xs), times, FEATS, edge=True, roofline=ROOF)
    assert rec["gpu"] == "roofline"
    assert set(rec["coef"]) == {0.0}
    assert rec["host_s"] == pytest.approx(H)
    assert rec["edge"] == {"flops": 0.0, "bytes": 0.0}
    assert not resolved(rec, ("flops", "flops_wave"))  # so the roofline prices it past 0


def test_a_step_prices_a_floored_fit_at_the_gpu_work_or_the_dispatch_cost() -> None:
    """The floor is the calibration's per-call pace (Python, the timing loop); in a
    training step the host issues a pass at the profile's measured per-op dispatch
    cost, so the pass costs max(dispatch, GPU work)."""
    prof = MeasuredProfile.from_data(read_profile_data("h100-sxm-80gb-measured"))
    fit = Fit(FEATS, (0.0, RATE, 0.0, 0.0), host_s=H)
    assert fit({"const": 1, "flops": 1e9, "bytes": 0, "bytes_spill": 0}) == pytest.approx(1e-5)
    layer = next(L for L in preset_layers("resnet50", 224, 1000) if L.op == "linear")
    prof.compute["fp32"]["linear"]["fwd"] = Fit(FEATS, (0.0, 0.0, 0.0, 0.0), host_s=H)
    assert prof.layer_time(layer, 1, "fp32", "fwd") == pytest.approx(prof.dispatch_s)
    assert 0 < prof.dispatch_s < H


def test_transfer_scales_the_floor_like_the_constant() -> None:
    rec = {"features": list(FEATS), "coef": [0.0, RATE, 0.0, 0.0], "host_s": H}
    out = _scale_fit(rec, {"launch": 2.0, "compute": 3.0, "memory": 1.0})
    assert out["host_s"] == pytest.approx(2 * H)
    assert out["coef"][1] == pytest.approx(3 * RATE)
    cpu = _scale_fit(rec, {"launch": 2.0, "compute": 3.0, "memory": 1.0}, launch_s=5e-6)
    assert "host_s" not in cpu  # a CPU's per-call cost says nothing of a GPU's host


def test_refit_host_floor_keeps_fits_without_a_floor_and_records_itself() -> None:
    data = read_profile_data("h200-measured-2026-11-28")
    out = refit_host_floor(data, "cmd")
    assert out["provenance"]["refit_host_floor"]["command"] == "cmd"
    floored = plain = 0
    for precision, classes in out["device"]["compute"].items():
        for key, passes in classes.items():
            for pass_, fit in passes.items():
                if "host_s" in fit or fit.get("gpu") == "roofline":
                    floored += 1
                else:
                    plain += 1
                    assert fit == data["device"]["compute"][precision][key][pass_]
    assert floored == out["provenance"]["refit_host_floor"]["fits_with_floor"] > 0
    assert plain > 0
    MeasuredProfile.from_data(out)  # loads


def test_bad_host_floor_is_a_one_line_error() -> None:
    from simcluster.errors import ConfigError

    rec = {"features": ["const"], "coef": [0.0], "host_s": -1.0}
    with pytest.raises(ConfigError, match=r"fit\.host_s"):
        Fit.from_json(rec, "t.json", "fit")


def test_host_floor_refit_refuses_a_spec_and_another_mode(tmp_path, capsys) -> None:
    out = str(tmp_path / "r.json")
    assert refit(["h200-measured-2026-11-28", "--host-floor", "--spec", "h200-sxm",
                  "--out", out]) == 2  # fmt: skip
    assert "--spec: --host-floor reads no spec sheet" in capsys.readouterr().err
    assert refit(["h200-measured-2026-11-28", "--host-floor", "--edges", "--out", out]) == 2
    assert "not with" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_a_per_call_gpu_calibration_takes_its_floors_at_once() -> None:
    from calibrate.runner import per_call_floors

    data = read_profile_data("h100-sxm-80gb-measured")
    data["provenance"].pop("refit_host_floor")
    assert per_call_floors(data, "cpu", False) is data
    assert per_call_floors(data, "cuda", True) is data  # host-ahead: the GPU's work already
    out = per_call_floors(data, "cuda", False)
    assert out["provenance"]["refit_host_floor"]["fits_with_floor"] > 0


def test_a_host_ahead_profile_prices_every_pass_at_least_the_dispatch() -> None:
    """Host-ahead samples are the GPU's work alone, for every fit: a step's pass costs
    no less than the host's measured per-op dispatch, in the derived profile too."""
    from simcluster.compute.transfer import _layer_timing

    data = read_profile_data("h100-sxm-80gb-measured")
    layer = next(L for L in preset_layers("resnet50", 224, 1000) if L.op == "linear")
    tiny = Fit(FEATS, (0.0, 1e-18, 0.0, 0.0))  # no floor: a plain fit
    plain = MeasuredProfile.from_data(data)
    plain.compute["fp32"]["linear"]["fwd"] = tiny
    assert plain.layer_time(layer, 1, "fp32", "fwd") < plain.dispatch_s
    data["provenance"]["layer_timing"] = {"mode": "host-ahead"}
    ahead = MeasuredProfile.from_data(data)
    assert ahead.host_ahead
    ahead.compute["fp32"]["linear"]["fwd"] = tiny
    assert ahead.layer_time(layer, 1, "fp32", "fwd") == pytest.approx(ahead.dispatch_s)
    assert _layer_timing(data["provenance"]) == {"layer_timing": "host-ahead"}
    assert _layer_timing({"layer_timing": {"mode": "per-call"}}) == {}
    derived = read_profile_data("v100-sxm2-32gb-derived")
    assert not MeasuredProfile.from_data(derived).host_ahead
    derived["provenance"]["derived_from"]["layer_timing"] = "host-ahead"
    assert MeasuredProfile.from_data(derived).host_ahead


def test_host_floor_refuses_a_cpu_profile(tmp_path, capsys) -> None:
    """On a CPU the passes run one after another on the host: no floor to take."""
    assert refit(["cpu-epyc-1core", "--host-floor", "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "cpu-epyc-1core.json: provenance.device: --host-floor refits a GPU profile" in err
    assert "(got 'cpu')" in err
    assert not (tmp_path / "r.json").exists()

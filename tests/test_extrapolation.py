"""Past a fit's largest sample the roofline prices the work its samples never resolved
(simcluster/compute/extrapolation.py), closed-form checks."""

from __future__ import annotations

import copy

import pytest

from calibrate.fit import fit_cost_model
from simcluster.compute.extrapolation import add_beyond, beyond_of, resolved
from simcluster.compute.loader import read_profile_data
from simcluster.compute.measured import Fit
from simcluster.compute.transfer import _scale_fit
from simcluster.errors import ConfigError

PEAK = 100e12  # FLOP/s
BW = 2e12  # bytes/s
C0 = 50e-6  # s: fixed cost of every sample


def _launch_bound_fit() -> dict:
    """A fit on samples up to X = 1 GFLOP whose time is mostly the constant: the FLOP
    term at the edge, 2e-14 s/FLOP x 1e9 = 20 us, is below c0 = 50 us."""
    xs = [1e8, 2.5e8, 5e8, 1e9]
    rows = [{"flops": x, "bytes": x / 100, "bytes_spill": 0.0} for x in xs]
    times = [C0 + 2e-14 * x for x in xs]
    return fit_cost_model(rows, times, ("const", "flops", "bytes", "bytes_spill"), edge=True)


def test_fit_records_its_sampled_range() -> None:
    rec = _launch_bound_fit()
    assert rec["edge"] == {"flops": 1e9, "bytes": 1e7, "bytes_spill": 0.0}
    assert rec["coef"][0] == pytest.approx(C0, rel=1e-6)
    assert rec["coef"][1] == pytest.approx(2e-14, rel=1e-6)


def test_launch_bound_flops_follow_the_roofline_at_ten_times_the_edge() -> None:
    rec = _launch_bound_fit()
    assert not resolved(rec, ("flops", "flops_wave"))
    rec["beyond"] = beyond_of(rec, "linear", {"flops": 1 / PEAK, "bytes": 1 / BW})
    fit = Fit.from_json(rec, "t.json", "fit")
    x = 1e9  # the edge
    at_edge = fit({"const": 1, "flops": x, "bytes": x / 100, "bytes_spill": 0.0})
    assert at_edge == pytest.approx(C0 + 2e-14 * x, rel=1e-6)
    # 10 X: the fit at the edge + 9 X at the peak (the bytes past their edge, 9e7 B at
    # 2 TB/s = 45 us, are below the FLOPs' 90 us: the larger counts)
    t = fit({"const": 1, "flops": 10 * x, "bytes": 10 * x / 100, "bytes_spill": 0.0})
    assert t == pytest.approx(at_edge + 9 * x / PEAK, rel=1e-6)
    # along the fit's own slope it would have been
    assert C0 + 2e-14 * 10 * x > t
    # bytes past their edge faster than FLOPs: the byte term wins the max
    t_b = fit({"const": 1, "flops": 10 * x, "bytes": 1e9, "bytes_spill": 0.0})
    assert t_b == pytest.approx(at_edge + (1e9 - 1e7) / BW, rel=1e-6)


def test_inside_the_range_the_fit_holds() -> None:
    rec = _launch_bound_fit()
    rec["beyond"] = beyond_of(rec, "linear", {"flops": 1 / PEAK, "bytes": 1 / BW})
    fit = Fit.from_json(rec, "t.json", "fit")
    plain = Fit(tuple(rec["features"]), tuple(rec["coef"]))
    for x in (1e8, 4e8, 1e9):
        v = {"const": 1, "flops": x, "bytes": x / 100, "bytes_spill": 0.0}
        assert fit(v) == plain(v)


def test_a_fit_whose_samples_measured_the_rate_keeps_its_slope() -> None:
    """Samples past the half-performance size: 1e-14 s/FLOP x 1e9 = 10 us > c0 = 5 us."""
    xs = [1e8, 5e8, 1e9]
    rows = [{"flops": x, "bytes": 0.0, "bytes_spill": 0.0} for x in xs]
    rec = fit_cost_model(rows, [5e-6 + 1e-14 * x for x in xs], ("const", "flops"), edge=True)
    assert resolved(rec, ("flops", "flops_wave"))
    assert "flops" not in beyond_of(rec, "conv", {"flops": 1 / PEAK, "bytes": 1 / BW})
    fit = Fit.from_json(rec, "t.json", "fit")
    assert fit({"const": 1, "flops": 1e10}) == pytest.approx(5e-6 + 1e-14 * 1e10, rel=1e-6)


def test_memory_bound_ops_stream_past_the_edge() -> None:
    """A norm fit's FLOPs are elements: all its features stop at the edge and the bytes
    past it cost 1 / bandwidth."""
    rec = {
        "features": ["const", "flops", "bytes", "bytes_spill"],
        "coef": [40e-6, 1e-14, 0.0, 1e-13],
        "edge": {"flops": 1e8, "bytes": 1e8, "bytes_spill": 4e7},
    }
    beyond = beyond_of(rec, "norm", {"bytes": 1 / BW})
    assert beyond == {"bytes": 1 / BW, "bytes_spill": 0.0, "flops": 0.0}
    fit = Fit.from_json({**rec, "beyond": beyond}, "t.json", "fit")
    edge_t = 40e-6 + 1e-14 * 1e8 + 1e-13 * 4e7
    t = fit({"const": 1, "flops": 1e9, "bytes": 1e9, "bytes_spill": 9.4e8})
    assert t == pytest.approx(edge_t + (1e9 - 1e8) / BW, rel=1e-6)


def test_measured_profile_rates_are_its_roofline() -> None:
    data = copy.deepcopy(read_profile_data("h200-measured-2026-11-28"))
    add_beyond(data)
    roof = data["device"]["roofline"]
    lin = data["device"]["compute"]["amp"]["linear"]["bwd_input"]
    assert lin["beyond"]["flops"] == pytest.approx(1 / roof["peak_flops"]["fp16_tensor"], 1e-5)
    # the fused backward: scores recomputed, then dV, dP, dQ, dK: 5 GEMMs to the forward's 2
    att = data["device"]["compute"]["amp"]["attention"]["bwd_input"]
    assert att["beyond"]["flops"] == pytest.approx(2.5 / roof["peak_flops"]["fp16_tensor"], 1e-5)
    assert lin["beyond"]["bytes"] == pytest.approx(1 / roof["memory_bandwidth"], 1e-5)


def test_tf32_attention_runs_past_its_edge_at_the_fp32_rate() -> None:
    """Fused attention ignores the TF32 flags: its tf32 fits extrapolate at the measured
    fp32 GEMM rate, like the fp32 ones, while a tf32 linear layer runs at the TF32 one."""
    data = copy.deepcopy(read_profile_data("h100-sxm-80gb-measured"))
    add_beyond(data)
    peaks = data["device"]["roofline"]["peak_flops"]
    tf32 = data["device"]["compute"]["tf32"]
    for p, gemms in (("fwd", 1.0), ("bwd_input", 2.5)):
        att = tf32["attention"][p]["beyond"]["flops"]
        assert att == pytest.approx(gemms / peaks["fp32"], 1e-5)
        assert att == data["device"]["compute"]["fp32"]["attention"][p]["beyond"]["flops"]
    assert tf32["linear"]["fwd"]["beyond"]["flops"] == pytest.approx(1 / peaks["tf32_tensor"], 1e-5)


def test_transfer_scales_the_roofline_like_a_term_and_keeps_the_edge() -> None:
    rec = _launch_bound_fit()
    rec["beyond"] = beyond_of(rec, "linear", {"flops": 1 / PEAK, "bytes": 1 / BW})
    ratios = {"launch": 1.0, "compute": 4.0, "memory": 2.0}
    out = _scale_fit(rec, ratios)
    assert out["edge"] == rec["edge"]
    assert out["beyond"]["flops"] == pytest.approx(4.0 / PEAK)
    assert out["beyond"]["bytes"] == pytest.approx(2.0 / BW)
    halved = _scale_fit(rec, ratios, 0.5, edge_bytes=0.5)  # fp32 fits become autocast
    assert halved["edge"]["bytes"] == pytest.approx(rec["edge"]["bytes"] / 2)
    assert halved["edge"]["flops"] == rec["edge"]["flops"]


def test_committed_derived_profiles_carry_their_sources_edges() -> None:
    src = read_profile_data("h100-sxm-80gb-measured")["device"]["compute"]
    der = read_profile_data("v100-sxm2-32gb-derived")["device"]["compute"]
    for key in ("linear", "norm", "conv"):
        for p in ("fwd", "bwd_input"):
            assert der["amp"][key][p]["edge"] == src["amp"][key][p]["edge"]
            assert ("beyond" in der["amp"][key][p]) == ("beyond" in src["amp"][key][p])


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"beyond": {"flops": 1e-15}}, "fit.beyond.flops"),
        ({"edge": {"flopz": 1.0}}, "fit.edge.flopz"),
        ({"edge": {"flops": -1.0}}, "fit.edge.flops"),
        ({"edge": {"flops": 1.0}, "beyond": {"flops": "fast"}}, "fit.beyond.flops"),
    ],
)
def test_bad_edges_are_one_line_errors(patch: dict, where: str) -> None:
    rec = {"features": ["const", "flops"], "coef": [1e-5, 1e-15], **patch}
    with pytest.raises(ConfigError, match=where.replace(".", r"\.")):
        Fit.from_json(rec, "t.json", "fit")


def test_calibration_fits_record_their_range_and_roofline() -> None:
    """The calibration's own fitting path (``calibrate.runner.refit`` runs it on a
    profile's samples) writes the edge of every compute fit made on samples, and the
    roofline past it where a kind of work is not resolved."""
    pytest.importorskip("torch")
    from calibrate.runner import refit

    data = refit(copy.deepcopy(read_profile_data("cpu-epyc-1core")))
    fits = [f for c in data["device"]["compute"]["fp32"].values() for f in c.values()]
    made = [f for f in fits if f.get("n")]
    assert made and all(set(f["edge"]) >= {"flops", "bytes"} for f in made)
    assert any("beyond" in f for f in made)
    for f in made:  # each priced group's first feature has a rate (the others 0)
        if "beyond" in f:
            assert max(f["beyond"].values()) > 0

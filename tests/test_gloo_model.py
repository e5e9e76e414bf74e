"""The gloo host model: message counts per algorithm, the fit, CPU-sharing scaling,
and how live validation scores collectives and combines repeated runs."""

from __future__ import annotations

import math

import pytest

from simcluster.network.gloo import GlooModel, cost_terms, fit_alpha_beta, ring_segments
from simcluster.validation.live import LiveReport, PhaseResult, _phase_value, combine, series_key


@pytest.mark.parametrize("p", [2, 3, 4, 8, 16])
def test_cost_terms_closed_form(p):
    n = 1e6
    assert cost_terms("allreduce", p, n) == (2 * (p - 1), 2 * (p - 1) / p * n)
    assert cost_terms("allgather", p, n) == (p - 1, (p - 1) * n)
    r = math.ceil(math.log2(p))
    assert cost_terms("broadcast", p, n) == (r, r * n)
    assert cost_terms("allreduce", 1, n) == (0.0, 0.0)


@pytest.mark.parametrize(
    ("p", "nbytes", "with_data", "messages"),
    [
        (2, 16, 4, 2.0),  # 4 fp32 elements fill the 4 segments of 2 processes
        (4, 16, 4, 3.0),  # half of the 8 segments of 4 processes hold data
        (8, 16, 4, 3.5),  # a quarter of 16 (hsadmm's residuals on 8 processes)
        (8, 32, 8, 7.0),
        (8, 256, 16, 14.0),  # 4 bytes a segment: every one holds data
        (8, 3840, 16, 14.0),  # the uint8 mask: 240 bytes a segment
        (8, 4, 1, 0.875),
    ],
)
def test_allreduce_counts_only_segments_holding_data(p, nbytes, with_data, messages):
    """gloo's ring cuts an allreduce into 2P segments of whole elements and skips the
    empty ones: a buffer of fewer elements than segments sends fewer messages."""
    assert ring_segments(p, nbytes) == (2 * p, with_data)
    assert cost_terms("allreduce", p, nbytes)[0] == pytest.approx(messages)


def test_fit_reads_a_small_allreduce_by_its_messages():
    """A 16-byte allreduce on 8 processes costs a quarter of a 256-byte one per the
    message count: the fit's alpha is the same from either size."""
    alpha, p = 1.2e-3, 8
    pts = [(float(n), alpha * cost_terms("allreduce", p, n)[0]) for n in (16, 256, 4096)]
    assert pts[0][1] == pytest.approx(pts[1][1] / 4)
    f = fit_alpha_beta("allreduce", p, pts + [(float(16 << 20), alpha * 14 + 0.05)])
    assert f["alpha_s"] == pytest.approx(alpha)


def test_cost_terms_unknown_op():
    with pytest.raises(ValueError, match="unknown collective 'alltoall'"):
        cost_terms("alltoall", 4, 1.0)


@pytest.mark.parametrize("op", ["allreduce", "allgather", "broadcast"])
@pytest.mark.parametrize("p", [2, 4, 8])
def test_fit_recovers_alpha_beta(op, p):
    alpha, beta = 150e-6, 0.8e-9
    sizes = [16, 256, 4096, 32768, 262144, 1 << 20, 4 << 20, 16 << 20]
    pts = []
    for n in sizes:
        m, b = cost_terms(op, p, n)
        pts.append((float(n), alpha * m + beta * b))
    f = fit_alpha_beta(op, p, pts)
    # the small sizes carry a little of beta: alpha within 1 %, beta within 1 %
    assert f["alpha_s"] == pytest.approx(alpha, rel=0.01)
    assert f["beta_s_per_byte"] == pytest.approx(beta, rel=0.01)
    assert f["rel_err_max"] < 0.02


def _worlds():
    c = {"alpha_s": 1e-4, "beta_s_per_byte": 1e-9}
    return {
        "2": {"cpu_share_factor": 1.5, "allreduce": c, "allgather": c, "broadcast": c},
        "8": {"cpu_share_factor": 6.0, "allreduce": c, "allgather": c, "broadcast": c},
    }


def test_model_seconds_and_sharing():
    g = GlooModel(_worlds())
    assert g.seconds("allreduce", 2, 1e6) == pytest.approx(2 * 1e-4 + 1e6 * 1e-9)
    assert g.share(2) == 1.5 and g.share(8) == 6.0
    assert g.share(4) == pytest.approx(1.5 + 4.5 * 2 / 6)  # linear between measured counts
    assert g.share(16) == pytest.approx(12.0)  # P / P_max beyond the largest
    # an unmeasured count: the nearest below, scaled by the sharing ratio
    a, b, how = g.constants("allreduce", 4)
    assert a == pytest.approx(1e-4 * g.share(4) / 1.5) and "P=2" in how
    assert g.seconds("allreduce", 1, 1e6) == 0.0


def test_priced_as_names_the_sweep_a_count_is_priced_from():
    g = GlooModel({"4": _worlds()["2"], "8": _worlds()["8"]})
    assert g.priced_as(4) == 4 and g.priced_as(8) == 8  # measured
    assert g.priced_as(6) == 6 and g.priced_as(16) == 16  # scaled to the count
    # below every measured count: the 4-process sweep's constants, unscaled
    assert g.priced_as(2) == 4
    assert g.constants("allreduce", 2)[:2] == g.constants("allreduce", 4)[:2]


def test_model_scaled():
    g = GlooModel(_worlds()).scaled(2.0)
    assert g.seconds("broadcast", 2, 0.0) == pytest.approx(2e-4)
    assert g.share(2) == 1.5  # the factors themselves stay


def test_collective_phase_is_least_over_ranks_summed_over_calls():
    # two ranks, two calls of "allreduce": rank 0 waited 30 ms in the first
    spans = {
        0: [("allreduce", "a", 0.040), ("pack", "p", 0.5), ("allreduce", "b", 0.020)],
        1: [("allreduce", "a", 0.010), ("pack", "p", 0.7), ("allreduce", "b", 0.025)],
    }
    assert _phase_value(spans, "allreduce", True, True) == pytest.approx(0.030)
    assert _phase_value(spans, "pack", False, True) == pytest.approx(0.6)
    # simulated: a call's arrival and cost share one key
    sim = {
        0: [("allreduce", "allreduce#0~arrive", 0.003), ("allreduce", "allreduce#0", 0.010)],
        1: [("allreduce", "allreduce#0~arrive", 0.0), ("allreduce", "allreduce#0", 0.010)],
    }
    assert _phase_value(sim, "allreduce", True, False) == pytest.approx(0.010)


def test_combine_takes_medians_and_keeps_range():
    def rep(m, s):
        cfg = {"world_size": 2, "backend": "gloo", "nodes": 2, "ranks_per_node": 1,
               "model": "resnet18-cifar", "batch": 8, "iterations": 3}  # fmt: skip
        r = LiveReport("f", cfg, "n", "d", {"bandwidth": 1.0, "overhead_s": 0.0})
        r.phases.append(PhaseResult("ddp", "allreduce", m, s, "network"))
        return r

    out = combine([rep(1.0, 1.1), rep(3.0, 0.9), rep(2.0, 1.0)], "series")
    (p,) = out.phases
    assert (p.measured, p.simulated, p.spread) == (2.0, 1.0, (1.0, 3.0))
    assert out.runs == 3 and "median of 3 runs" in out.table()


def test_series_key():
    from pathlib import Path

    assert series_key(Path("x/localhost-8x1-r3.json")) == "localhost-8x1"
    assert series_key(Path("x/localhost-2x1.json")) == "localhost-2x1"


def test_calibrate_gloo_bad_input_exit_2(tmp_path, capsys):
    from simcluster.cli import main

    assert main(["calibrate", "gloo", "--nproc", "1,4", "--out", str(tmp_path / "g.json")]) == 2
    assert "--nproc" in capsys.readouterr().err
    assert main(["calibrate", "gloo", "--out", str(tmp_path / "g.yaml")]) == 2
    assert "ends in .json" in capsys.readouterr().err


def _with_wake_sizes():
    w = _worlds()
    c = dict(w["2"]["allgather"], wake_s=0.5e-3, wake_by_bytes=[[4096, 1e-3], [262144, 3e-3]])
    w["2"] = dict(w["2"], allgather=c)
    return w


def test_wake_by_bytes_interpolates_in_log_bytes():
    g = GlooModel(_with_wake_sizes())
    assert g.wake("allgather", 2, 4096) == pytest.approx(1e-3)
    assert g.wake("allgather", 2, 32768) == pytest.approx(2e-3)  # log2 12 .. 18: midpoint 15
    assert g.wake("allgather", 2, 16) == pytest.approx(1e-3)  # the end values beyond
    assert g.wake("allgather", 2, 1e9) == pytest.approx(3e-3)
    assert g.wake("allgather", 2) == pytest.approx(0.5e-3)  # no size: wake_s
    base = g.seconds("allgather", 2, 32768)
    assert g.seconds("allgather", 2, 32768, skewed=True) == pytest.approx(base + 2e-3)
    assert g.scaled(2.0).wake("allgather", 2, 32768) == pytest.approx(4e-3)


def test_wake_sizes_from_another_model_scale_with_sharing():
    own = GlooModel(_worlds())  # no wake_by_bytes; sharing 1.5 at P=2
    host = GlooModel({**_with_wake_sizes(), "2": {**_with_wake_sizes()["2"],
                                                  "cpu_share_factor": 3.0}})  # fmt: skip
    out = own.with_wake_sizes(host)
    assert out.wake("allgather", 2, 4096) == pytest.approx(1e-3 * 1.5 / 3.0)
    assert out.wake("allreduce", 2, 4096) == 0.0  # the host has none for allreduce
    assert own.with_wake_sizes(GlooModel(_worlds())).wake("allgather", 2, 4096) == 0.0


def test_fit_writes_the_after_compute_cost_per_size():
    from calibrate.gloo import COMPUTED, SKEWED, fit

    aligned = [{"nbytes": n, "mean_s": t, "median_s": t}
               for n, t in ((16, 1e-4), (4096, 1e-4), (32768, 2e-4), (262144, 5e-4),
                            (1 << 20, 1.5e-3))]  # fmt: skip
    world = {
        "world": 2,
        "compute": {"factor": 1.2},
        "ops": {
            "allgather": aligned,
            f"allgather{SKEWED}": [{"nbytes": 4096, "mean_s": 3e-4, "median_s": 3e-4}],
            f"allgather{COMPUTED}": [
                {"nbytes": 4096, "mean_s": 1.1e-3, "median_s": 1e-3},
                {"nbytes": 32768, "mean_s": 2.2e-3, "median_s": 2e-3},
                {"nbytes": 99, "mean_s": 1.0, "median_s": 1.0},  # no aligned call: left out
            ],
        },
    }
    entry = fit([world])["2"]["allgather"]
    assert entry["wake_by_bytes"] == [[4096, pytest.approx(1e-3)], [32768, pytest.approx(2e-3)]]
    assert "wake_s" in entry


def test_fit_takes_beta_at_the_largest_size():
    """On a busy host the per-byte cost grows with the size: the largest swept size,
    not a median over 1-16 MiB, sets beta (the large buckets training moves)."""
    alpha, p = 8e-4, 4
    rate = {1 << 20: 0.6e-9, 4 << 20: 0.8e-9, 16 << 20: 1.5e-9}
    pts = []
    for n in [16, 256, 4096, 1 << 20, 4 << 20, 16 << 20]:
        m, b = cost_terms("allreduce", p, n)
        pts.append((float(n), alpha * m + rate.get(n, 0.0) * b))
    f = fit_alpha_beta("allreduce", p, pts)
    assert f["alpha_s"] == pytest.approx(alpha)
    assert f["beta_s_per_byte"] == pytest.approx(1.5e-9)


def test_live_validation_refits_a_runs_stored_samples():
    """A committed run is scored by the fit as it is now: the constants come from its
    samples, and the ones stored beside them only where there are none."""
    from simcluster.network.gloo import fit_worlds
    from simcluster.validation.live import _fitted

    rows = [{"nbytes": n, "mean_s": 1e-3 + n * 1e-9, "median_s": 1e-3}
            for n in (16, 4096, 1 << 20, 16 << 20)]  # fmt: skip
    sweep = {"world": 2, "compute": {"factor": 1.1}, "ops": {"allreduce": rows}}
    stale = {"2": {"cpu_share_factor": 1.1, "allreduce": {"alpha_s": 9.0, "beta_s_per_byte": 9.0}}}
    assert _fitted({"worlds": stale, "samples": sweep}) == fit_worlds([sweep])
    assert _fitted({"worlds": stale}) is stale

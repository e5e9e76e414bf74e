"""Attention's S x S work at long sequences, closed form: the two batched matmuls'
FLOPs, the fused backward's five GEMMs, and the fp32 math under tf32
(simcluster/compute/precision.py, simcluster/compute/measured.py)."""

from __future__ import annotations

import pytest

from simcluster.compute import load_profile
from simcluster.compute.loader import read_profile_data
from simcluster.compute.measured import PASS_GEMMS
from simcluster.compute.transfer import load_spec
from simcluster.workload import build_model
from simcluster.workload.model import attention

S, D, H = 512, 1024, 16  # BERT-large at 512 tokens


def test_score_and_context_matmuls_are_the_layers_flops() -> None:
    """Q K^T and P V: S*S*d multiply-adds each, 2 FLOPs per multiply-add, per sample."""
    layer = attention("a", H, S, D)
    assert layer.flops == 2 * (2 * S * S * D) == 1_073_741_824
    assert (layer.in_elems, layer.out_elems) == (3 * S * D, S * D)
    bert = build_model("bert_large", S)
    att = [x for x in bert.layers if x.op == "attention"]
    assert len(att) == 24 and all(x.flops == layer.flops for x in att)


def test_fused_backward_runs_five_gemms() -> None:
    assert PASS_GEMMS[("attention", "bwd_input")] == 2.5


@pytest.mark.parametrize("key", ["fp32", "tf32"])
@pytest.mark.parametrize(("pass_", "gemms"), [("fwd", 1.0), ("bwd_input", 2.5)])
def test_attention_past_the_edge_costs_its_flops_at_the_fp32_rate(key, pass_, gemms) -> None:
    """On the measured H100, BERT-large's attention at 512 tokens is ~80x the largest
    attention sample (batch 8: 8.6 GFLOP against 0.2): past the edge each extra FLOP
    costs gemms / fp32 peak under fp32 and tf32 alike, so batch 16 takes 8 x 1.07 GFLOP
    x gemms / 50.18 TFLOP/s more than batch 8 (the bytes past their edge, 67 MB at
    2.98 TB/s, are cheaper than those FLOPs)."""
    prof = load_profile("h100-sxm-80gb-measured")
    peak = read_profile_data("h100-sxm-80gb-measured")["device"]["roofline"]["peak_flops"]
    layer = attention("a", H, S, D)
    fit = prof.compute[key]["attention"][pass_]
    assert 8 * layer.flops > fit.edge["flops"]
    extra = prof.layer_time(layer, 16, key, pass_) - prof.layer_time(layer, 8, key, pass_)
    assert extra == pytest.approx(8 * layer.flops * gemms / peak["fp32"], rel=1e-4)


def test_tf32_attention_is_not_priced_at_the_tf32_tensor_peak() -> None:
    """The fused kernel ignores allow_tf32: a long-sequence tf32 attention pass takes at
    least its FLOPs at the fp32 rate, several times the TF32 tensor-core time."""
    prof = load_profile("h100-sxm-80gb-measured")
    peak = read_profile_data("h100-sxm-80gb-measured")["device"]["roofline"]["peak_flops"]
    layer = attention("a", H, S, D)
    t = prof.layer_time(layer, 16, "tf32", "bwd_input")
    assert t >= 2.5 * 16 * layer.flops / peak["fp32"]
    assert t > 5 * 2.5 * 16 * layer.flops / peak["tf32_tensor"]


def test_transfer_moves_tf32_attention_by_the_fp32_peaks() -> None:
    """A derived profile's tf32 attention past its edge moves from the source's fp32 rate
    to the target's, as its fp32 attention does; a tf32 linear layer moves by the TF32
    tensor-core rates (the two spec sheets' peaks: two different ratios)."""
    src_data = read_profile_data("h100-sxm-80gb-measured")
    src, der = src_data["device"]["compute"], read_profile_data("a100-80gb-sxm-derived")
    der = der["device"]["compute"]
    s_peak = load_spec(src_data["device"]["spec_profile"])[0].peak_flops
    t_peak = load_spec("a100-80gb-sxm")[0].peak_flops

    def ratio(key: str, op: str, p: str) -> float:
        return der[key][op][p]["beyond"]["flops"] / src[key][op][p]["beyond"]["flops"]

    fp32, tf32 = s_peak["fp32"] / t_peak["fp32"], s_peak["tf32_tensor"] / t_peak["tf32_tensor"]
    assert abs(fp32 / tf32 - 1) > 0.05  # the two mechanisms give different numbers
    for p in ("fwd", "bwd_input"):
        assert ratio("fp32", "attention", p) == pytest.approx(fp32, rel=1e-4)
        assert ratio("tf32", "attention", p) == pytest.approx(fp32, rel=1e-4)
    assert ratio("tf32", "linear", "fwd") == pytest.approx(tf32, rel=1e-4)

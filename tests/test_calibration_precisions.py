"""Calibration precisions: TF32 switches, autocast dtypes, half-precision layer inputs,
and the measured H100 profile's four precisions."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from calibrate.layers import (  # noqa: E402
    CALIBRATION_PRECISIONS,
    _as_activation,
    amp_dtype,
    math_mode,
)
from simcluster.cli import main  # noqa: E402
from simcluster.compute import load_profile  # noqa: E402
from simcluster.workload import build_model  # noqa: E402


@pytest.mark.parametrize("precision", CALIBRATION_PRECISIONS)
def test_math_mode_sets_tf32_only_for_tf32_and_restores(precision):
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with math_mode(precision):
        on = precision == "tf32"
        assert torch.backends.cuda.matmul.allow_tf32 is on
        assert torch.backends.cudnn.allow_tf32 is on
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


def test_amp_dtypes():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert amp_dtype(cuda, "amp") is torch.float16
    assert amp_dtype(cpu, "amp") is torch.bfloat16  # no fp16 autocast on a CPU
    assert amp_dtype(cuda, "amp_bf16") is torch.bfloat16
    assert amp_dtype(cuda, "fp32") is None and amp_dtype(cuda, "tf32") is None


def test_layer_inputs_under_amp_are_half_but_indices_stay():
    x = torch.randn(2, 3, requires_grad=True)
    idx = torch.tensor([1, 2])
    h = _as_activation(x, torch.bfloat16)
    assert h.dtype is torch.bfloat16 and h.requires_grad and h.is_leaf
    assert _as_activation(idx, torch.bfloat16) is idx


def test_calibrate_rejects_an_unknown_precision(tmp_path, capsys):
    code = main(
        [
            "calibrate",
            "--device",
            "cpu",
            "--tiny",
            "--precisions",
            "fp32,fp64",
            "--out",
            str(tmp_path / "p.json"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "--precisions" in err and "amp_bf16" in err and "Traceback" not in err
    assert not (tmp_path / "p.json").exists()


def test_measured_h100_profile_orders_its_precisions():
    """The H100 profile (calibrate/profiles/h100-sxm-80gb-measured.json) has all four
    precisions, and a large conv net runs faster on tensor cores than in strict fp32."""
    prof = load_profile("h100-sxm-80gb-measured")
    model = build_model("resnet50")

    def step(precision: str) -> float:
        return sum(
            prof.layer_time(layer, 256, precision, p)
            for layer in model.layers
            for p in ("fwd", "bwd_input", "bwd_weight")
        )

    fp32 = step("fp32")
    for fast in ("tf32", "amp", "amp_bf16"):
        assert step(fast) < 0.6 * fp32, fast

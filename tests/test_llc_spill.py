"""Kernel families spill beyond the last-level cache; layer passes beyond ``cache_bytes``."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from calibrate.refit import main as refit_main  # noqa: E402
from calibrate.refit import refit_kernels_llc  # noqa: E402
from calibrate.runner import llc_size  # noqa: E402
from simcluster.compute import load_profile  # noqa: E402
from simcluster.compute.loader import read_profile_data  # noqa: E402
from simcluster.compute.measured import MeasuredProfile, kernel_features  # noqa: E402
from simcluster.errors import UserError  # noqa: E402


def _sysfs(tmp_path, caches):
    for i, (level, kind, size) in enumerate(caches):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    (tmp_path / "uevent").write_text("")  # a file beside the index folders, as in sysfs
    return str(tmp_path)


def test_llc_is_the_highest_level_data_or_unified_cache(tmp_path):
    base = _sysfs(
        tmp_path, [(1, "Data", "32K"), (1, "Instruction", "32K"), (2, "Unified", "512K"),
                   (3, "Unified", "32768K")],
    )  # fmt: skip
    nbytes, origin = llc_size(torch.device("cpu"), base)
    assert nbytes == 32 * 2**20
    assert "L3 32768K" in origin


def test_llc_without_sysfs_is_unknown(tmp_path):
    nbytes, origin = llc_size(torch.device("cpu"), str(tmp_path / "absent"))
    assert nbytes == 0.0 and origin.startswith("unknown")


def _profile(llc: float | None) -> dict:
    data = read_profile_data("cpu-epyc-1core")
    data = json.loads(json.dumps(data))
    roof = data["device"]["roofline"]
    roof.pop("llc_bytes", None)
    if llc is not None:
        roof["llc_bytes"] = llc
    data["device"]["kernels"]["optimizer"] = {
        "features": ["const", "num_params", "num_params_spill"],
        "coef": [1e-5, 1e-10, 1e-9],
        "n": 3,
    }
    return data


def test_kernels_spill_beyond_llc_bytes_and_layers_beyond_cache_bytes(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(_profile(2e7)))
    prof = load_profile(str(f))
    assert isinstance(prof, MeasuredProfile)
    assert prof.llc_bytes == 2e7 and prof.cache_bytes == 524288.0
    n = 5e6  # 1e6 parameters beyond 2e7 / 20
    assert prof.sgd_time(n) == pytest.approx(1e-5 + 1e-10 * n + 1e-9 * (n - 1e6))
    assert prof.sgd_time(5e5) == pytest.approx(1e-5 + 1e-10 * 5e5)  # inside the cache


def test_a_profile_without_llc_bytes_spills_its_kernels_beyond_cache_bytes(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(_profile(None)))
    prof = load_profile(str(f))
    assert prof.llc_bytes == prof.cache_bytes == 524288.0
    n = 5e6
    spill = n - 524288.0 / 20
    assert prof.sgd_time(n) == pytest.approx(1e-5 + 1e-10 * n + 1e-9 * spill)


def test_a_bad_llc_bytes_names_its_field(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(_profile(-1.0)))
    with pytest.raises(UserError, match="device.roofline.llc_bytes"):
        load_profile(str(f))


def _same_fits(a, b, where="kernels"):
    assert type(a) is type(b), where
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same_fits(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same_fits(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and "rel_err" in where:  # a fit's error on its samples
        assert a == pytest.approx(b, abs=5e-3), where
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=2e-3, abs=1e-12), where
    else:
        assert a == b, where


def test_refit_kernels_llc_refits_from_the_samples_with_the_new_threshold():
    data = read_profile_data("cpu-epyc-1core")
    out = refit_kernels_llc(data, 32 * 2**20, "test", "cmd")
    assert out["device"]["roofline"]["llc_bytes"] == 32 * 2**20
    assert out["device"]["compute"] == data["device"]["compute"]  # layers untouched
    assert out["samples"] == data["samples"]
    # the committed profile's kernel fits are these fits of its own samples (32 MiB: the
    # VM's L3), up to the samples' 4 significant digits
    _same_fits(out["device"]["kernels"], data["device"]["kernels"])
    # the streaming kernels fit their own samples better than with the L2 threshold (the
    # optimizer: element-wise ops and copies are timed on operands from memory since
    # session 14, with no knee at either cache)
    old = refit_kernels_llc(data, data["device"]["roofline"]["cache_bytes"], "test", "cmd")
    for fam in ("optimizer",):
        new_err = out["device"]["kernels"][fam]["rel_err_median"]
        assert new_err < 0.1
        assert old["device"]["kernels"][fam]["rel_err_median"] > 2 * new_err
    feats = kernel_features("elementwise", {"nbytes": 64 * 2**20}, 32 * 2**20)
    assert feats["nbytes_spill"] == 32 * 2**20


def test_refit_kernels_llc_on_another_cpu_model_asks_for_the_size(tmp_path, capsys):
    data = read_profile_data("cpu-xeon-1core")
    data["provenance"]["cpu_model"] = "Some Other CPU 9000"
    src = tmp_path / "src.json"
    src.write_text(json.dumps(data))
    rc = refit_main([str(src), "--kernels-llc", "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "provenance.cpu_model" in err and "--llc-bytes" in err
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("bad", ["0", "-5", "inf", "nan"])
def test_refit_kernels_llc_refuses_a_bad_size(tmp_path, capsys, bad):
    rc = refit_main(
        ["cpu-epyc-1core", "--kernels-llc", "--llc-bytes", bad, "--out", str(tmp_path / "o.json")]
    )
    assert rc == 2
    assert "--llc-bytes" in capsys.readouterr().err

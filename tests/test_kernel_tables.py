"""A measured CPU profile's top-k times interpolated on their grid of densities x sizes,
and its fresh-output cost (simcluster.compute.measured); GPU profiles without them
price as before."""

from __future__ import annotations

import json
import math

import pytest

from simcluster.compute import load_profile
from simcluster.compute.measured import MeasuredProfile, grid_time, sparsify_grid
from simcluster.errors import ConfigError
from simcluster.paths import profiles_dir


def _data(name: str) -> dict:
    return json.loads((profiles_dir() / f"{name}.json").read_text())


def _fit(rec, **x):
    return sum(c * x.get(f, 1.0 if f == "const" else 0.0)
               for f, c in zip(rec["features"], rec["coef"], strict=True))  # fmt: skip


def test_exact_topk_hits_its_samples():
    data = _data("cpu-epyc-1core")
    prof = load_profile("cpu-epyc-1core")
    samples = [s for s in data["samples"]["kernels"]
               if s["family"] == "sparsify" and s["method"] == "exact"]  # fmt: skip
    assert len(samples) >= 9
    for s in samples:
        t = prof.kernel_time("sparsify", numel=s["numel"], density=s["density"], method="exact")
        assert t == pytest.approx(s["estimate_s"], rel=1e-9), (s["numel"], s["density"])


GRID = ((0.001, 0.1), (1000.0, 3000.0), ((1.0, 3.0), (5.0, 11.0)))


def test_grid_is_linear_in_size_and_in_log_density():
    assert grid_time(GRID, 2000.0, 0.001) == pytest.approx(2.0)
    assert grid_time(GRID, 2000.0, 0.1) == pytest.approx(8.0)
    # density 0.01 is halfway between 0.001 and 0.1 in log
    assert grid_time(GRID, 2000.0, 0.01) == pytest.approx(5.0)
    # outside the densities: the nearest row; below the smallest size: its time
    assert grid_time(GRID, 2000.0, 0.5) == pytest.approx(8.0)
    assert grid_time(GRID, 10.0, 1e-5) == pytest.approx(1.0)
    # above the largest size: the last segment's slope carries on
    assert grid_time(GRID, 5000.0, 0.001) == pytest.approx(5.0)


def test_profiles_without_the_new_entries_price_as_their_fits():
    data = _data("h200-measured")
    prof = load_profile("h200-measured")
    exact = data["device"]["kernels"]["sparsify"]["device"]["exact"]
    assert "table" not in exact
    n, d = 1_000_000, 0.01
    want = _fit(exact, numel=n, k=n * d, numel_spill=max(0.0, n - prof.llc_bytes / 4))
    assert prof.kernel_time("sparsify", numel=n, density=d, method="exact") == pytest.approx(want)
    assert prof.fresh_output_time(1e9) == 0.0
    xeon = load_profile("cpu-xeon-1core")  # measured before these entries existed
    assert xeon.fresh_output_time(1e9) == 0.0 and not xeon.sparsify_grid


def _broken(tmp_path, edit) -> str:
    data = _data("cpu-epyc-1core")
    edit(data["device"]["kernels"])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda k: k["sparsify"]["device"]["exact"]["table"].update(seconds=[[1.0]]),
         "device.kernels.sparsify.device.exact.table.seconds"),
        (lambda k: k["sparsify"]["device"]["exact"]["table"].update(numel=[10, 5]),
         "device.kernels.sparsify.device.exact.table.numel"),
        (lambda k: k["fresh_output"].pop("mapped_from_bytes"),
         "device.kernels.fresh_output.mapped_from_bytes"),
        (lambda k: k["fresh_output"].update(features=["const", "numel"]),
         "device.kernels.fresh_output.features"),
        (lambda k: k["channel_mask"].update(features=["const", "kept"]),
         "device.kernels.channel_mask.features"),
        (lambda k: k["index_copy"].update(coef=[1.0]),
         "device.kernels.index_copy.coef"),
    ],
)  # fmt: skip
def test_a_broken_entry_names_its_field(tmp_path, edit, field):
    path = _broken(tmp_path, edit)
    with pytest.raises(ConfigError) as err:
        MeasuredProfile.from_data(json.loads(open(path).read()), path)
    assert field in str(err.value)
    assert "\n" not in str(err.value).strip()


def test_sparsify_grid_checks_its_shape():
    good = {"density": [0.01], "numel": [1, 2], "seconds": [[0.1, 0.2]]}
    assert sparsify_grid(good, "f", "t") == ((0.01,), (1.0, 2.0), ((0.1, 0.2),))
    with pytest.raises(ConfigError, match="one row per density"):
        sparsify_grid({**good, "seconds": []}, "f", "t")
    assert math.isfinite(grid_time(sparsify_grid(good, "f", "t"), 1.5, 0.01))


HEAP_CHECK = """
import resource, torch
from calibrate.allocator import glibc, heap_only
if glibc() is None:
    print("skip")
else:
    x = torch.randn(2_560_000)  # top-k's scratch: 41 MB of (value, index) pairs
    with heap_only() as on:
        assert on
        for _ in range(10):  # the heap grows to hold the blocks
            torch.topk(x.abs(), 2560, sorted=False)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.topk(x.abs(), 2560, sorted=False)
        torch.topk(x.abs(), 2560, sorted=False)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_heap_only_serves_a_large_block_from_the_heap():
    """Inside heap_only a top-k over 2.56 M elements (its 41 MB scratch and 10 MB of
    magnitudes freed and allocated again) touches the same pages once the heap has grown
    (the first calls): (almost) no page faults (glibc hosts; in a fresh process, whose
    heap no other test shaped). Outside, the scratch is mapped anew: 10000 a call."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("torch")
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", HEAP_CHECK], cwd=root, capture_output=True, text=True,
        env={"PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
        timeout=120, check=True,
    ).stdout.strip()  # fmt: skip
    if out == "skip":
        pytest.skip("not a glibc host")
    assert int(out) < 1000  # 2 calls' 51 MB are 25000 pages of 4 KiB


def test_channel_mask_benchmark_keeps_the_largest_input_channels():
    torch = pytest.importorskip("torch")
    from calibrate.kernels import channel_mask_cases, channel_mask_fn

    w = torch.zeros(2, 4, 3, 3)
    w[:, 1] = 3.0  # channel norms^2 per input channel: 0, 162, 18, 72
    w[:, 2] = 1.0
    w[0, 3] = 2.0
    w[1, 3] = 2.0
    assert channel_mask_fn(w, keep=0.5)().tolist() == [0, 1, 0, 1]
    (params, _), *_ = channel_mask_cases([(8, 4, 3, 3)], "cpu")
    assert params == {"numel": 8 * 4 * 9, "groups": 4, "window": 9}


def test_index_copy_benchmark_zeroes_the_weight_and_copies_the_kept_channels():
    pytest.importorskip("torch")
    from calibrate.kernels import index_copy_cases

    (params, build), (quarter, _) = index_copy_cases([(2, 8, 1, 1)], "cpu")
    assert params == {"numel": 16, "kept": 8} and quarter == {"numel": 16, "kept": 4}
    v = build()()
    assert (v != 0).sum(dim=(0, 2, 3)).tolist().count(2) == 4  # 4 of 8 channels filled
    assert int((v.abs().sum(dim=(0, 2, 3)) == 0).sum()) == 4

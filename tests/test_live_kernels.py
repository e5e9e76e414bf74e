"""Live validation's packing, top-k and H-SADMM consensus phases priced from the CPU
profile's kernel families (simcluster.validation.live_kernels): the calls each timed op
makes, and their seconds as closed forms over the profile's fits."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from simcluster.compute import load_profile
from simcluster.compute.measured import MeasuredProfile
from simcluster.paths import profiles_dir
from simcluster.validation.live import _validate_live
from simcluster.validation.live_kernels import kernel_calls, op_seconds, phase_ops
from simcluster.workload import build_model

CFG = {
    "world_size": 4,
    "nodes": 2,
    "bucket_mb": 25.0,
    "first_bucket_mb": 1.0,
    "fusion_mb": 4.0,
    "density": 0.01,
    "small_numel": 102400,
    "keep": 0.5,
}


@pytest.fixture(scope="module")
def cpu():
    return load_profile("cpu-epyc-1core")


@pytest.fixture(scope="module")
def fits():
    data = json.loads((profiles_dir() / "cpu-epyc-1core.json").read_text())
    return data["device"]["kernels"]


def _fit(rec, **x):
    return sum(c * x.get(f, 1.0 if f == "const" else 0.0)
               for f, c in zip(rec["features"], rec["coef"], strict=True))  # fmt: skip


def _tiny(*sizes):
    layers = [SimpleNamespace(param_tensors=(n,), op="linear", shape={}) for n in sizes]
    return SimpleNamespace(layers=layers)


def test_pack_of_n_bytes_costs_the_memcpy_fit_for_n_bytes(cpu, fits):
    ops = kernel_calls("ddp", "pack", "all", _tiny(10, 20), CFG)
    # one bucket (below the 1 MB first bucket): flatten into a fresh buffer, then divide
    # + copy back per tensor (in place: nothing fresh)
    # (a reshape per tensor before the cat; a slice and a view_as per tensor after)
    assert ops == [
        [("dispatch", {"calls": 2}), ("memcpy", {"nbytes": 120.0, "kind": "d2d"}),
         ("fresh", {"nbytes": 120.0})],
        [("elementwise", {"nbytes": 240.0}), ("dispatch", {"calls": 4}),
         ("memcpy", {"nbytes": 80.0, "kind": "d2d"}), ("memcpy", {"nbytes": 40.0, "kind": "d2d"})],
    ]  # fmt: skip
    memcpy, ew = fits["memcpy"]["d2d"], fits["elementwise"]
    call = cpu.dispatch_time()
    assert op_seconds(cpu, ops[0]) == pytest.approx(2 * call + _fit(memcpy, nbytes=120.0))
    assert op_seconds(cpu, ops[1]) == pytest.approx(
        _fit(ew, nbytes=240.0) + 4 * call + _fit(memcpy, nbytes=80.0) + _fit(memcpy, nbytes=40.0)
    )


def test_a_call_that_moves_no_data_costs_the_profiles_one_element_op(cpu):
    """``dispatch`` calls (views, slices) cost the CPU profile's measured
    ``roofline.launch_overhead_s`` each; a profile that did not measure it prices them 0."""
    data = json.loads((profiles_dir() / "cpu-epyc-1core.json").read_text())
    one = data["device"]["roofline"]["launch_overhead_s"]
    assert cpu.dispatch_time() == one > 0
    assert op_seconds(cpu, [("dispatch", {"calls": 6})]) == pytest.approx(6 * one)
    (calls,) = kernel_calls("topk", "decompress", "all", _tiny(64), CFG)
    assert calls[0] == ("dispatch", {"calls": 6})  # _scatter_add's views and slices
    from simcluster.compute.profile import DeviceProfile

    assert DeviceProfile.dispatch_time(cpu) == 0.0


def test_buckets_as_the_live_run_groups_the_gradients():
    model = _tiny(*([300_000] * 5))  # 1.2 MB each: the first (1 MB) bucket holds one
    ops = kernel_calls("ddp", "pack", "all", model, {**CFG, "bucket_mb": 2.0})
    flat = [o[1][1]["nbytes"] for o in ops[::2]]
    assert flat == [1.2e6, 2.4e6, 2.4e6]


def test_topk_sparsify_is_the_exact_fit_per_tensor_last_first(cpu, fits):
    model = _tiny(1000, 250_000)
    ops = kernel_calls("topk", "sparsify", "all", model, CFG)
    assert [o[1][1]["numel"] for o in ops] == [250_000, 1000]
    k = 2500  # round(250_000 x 0.01)
    topk = cpu.kernel_time("sparsify", numel=250_000, density=k / 250_000, method="exact")
    want = topk + _fit(fits["memcpy"]["d2d"], nbytes=8.0 * k)  # abs + scratch: 5 MB, reused
    want += 2 * cpu.dispatch_time()  # reshape(-1), the indices' view(float32)
    assert op_seconds(cpu, ops[0]) == pytest.approx(want)
    assert ("fresh", {"nbytes": 16.0 * 250_000}) in ops[0]  # top-k's (value, index) pairs


def test_topk_decompress_scatter_adds_what_every_rank_sent(cpu, fits):
    ops = kernel_calls("topk", "decompress", "all", _tiny(250_000), CFG)
    (calls,) = ops
    assert ("scatter_add", {"numel": 4 * 2500}) in calls
    assert op_seconds(cpu, calls) > _fit(fits["scatter_add"], numel=4 * 2500)


def test_only_hsadmm_leaders_have_phases_of_their_own():
    model = _tiny(10, 20)
    assert kernel_calls("topk", "sparsify", "leader", model, CFG) == []
    assert kernel_calls("ddp", "allreduce", "all", model, CFG) == []


def test_hsadmm_projection_and_compress_per_pruned_conv(cpu, fits):
    model = build_model("resnet18-cifar", 32, 10)
    ops = phase_ops("hsadmm", model, CFG)
    assert set(ops) == {("dual", "all"), ("dual", "leader"), ("projection", "leader"),
                        ("compress", "leader"), ("decompress", "leader")}  # fmt: skip
    (proj,) = ops[("projection", "leader")]
    assert len(proj) == 19  # convs with more than 3 input channels
    # layer1.0.conv1: 64 x 64 x 3 x 3, one norm per input channel: the live code's ops
    # (channel_mask), or the projection family's channel kind on a profile without them
    assert proj[0] == ("channel_mask", {"numel": 36864, "groups": 64, "window": 9, "otherwise": [
        ("projection", {"numel": 36864, "groups": 64, "kind": "channel"})]})  # fmt: skip
    (comp,) = ops[("compress", "leader")]
    assert comp[:2] == [
        ("compress", {"numel": 64 * 32 * 9}),
        ("fresh", {"nbytes": 4.0 * 64 * 32 * 9}),
    ]
    total = sum(n for layer in model.layers for n in layer.param_tensors)
    kept = sum(c[1]["numel"] for c in comp if c[0] == "compress")
    dense = total - sum(int(c[1]["numel"]) for c in proj)
    assert comp[-2:] == [("memcpy", {"nbytes": 4.0 * (kept + dense), "kind": "d2d"}),
                         ("fresh", {"nbytes": 4.0 * (kept + dense)})]  # fmt: skip
    rec = fits["channel_mask"]
    # a 3 x 3 window: its elements count in numel_window too
    want = _fit(rec, numel=36864, numel_window=36864, groups=64)
    assert op_seconds(cpu, [proj[0]]) == pytest.approx(want)
    shortcut = next(c for c in proj if c[1]["window"] == 1)  # layer2.0's 1 x 1 shortcut
    n, g = shortcut[1]["numel"], shortcut[1]["groups"]
    assert op_seconds(cpu, [shortcut]) == pytest.approx(_fit(rec, numel=n, groups=g))


def _without(*families: str):
    data = json.loads((profiles_dir() / "cpu-epyc-1core.json").read_text())
    for family in families:
        data["device"]["kernels"].pop(family)
    return MeasuredProfile.from_data(data, "cpu-epyc-1core-without")


def test_profiles_without_the_live_codes_families_price_by_the_others(fits):
    model = build_model("resnet18-cifar", 32, 10)
    old = _without("channel_mask", "index_copy")
    assert old.optional_kernel_time("channel_mask", numel=1.0, groups=1.0) is None
    (proj,) = kernel_calls("hsadmm", "projection", "leader", model, CFG)
    rec = fits["projection"]["channel"]
    assert op_seconds(old, [proj[0]]) == pytest.approx(_fit(rec, numel=36864, groups=64))
    (calls,) = kernel_calls("hsadmm", "decompress", "leader", model, CFG)
    first = next(c for c in calls if c[0] == "index_copy")
    n, kept = 36864, 36864 // 2
    want = old.elementwise_time(4.0 * n) + old.kernel_time("compress", numel=kept)
    assert op_seconds(old, [first]) == pytest.approx(want)
    # the Intel profile (measured before them) and GPU profiles lack them too
    assert (
        load_profile("cpu-xeon-1core").optional_kernel_time("index_copy", numel=1, kept=1) is None
    )
    assert load_profile("h200-measured").optional_kernel_time("channel_mask", numel=1) is None


def test_nodebased_packs_intra_buckets_then_the_parameter_average():
    model = _tiny(10, 20)
    ops = kernel_calls("nodebased", "pack", "all", model, CFG)  # 2 ranks per node
    assert len(ops) == 4
    assert ops[2] == [("dispatch", {"calls": 2}), ("memcpy", {"nbytes": 120.0, "kind": "d2d"}),
                      ("fresh", {"nbytes": 120.0})]  # fmt: skip
    one_per_node = kernel_calls("nodebased", "pack", "all", model, {**CFG, "nodes": 4})
    assert one_per_node == ops[2:]


def test_committed_run_scores_the_new_phases_from_the_profile(tmp_path):
    report = _validate_live("scenarios/references/live/epyc-c-2x1-r1.json", tmp_path, None)
    src = {(p.pattern, p.phase): p.source for p in report.phases}
    for key in [("ddp", "pack"), ("topk", "sparsify"), ("topk", "decompress"),
                ("hsadmm", "dual"), ("hsadmm", "projection"), ("hsadmm", "compress"),
                ("fusion", "decompress")]:  # fmt: skip
        assert src[key] == "profile", key
    assert "replayed" not in src.values()


def test_sizes_match_the_live_runs_tensors_and_buckets():
    torch = pytest.importorskip("torch")
    from calibrate.live.model import resnet18_cifar
    from calibrate.live.run import _buckets, _pruned

    torch.manual_seed(0)
    net = resnet18_cifar(10)
    params = list(net.parameters())
    model = build_model("resnet18-cifar", 32, 10)
    ops = kernel_calls("ddp", "pack", "all", model, CFG)
    want = [4.0 * sum(p.numel() for p in b) for b in _buckets(params, 1.0, 25.0)]
    assert [o[1][1]["nbytes"] for o in ops[::2]] == want
    (proj,) = kernel_calls("hsadmm", "projection", "leader", model, CFG)
    assert [c[1]["numel"] for c in proj] == [w.numel() for w in _pruned(net)]
    assert [c[1]["groups"] for c in proj] == [w.shape[1] for w in _pruned(net)]


def test_a_fresh_output_costs_its_first_touch_only_when_mapped_anew(cpu, fits):
    """The flat copy of 12 M parameters (48 MB, above glibc's 32 MiB mmap threshold) pays
    the profile's fresh_output fit on top of the copy; the in-place divide and copy back
    pay none, and a fresh buffer below the threshold costs nothing extra."""
    fresh = fits["fresh_output"]
    assert fresh["mapped_from_bytes"] == 32 << 20
    n = 12_000_000
    flat, unflat = kernel_calls("nodebased", "pack", "all", _tiny(n), {**CFG, "nodes": 4})
    nbytes = 4.0 * n

    def copy(nb):  # the memcpy and element-wise fits spill beyond the last-level cache
        return _fit(fits["memcpy"]["d2d"], nbytes=nb, nbytes_spill=max(0.0, nb - cpu.llc_bytes))

    def ew(nb):
        return _fit(fits["elementwise"], nbytes=nb, nbytes_spill=max(0.0, nb - cpu.llc_bytes))

    call = cpu.dispatch_time()  # one reshape before the cat; a slice + view_as after
    assert op_seconds(cpu, flat) == pytest.approx(call + copy(nbytes) + _fit(fresh, nbytes=nbytes))
    assert _fit(fresh, nbytes=nbytes) > 0.5 * copy(nbytes)
    assert all(family != "fresh" for family, _ in unflat)
    assert op_seconds(cpu, unflat) == pytest.approx(ew(2 * nbytes) + 2 * call + copy(nbytes))
    small = 4.0 * 1_000_000
    assert cpu.fresh_output_time(small) == 0.0
    assert cpu.fresh_output_time(nbytes) == pytest.approx(_fit(fresh, nbytes=nbytes))


def test_hsadmm_dual_sums_are_fresh_and_the_update_in_place():
    model = _tiny(12_000_000)
    theta, update = kernel_calls("hsadmm", "dual", "all", model, CFG)
    assert [f for f, _ in theta] == ["memcpy", "fresh", "elementwise", "fresh"]
    # cat (fresh), th - z (fresh), u += (in place), then a copy back per tensor
    assert [f for f, _ in update] == ["memcpy", "fresh", "elementwise", "fresh", "elementwise",
                                      "memcpy"]  # fmt: skip


def test_hsadmm_decompress_zeroes_in_place_and_copies_the_kept_channels_back():
    model = build_model("resnet18-cifar", 32, 10)
    (calls,) = kernel_calls("hsadmm", "decompress", "leader", model, CFG)
    (proj,) = kernel_calls("hsadmm", "projection", "leader", model, CFG)
    first = proj[0][1]["numel"]  # layer1.0.conv1, 64 x 64 x 3 x 3, half the channels kept
    own = [c for c in calls if c[0] == "index_copy"]
    assert len(own) == len(proj)  # one zero_ + index_copy_ per pruned conv
    otherwise = [("elementwise", {"nbytes": 4.0 * first}), ("compress", {"numel": first // 2})]
    assert own[0] == ("index_copy", {"numel": first, "kept": first // 2, "otherwise": otherwise})
    assert all(family not in ("decompress", "fresh") for family, _ in calls)


def test_hsadmm_decompress_costs_the_index_copy_fit(cpu, fits):
    model = build_model("resnet18-cifar", 32, 10)
    (calls,) = kernel_calls("hsadmm", "decompress", "leader", model, CFG)
    first = next(c for c in calls if c[0] == "index_copy")
    n, kept = first[1]["numel"], first[1]["kept"]
    assert op_seconds(cpu, [first]) == pytest.approx(_fit(fits["index_copy"], numel=n, kept=kept))

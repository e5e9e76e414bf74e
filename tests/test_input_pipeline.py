"""The input pipeline's CPU cost per step (workload.input_pipeline) and its microbenchmark."""

from __future__ import annotations

import json

import pytest
import yaml

from simcluster.cli import main
from simcluster.collectives import CommContext
from simcluster.compute.input_pipeline import InputLoad, clock_transfer, load_input_profile
from simcluster.engine import Engine
from simcluster.scenario import parse_scenario, resolved_input_load
from simcluster.schedules import BuildContext, get_schedule
from simcluster.workload import build_model

BATCH = 32


@pytest.fixture(scope="module")
def small():
    return build_model("resnet18-cifar", 32, 10)


def _step(cluster, model, profile, name, load, accumulation=1, **options):
    cls = get_schedule(name)
    ctx = BuildContext(cluster, 4, model, profile, BATCH, "fp32", accumulation, 0,
                       input_load=load)  # fmt: skip
    it = cls(cls.Options(**options)).build(ctx)
    return Engine(CommContext(cluster)).run(it.classes).end_time


@pytest.mark.parametrize(
    ("name", "options"),
    [("ddp", {}), ("ddp", {"implementation": "colossalai"}), ("nodebased", {}), ("topk", {})],
)
@pytest.mark.parametrize("accumulation", [1, 3])
def test_workers_0_add_batch_times_per_sample_to_every_step(
    star_cluster, small, profile, name, options, accumulation
):
    cluster = star_cluster(4, 10e9, 1e-6)
    base = _step(cluster, small, profile, name, None, accumulation, **options)
    c = 2.5e-4
    loaded = _step(cluster, small, profile, name, InputLoad(c, 0), accumulation, **options)
    assert loaded - base == pytest.approx(accumulation * BATCH * c, rel=1e-9)


def test_enough_workers_add_nothing_and_too_few_bound_the_step(star_cluster, small, profile):
    cluster = star_cluster(4, 10e9, 1e-6)
    base = _step(cluster, small, profile, "ddp", None)
    c = 1e-4
    # 4 workers make 32 samples in 0.8 ms, far inside the step: no wait
    fast = _step(cluster, small, profile, "ddp", InputLoad(c, 4))
    assert fast == pytest.approx(base, rel=1e-12)
    # per-sample cost so high that one worker is slower than the step: the step is theirs
    slow_c = 2 * base / BATCH
    slow = _step(cluster, small, profile, "ddp", InputLoad(slow_c, 1))
    assert slow == pytest.approx(BATCH * slow_c, rel=1e-12)
    two = _step(cluster, small, profile, "ddp", InputLoad(slow_c, 2))
    assert two == pytest.approx(max(base, BATCH * slow_c / 2), rel=1e-12)


def test_clock_transfer_is_the_ratio_of_clocks():
    assert clock_transfer(1e-3, 2.0, 2.5) == pytest.approx(0.8e-3)


def test_shipped_profile_transfers_by_the_stated_clocks(tiny_scenario):
    prof = load_input_profile("cifar10-autoaugment")
    assert prof.per_sample_s > 0 and prof.clock_ghz
    sc = dict(tiny_scenario)
    sc["workload"] = {
        **sc["workload"],
        "input_pipeline": {"profile": "cifar10-autoaugment", "host_clock_ghz": 2 * prof.clock_ghz},
    }
    load = resolved_input_load(parse_scenario(sc, "t.yaml").workload)
    assert load == InputLoad(prof.per_sample_s / 2, 0)


def test_default_is_no_input_cost(tiny_scenario):
    assert resolved_input_load(parse_scenario(tiny_scenario, "t.yaml").workload) is None


@pytest.mark.parametrize(
    ("pipeline", "field", "words"),
    [
        ({"per_sample_s": -1e-3}, "workload.input_pipeline.per_sample_s", "allowed: a value > 0"),
        (
            {"per_sample_s": 1e-3, "workers": -1},
            "workload.input_pipeline.workers",
            "allowed: a value >= 0",
        ),
        ({"per_sample_s": 1e-3, "workers": 1.5}, "workload.input_pipeline.workers", "integer"),
        ({}, "workload.input_pipeline", "exactly one of profile and per_sample_s"),
        (
            {"profile": "cifar10-autoaugment", "per_sample_s": 1e-3},
            "workload.input_pipeline",
            "exactly one",
        ),
        ({"per_sample_s": 1e-3, "host_clock_ghz": 2.5}, "workload.input_pipeline", "transfers"),
        (
            {"profile": "cifar10-autoaugmnet"},
            "workload.input_pipeline.profile",
            "cifar10-autoaugment",
        ),
        ({"per_sample_s": 1e-3, "worker": 2}, "workload.input_pipeline.worker", "workers"),
    ],
)
def test_bad_input_pipeline_exits_2_naming_the_field(
    tmp_path, capsys, tiny_scenario, pipeline, field, words
):
    sc = dict(tiny_scenario)
    sc["workload"] = {**sc["workload"], "input_pipeline": pipeline}
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(sc))
    assert main(["run", str(p), "--no-plots", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("simcluster: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(p) in lines[0] and field in lines[0] and words in lines[0], lines[0]


def test_input_profile_of_another_kind_is_refused(tmp_path, capsys, tiny_scenario):
    bad = tmp_path / "prof.json"
    bad.write_text(json.dumps({"schema_version": 1, "kind": "measured", "provenance": {}}))
    sc = dict(tiny_scenario)
    sc["workload"] = {**sc["workload"], "input_pipeline": {"profile": str(bad)}}
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(sc))
    assert main(["run", str(p), "--no-plots", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "not an input profile" in err and str(bad) in err


def test_microbenchmark_pipeline_makes_normalized_float_images():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    pytest.importorskip("PIL")
    from calibrate import input_pipeline as ip

    torch.manual_seed(0)
    rows = np.random.default_rng(0).integers(0, 256, size=(64, 32, 32, 3), dtype=np.uint8)
    outs = [ip.transform(r, torch, np) for r in rows]  # 64 draws: most sub-policies run
    for out in outs:
        ip.check_output(out)
    batch, labels = ip._collate(torch, outs, list(range(64)))
    assert tuple(batch.shape) == (64, 3, 32, 32) and batch.dtype == torch.float32
    assert labels.dtype == torch.int64
    # every op of the CIFAR-10 policy runs on a PIL image and keeps it 32x32 RGB
    from PIL import Image

    img = Image.fromarray(rows[0])
    names = {name for sub in ip.CIFAR10_POLICY for name, _, _ in sub}
    assert len(ip.CIFAR10_POLICY) == 25 and len(names) == 13  # every op but ShearX
    table = ip._magnitudes(torch, 32, 32)
    for name in sorted(names | {"ShearX"}):
        mags = table[name][0]
        out = ip._apply_op(img, name, float(mags[9]) if mags.ndim else 0.0)  # the largest bin
        assert out.size == (32, 32) and out.mode == "RGB", name


def test_microbenchmark_writes_a_profile_the_simulator_reads(tmp_path):
    pytest.importorskip("torch")
    from calibrate import input_pipeline as ip

    out = tmp_path / "p.json"
    assert ip.main(["--out", str(out), "--samples", "8", "--repeats", "1"]) == 0
    prof = load_input_profile(str(out))
    assert prof.per_sample_s > 0 and prof.provenance["threads"] == 1
    assert "median of 1" in prof.provenance["statistic"]


def test_a_wait_for_loader_workers_is_not_exposed_communication(tiny_scenario):
    from simcluster.study import run_scenario

    sc = dict(tiny_scenario, schedules=[{"name": "ddp"}])
    free = run_scenario(parse_scenario(sc, "t.yaml")).records
    slow = dict(
        sc, workload={**sc["workload"], "input_pipeline": {"per_sample_s": 0.01, "workers": 1}}
    )
    held = run_scenario(parse_scenario(slow, "t.yaml")).records
    for a, b in zip(free, held, strict=True):
        assert b["step_time_s"] == pytest.approx(128 * 0.01)  # the worker's batch time
        assert b["step_compute_s"] == pytest.approx(a["step_compute_s"])
        assert b["step_exposed_comm_s"] == pytest.approx(a["step_exposed_comm_s"])
        assert b["exposed_comm_s"] == pytest.approx(a["exposed_comm_s"])
        assert any(s.get("input_wait_s", 0) > 1.0 for s in b["segments"])


# --- the ImageNet pipeline (calibrate.input_imagenet) --------------------------------


def test_imagenet_pipeline_makes_normalized_224_float_images():
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    pytest.importorskip("PIL")
    from calibrate import input_imagenet as ini
    from calibrate import input_pipeline as ip

    torch.manual_seed(0)
    img = ini.load(ini.sample_image_path())
    assert img.mode == "RGB" and img.size == (512, 600)
    outs = [ini.transform(img, torch, np) for _ in range(4)]
    for out in outs:
        ini.check_output(out)
    batch, labels = ip._collate(torch, outs, [0, 1, 2, 3])
    assert tuple(batch.shape) == (4, 3, 224, 224) and batch.dtype == torch.float32
    assert labels.dtype == torch.int64
    with pytest.raises(ValueError, match="224"):
        ini.check_output(outs[0][:, :100])


def test_random_resized_crop_draws_within_torchvision_bounds():
    torch = pytest.importorskip("torch")
    from calibrate import input_imagenet as ini

    torch.manual_seed(0)
    lo_r, hi_r = ini.RATIO
    for width, height in [(482, 415), (512, 600), (300, 200)]:
        for _ in range(300):
            i, j, h, w = ini.rrc_params(torch, width, height)
            assert 0 < h <= height and 0 < w <= width
            assert 0 <= i <= height - h and 0 <= j <= width - w
            # rounding each side moves area and aspect by at most ~1 px per side
            area = h * w / (width * height)
            assert ini.SCALE[0] * 0.95 <= area <= 1.0
            assert lo_r * (1 - 2 / min(h, w)) <= w / h <= hi_r * (1 + 2 / min(h, w))
    # a 1000 x 10 strip fits no draw (h >= 24 px): torchvision's centre fallback
    assert ini.rrc_params(torch, 1000, 10) == (0, (1000 - 13) // 2, 10, 13)
    assert ini.rrc_params(torch, 10, 1000) == ((1000 - 13) // 2, 0, 13, 10)


def test_imagenet_benchmark_jpeg_is_the_stated_size_and_encoding():
    pytest.importorskip("PIL")
    import io

    from PIL import Image, JpegImagePlugin

    from calibrate import input_imagenet as ini

    src = ini.sample_image_path()
    assert ini.benchmark_jpeg(src, None, None) == src.read_bytes()
    data = ini.benchmark_jpeg(src, ini.MEAN_SIZE, ini.QUALITY)
    img = Image.open(io.BytesIO(data))
    assert img.size == ini.MEAN_SIZE and img.format == "JPEG"
    assert JpegImagePlugin.get_sampling(img) == 0  # 4:4:4
    with pytest.raises(ValueError, match="smaller than"):
        ini.benchmark_jpeg(src, (600, 600), 96)


def test_imagenet_microbenchmark_writes_a_profile_the_simulator_reads(tmp_path):
    pytest.importorskip("torch")
    from calibrate import input_pipeline as ip

    out = tmp_path / "im.json"
    assert ip.main(["--pipeline", "imagenet", "--out", str(out), "--samples", "2",
                    "--repeats", "1"]) == 0  # fmt: skip
    prof = load_input_profile(str(out))
    data = json.loads(out.read_text())
    assert prof.per_sample_s == pytest.approx(sum(data["parts_s"].values()))
    assert prof.pipeline.startswith("imagenet") and prof.provenance["threads"] == 1
    assert "482x415" in prof.provenance["images"]
    assert data["check"]["source_decode_scaled_by_pixels_s"] == pytest.approx(
        data["check"]["source_decode_s"] * 482 * 415 / (512 * 600)
    )


@pytest.mark.parametrize("text", ["482", "482x", "x415", "0x415", "axb"])
def test_imagenet_size_argument_is_checked(text):
    import argparse

    from calibrate import input_pipeline as ip

    with pytest.raises(argparse.ArgumentTypeError, match="WIDTHxHEIGHT"):
        ip._size(text)
    assert ip._size("asis") is None and ip._size("469x387") == (469, 387)


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["--quality", "101"], "--quality: out of range (got 101); allowed: an integer 0..100"),
        (["--image", "{tmp}/none.jpg"], "--image: no such file (got {tmp}/none.jpg)"),
        (["--size", "48x"], "--size: '48x': give WIDTHxHEIGHT"),
    ],
)
def test_imagenet_flags_are_checked_before_timing(tmp_path, capsys, monkeypatch, args, shown):
    from calibrate import input_imagenet, input_pipeline

    def never(*a, **k):
        raise AssertionError("timed before checking the flags")

    monkeypatch.setattr(input_imagenet, "measure", never)
    fill = {"tmp": str(tmp_path)}
    argv = ["--pipeline", "imagenet", "--out", str(tmp_path / "x.json")]
    assert input_pipeline.main(argv + [a.format(**fill) for a in args]) == 2
    err = capsys.readouterr().err
    assert shown.format(**fill) in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "x.json").exists()


def test_shipped_imagenet_profile_loads_with_its_provenance():
    prof = load_input_profile("imagenet-train")
    assert prof.pipeline.startswith("imagenet") and prof.clock_ghz
    assert prof.provenance["threads"] == 1 and "thread_time" in prof.provenance["clock"]
    assert prof.provenance["load_average_1min"] and "median of" in prof.provenance["statistic"]
    assert prof.per_sample_s > 0


def test_ceta_scenario_moves_the_imagenet_profile_to_its_host_clock():
    from pathlib import Path

    from simcluster.scenario import load_scenario

    sc = load_scenario(Path(__file__).resolve().parents[1] / "scenarios/nodebased-ceta.yaml")
    prof = load_input_profile("imagenet-train")
    load = resolved_input_load(sc.workload)
    assert load == InputLoad(clock_transfer(prof.per_sample_s, prof.clock_ghz, 2.5), 0)


@pytest.mark.parametrize(
    ("pipeline", "line"),
    [
        ({"per_sample_s": 2.5e-4, "workers": 0},
         "input pipeline: 250.0 us/sample from per_sample_s given in the scenario, "
         "made by the training process before each step"),
        ({"profile": "cifar10-autoaugment", "workers": 4},
         "from profile cifar10-autoaugment (measured), 4 loader workers beside each step"),
    ],
)  # fmt: skip
def test_run_names_the_input_pipeline_under_the_scenario(
    tmp_path, capsys, tiny_scenario, pipeline, line
):
    """Like the profiles in each table's header: where the step's input cost comes from."""
    sc = dict(tiny_scenario)
    sc["workload"] = {**sc["workload"], "input_pipeline": pipeline}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    assert main(["run", str(p), "--no-plots", "--out", str(tmp_path / "out")]) == 0
    assert line in capsys.readouterr().out


def test_run_without_an_input_pipeline_prints_no_input_line(tmp_path, capsys, tiny_scenario):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(tiny_scenario))
    assert main(["run", str(p), "--no-plots", "--out", str(tmp_path / "out")]) == 0
    assert "input pipeline" not in capsys.readouterr().out


def _run_with_profile(tmp_path, tiny_scenario, profile: dict, **pipeline):
    prof = tmp_path / "prof.json"
    prof.write_text(json.dumps({"schema_version": 1, "name": "mine", "kind": "input",
                                "pipeline": "x", "provenance": {}, **profile}))  # fmt: skip
    sc = dict(tiny_scenario)
    sc["workload"] = {**sc["workload"], "input_pipeline": {"profile": str(prof), **pipeline}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    return p


@pytest.mark.parametrize(
    ("profile", "pipeline", "shown"),
    [
        # was: inf seconds per step and a TypeError traceback inside SimPy
        ({"per_sample_s": 1e308, "clock_ghz": 2.0}, {},
         "prof.json: per_sample_s: must be a positive number of seconds per sample "
         "(got 1e+308); allowed: a number > 0 and <= 10"),
        ({"per_sample_s": 1e-3, "clock_ghz": -2}, {},
         "clock_ghz: must be a positive number of GHz"),
        ({"per_sample_s": 9.0, "clock_ghz": 5.0}, {"host_clock_ghz": 0.1},
         "workload.input_pipeline.host_clock_ghz: moves 'mine' (9 s at 5 GHz) to 450 s per "
         "sample (got 0.1)"),
        ({"per_sample_s": 1e-3, "clock_ghz": 2.0}, {"host_clock_ghz": 1e-300},
         "workload.input_pipeline.host_clock_ghz: out of range (got 1e-300)"),
    ],
)  # fmt: skip
def test_input_costs_beyond_any_cpu_are_refused(tmp_path, capsys, tiny_scenario, profile,
                                                pipeline, shown):  # fmt: skip
    p = _run_with_profile(tmp_path, tiny_scenario, profile, **pipeline)
    assert main(["run", str(p), "--no-plots", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and shown in err, err

"""``python -m calibrate.ddp_overhead``: DDP's own cost on one device (one-rank group).

The split of DDP's added time into a per-tensor and a per-bucket-call cost is checked in
closed form; bad flags are refused before anything is timed; a tiny CPU run (gloo, one
process) writes every variant with the buckets DDP logged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _rows(plain_s: float, tensors: int, per_tensor: float, per_call: float, buckets) -> list:
    rows = [{"case": "m", "batch": 8, "precision": "amp", "variant": "plain", "ddp": False,
             "tensors": tensors, "step_s": plain_s}]  # fmt: skip
    for b in buckets:
        for views in (False, True):
            rows.append({
                "case": "m", "batch": 8, "precision": "amp", "variant": f"ddp-b{b}",
                "ddp": True, "gradient_as_bucket_view": views, "tensors": tensors,
                "ddp_log": {"num_buckets_reduced": b},
                "step_s": plain_s + tensors * per_tensor + b * per_call + (1.0 if views else 0),
            })  # fmt: skip
    return rows


def test_host_costs_split_the_added_time_in_closed_form():
    pytest.importorskip("torch")
    from calibrate.ddp_overhead import host_costs

    (h,) = host_costs(_rows(0.030, 161, 25e-6, 0.2e-3, (35, 4)))
    assert h["per_tensor_s"] == pytest.approx(25e-6, rel=1e-3)
    assert h["per_call_s"] == pytest.approx(0.2e-3, rel=1e-3)
    assert h["buckets"] == [35, 4] and h["tensors"] == 161
    # views rows are left out: their +1 s would show in both costs otherwise
    (h,) = host_costs(_rows(0.030, 100, 10e-6, 0.0, (10, 2, 1)))
    assert h["per_call_s"] == pytest.approx(0.0, abs=1e-12)
    assert h["per_tensor_s"] == pytest.approx(10e-6, rel=1e-3)


def test_host_costs_clip_a_negative_cost_to_zero():
    pytest.importorskip("torch")
    from calibrate.ddp_overhead import host_costs

    rows = _rows(0.030, 100, 0.0, 0.0, (10, 2))
    rows[1]["step_s"] = 0.030 + 1e-3  # 10 buckets: +1 ms; 2 buckets: +2 ms
    rows[3]["step_s"] = 0.030 + 2e-3
    (h,) = host_costs(rows)
    assert h["per_call_s"] == 0.0 and h["per_tensor_s"] > 0


@pytest.mark.parametrize(
    "args, shown",
    [
        (["--cases", "resnet5"], "--cases: unknown case (got 'resnet5')"),
        (["--precisions", "fp8"], "--precisions: unknown precision (got 'fp8')"),
        (["--bucket-mb", "0"], "--bucket-mb: not a comma list of caps (got '0')"),
        (["--bucket-mb", "1,x"], "--bucket-mb: not a comma list of caps (got '1,x')"),
        (["--reps", "0"], "--reps: out of range (got 0)"),
        (["--batch", "0"], "--batch: out of range (got 0)"),
        (["--deadline-s", "nan"], "--deadline-s: out of range (got nan)"),
        (["--device", "tpu"], "--device: unknown device (got 'tpu')"),
        (["--out", "{mine}"], "--out {mine}: file exists; pass --force to overwrite it"),
        (["--trace-dir", "{mine}"], "--trace-dir {mine}: is a file, not a folder"),
        # a cap DDP cannot turn into an int64 byte count was a traceback inside DDP
        (["--bucket-mb", "nan"], "--bucket-mb: not a comma list of caps (got 'nan')"),
        (["--bucket-mb", "1,inf"], "--bucket-mb: not a comma list of caps (got '1,inf')"),
        (["--bucket-mb", "1e300"], "allowed: MiB > 0 and <= 1048576 (1 TiB)"),
        # nothing to time: an empty list wrote a file with no rows and exit 0
        (["--cases", " , "], "--cases: no case given (got ' , ')"),
        (["--precisions", ""], "--precisions: no precision given (got '')"),
        # the trace folder made where --out goes: an IsADirectoryError after the timing
        (["--trace-dir", "{out}"], "--trace-dir {out}: is the --out file"),
    ],
)
def test_bad_flags_exit_2_before_timing(tmp_path, capsys, args, shown):
    pytest.importorskip("torch")
    from calibrate.ddp_overhead import main

    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "notes"}')
    argv = ["--device", "cpu", "--out", str(tmp_path / "a.json")]
    argv += [a.format(mine=mine, out=tmp_path / "a.json") for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and shown.format(mine=mine, out=tmp_path / "a.json") in err
    assert mine.read_text() == '{"my": "notes"}' and not (tmp_path / "a.json").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_out_folder_that_cannot_be_made_exits_2_before_timing(capsys):
    """The folder of --out is made before the timing (it was made at the first write,
    after the first case: a FileNotFoundError traceback there)."""
    pytest.importorskip("torch")
    from calibrate.ddp_overhead import main

    out = "/proc/simcluster-no-such/a.json"
    assert main(["--device", "cpu", "--cases", "small_cnn", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"--out {out}: cannot" in err and "\n" not in err.strip()


def test_missing_out_and_bad_summary_file_exit_2(tmp_path, capsys):
    pytest.importorskip("torch")
    from calibrate.ddp_overhead import main

    assert main(["--device", "cpu"]) == 2
    assert "--out FILE is required" in capsys.readouterr().err
    bad = tmp_path / "b.json"
    bad.write_text("[1, 2]")
    assert main(["--summarize", str(bad)]) == 2
    assert "not a ddp_overhead file" in capsys.readouterr().err
    for rows in ([{"case": "m"}], [1, 2], [{"case": "m", "batch": 1, "precision": "fp32",
                                           "variant": "plain", "ddp": False}] * 2):  # fmt: skip
        bad.write_text(json.dumps({"rows": rows}))
        code = main(["--summarize", str(bad)])
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert code == 2 and "not a ddp_overhead file" in err or code == 0


def test_committed_h200_measurements_summarize(capsys):
    pytest.importorskip("torch")
    from calibrate.ddp_overhead import main

    files = sorted((ROOT / "calibrate/measurements/h200-2026-11-28").glob("ddp-overhead-*.json"))
    assert len(files) == 3
    assert main(["--summarize", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert out.count("per bucket call") == 8
    assert "resnet50 b64 amp: plain" in out


def test_tiny_cpu_run_writes_every_variant(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "d.json"
    cmd = [sys.executable, "-m", "calibrate.ddp_overhead", "--device", "cpu", "--cases",
           "small_cnn", "--precisions", "fp32", "--batch", "4", "--bucket-mb", "0.01,25",
           "--warmup", "1", "--reps", "2", "--rounds", "1", "--no-group-baseline",
           "--out", str(out)]  # fmt: skip
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    names = [row["variant"] for row in data["rows"]]
    assert names == ["plain-no-group", "plain", "ddp-b0.01", "ddp-b0.01-views", "ddp-b25",
                     "ddp-b25-views"]  # fmt: skip
    assert data["provenance"]["backend"] == "gloo"
    ddp = [row for row in data["rows"] if row["ddp"]]
    assert all(row["step_s"] > 0 and row["tensors"] == 11 for row in ddp)
    # after its rebuild (second step) a 10 KiB cap splits the small CNN's 0.38 MB of
    # gradients; 25 MiB holds them in one
    assert ddp[0]["ddp_log"]["num_buckets_reduced"] > 1
    assert ddp[2]["ddp_log"]["num_buckets_reduced"] == 1


@pytest.mark.parametrize(
    "change, shown",
    [
        # each was "not a ddp_overhead file (TypeError: unhashable type: 'list')" or
        # similar, naming no field; nan, inf and negative times were summarized (exit 0)
        (lambda rs: rs[0].__setitem__("batch", [1]), "rows[0].batch: not a ddp_overhead file"),
        (lambda rs: rs[1].__setitem__("step_s", "fast"), "rows[1].step_s: not a ddp_overhead"),
        (lambda rs: rs[0].__setitem__("step_s", -1.0), "rows[0].step_s: not a ddp_overhead"),
        (lambda rs: rs[1].__setitem__("step_s", float("nan")), "rows[1].step_s: not a finite"),
        (lambda rs: rs[1].pop("gradient_as_bucket_view"), "rows[1].gradient_as_bucket_view"),
        (lambda rs: rs[3]["ddp_log"].__setitem__("num_buckets_reduced", "two"),
         "rows[3].ddp_log.num_buckets_reduced: not a ddp_overhead file: bad value (got 'two')"),
        (lambda rs: rs.__setitem__(2, None), "rows[2]: not a ddp_overhead file: not a row"),
    ],
)  # fmt: skip
def test_a_bad_row_in_a_summarized_file_is_named_by_its_field(tmp_path, capsys, change, shown):
    pytest.importorskip("torch")
    from calibrate.ddp_overhead import main

    rows = _rows(0.030, 161, 25e-6, 0.2e-3, (35, 4))
    change(rows)
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"rows": rows}))  # nan is written as NaN, as json.dump does
    assert main(["--summarize", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{bad}: {shown}" in err and len(err.splitlines()) == 1


def test_bench_ddp_overhead_model_names_a_bad_file_or_profile(tmp_path, capsys):
    """bench/ddp_overhead_model.py reads files through read_rows (a missing file, a bad
    row and an unknown --profile were tracebacks)."""
    pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location("dom", ROOT / "bench/ddp_overhead_model.py")
    dom = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dom)
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({"rows": [{"case": "resnet50", "step_s": "fast"}]}))
    good = ROOT / "calibrate/measurements/h200-2026-11-28/ddp-overhead-run1.json"
    for argv, shown in (
        ([str(tmp_path / "nope.json")], "no such ddp_overhead file"),
        ([str(bad)], f"{bad}: rows[0].batch: not a ddp_overhead file: missing field"),
        (["--profile", "h200-measurd", str(good)], "did you mean 'h200-measured'"),
    ):
        assert dom.main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and shown in err and len(err.splitlines()) == 1

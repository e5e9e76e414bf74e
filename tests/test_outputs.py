"""Results are checked before they are written; folders are checked before simulating."""

from __future__ import annotations

import json
import os

import pytest

import simcluster.study as study
from simcluster.cli import main
from simcluster.errors import ResultError, UserError
from simcluster.report.outdir import RunOutputs, atomic_write, prepare_output_dir
from simcluster.report.sanity import check_records

SCENARIO = """
name: tiny
topology: puhti
profile: v100-sxm2-32gb
workload: {model: resnet18-cifar, dataset: cifar10, batch_per_gpu: 32}
schedules: [{name: ddp}]
study: {gpus: [4]}
"""


@pytest.fixture
def scenario(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(SCENARIO)
    return p


@pytest.mark.parametrize(
    "rec, where",
    [
        ({"schedule": "ddp", "gpus": 4, "iteration_time_s": float("nan")}, "iteration_time_s"),
        ({"schedule": "ddp", "gpus": 4, "compute_s": -1e-3}, "compute_s"),
        ({"schedule": "ddp", "breakdown_s": {"allreduce": float("inf")}}, "breakdown_s.allreduce"),
        ({"schedule": "ddp", "inter_node_bytes": -5}, "inter_node_bytes"),
    ],
)
def test_bad_numbers_are_result_errors(rec, where):
    with pytest.raises(ResultError, match=where) as err:
        check_records([rec])
    assert err.value.exit_code == 3 and "\n" not in str(err.value)


def test_signed_fields_may_be_negative():
    check_records([{"schedule": "x", "error_pct": -12.5, "iteration_time_s": 1.0}])


def test_run_with_a_nan_exits_3_and_writes_nothing(scenario, tmp_path, monkeypatch, capsys):
    real = study.run_scenario

    def broken(sc, progress=None):
        res = real(sc)
        res.records[0]["iteration_time_s"] = float("nan")
        return res

    monkeypatch.setattr(study, "run_scenario", broken)
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--no-plots", "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "iteration_time_s" in err
    assert not (out / "results.json").exists()


def test_run_json_is_strict_and_stale_plots_go(scenario, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out", str(out)]) == 0
    assert (out / "scaling.png").exists()
    capsys.readouterr()
    assert main(["run", str(scenario), "--no-plots", "--json", "--out", str(out)]) == 0
    payload = json.loads(capsys.readouterr().out, parse_constant=lambda c: 1 / 0)
    assert payload["results"]
    assert not (out / "scaling.png").exists() and not (out / "breakdown.png").exists()
    names = sorted(p.name for p in out.iterdir())
    assert names == [".simcluster-outputs", "results.csv", "results.json", "trace.json"]
    row = (out / "results.csv").read_text().splitlines()[1]
    assert "[{" in row or '""' in row or "[]" in row or "{" not in row  # nested cells are JSON
    assert "'" not in row  # no Python reprs


def test_folder_from_before_manifests_is_refused_not_cleaned(scenario, tmp_path, capsys):
    out = tmp_path / "old"
    out.mkdir()
    (out / "scaling.png").write_bytes(b"old")
    (out / "notes.txt").write_text("mine")
    assert main(["run", str(scenario), "--no-plots", "--out", str(out)]) == 2
    assert "scaling.png" in capsys.readouterr().err
    assert (out / "scaling.png").read_bytes() == b"old" and (out / "notes.txt").exists()


def test_user_files_are_never_removed(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / ".simcluster-outputs").write_text('["a.png", "../x", "notes2.txt"]')
    (tmp_path / "a.png").write_text("old")
    outputs = RunOutputs(tmp_path, known=["a.png", "b.json"], planned=["b.json"])
    outputs.check()
    assert outputs.finish() == ["a.png"]
    assert (tmp_path / "notes.txt").exists()


@pytest.mark.parametrize("kind", ["file", "proc", "long"])
def test_bad_output_folders(tmp_path, kind):
    path = {
        "file": tmp_path / "f",
        "proc": "/proc/simcluster-test/x",
        "long": tmp_path / ("a" * 300),
    }[kind]
    if kind == "file":
        path.write_text("x")
    with pytest.raises(UserError):
        prepare_output_dir(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    with pytest.raises(UserError, match="cannot write"):
        prepare_output_dir(ro / "x")


def test_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old")

    def fail(fh):
        fh.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(UserError, match="No space left"):
        atomic_write(target, fail)
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_run_checks_the_folder_before_simulating(scenario, tmp_path, monkeypatch, capsys):
    def never(*a, **k):
        raise AssertionError("simulated before checking --out")

    monkeypatch.setattr(study, "run_scenario", never)
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["run", str(scenario), "--out", str(f)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_progress_in_logs_is_a_line_every_few_seconds():
    import io

    from simcluster.report.progress import ProgressBar

    buf = io.StringIO()  # not a TTY
    bar = ProgressBar(buf, interval_s=0.0)
    bar(1, 3, "a")
    bar(3, 3, "c")
    lines = buf.getvalue().splitlines()
    assert lines == [
        lines[0],
        lines[1],
    ] and lines[0].startswith("simcluster: progress 1/3 after")
    quiet = io.StringIO()
    bar = ProgressBar(quiet, interval_s=3600)
    bar(1, 3, "a")
    bar(3, 3, "c")
    assert quiet.getvalue() == ""  # short work prints nothing


def test_list_json(capsys):
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "resnet18-cifar" in data["models"] and "puhti" in data["topologies"]
    assert "ddp" in data["schedules"] and "nccl-spec" in data["network_profiles"]


def test_every_option_has_help():
    import argparse

    from simcluster.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{name} {act.option_strings or act.dest}"
        for name, parser in sub.choices.items()
        for act in parser._actions
        if not act.help and not isinstance(act, argparse._HelpAction)
    ]
    assert not missing


def test_nan_link_efficiency_cannot_reach_max_min():
    from simcluster.collectives import CommContext
    from simcluster.topology import load_topology

    cluster = load_topology("puhti", num_nodes=2)
    kind = cluster.link_kind[0]
    for eff in (float("nan"), 0.0):
        with pytest.raises(UserError, match="not a positive finite"):
            CommContext(cluster, 0.0, {kind: eff})


@pytest.mark.parametrize(
    "argv, match",
    [
        (["validate", "--references", "/nonexistent/refs"], "no such folder"),
        (["validate", "--live", "/nonexistent/live.json"], "no such live-run file"),
    ],
)
def test_validate_bad_paths_exit_2(argv, match, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path / "v"), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1


def test_validate_live_folder_and_nulls(tmp_path, capsys):
    assert main(["validate", "--live", str(tmp_path), "--out", str(tmp_path / "v")]) == 2
    assert "is a folder" in capsys.readouterr().err
    p = tmp_path / "live.json"
    p.write_text(
        json.dumps(
            {"schema": "simcluster-live/1", "config": None, "calibration": None, "ranks": None}
        )
    )
    assert main(["validate", "--live", str(p), "--out", str(tmp_path / "v"), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert "live.json" in err and err.count("\n") == 1


def test_sweep_folder_holds_one_grid_shape(tmp_path, capsys):
    s = tmp_path / "s.yaml"
    s.write_text(SCENARIO)
    out = tmp_path / "sw"
    assert main(["sweep", str(s), "--set", "seed=1,2", "--out", str(out)]) == 0
    assert (out / "sweep.png").exists()
    argv = ["sweep", str(s), "--set", "seed=1,2", "--set", "workload.batch_per_gpu=16,32"]
    assert main([*argv, "--out", str(out)]) == 0
    assert not (out / "sweep.png").exists()
    assert (out / "heatmap-speedup.png").exists()

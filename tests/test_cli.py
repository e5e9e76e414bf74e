"""The command line: exit codes and messages, outputs on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simcluster.cli import main

ROOT = Path(__file__).resolve().parents[1]
PUHTI = ROOT / "scenarios" / "puhti64.yaml"


def write_scenario(tmp_path: Path, mutate) -> Path:
    d = yaml.safe_load(PUHTI.read_text())
    mutate(d)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d["workload"].__setitem__("batchsize", 3), "workload.batchsize"),
        (lambda d: d["workload"].__setitem__("batch_per_gpu", "many"), "workload.batch_per_gpu"),
        (lambda d: d["workload"].__setitem__("model", "resnet9000"), "workload.model"),
    ],
)
def test_bad_scenarios_exit_2_without_traceback(tmp_path, mutate, field):
    path = write_scenario(tmp_path, mutate)
    proc = subprocess.run(
        [sys.executable, "-m", "simcluster.cli", "run", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # this checkout's code, not whatever `simcluster` is installed:
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert str(path) in proc.stderr and field in proc.stderr
    assert proc.stdout == ""


def test_run_json_and_files(tmp_path, capsys):
    def small(d):
        d["study"]["gpus"] = [4, 8]
        d["workload"].update(model="resnet18-cifar", input_size=32)

    path = write_scenario(tmp_path, small)
    out = tmp_path / "res"
    assert main(["run", str(path), "--json", "--out", str(out)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["scenario"] == "puhti64"
    recs = [r for r in payload["results"] if r["schedule"] == "ddp"]
    assert [r["gpus"] for r in recs] == [4, 8]
    names = {r["schedule"] for r in payload["results"]}
    assert names == {"ddp", "topk", "hsadmm", "hsadmm-flat"}
    for r in recs:
        for key in (
            "schedule",
            "gpus",
            "nodes",
            "iteration_time_s",
            "time_to_train_s",
            "throughput_samples_per_s",
            "speedup",
            "efficiency",
            "breakdown_s",
            "inter_node_bytes",
        ):
            assert key in r
    assert recs[0]["inter_node_bytes"] == 0  # one node
    assert recs[1]["inter_node_bytes"] > 0
    for name in ("results.json", "results.csv", "trace.json", "scaling.png", "breakdown.png"):
        assert (out / name).stat().st_size > 0
    trace = json.loads((out / "trace.json").read_text())
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])


def test_same_seed_same_output(tmp_path, capsys):
    path = write_scenario(tmp_path, lambda d: d["study"].__setitem__("gpus", [8]))
    main(["run", str(path), "--json", "--out", str(tmp_path / "a"), "--no-plots"])
    first = capsys.readouterr().out
    main(["run", str(path), "--json", "--out", str(tmp_path / "b"), "--no-plots"])
    assert capsys.readouterr().out == first
    assert (tmp_path / "a" / "results.csv").read_text() == (
        tmp_path / "b" / "results.csv"
    ).read_text()


def test_list_names_everything(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for word in ("resnet152", "puhti", "v100-sxm2-32gb", "nccl-spec", "ddp"):
        assert word in out


def test_topo_prints_and_draws(tmp_path, capsys):
    png = tmp_path / "p.png"
    assert main(["topo", "puhti", "--nodes", "2", "--png", str(png)]) == 0
    assert "gpu" in capsys.readouterr().out
    assert png.stat().st_size > 0


def test_unknown_topology_file_exit_2(capsys):
    assert main(["topo", "puhtii", "--no-png"]) == 2
    assert "did you mean 'puhti'" in capsys.readouterr().err


def test_bad_flag_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", str(PUHTI), "--network-model", "fast"])
    assert info.value.code == 2


def test_list_into_a_closed_pipe_is_quiet(monkeypatch, capsys):
    """`simcluster list | head -1`: the reader left; exit 141, no error line, no traceback."""
    import os

    r, w = os.pipe()
    os.close(r)  # the reader is gone: every write raises BrokenPipeError
    broken = os.fdopen(w, "w", buffering=1)
    monkeypatch.setattr("sys.stdout", broken)
    code = main(["list"])
    assert code == 141
    assert capsys.readouterr().err == ""

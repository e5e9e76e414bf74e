"""What-if sweeps: field paths, the grid, points.csv, resume after a kill, executors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from simcluster.cli import main
from simcluster.errors import ConfigError, UserError
from simcluster.sweep import build_point, make_grid, materialize, parse_axis, parse_path, run_sweep
from simcluster.sweep.overrides import set_path, split_values
from simcluster.sweep.runner import read_points

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def small(tmp_path: Path, tiny_scenario: dict) -> Path:
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump(tiny_scenario))
    return p


def test_parse_path_and_values():
    assert parse_path("schedules[1].options.keep") == ["schedules", 1, "options", "keep"]
    assert parse_path("topology.node.nics.bandwidth") == ["topology", "node", "nics", "bandwidth"]
    assert split_values("50 Gb/s,100 Gb/s") == ["50 Gb/s", "100 Gb/s"]
    assert split_values("[8, 16],[32, 64]") == ["[8, 16]", "[32, 64]"]
    ax = parse_axis("workload.batch_per_gpu=64,128")
    assert ax.values == (64, 128)
    with pytest.raises(ConfigError, match="PATH=V1"):
        parse_axis("workload.batch_per_gpu")
    with pytest.raises(ConfigError, match="repeated"):
        parse_axis("seed=1,1")


def test_set_path_wraps_scalars_into_lists_and_names_bad_indices():
    d = {"study": {"gpus": [8, 16]}, "schedules": [{"name": "ddp"}]}
    set_path(d, parse_path("study.gpus"), 64)
    assert d["study"]["gpus"] == [64]
    set_path(d, parse_path("schedules[0].options.bucket_cap_mb"), 50)
    assert d["schedules"][0]["options"] == {"bucket_cap_mb": 50}
    with pytest.raises(ConfigError, match=r"schedules\[3\].*index out of range"):
        set_path(d, parse_path("schedules[3].name"), "x")


def test_grid_order_first_axis_slowest():
    g = make_grid([parse_axis("a=1,2"), parse_axis("b=x,y")])
    assert g == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]


def test_topology_field_writes_a_modified_topology(tmp_path, tiny_scenario):
    point = build_point(tiny_scenario, {"topology.fabric.oversubscription": 4}, "tiny.yaml")
    sc = materialize(point, tmp_path)
    assert Path(sc.topology).is_file()
    assert yaml.safe_load(Path(sc.topology).read_text())["fabric"]["oversubscription"] == 4
    bad = build_point(tiny_scenario, {"topology.fabric.oversubscription": 0.5}, "tiny.yaml")
    with pytest.raises(UserError, match="oversubscription"):
        materialize(bad, tmp_path)


def test_sweep_rows_values_and_plots(small, tmp_path):
    axes = [parse_axis("topology.node.nics.bandwidth=25 Gb/s,100 Gb/s")]
    r = run_sweep(small, axes, out=tmp_path / "out")
    assert r.points == 2 and len(r.rows) == 2 * 2 * 2  # points x schedules x sizes
    ddp = {
        row["topology.node.nics.bandwidth"]: row
        for row in r.rows
        if row["schedule"] == "ddp" and row["gpus"] == "8"
    }
    # a slower NIC makes DDP's iteration no faster
    assert float(ddp["25 Gb/s"]["iteration_time_s"]) >= float(ddp["100 Gb/s"]["iteration_time_s"])
    from simcluster.sweep.plots import plot_sweep

    pngs = plot_sweep(r.out, r.rows, [a.path for a in axes], "t")
    assert [p.name for p in pngs] == ["sweep.png"] and pngs[0].stat().st_size > 0


def test_resume_after_interrupt_gives_identical_points_csv(small, tmp_path):
    axes = [
        parse_axis("workload.batch_per_gpu=32,64,128"),
        parse_axis("schedules[1].options.keep=0.3,0.5"),
    ]
    full = run_sweep(small, axes, out=tmp_path / "full")
    reference = (full.out / "points.csv").read_bytes()

    class Stop(Exception):
        pass

    def stop_after_two(done, total, label):
        if done >= 2 and label not in ("starting", "resumed"):
            raise Stop

    with pytest.raises(Stop):
        run_sweep(small, axes, out=tmp_path / "cut", progress=stop_after_two)
    partial = tmp_path / "cut" / "points.csv"
    # a kill in the middle of a write leaves half a line behind
    with partial.open("a") as fh:
        fh.write("64,0.3,ddp,4,1,0.12")
    again = run_sweep(small, axes, out=tmp_path / "cut", resume=True)
    assert again.skipped == 2 and again.ran == 4
    assert partial.read_bytes() == reference
    # same scenario, same seed: a rerun from scratch writes the same bytes too
    assert (
        run_sweep(small, axes, out=tmp_path / "again").out / "points.csv"
    ).read_bytes() == reference


def test_sigkill_then_resume_matches_uninterrupted(small, tmp_path):
    axes = ["--set", "workload.batch_per_gpu=16,32,64,128,256,512"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "simcluster.cli", "sweep", str(small), *axes, "--no-plots"]
    done = tmp_path / "done"
    subprocess.run([*cmd, "--out", str(done)], check=True, capture_output=True, env=env)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [*cmd, "--out", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    csv = killed / "points.csv"
    deadline = time.time() + 60
    while time.time() < deadline:
        if csv.exists() and len(read_points(csv)[1]) >= 4:  # at least one point written
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows_before = len(read_points(csv)[1])
    assert 0 < rows_before < 24, f"kill did not land mid-sweep ({rows_before} of 24 rows)"
    out = subprocess.run(
        [*cmd, "--out", str(killed), "--resume"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    assert "from a previous run" in out.stdout
    assert csv.read_bytes() == (done / "points.csv").read_bytes()


def test_process_pool_and_dask_give_the_same_points(small, tmp_path):
    axes = [parse_axis("workload.batch_per_gpu=64,128")]
    local = run_sweep(small, axes, out=tmp_path / "local")
    pool = run_sweep(small, axes, out=tmp_path / "pool", jobs=2)
    assert (pool.out / "points.csv").read_bytes() == (local.out / "points.csv").read_bytes()
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            via_dask = run_sweep(small, axes, out=tmp_path / "dask", executor="dask", client=client)
    assert (via_dask.out / "points.csv").read_bytes() == (local.out / "points.csv").read_bytes()


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--set", "workload.batch_per_gpu=0"], "workload.batch_per_gpu"),
        (["--set", "workload.batch_per_gpus=8"], "did you mean 'batch_per_gpu'"),
        (["--set", "nonsense"], "PATH=V1"),
        (["--executor", "spark"], "--executor"),
        (["--executor", "dask"], "--scheduler"),
    ],
)
def test_bad_sweep_input_is_one_line_exit_2(small, tmp_path, capsys, args, expected):
    rc = main(["sweep", str(small), "--out", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and expected in err[0], err


def test_swept_gpu_count_gives_speedup_across_points(small, tmp_path):
    """One size per point: speedup and efficiency against the smallest size, per
    schedule and per value of the other axes (not 1.0 on every row)."""
    from simcluster.sweep.runner import cross_point_scaling

    axes = [parse_axis("study.gpus=4,8"), parse_axis("workload.batch_per_gpu=64,128")]
    r = run_sweep(small, axes, out=tmp_path / "g")
    rows = {(x["study.gpus"], x["workload.batch_per_gpu"], x["schedule"]): x for x in r.rows}
    for batch in ("64", "128"):
        for sched in ("ddp", "hsadmm"):
            base, big = rows[("4", batch, sched)], rows[("8", batch, sched)]
            want = float(base["time_to_train_s"]) / float(big["time_to_train_s"])
            assert float(big["speedup"]) == pytest.approx(want) and want > 1.5
            assert float(big["efficiency"]) == pytest.approx(want * 4 / 8)
            assert float(base["speedup"]) == 1.0 and float(base["efficiency"]) == 1.0
    # closed form: a weak study compares throughput
    ax = [parse_axis("study.gpus=2,4")]
    made = [
        {"study.gpus": "2", "schedule": "s", "gpus": "2", "time_to_train_s": "10.0",
         "throughput_samples_per_s": "100.0", "speedup": "", "efficiency": ""},
        {"study.gpus": "4", "schedule": "s", "gpus": "4", "time_to_train_s": "10.0",
         "throughput_samples_per_s": "150.0", "speedup": "", "efficiency": ""},
    ]  # fmt: skip
    keys = {'{"study.gpus": "2"}': "weak", '{"study.gpus": "4"}': "weak"}
    got = cross_point_scaling(made, ax, keys)
    assert [float(x["speedup"]) for x in got] == [1.0, 1.5]
    assert [float(x["efficiency"]) for x in got] == [1.0, 0.75]
    got = cross_point_scaling(made, ax, {})  # strong: same time to train, speedup 1
    assert [float(x["speedup"]) for x in got] == [1.0, 1.0]

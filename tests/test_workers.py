"""Worker processes die with their parent: SIGKILL of `sweep --jobs 2` leaves nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCENARIO = """
name: kill
topology: puhti
profile: v100-sxm2-32gb
workload: {model: resnet50, dataset: imagenet, batch_per_gpu: 32}
schedules: [{name: ddp}]
study: {gpus: [16, 32, 64]}
"""


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parent[int(d.name)] = int(fields[1])
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out.update(kids)
        todo.extend(kids)
    return out


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(p)
    return alive


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigkill_of_sweep_jobs_2_leaves_no_process(tmp_path):
    s = tmp_path / "s.yaml"
    s.write_text(SCENARIO)
    cmd = [sys.executable, "-m", "simcluster.cli", "sweep", str(s), "--jobs", "2",
           "--set", "seed=" + ",".join(str(i) for i in range(40)),
           "--out", str(tmp_path / "o"), "--no-plots"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen |= _children(proc.pid)
            # both workers up and the first rows written: the pool is busy
            csv = tmp_path / "o" / "points.csv"
            if len(seen) >= 2 and csv.exists() and csv.read_text().count("\n") > 1:
                break
            time.sleep(0.2)
        assert len(seen) >= 2, "the sweep never started its workers"
        seen |= _children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 15
        while _alive(seen) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(seen), f"left behind: {sorted(_alive(seen))}"
    finally:
        for p in _alive(seen | _children(proc.pid)):  # only what this test started
            os.kill(p, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


def test_resume_reruns_points_whose_inputs_changed(tmp_path, tiny_scenario):
    import json

    import yaml

    from simcluster.paths import topologies_dir
    from simcluster.sweep.runner import parse_axis, run_sweep

    topo = yaml.safe_load((topologies_dir() / f"{tiny_scenario['topology']}.yaml").read_text())
    tfile = tmp_path / "topo.yaml"
    tfile.write_text(yaml.safe_dump(topo))
    s = tmp_path / "s.yaml"
    sc = {**tiny_scenario, "topology": str(tfile)}
    s.write_text(yaml.safe_dump(sc))
    axes = [parse_axis("seed=1,2")]
    out = tmp_path / "o"
    assert run_sweep(s, axes, out=out).ran == 2
    assert run_sweep(s, axes, out=out, resume=True).ran == 0  # nothing changed
    # the scenario changes: every point runs again
    s.write_text(yaml.safe_dump({**sc, "workload": {**sc["workload"], "epochs": 2}}))
    assert run_sweep(s, axes, out=out, resume=True).ran == 2
    assert run_sweep(s, axes, out=out, resume=True).ran == 0
    # the topology file it names changes (same name): every point runs again
    topo["node"]["nics"] = {**topo["node"].get("nics", {}), "latency": "2 us"}
    tfile.write_text(yaml.safe_dump(topo))
    assert run_sweep(s, axes, out=out, resume=True).ran == 2
    keys = (out / "points.keys").read_text().splitlines()
    assert len(keys) == 2 and all(len(k.rsplit("\t", 1)[1]) == 64 for k in keys)
    assert json.loads(keys[0].rsplit("\t", 1)[0]) == {"seed": "1"}

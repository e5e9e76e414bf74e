"""Per-step results: full-batch steps and the partial last step reported apart."""

from __future__ import annotations

import pytest

from simcluster.collectives import CommContext
from simcluster.engine import Engine
from simcluster.program import CollectiveCall, RankClass, collective, compute
from simcluster.report import scaling_table
from simcluster.scenario import parse_scenario
from simcluster.study import epoch_plan, run_scenario
from simcluster.topology import load_topology


def test_full_steps_and_the_partial_step_apart(tiny_scenario):
    d = {**tiny_scenario, "schedules": [{"name": "ddp"}, {"name": "hsadmm"}]}
    d["workload"] = {**d["workload"], "epochs": 2}
    recs = run_scenario(parse_scenario(d, "tiny.yaml")).records
    ddp = {r["gpus"]: r for r in recs if r["schedule"] == "ddp"}
    for gpus, r in ddp.items():
        steps, last = epoch_plan(50_000, gpus, 128, 1)  # CIFAR-10, batch 128 per GPU
        assert 0 < last < 128  # 4 GPUs: 98 steps, last 84; 8 GPUs: 49 steps, last 106
        seg = {s["label"]: s for s in r["segments"]}
        assert r["full_steps"] == (steps - 1) * 2 and r["partial_steps"] == 2
        assert r["step_samples"] == gpus * 128 and r["partial_samples"] == gpus * last
        assert r["step_time_s"] == pytest.approx(seg["step"]["time_s"], rel=1e-12)
        assert r["partial_step_time_s"] == pytest.approx(seg["last step"]["time_s"], rel=1e-12)
        assert r["step_compute_s"] == pytest.approx(seg["step"]["compute_s"], rel=1e-12)
        # the run mean mixes both: (n_full t_full + n_part t_part) / (n_full + n_part)
        mixed = (r["full_steps"] * r["step_time_s"] + 2 * r["partial_step_time_s"]) / (
            r["full_steps"] + 2
        )
        assert r["iteration_time_s"] == pytest.approx(mixed)
        assert r["partial_step_time_s"] < r["step_time_s"]
        assert r["compute_s"] < r["step_compute_s"]
    # at a fixed per-GPU batch a full step computes the same at 4 and 8 GPUs
    assert ddp[4]["step_compute_s"] == pytest.approx(ddp[8]["step_compute_s"], rel=1e-12)
    # H-SADMM: consensus rounds are neither full nor partial steps
    hs = next(r for r in recs if r["schedule"] == "hsadmm" and r["gpus"] == 8)
    local = next(s for s in hs["segments"] if s["label"] == "local step")
    assert hs["step_time_s"] == pytest.approx(local["time_s"], rel=1e-12)
    assert hs["step_comm_s"] == 0.0
    assert hs["iteration_time_s"] > hs["step_time_s"] * hs["full_steps"] / (
        hs["full_steps"] + hs["partial_steps"]
    )
    table = scaling_table(recs)
    assert "last step" in table.splitlines()[1]
    assert f"({100 * 106 / 128:.0f}%)" in table  # the 8-GPU partial batch: 106 of 128


def test_no_partial_step_when_the_batch_divides_the_shard(tiny_scenario):
    d = {**tiny_scenario, "schedules": [{"name": "ddp"}]}
    d["workload"] = {**d["workload"], "dataset_size": 8 * 128 * 3}
    recs = run_scenario(parse_scenario(d, "tiny.yaml")).records
    r = next(r for r in recs if r["gpus"] == 8)
    assert r["partial_steps"] == 0 and r["partial_step_time_s"] is None
    assert r["step_time_s"] == pytest.approx(r["iteration_time_s"])
    import re

    head, _, row = scaling_table([r]).splitlines()[1:4]
    cells = dict(zip(re.split(r"\s{2,}", head), re.split(r"\s{2,}", row), strict=True))
    assert cells["last step"] == "-"


def test_booked_collective_holds_the_wait_net_does_not():
    # B reaches the broadcast at once, A after 1 s of compute: B books 1 s + T,
    # A books T, and net is T for both (T: the call's own span on the network)
    cluster = load_topology("puhti", num_nodes=1)
    call = CollectiveCall("broadcast", ((0, 1, 2, 3),), 64e6, "auto")
    a = RankClass("a", (0,))
    a.add(compute("work", 1.0, "compute"))
    a.add(collective("bc", call, "broadcast", ("work",)))
    b = RankClass("b", (1, 2, 3))
    b.add(collective("bc", call, "broadcast"))
    trace = Engine(CommContext(cluster)).run([a, b])
    (net,) = [r for r in trace.rows if r[0] == "<network>"]
    T = net[5] - net[4]
    assert 0 < T < 1.0
    assert trace.by_category("a") == pytest.approx({"compute": 1.0, "broadcast": T})
    assert trace.by_category("b")["broadcast"] == pytest.approx(1.0 + T)
    assert trace.by_category("b", net=True)["broadcast"] == pytest.approx(T)
    assert trace.by_category("a", net=True) == trace.by_category("a")

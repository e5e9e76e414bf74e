"""The spmv schedule: programs from a partition, runs on a cluster, scenario and CLI."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from simcluster.collectives import CommContext
from simcluster.compute import load_profile
from simcluster.engine import Engine
from simcluster.errors import ConfigError, UserError
from simcluster.partition import NetworkPartition, comm_plan, input_owners
from simcluster.scenario import load_scenario, parse_scenario
from simcluster.schedules import BuildContext
from simcluster.schedules.spmv import SpMV, SpMVOptions
from simcluster.study import run_scenario
from simcluster.workload.sparse import from_rows

PROFILE = "haswell-e5-2630v3-core"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMCLUSTER_CACHE_DIR", str(tmp_path / "cache"))


def figure3_plan():
    """The paper's Figure 3 network and 2-way partition (see tests/test_partition.py)."""
    w1 = [[0, 1], [0, 1, 2], [0, 2, 3], [2, 3]]
    w2 = [[0, 2], [1, 3], [0, 2, 3], [1, 2]]
    net = from_rows("figure3", [w1, w2])
    pi1, pi2 = np.array([1, 1, 0, 0]), np.array([0, 0, 1, 1])
    x0 = input_owners(net.layers[0], pi1, 2)
    part = NetworkPartition("figure3", 2, "given", 0.01, 0, (x0, pi1, pi2), (0, 0), (0, 0))
    return net, comm_plan(net, part)


def test_figure3_programs(star_cluster):
    net, plan = figure3_plan()
    cluster = star_cluster(2, 4e9, 1e-6)  # two ranks on two hosts: every message crosses
    profile = load_profile(PROFILE)
    ctx = BuildContext(cluster, 2, None, profile, 1, "fp32", 1, 0)
    classes = SpMV(SpMVOptions(word_bytes=4))._programs(ctx, net, plan)
    # both ranks send and receive in every layer: one folded class, durations per rank
    assert [c.ranks for c in classes] == [(0, 1)]
    assert classes[0].factors is not None and classes[0].factors.shape[0] == 2
    ops = {op.id: op for op in classes[0].ops}
    # SpFF layer 1: one word each way; layer 2: two words each way (fp32 entries)
    assert ops["f1.x"].call.groups == ((0, 1), (1, 0)) and ops["f1.x"].call.nbytes == 4
    assert ops["f2.x"].call.groups == ((0, 1), (1, 0)) and ops["f2.x"].call.nbytes == 8
    # SpBP returns the partial sums of layer 2 along the reversed pairs; layer 1 has no
    # SpBP exchange (delta^0 is never used)
    assert ops["b2.x"].call.groups == ((1, 0), (0, 1)) and ops["b2.x"].call.nbytes == 8
    assert "b1.x" not in ops and "b1.spmv" not in ops
    assert ops["f2.rem"].deps == ("f2.x",) and ops["f2.x"].deps == ("f2.pack",)
    assert ops["b1.delta"].deps == ("b2.x",)
    order = [op.id for op in classes[0].ops]
    assert order.index("f1.loc") < order.index("f1.rem") < order.index("f2.pack")
    assert order[-1] == "b1.upd"
    for c in classes:
        c.validate()
    trace = Engine(CommContext(cluster, 2e-6)).run(classes)
    spans = {s.op: s for s in trace.spans if s.rank_class == classes[0].name}
    # the local SpMV runs while the layer's messages are in flight
    assert spans["f1.loc"].start < spans["f1.x"].end <= spans["f1.rem"].start
    assert trace.end_time == pytest.approx(max(s.end for s in trace.spans))


def _classes(gpus: int, partitioner: str = "random", neurons: int = 1024, layers: int = 4):
    from simcluster.simulation import Simulation

    sim = Simulation.for_topology("haswell-ib", gpus, "mpi-spec")
    ctx = sim.build_context(gpus, None, load_profile(PROFILE), 1)
    o = SpMVOptions(neurons=neurons, layers=layers, partitioner=partitioner, cache=False)
    return sim.engine, SpMV(o).build(ctx).classes


@pytest.mark.parametrize("gpus", [5, 48])
def test_folded_programs_run_as_one_class_per_rank(gpus):
    """Ranks with the same program shape share a class with per-rank durations; the
    engine gives the same times as one class per rank (straggler and transient splits
    and jitter included)."""
    from simcluster.program import expand
    from simcluster.scenario import Heterogeneity, Stragglers, Transient
    from simcluster.study import simulate_iteration

    engine, classes = _classes(gpus)
    assert sum(len(c.ranks) for c in classes) == gpus and len(classes) < gpus
    folded = engine.run(classes)
    per_rank = engine.run(expand(classes))
    assert folded.end_time == per_rank.end_time
    lowest = {c.name: f"{c.name}#{min(c.ranks)}" for c in classes}
    for name, single in lowest.items():
        a = [(s.op, s.start, s.end) for s in folded.class_spans(name)]
        b = [(s.op, s.start, s.end) for s in per_rank.class_spans(single)]
        assert a == b
    het = Heterogeneity(stragglers=Stragglers(fraction=0.2, slowdown=1.5), jitter=0.0)
    slow = simulate_iteration(engine, classes, True, het, 3)
    assert slow.end_time == simulate_iteration(engine, classes, False, het, 3).end_time
    assert slow.end_time > folded.end_time
    jit = Heterogeneity(jitter=0.1)
    a = simulate_iteration(engine, classes, True, jit, 3).end_time
    assert a == simulate_iteration(engine, classes, False, jit, 3).end_time
    both = Heterogeneity(
        stragglers=Stragglers(fraction=0.2, slowdown=1.5),
        transient=Transient(fraction=0.3, slowdown=2.0),
    )
    for step in (0, 1):
        a = simulate_iteration(engine, classes, True, both, 3, step).end_time
        assert a == simulate_iteration(engine, classes, False, both, 3, step).end_time
        assert a >= slow.end_time
    mixed = Heterogeneity(transient=Transient(fraction=0.3, slowdown=2.0), jitter=0.1)
    a = simulate_iteration(engine, classes, True, mixed, 3, 2).end_time
    assert a == simulate_iteration(engine, classes, False, mixed, 3, 2).end_time


def _scenario(tmp_path, schedules: list[dict], gpus: list[int], batch: int = 1):
    data = {
        "name": "spmv-test",
        "topology": "haswell-ib",
        "profile": PROFILE,
        "network_profile": "mpi-spec",
        "workload": {"model": "resnet18", "dataset_size": 10, "batch_per_gpu": batch},
        "schedules": schedules,
        "study": {"kind": "strong", "gpus": gpus},
    }
    path = tmp_path / "spmv.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


NET = {"neurons": 256, "layers": 3, "vectors": 10}


def spec(label: str | None = None, **options) -> dict:
    out = {"name": "spmv", "options": {**NET, **options}}
    if label:
        out["label"] = label
    return out


def test_run_hypergraph_vs_random(tmp_path):
    path = _scenario(
        tmp_path, [spec("H", partitioner="kahypar"), spec("R", partitioner="random")], [16, 32]
    )
    res = run_scenario(load_scenario(path))
    by = {(r["schedule"], r["gpus"]): r for r in res.records}
    for (_label, _gpus), r in by.items():
        seg = r["segments"][0]
        assert seg["count"] == 10 and r["time_to_train_s"] == pytest.approx(
            10 * r["iteration_time_s"]
        )
        assert r["throughput_samples_per_s"] == pytest.approx(1 / r["iteration_time_s"])
        assert set(r["breakdown_s"]) == {"comm", "spmv", "update"}
    h, rr = by[("H", 32)]["segments"][0]["extra"], by[("R", 32)]["segments"][0]["extra"]
    assert h["table1"]["volume_per_layer"] < 0.5 * rr["table1"]["volume_per_layer"]
    assert by[("H", 32)]["iteration_time_s"] < by[("R", 32)]["iteration_time_s"]
    assert by[("H", 32)]["inter_node_bytes"] < by[("R", 32)]["inter_node_bytes"]
    assert by[("H", 16)]["inter_node_bytes"] == 0  # one node


def test_minibatch_last_step(tmp_path):
    path = _scenario(tmp_path, [spec(partitioner="random")], [16], batch=4)
    (rec,) = run_scenario(load_scenario(path)).records
    counts = {s["label"]: s["count"] for s in rec["segments"]}
    assert counts == {"step": 2, "last step": 1}  # 10 vectors = 4 + 4 + 2
    assert rec["throughput_samples_per_s"] == pytest.approx(10 / rec["time_to_train_s"])


def test_bad_options_name_the_field(tmp_path):
    path = _scenario(tmp_path, [{"name": "spmv", "options": {"partitioner": "patoh"}}], [16])
    with pytest.raises(ConfigError, match=r"schedules\[0\]\.options\.partitioner"):
        load_scenario(path)
    with pytest.raises(ConfigError, match=r"schedules\[0\]\.options\.neuron"):
        parse_scenario(
            {
                "name": "x",
                "topology": "haswell-ib",
                "profile": PROFILE,
                "workload": {"model": "resnet18", "dataset_size": 1, "batch_per_gpu": 1},
                "schedules": [{"name": "spmv", "options": {"neuron": 1024}}],
                "study": {"gpus": [16]},
            }
        )


def test_radixnet_size_error_is_a_user_error(tmp_path):
    path = _scenario(tmp_path, [spec(neurons=1000, partitioner="random")], [16])
    with pytest.raises(UserError, match="power of 2"):
        run_scenario(load_scenario(path))


def test_graphchallenge_scenario_validates():
    sc = load_scenario("scenarios/hsgd-graphchallenge.yaml")
    opts = [SpMVOptions.model_validate(s.options) for s in sc.schedules]
    assert [(o.neurons, o.partitioner) for o in opts] == [
        (1024, "kahypar"),
        (1024, "random"),
        (4096, "kahypar"),
        (4096, "random"),
    ]
    assert all(o.layers == 120 and o.connections == 32 for o in opts)
    assert sc.study.gpus == [32, 64, 128, 256, 512]


def test_cli_spmv_table(tmp_path, capsys):
    from simcluster.cli import main

    path = _scenario(
        tmp_path, [spec("H", partitioner="kahypar"), spec("R", partitioner="random")], [16, 32]
    )
    assert main(["spmv-table", str(path)]) == 0
    out = capsys.readouterr().out
    assert "radixnet-256x3" in out and "H / R" in out
    assert out.count("\n16 ") == 1 and out.count("\n32 ") == 1

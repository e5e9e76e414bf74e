"""Stragglers and kernel jitter: exact where collapse is kept, seeded where random."""

from __future__ import annotations

import pytest

from simcluster.collectives import CommContext
from simcluster.compute import load_profile
from simcluster.engine import Engine
from simcluster.program import expand, perturb
from simcluster.scenario import Heterogeneity
from simcluster.schedules import BuildContext, get_schedule
from simcluster.study import simulate_iteration
from simcluster.topology import load_topology
from simcluster.workload import build_model


@pytest.fixture(scope="module")
def setup():
    cluster = load_topology("puhti", num_nodes=4)
    model = build_model("resnet18-cifar", 32, 10)
    ctx = BuildContext(cluster, 16, model, load_profile("v100-sxm2-32gb"), 32, "fp32", 1, 0)
    it = get_schedule("ddp")().build(ctx)
    return Engine(CommContext(cluster)), it.classes


def test_stragglers_keep_the_collapse_exact(setup):
    engine, classes = setup
    slow = frozenset({3, 9})
    split = perturb(classes, slow, 2.0)
    assert sorted(c.name for c in split) == ["all", "all~slow"]
    fast = engine.run(split)
    full = engine.run(expand(split))
    assert fast.end_time == pytest.approx(full.end_time, rel=1e-12)


def test_a_straggler_sets_the_pace(setup):
    engine, classes = setup
    base = engine.run(classes)
    slowed = engine.run(perturb(classes, frozenset({5}), 2.0))
    compute = base.busy_time("all", "compute")
    assert slowed.end_time >= 2 * compute * 0.99
    assert slowed.end_time > 1.5 * base.end_time


def test_jitter_is_seeded(setup):
    engine, classes = setup
    h = Heterogeneity(jitter=0.1)
    a = simulate_iteration(engine, classes, True, h, seed=1).end_time
    b = simulate_iteration(engine, classes, True, h, seed=1).end_time
    c = simulate_iteration(engine, classes, True, h, seed=2).end_time
    assert a == b
    assert a != c
    base = engine.run(classes).end_time
    assert abs(a / base - 1) < 0.5


def test_scenario_heterogeneity_fields_are_checked():
    from pathlib import Path

    import yaml

    from simcluster.errors import ConfigError
    from simcluster.scenario import parse_scenario

    root = Path(__file__).resolve().parents[1]
    d = yaml.safe_load((root / "scenarios" / "puhti64.yaml").read_text())
    d["heterogeneity"] = {"stragglers": {"fraction": 1.5, "slowdown": 2}}
    with pytest.raises(ConfigError, match=r"heterogeneity\.stragglers\.fraction: out of range"):
        parse_scenario(d, "h.yaml")
    d["heterogeneity"] = {"jiter": 0.1}
    with pytest.raises(ConfigError, match="did you mean 'jitter'"):
        parse_scenario(d, "h.yaml")

"""Transient slowdowns, network noise and the step-time distribution study:
seeded, exact where folded, and the slowest-of-N closed form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from simcluster.cli import main
from simcluster.collectives import CommContext
from simcluster.compute import load_network_profile, load_profile
from simcluster.engine import Engine
from simcluster.errors import ConfigError
from simcluster.program import perturb
from simcluster.scenario import Heterogeneity, Stragglers, Transient, parse_scenario
from simcluster.schedules import BuildContext, get_schedule
from simcluster.study import (
    noise_levels,
    noisy_capacity,
    run_scenario,
    simulate_iteration,
    transient_ranks,
)
from simcluster.topology import load_topology
from simcluster.workload import build_model

ROOT = Path(__file__).resolve().parents[1]


def _setup(schedule: str = "ddp", nodes: int = 4, profile: str = "nccl-spec"):
    cluster = load_topology("puhti", num_nodes=nodes)
    model = build_model("resnet18-cifar", 32, 10)
    gpus = 4 * nodes
    ctx = BuildContext(cluster, gpus, model, load_profile("v100-sxm2-32gb"), 32, "fp32", 1, 0)
    classes = get_schedule(schedule)().build(ctx).classes
    engine = Engine(CommContext.from_profile(cluster, load_network_profile(profile)))
    return engine, classes


@pytest.fixture(scope="module")
def ddp16():
    return _setup()


def test_draws_are_seeded_and_differ_by_step(ddp16):
    engine, classes = ddp16
    h = Heterogeneity(jitter=0.05, transient=Transient(fraction=0.2, slowdown=2.0),
                      network_noise=0.1)  # fmt: skip
    a = simulate_iteration(engine, classes, True, h, seed=4, step=3).end_time
    b = simulate_iteration(engine, classes, True, h, seed=4, step=3).end_time
    c = simulate_iteration(engine, classes, True, h, seed=4, step=5).end_time
    assert a == b
    assert a != c
    assert transient_ranks(classes, 0.3, 1, 2) == transient_ranks(classes, 0.3, 1, 2)
    cap = engine.ctx.capacity
    np.testing.assert_array_equal(noisy_capacity(cap, 0.1, 1, 2), noisy_capacity(cap, 0.1, 1, 2))
    assert not np.array_equal(noisy_capacity(cap, 0.1, 1, 2), noisy_capacity(cap, 0.1, 1, 3))


@pytest.mark.parametrize("cv", [0.01, 0.1, 0.5, 1.0])
def test_noise_levels_have_mean_one_and_the_cv(cv):
    x, p = noise_levels(cv)
    assert p.sum() == pytest.approx(1.0, rel=1e-12)
    assert p @ x == pytest.approx(1.0, rel=1e-12)
    assert np.sqrt(p @ (x - 1) ** 2) == pytest.approx(cv, rel=1e-9)
    assert (x > 0).all()
    # the draws follow the levels' law
    f = noisy_capacity(np.ones(200_000), cv, 0, 0)
    assert f.mean() == pytest.approx(1.0, abs=4 * cv / np.sqrt(200_000))
    assert f.std() == pytest.approx(cv, rel=0.02)
    assert np.unique(f).size <= x.size


def test_transient_draws_follow_the_slowest_of_n_law(ddp16):
    """A class of N ranks is hit in a step with probability 1 - (1 - q)^N."""
    _, classes = ddp16
    n = sum(len(c.ranks) for c in classes)
    q = 1 - 0.5 ** (1 / n)  # a step is hit half the time
    hits = [bool(transient_ranks(classes, q, 0, k)) for k in range(2000)]
    assert np.mean(hits) == pytest.approx(0.5, abs=4 * 0.5 / np.sqrt(2000))
    # and each rank on its own about q of the steps
    per_rank = np.zeros(n)
    for k in range(2000):
        for r in transient_ranks(classes, q, 0, k):
            per_rank[r] += 1
    assert per_rank.sum() / (2000 * n) == pytest.approx(q, rel=0.1)


def test_step_time_is_the_slowest_ranks_exactly(ddp16):
    """Ranks of a class are alike: a step takes the slowed time whenever any
    rank is hit, however many, and the base time otherwise."""
    engine, classes = ddp16
    base = engine.run(classes).end_time
    one = engine.run(perturb(classes, transient=frozenset({7}), transient_slowdown=2.0)).end_time
    many = engine.run(
        perturb(classes, transient=frozenset({0, 5, 15}), transient_slowdown=2.0)
    ).end_time
    assert one == many > base
    h = Heterogeneity(transient=Transient(fraction=0.05, slowdown=2.0))
    for k in range(12):
        t = simulate_iteration(engine, classes, True, h, seed=0, step=k).end_time
        assert t == (one if transient_ranks(classes, 0.05, 0, k) else base)


@pytest.mark.parametrize("schedule", ["ddp", "nodebased"])
def test_folded_equals_unfolded_with_every_kind_of_variability(schedule):
    engine, classes = _setup(schedule)
    h = Heterogeneity(
        stragglers=Stragglers(fraction=0.1, slowdown=1.3),
        jitter=0.05,
        transient=Transient(fraction=0.1, slowdown=1.7),
        network_noise=0.1,
    )
    for step in (0, 1):
        folded = simulate_iteration(engine, classes, True, h, seed=2, step=step)
        apart = simulate_iteration(engine, classes, False, h, seed=2, step=step)
        assert folded.end_time == pytest.approx(apart.end_time, rel=1e-12, abs=0)
    h = Heterogeneity(stragglers=h.stragglers, transient=h.transient, network_noise=0.1)
    folded = simulate_iteration(engine, classes, True, h, seed=2, step=1)
    apart = simulate_iteration(engine, classes, False, h, seed=2, step=1)
    assert len(folded.classes) < len(apart.classes)
    assert folded.end_time == pytest.approx(apart.end_time, rel=1e-12, abs=0)


def test_persistent_stragglers_are_the_same_every_step(ddp16):
    engine, classes = ddp16
    h = Heterogeneity(stragglers=Stragglers(fraction=0.1, slowdown=1.5))
    times = {simulate_iteration(engine, classes, True, h, 0, k).end_time for k in range(4)}
    assert len(times) == 1


def _scenario(**het) -> dict:
    d = yaml.safe_load((ROOT / "scenarios" / "puhti64.yaml").read_text())
    d["schedules"] = [{"name": "ddp"}]
    d["workload"] = {"model": "resnet18-cifar", "dataset": "cifar10", "batch_per_gpu": 32}
    d["study"] = {"kind": "distribution", "gpus": [16], "samples": 40}
    d["heterogeneity"] = het
    return d


def test_distribution_study_reports_p50_and_p99_by_the_closed_form():
    # 16 ranks, each hit in 2.5 % of steps: a step is slowed with probability
    # 1 - 0.975^16 = 33 %, so p50 is the base step and p99 the slowed one
    sc = parse_scenario(_scenario(transient={"fraction": 0.025, "slowdown": 2.0}))
    rec = run_scenario(sc).records[0]
    assert rec["step_time_samples"] == 40
    assert rec["step_time_min_s"] == rec["step_time_p50_s"] < rec["step_time_p99_s"]
    assert rec["step_time_p99_s"] == rec["step_time_max_s"]
    assert rec["step_time_min_s"] <= rec["step_time_sample_mean_s"] <= rec["step_time_max_s"]
    again = run_scenario(parse_scenario(_scenario(transient={"fraction": 0.025, "slowdown": 2.0})))
    assert again.records[0]["step_time_p99_s"] == rec["step_time_p99_s"]
    steady = run_scenario(parse_scenario(_scenario())).records[0]
    assert steady["step_time_p50_s"] == steady["step_time_p99_s"] == steady["step_time_s"]
    assert steady["step_time_p50_s"] == rec["step_time_p50_s"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("heterogeneity", {"transient": {"fraction": 0, "slowdown": 2}},
         r"heterogeneity\.transient\.fraction: out of range"),
        ("heterogeneity", {"transient": {"fraction": 0.1}},
         r"heterogeneity\.transient\.slowdown: missing"),
        ("heterogeneity", {"network_noise": 3}, r"heterogeneity\.network_noise: out of range"),
        ("heterogeneity", {"network_nosie": 0.1}, "did you mean 'network_noise'"),
        ("study", {"kind": "strong", "gpus": [16], "samples": 10}, "samples is for kind"),
        ("study", {"kind": "distribution", "gpus": [16], "samples": 0}, r"study\.samples"),
        ("study", {"kind": "distributon", "gpus": [16]}, r"study\.kind"),
    ],
)  # fmt: skip
def test_bad_variability_fields_are_config_errors(field, value, message):
    d = _scenario()
    d[field] = value
    with pytest.raises(ConfigError, match=message):
        parse_scenario(d, "v.yaml")


def test_cli_exit_2_on_bad_noise(tmp_path, capsys):
    d = _scenario(network_noise=-0.1)
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump(d))
    assert main(["run", str(path), "--no-plots", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "heterogeneity.network_noise" in err
    assert "Traceback" not in err

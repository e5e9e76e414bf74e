"""Stragglers and kernel jitter: exact where collapse is kept, seeded where random."""

from __future__ import annotations

import numpy as np
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


@pytest.mark.parametrize("schedule", ["ddp", "hsadmm", "nodebased"])
@pytest.mark.parametrize(
    ("jitter", "stragglers", "step_jitter"),
    [(0.1, None, 0.0), (0.05, (0.25, 1.3), 0.0), (0.0, None, 0.2), (0.05, (0.25, 1.3), 0.1)],
)
def test_folded_jitter_matches_one_class_per_rank(schedule, jitter, stragglers, step_jitter):
    """Jittered classes run once with a clock per rank: the same times, spans and
    bytes as simulating every rank as its own class (to float rounding)."""
    from simcluster.scenario import Stragglers

    cluster = load_topology("puhti", num_nodes=4)
    model = build_model("resnet18-cifar", 32, 10)
    ctx = BuildContext(cluster, 16, model, load_profile("v100-sxm2-32gb"), 32, "fp32", 1, 0)
    classes = get_schedule(schedule)().build(ctx).classes
    s = None if stragglers is None else Stragglers(fraction=stragglers[0], slowdown=stragglers[1])
    h = Heterogeneity(jitter=jitter, stragglers=s, step_jitter=step_jitter)
    engine = Engine(CommContext(cluster))
    folded = simulate_iteration(engine, classes, True, h, seed=3)
    apart = simulate_iteration(engine, classes, False, h, seed=3)
    assert len(folded.classes) == len(classes) < len(apart.classes) == 16
    assert folded.end_time == pytest.approx(apart.end_time, rel=1e-12, abs=0)
    assert folded.inter_node_bytes == pytest.approx(apart.inter_node_bytes, rel=1e-12)
    lowest = {name: min(r) for name, r in folded.classes.items()}
    for name, rank in lowest.items():  # the folded rows are those of the class's lowest rank
        twin = next(n for n, r in apart.classes.items() if r == (rank,))
        a = [(s.op, s.stream, s.start, s.end) for s in folded.class_spans(name)]
        b = [(s.op, s.stream, s.start, s.end) for s in apart.class_spans(twin)]
        assert [x[:2] for x in a] == [x[:2] for x in b]
        np.testing.assert_allclose([x[2:] for x in a], [x[2:] for x in b], rtol=1e-12, atol=0)
    net = lambda tr: sorted((s.op, s.start, s.end) for s in tr.class_spans("<network>"))  # noqa: E731
    x, y = net(folded), net(apart)
    assert [s[0] for s in x] == [s[0] for s in y]
    np.testing.assert_allclose([s[1:] for s in x], [s[1:] for s in y], rtol=1e-12, atol=0)


def _durations(cls) -> np.ndarray:
    return np.array([op.duration for op in cls.ops if op.duration > 0 and op.stream == "compute"])


def test_step_jitter_scales_all_of_a_rank_s_step_by_one_draw(setup):
    """Per-step jitter multiplies every timed op of a rank by the same factor, drawn
    apart from the kernel draws: with both, each op is its kernel draw times it."""
    from simcluster.program import rank_draws

    _, classes = setup
    base = _durations(classes[0])
    only = expand(perturb(classes, step_cv=0.3, seed=7, step=2))
    kern = expand(perturb(classes, jitter_cv=0.1, seed=7, step=2))
    both = expand(perturb(classes, jitter_cv=0.1, step_cv=0.3, seed=7, step=2))
    factors = []
    for a, k, b in zip(only, kern, both, strict=True):
        ratio = _durations(a) / base
        assert np.ptp(ratio) < 1e-12 * ratio[0]  # one factor for the whole step
        f = rank_draws(a.ranks[0], len(base), 0.0, 0.3, 7, 2)[0]
        assert ratio[0] == pytest.approx(f, rel=1e-12)
        np.testing.assert_allclose(_durations(b), _durations(k) * f, rtol=1e-12)
        factors.append(f)
    assert len(set(factors)) == len(factors)  # every rank its own draw


def test_step_jitter_has_mean_one_and_the_asked_spread():
    from simcluster.program import rank_draws

    f = np.array([rank_draws(r, 1, 0.0, 0.15, 0, step)[0] for r in range(40) for step in range(50)])
    assert f.mean() == pytest.approx(1.0, abs=0.01)
    assert f.std() / f.mean() == pytest.approx(0.15, rel=0.08)


def test_a_synchronous_step_waits_for_its_slowest_rank(setup):
    """With per-step jitter a DDP step takes at least the slowest rank's compute, and
    its mean over steps exceeds the unjittered step (the slowest of 16 draws)."""
    from simcluster.program import rank_draws

    engine, classes = setup
    h = Heterogeneity(step_jitter=0.2)
    base = engine.run(classes)
    compute = base.busy_time("all", "compute")
    ends = []
    for step in range(1, 9):
        t = simulate_iteration(engine, classes, True, h, seed=5, step=step).end_time
        slowest = max(rank_draws(r, 1, 0.0, 0.2, 5, step)[0] for r in range(16))
        assert t >= slowest * compute * (1 - 1e-9)
        ends.append(t)
    assert np.mean(ends) > 1.1 * base.end_time

"""Symmetry folding of the max-min solve: the folded rates are the unfolded
rates bit for bit, on fat trees with pods, rail-optimised nodes, rings, trees,
concurrent groups, a down-weighted link and stragglers; folding is refused
where the problem has no symmetry worth folding or the classes fail the check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import simpy
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster.collectives import CollectiveCall, CommContext, lower
from simcluster.compute import load_network_profile, load_profile
from simcluster.engine import Engine
from simcluster.network import make_network, symmetry
from simcluster.network.flow import FlowBatch
from simcluster.network.maxmin import maxmin_rates
from simcluster.network.symmetry import _equal_rows, fold, folded_rates
from simcluster.program import perturb
from simcluster.schedules import BuildContext, get_schedule
from simcluster.topology import build_cluster, load_topology
from simcluster.workload import build_model

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"


def _pods(routing: str = "hash", oversubscription: float = 1.0):
    """puhti-mega's nodes on a 3-level fat tree of 2 nodes per leaf and 2 leaves
    per pod: 12 nodes are 3 pods (48 GPUs)."""
    spec = yaml.safe_load((TOPOLOGIES / "puhti-mega.yaml").read_text())
    spec["fabric"].update(
        nodes_per_leaf=2,
        leaves_per_pod=2,
        routing=routing,
        oversubscription=oversubscription,
        core_oversubscription=oversubscription,
    )
    return build_cluster(spec, num_nodes=12)


CLUSTERS = {
    "pods-hash": lambda: _pods(),
    "pods-dmodk-oversubscribed": lambda: _pods("dmodk", 2.0),
    "rails": lambda: load_topology("dgx-a100", num_nodes=4),  # rail-aligned, 8 NICs a node
    "puhti-2l": lambda: load_topology("puhti-2l", num_nodes=16),
}


def _ctx(name: str) -> CommContext:
    return CommContext.from_profile(CLUSTERS[name](), load_network_profile("nccl-spec"))


def _same(batch: FlowBatch, capacity: np.ndarray, load=None) -> symmetry.Folding | None:
    """Fold ``batch``; when it folds, its rates must equal the unfolded ones exactly."""
    args = (batch.entry_flow, batch.entry_link, batch.num_flows, capacity)
    f = fold(*args, load)
    if f is not None:
        want = maxmin_rates(*args, load)
        got = folded_rates(f, capacity, load)
        assert np.array_equal(got, want)  # bit for bit, inf included
        assert f.num_flow_classes < batch.num_flows
    return f


def _concat(batches: list[FlowBatch]) -> FlowBatch:
    off = np.cumsum([0] + [b.num_flows for b in batches])
    return FlowBatch(
        np.concatenate([b.entry_flow + o for b, o in zip(batches, off, strict=False)]),
        np.concatenate([b.entry_link for b in batches]),
        np.concatenate([b.nbytes for b in batches]),
        np.concatenate([np.broadcast_to(b.latency, b.nbytes.shape) for b in batches]),
    )


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_a_ring_over_every_rank_folds_to_few_classes_with_the_same_rates(name):
    ctx = _ctx(name)
    P = ctx.cluster.num_ranks
    _, phases = lower(ctx, CollectiveCall("allreduce", (tuple(range(P)),), 1e8, "ring"))
    f = _same(phases[0], ctx.capacity)
    assert f is not None
    assert f.num_flow_classes <= 16 < phases[0].num_flows


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_concurrent_groups_trees_and_down_weighted_links_keep_the_rates(name):
    """DDP-like concurrent rings of node groups with per-node rings, the
    double binary tree, and the same problems with one fabric link slowed."""
    ctx = _ctx(name)
    c = ctx.cluster
    R, N = c.ranks_per_node, c.num_nodes
    half = tuple(range(N // 2 * R))
    batches = []
    for groups, algo in [
        ((half, tuple(range(N // 2 * R, N * R))), "ring"),
        (tuple(tuple(range(n * R, n * R + R)) for n in range(N)), "ring"),
        ((tuple(range(N * R)),), "tree"),
    ]:
        _, phases = lower(ctx, CollectiveCall("allreduce", groups, 1e8, algo))
        batches.append(phases[0])
        _same(phases[0], ctx.capacity)
    both = _concat(batches[:2])
    assert _same(both, ctx.capacity) is not None
    slow = ctx.capacity.copy()
    fabric = np.flatnonzero(c.inter_node_link)
    used = np.intersect1d(fabric, both.entry_link)
    slow[used[len(used) // 3]] *= 0.5  # one fabric link at half speed: less symmetry
    f = _same(both, slow)
    g = _same(both, ctx.capacity)
    if f is not None:
        assert f.num_flow_classes > g.num_flow_classes
    load = np.zeros_like(ctx.capacity)  # a partial re-solve: other flows hold part of links
    load[used[::5]] = 0.25 * ctx.capacity[used[::5]]
    _same(both, ctx.capacity, load)


def test_folding_is_refused_without_symmetry():
    rng = np.random.default_rng(7)
    nf, nl = 600, 400
    lens = rng.integers(1, 6, nf)
    ef = np.repeat(np.arange(nf), lens)
    el = rng.integers(0, nl, ef.size)
    cap = rng.uniform(1e9, 2e9, nl)
    assert fold(ef, el, nf, cap) is None
    # same capacities: still irregular
    assert fold(ef, el, nf, np.full(nl, 1e9)) is None


def test_the_exact_check_rejects_a_partition_that_is_not_equitable():
    # flows 0, 1 on link 0; flow 2 on links 1 and 2: one class for all flows is not
    # equitable (flow 2 crosses two links), nor one class for links 0 and 1
    ef = np.array([0, 1, 2, 2])
    el = np.array([0, 0, 1, 2])
    assert not _equal_rows(ef, np.zeros(4, dtype=np.int64), 3, 1, np.zeros(3, dtype=np.int64))
    assert not _equal_rows(el, np.zeros(4, dtype=np.int64), 3, 1, np.zeros(3, dtype=np.int64))
    assert _equal_rows(ef[:2], np.zeros(2, dtype=np.int64), 2, 1, np.zeros(2, dtype=np.int64))
    # the same classes in another order are the same multiset; other classes are not
    two = np.array([0, 0, 1, 1])
    one_group = np.zeros(2, dtype=np.int64)
    assert _equal_rows(two, np.array([0, 1, 1, 0]), 2, 2, one_group)
    assert not _equal_rows(two, np.array([0, 1, 1, 1]), 2, 2, one_group)
    assert not _equal_rows(two[::-1].copy(), np.array([0, 1, 1, 1]), 2, 2, one_group)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    copies=st.integers(8, 20),
    flows=st.integers(1, 12),
    shared=st.booleans(),
    perturb_link=st.booleans(),
)
def test_replicated_problems_fold_and_match(seed, copies, flows, shared, perturb_link):
    """A random problem copied on disjoint links (a symmetry), optionally with
    one link every copy shares and one link slowed: folded == unfolded."""
    rng = np.random.default_rng(seed)
    links = 6
    lens = rng.integers(0, 4, flows)
    ef0 = np.repeat(np.arange(flows), lens)
    el0 = rng.integers(0, links, ef0.size)
    ef = np.concatenate([ef0 + k * flows for k in range(copies)])
    el = np.concatenate([el0 + k * links for k in range(copies)])
    nl = copies * links + 1
    if shared:  # every copy's flow 0 also crosses one common link
        first = np.arange(copies) * flows
        ef = np.concatenate([ef, first])
        el = np.concatenate([el, np.full(copies, nl - 1)])
    cap = np.tile(rng.choice([1e9, 2e9, 5e9], links), copies)
    cap = np.append(cap, 3e9)
    if perturb_link:
        cap[int(rng.integers(0, nl))] *= 0.7
    nf = copies * flows
    f = fold(ef, el, nf, cap, max_classes=nf)
    want = maxmin_rates(ef, el, nf, cap)
    if not perturb_link and ef.size:
        assert f is not None and f.num_flow_classes <= flows + 1
    if f is not None:
        assert np.array_equal(folded_rates(f, cap), want)


def _ddp(cluster, gpus):
    model = build_model("resnet18-cifar", 32, 10)
    ctx = BuildContext(cluster, gpus, model, load_profile("v100-sxm2-32gb"), 32, "fp32", 1, 0)
    return get_schedule("ddp")().build(ctx).classes


@pytest.mark.parametrize("name", ["pods-dmodk-oversubscribed", "rails", "puhti-2l"])
def test_concurrent_transfers_end_at_the_same_times_folded(name, monkeypatch):
    """Rings of two halves, per-node rings and a tree started at staggered times
    with different sizes on one network: every transfer ends at the same time on
    ``maxmin`` and ``maxmin-folded``, with as many re-solves, and some folded."""
    monkeypatch.setattr(symmetry, "FOLD_MIN_FLOWS", 0)  # fold problems of any size
    ctx = _ctx(name)
    c = ctx.cluster
    R, N = c.ranks_per_node, c.num_nodes
    calls = [
        ((tuple(range(N // 2 * R)), tuple(range(N // 2 * R, N * R))), "ring", 4e7, 0.0),
        (tuple(tuple(range(n * R, n * R + R)) for n in range(N)), "ring", 1e8, 1e-4),
        ((tuple(range(N * R)),), "tree", 3e7, 2e-4),
        ((tuple(range(0, N * R, R)),), "ring", 2e7, 5e-4),  # one rank per node
    ]
    lowered = [lower(ctx, CollectiveCall("allreduce", g, b, a))[1] for g, a, b, _ in calls]

    def run(model: str):
        env = simpy.Environment()
        net = make_network(model, env, ctx.capacity, ctx.inter_node_link)
        ends = []

        def go(phases, delay):
            yield env.timeout(delay)
            for p in phases:
                yield net.transfer(p)
            ends.append(env.now)

        for phases, (_, _, _, delay) in zip(lowered, calls, strict=True):
            env.process(go(phases, delay))
        env.run()
        return (ends, net.rate_updates), getattr(net, "fold_stats", None)

    want, _ = run("maxmin")
    got, stats = run("maxmin-folded")
    assert got == want
    assert stats["folded"] > 0


@pytest.mark.parametrize("name", ["pods-dmodk-oversubscribed", "rails"])
def test_the_folded_network_gives_the_same_trace(name, monkeypatch):
    """A DDP step, and the same with two stragglers, on ``maxmin`` and
    ``maxmin-folded``: every span equal to the last bit."""
    monkeypatch.setattr(symmetry, "FOLD_MIN_FLOWS", 0)
    cluster = CLUSTERS[name]()
    ctx = CommContext.from_profile(cluster, load_network_profile("nccl-spec"))
    classes = _ddp(cluster, cluster.num_ranks)
    for cls in (classes, perturb(classes, frozenset({3, 17}), 1.7)):
        a = Engine(ctx, "maxmin").run(cls)
        b = Engine(ctx, "maxmin-folded").run(cls)
        assert a.end_time == b.end_time
        assert sorted(a.rows) == sorted(b.rows)
        assert (a.flows, a.rate_updates, a.events) == (b.flows, b.rate_updates, b.events)


def test_solve_folds_or_falls_back_with_the_same_rates(monkeypatch):
    ctx = _ctx("pods-dmodk-oversubscribed")
    P = ctx.cluster.num_ranks
    _, phases = lower(ctx, CollectiveCall("allreduce", (tuple(range(P)),), 1e8, "ring"))
    ring = (phases[0].entry_flow, phases[0].entry_link, phases[0].num_flows, ctx.capacity)
    rng = np.random.default_rng(3)
    ef = np.repeat(np.arange(600), 3)
    irregular = (ef, rng.integers(0, 300, ef.size), 600, rng.uniform(1e9, 2e9, 300))
    stats: dict[str, int] = {}
    for args, min_flows in [(ring, 0), (irregular, 0), (ring, 10**9)]:
        monkeypatch.setattr(symmetry, "FOLD_MIN_FLOWS", min_flows)
        assert np.array_equal(symmetry.solve(*args, stats=stats), maxmin_rates(*args))
    assert stats == {"folded": 1, "unfolded": 2}

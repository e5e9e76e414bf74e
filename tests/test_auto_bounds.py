"""``auto`` lowers only candidates that can win: bounds never exceed estimates,
and the choice is the exhaustive one."""

from __future__ import annotations

import numpy as np
import pytest

from simcluster.collectives import CollectiveCall, CommContext, estimate_phases, lower
from simcluster.collectives import registry as reg
from simcluster.collectives.bounds import lower_bound
from simcluster.compute import load_network_profile
from simcluster.topology import load_topology

CASES = [
    ("puhti", 1, None),
    ("puhti", 16, None),
    ("puhti", 5, (0, 1, 2, 5, 9, 13, 14)),  # a ragged group: 1-3 ranks per node
    ("dgx1-v100", 2, None),
    ("dgx-a100", 4, None),
    ("dgx2", 3, None),
]
SIZES = [4.0, 1e3, 9.8e4, 2.2e6, 2.6e7, 4e8]


def _ctx(topology: str, nodes: int) -> CommContext:
    return CommContext.from_profile(
        load_topology(topology, num_nodes=nodes), load_network_profile("nccl-spec")
    )


def _exhaustive(ctx: CommContext, call: CollectiveCall) -> tuple[str, float]:
    """The least estimate over every candidate; ties (1e-9) to the earliest."""
    times = []
    for name in reg.AUTO_CANDIDATES["allreduce"]:
        for proto in ctx.protocols:
            phases = reg._lower_with(ctx, call, name, proto)
            times.append((estimate_phases(ctx, phases), f"{name}/{proto}"))
    t_min = min(t for t, _ in times)
    return next(label for t, label in times if t <= t_min * (1 + 1e-9)), t_min


@pytest.mark.parametrize(("topology", "nodes", "group"), CASES)
def test_bounds_hold_and_auto_is_exhaustive_choice(topology, nodes, group):
    ctx = _ctx(topology, nodes)
    g = group or tuple(range(ctx.cluster.num_ranks))
    for size in SIZES:
        call = CollectiveCall("allreduce", (g,), size, "auto")
        for name in reg.AUTO_CANDIDATES["allreduce"]:
            for proto in ctx.protocols:
                est = estimate_phases(ctx, reg._lower_with(ctx, call, name, proto))
                assert lower_bound(ctx, call, name, proto) <= est
        label, t_min = _exhaustive(_ctx(topology, nodes), call)
        got, phases = lower(_ctx(topology, nodes), call)
        assert got == label
        assert estimate_phases(ctx, phases) == pytest.approx(t_min, rel=1e-12)


def test_large_ring_is_not_lowered_when_the_tree_wins(monkeypatch):
    """4,096 GPUs on 1,024 nodes of puhti-2l: the ring's start-up latency alone exceeds the
    tree's estimate, so auto never builds the ring's flows."""
    ctx = _ctx("puhti-2l", 1024)
    lowered = []
    orig = reg._lower_with

    def spy(ctx, call, name, proto=None):
        lowered.append(name)
        return orig(ctx, call, name, proto)

    monkeypatch.setattr(reg, "_lower_with", spy)
    call = CollectiveCall("allreduce", (tuple(range(4096)),), 2.5e7, "auto")
    label, _ = lower(ctx, call)
    assert label.startswith("tree/")
    assert "ring" not in lowered
    ring_lb = min(lower_bound(ctx, call, "ring", p) for p in ctx.protocols)
    assert ring_lb > estimate_phases(ctx, reg._lower_with(ctx, call, "tree", label[5:]))


def test_bounds_are_zero_without_protocols():
    ctx = CommContext.from_profile(
        load_topology("puhti", num_nodes=2), load_network_profile("mpi-spec")
    )
    call = CollectiveCall("allreduce", (tuple(range(8)),), 1e6, "auto")
    assert not ctx.protocols
    assert lower_bound(ctx, call, "ring", None) == 0.0
    assert np.isfinite(estimate_phases(ctx, lower(ctx, call)[1]))

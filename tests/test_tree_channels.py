"""The double binary tree over several channels, one NIC rail each (NCCL's trees)."""

from __future__ import annotations

import numpy as np
import pytest

from simcluster.collectives import CollectiveCall, CommContext, estimate_phases
from simcluster.collectives import registry as reg
from simcluster.collectives.tree import group_flows, tree_channels
from simcluster.compute import load_network_profile
from simcluster.topology import load_topology


def _ctx(topology: str, nodes: int, profile: str = "nccl-spec") -> CommContext:
    return CommContext.from_profile(
        load_topology(topology, num_nodes=nodes), load_network_profile(profile)
    )


def _nic_bytes(ctx: CommContext, batch) -> dict[int, float]:
    """Bytes per directed inter-node link (NIC side) of one phase."""
    inter = ctx.inter_node_link
    per = np.bincount(
        batch.entry_link, weights=batch.nbytes[batch.entry_flow], minlength=inter.size
    )
    return {int(i): float(per[i]) for i in np.flatnonzero(inter & (per > 0))}


@pytest.mark.parametrize(
    ("topology", "nodes", "want"),
    [("puhti", 2, 2), ("dgx-a100", 2, 8), ("dgx1-v100", 3, 4), ("puhti", 1, 1)],
)
def test_tree_gets_one_channel_per_nic(topology, nodes, want):
    ctx = _ctx(topology, nodes)
    R = ctx.cluster.ranks_per_node
    by_node = ctx.split_by_node(tuple(range(ctx.cluster.num_ranks)))
    assert tree_channels(ctx, by_node) == want
    # a ragged group: at most the fewest ranks on a node
    if nodes > 1:
        ragged = ctx.split_by_node((0, 1, R))
        assert tree_channels(ctx, ragged) == 1


def test_two_puhti_nodes_spread_the_tree_over_both_nics():
    """2 nodes x 4 V100, 2 HDR100 rails: 2 channels with heads on GPUs 0 and 2 (nic0,
    nic1); per phase each rail carries n / (2 trees x 2 channels) = n / 4 each way."""
    ctx = _ctx("puhti", 2)
    n = 1e6
    src, dst, nb, n_tree, chain_len, height = group_flows(ctx, tuple(range(8)), n)
    assert (n_tree, chain_len, height) == (4, 3, 1)
    heads = sorted({int(s) % 4 for s in src[:n_tree]} | {int(d) % 4 for d in dst[:n_tree]})
    nic = ctx.cluster.template.rank_nic
    assert sorted(nic[h] for h in heads) == [0, 1]
    np.testing.assert_allclose(nb[:n_tree], n / 4)
    # a chain step carries n / channels per channel that takes it: on each of the
    # 2 nodes a GPU sends n / 2 per channel it does not head
    sent = np.bincount(src[n_tree:] % 4, weights=nb[n_tree:], minlength=4)
    for g in range(4):
        assert sent[g] == pytest.approx(2 * n / 2 * (2 - (g in heads)))
    call = CollectiveCall("allreduce", (tuple(range(8)),), n, "tree")
    with ctx.lowering(None):
        up, down = reg.BATCH_LOWERINGS[("allreduce", "tree")](ctx, call)
    for phase in (up, down):
        per_link = _nic_bytes(ctx, phase)
        # NIC up- and down-links of 2 rails on 2 nodes (fabric links carry it too)
        assert per_link and all(v == pytest.approx(n / 4) for v in per_link.values())
        rails = {ctx.cluster.link_ends[i] for i in per_link}
        assert sum(1 for u, v in rails if "nic" in str(u) or "nic" in str(v)) >= 8


def test_two_node_tree_time_is_nic_bound_closed_form():
    """Puhti's fitted InfiniBand (0.037 of 12.5 GB/s per rail) bounds the tree: each
    phase moves n / 4 payload per rail direction at Simple's 0.92 wire fraction, so
    a large allreduce takes 2 x n / 4 / 0.92 / B + the latencies (NCCL's 2-node tree:
    algbw = rails x B x 0.92, twice the ring's n / (2 (P - 1) / P) per rail)."""
    ctx = _ctx("puhti", 2, "nccl-puhti-fitted")
    n = 4e9
    call = CollectiveCall("allreduce", (tuple(range(8)),), n, "tree", protocol="Simple")
    _, phases = reg.lower(ctx, call)
    t = estimate_phases(ctx, phases)
    inter = ctx.inter_node_link
    nic_bw = float(ctx.capacity[inter].min())
    want = 2 * (n / 4 / 0.92) / nic_bw
    assert t == pytest.approx(want, rel=1e-3)


def test_auto_prices_the_tree_with_nccls_per_channel_cap():
    """2 DGX A100 nodes, 8 channels: NCCL's tuner caps the tree's bus bandwidth at
    8 x 23.6 GB/s (perChMaxTreeBws, Ampere, 2 nodes), algorithm bandwidth half of
    it, so auto's estimate of a 1 GiB Simple tree is at least n / (0.5 x 8 x 23.6
    GB/s) and the ring wins; the simulated (forced) tree is not capped."""
    ctx = _ctx("dgx-a100", 2)
    assert ctx.tree_channel_max == pytest.approx((24.0e9, 23.6e9, 17.8e9))
    n = float(1 << 30)
    g = (tuple(range(16)),)
    tree = reg._lower_with(ctx, CollectiveCall("allreduce", g, n, "tree"), "tree", "Simple")
    floor = n / (0.5 * 8 * 23.6e9)
    t_est = estimate_phases(ctx, tree)
    assert floor <= t_est <= floor * 1.01 + 1e-4
    assert reg.lower(ctx, CollectiveCall("allreduce", g, n))[0] == "ring/Simple"
    # without the cap, the same flows move faster (NVSwitch-bound, not tuner-bound)
    uncapped = [type(b)(b.entry_flow, b.entry_link, b.nbytes, b.latency) for b in tree]
    assert estimate_phases(ctx, uncapped) < 0.9 * t_est


def test_bad_tree_channel_cap_is_a_config_error():
    from simcluster.collectives.protocols import parse_tree_channel_max
    from simcluster.errors import ConfigError

    with pytest.raises(ConfigError, match="tree_channel_max_GBps"):
        parse_tree_channel_max({"tree_channel_max_GBps": [1.0, 2.0]}, "x.json")
    with pytest.raises(ConfigError, match=r"tree_channel_max_GBps\[1\]"):
        parse_tree_channel_max({"tree_channel_max_GBps": [1.0, "x", 2.0]}, "x.json")
    assert parse_tree_channel_max({}, "x.json") is None


def _node_rings_reference(template) -> list[list[int]]:
    """channels.node_rings's greedy written with a dict of link loads, scored afresh
    for every candidate (the code it replaced): the tabulated rounds must agree."""
    from simcluster.collectives.channels import MAX_RINGS, nvlink_ring_candidates

    found = nvlink_ring_candidates(template)
    if found is None:
        return [list(range(template.ranks_per_node))]
    R, cap, directed = found

    def edges(order):
        return [(order[i], order[(i + 1) % R]) for i in range(R)]

    def score(counts, k):
        worst = max(n / cap[e] for e, n in counts.items())
        spread = sum((n / cap[e]) ** 2 for e, n in counts.items())
        return worst / k, spread / (k * k)

    load: dict = {}
    chosen, times = [], []
    while len(chosen) < MAX_RINGS:
        pick, pick_score = None, (float("inf"), float("inf"))
        k = len(chosen) + 1
        for order in directed:
            for e in edges(order):
                load[e] = load.get(e, 0) + 1
            s = score(load, k)
            for e in edges(order):
                load[e] -= 1
            if s[0] < pick_score[0] * (1 - 1e-9) or (
                s[0] <= pick_score[0] * (1 + 1e-9) and s[1] < pick_score[1] * (1 - 1e-9)
            ):
                pick, pick_score = order, s
        chosen.append(pick)
        times.append(pick_score[0])
        for e in edges(pick):
            load[e] = load.get(e, 0) + 1
    candidates = [(times[i], i + 1, chosen[: i + 1]) for i in range(len(chosen))]
    if len(directed) <= MAX_RINGS:
        every: dict = {}
        for order in directed:
            for e in edges(order):
                every[e] = every.get(e, 0) + 1
        candidates.append((score(every, len(directed))[0], len(directed), directed))
    best = min(candidates, key=lambda c: (c[0] * (1 + 1e-9), c[1]))
    return [list(r) for r in best[2]]


def test_node_rings_match_the_dict_greedy_on_random_meshes():
    import random
    import types

    from simcluster.collectives.channels import node_rings

    rng = random.Random(7)
    meshes = 0
    for _ in range(120):
        R = rng.randint(3, 6)
        p = rng.choice([0.5, 0.8, 1.0])
        bws = rng.choice([[25e9], [25e9, 50e9], [25e9, 50e9, 75e9, 1e9 / 3]])
        edges = [
            (f"gpu{a}", f"gpu{b}", {"kind": "nvlink", "bandwidth": rng.choice(bws)})
            for a in range(R)
            for b in range(a + 1, R)
            if rng.random() < p
        ]
        rng.shuffle(edges)
        t = types.SimpleNamespace(
            ranks_per_node=R, ranks=[f"gpu{i}" for i in range(R)], edges=edges
        )
        got = node_rings(t)
        assert got == _node_rings_reference(t)
        meshes += len(got) > 1
    assert meshes > 40  # most draws have NVLink rings to choose among

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


@pytest.mark.parametrize(("topology", "nodes", "want"), [("puhti", 2, 2), ("dgx-a100", 2, 8),
                                                         ("dgx1-v100", 3, 4), ("puhti", 1, 1)])  # fmt: skip
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

"""Channels along NVLink, rails between nodes, and LL/LL128/Simple protocols."""

from __future__ import annotations

import pytest

from simcluster.collectives import CollectiveCall, CommContext, estimate_phases, lower
from simcluster.collectives.channels import hamiltonian_cycles, node_rings
from simcluster.collectives.protocols import parse_protocols
from simcluster.collectives.ring import ring_orders
from simcluster.compute import load_network_profile
from simcluster.errors import ConfigError
from simcluster.topology import load_topology
from simcluster.topology.nodes import NVLINK_KINDS


def _ctx(topology: str, nodes: int, profile: str = "nccl-spec") -> CommContext:
    return CommContext.from_profile(
        load_topology(topology, num_nodes=nodes), load_network_profile(profile)
    )


def test_hamiltonian_cycles_of_k4():
    adj = [[j for j in range(4) if j != i] for i in range(4)]
    assert sorted(hamiltonian_cycles(adj)) == [(0, 1, 2, 3), (0, 1, 3, 2), (0, 2, 1, 3)]


@pytest.mark.parametrize("topology", ["dgx1-v100", "puhti", "dgx-a100", "dgx2"])
def test_single_node_rings_stay_on_nvlink(topology):
    ctx = _ctx(topology, 1)
    c = ctx.cluster
    orders = ring_orders(ctx, tuple(range(c.ranks_per_node)))
    for order in orders:
        assert sorted(order) == list(range(c.ranks_per_node))
        for i, a in enumerate(order):
            b = order[(i + 1) % len(order)]
            assert {c.link_kind[x] for x in c.route(a, b)} <= NVLINK_KINDS


def test_dgx1_rings_use_direct_nvlinks_and_several_channels():
    c = load_topology("dgx1-v100", num_nodes=1)
    rings = node_rings(c.template)
    assert len(rings) > 1
    for ring in rings:
        for i, a in enumerate(ring):
            assert len(c.route(a, ring[(i + 1) % 8])) == 1  # a direct NVLink, no relay


def _ring_throughput(template, rings) -> float:
    """Bytes/s one rank sends when a byte is split evenly over ``rings``."""
    index = {v: i for i, v in enumerate(template.ranks)}
    cap = {}
    for u, v, a in template.edges:
        if a["kind"] == "nvlink":
            cap[(index[u], index[v])] = cap[(index[v], index[u])] = a["bandwidth"]
    load: dict = {}
    for r in rings:
        for i, a in enumerate(r):
            e = (a, r[(i + 1) % len(r)])
            load[e] = load.get(e, 0) + 1
    return len(rings) / max(n / cap[e] for e, n in load.items())


@pytest.mark.parametrize("links", [1, 2])
def test_fully_connected_4gpu_board_uses_all_six_nvlink_rings(links):
    """K4: 6 directed Hamiltonian rings; only all of them load each of the 12
    directed NVLinks equally (3 x pair bandwidth per GPU, not 2 x)."""
    from simcluster.topology.nodes import nvlink_full_node

    t = nvlink_full_node(4, links_per_pair=links)
    rings = node_rings(t)
    assert len({tuple(r) for r in rings}) == 6
    assert _ring_throughput(t, rings) == pytest.approx(3 * links * 25e9)


def test_dgx1_rings_use_every_nvlink_of_each_gpu():
    from simcluster.topology.nodes import dgx1_cube_mesh_node

    t = dgx1_cube_mesh_node()
    assert _ring_throughput(t, node_rings(t)) == pytest.approx(6 * 25e9)


@pytest.mark.parametrize("topology,nodes", [("dgx-a100", 2), ("dgx-a100", 4), ("dgx1-v100", 2)])
def test_multi_node_rings_stay_on_one_rail_and_spread_nics(topology, nodes):
    ctx = _ctx(topology, nodes)
    c = ctx.cluster
    orders = ring_orders(ctx, tuple(range(c.num_ranks)))
    assert len(orders) == c.nics_per_node
    out_nics = {}
    for order in orders:
        for i, a in enumerate(order):
            b = order[(i + 1) % len(order)]
            if c.rank_node[a] != c.rank_node[b]:
                assert c.rank_nic[a].split(".")[1] == c.rank_nic[b].split(".")[1]
                out_nics[c.rank_nic[a]] = out_nics.get(c.rank_nic[a], 0) + 1
    assert max(out_nics.values()) == 1  # one channel per NIC and direction


def test_protocol_ring_time_is_nccl_closed_form_on_one_node():
    """8-byte ring LL allreduce on one NVSwitch node: base + 2(P-1) hops."""
    ctx = _ctx("dgx-a100", 1)
    p = ctx.protocols["LL"]
    call = CollectiveCall("allreduce", (tuple(range(8)),), 8.0, "ring", protocol="LL")
    name, phases = lower(ctx, call)
    assert name == "ring/LL"
    want = p.base_latency_s["ring"] + 14 * p.hop("ring", "nvlink")
    assert estimate_phases(ctx, phases) == pytest.approx(want, rel=1e-3)


def test_one_rank_per_node_ring_takes_the_tree_network_latency():
    """NCCL's tuner (tuning.cc): with one rank per node the network latency is
    fully exposed and the ring is charged the tree's NET step latency."""
    ctx = _ctx("dgx-a100", 2)
    p = ctx.protocols["LL"]
    assert p.hop("tree", "net") != p.hop("ring", "net")
    call = CollectiveCall("allreduce", ((0, 8),), 8.0, "ring", protocol="LL")
    _, phases = lower(ctx, call)
    want = p.base_latency_s["ring"] + 2 * p.hop("tree", "net")
    assert estimate_phases(ctx, phases) == pytest.approx(want, rel=1e-3)


def test_auto_picks_low_latency_protocol_small_and_simple_large():
    ctx = _ctx("dgx-a100", 2)
    group = (tuple(range(16)),)
    small, _ = lower(ctx, CollectiveCall("allreduce", group, 8.0))
    large, _ = lower(ctx, CollectiveCall("allreduce", group, float(1 << 30)))
    assert small.endswith("/LL")
    assert large == "ring/Simple"


def test_profile_without_protocols_keeps_bare_algorithm_names():
    ctx = _ctx("dgx-a100", 1, "mpi-spec")
    name, _ = lower(ctx, CollectiveCall("allreduce", (tuple(range(8)),), 8.0, "ring"))
    assert name == "ring"


def test_bad_protocol_section_is_a_config_error():
    good = load_network_profile("nccl-spec").protocols
    bad = {**good, "LL": {**good["LL"], "bandwidth_fraction": {"ring": 2.0, "tree": 0.2}}}
    with pytest.raises(ConfigError, match=r"network.protocols.LL.bandwidth_fraction.ring"):
        parse_protocols(bad, "x.json")
    with pytest.raises(ConfigError, match="did you mean 'LL128'"):
        parse_protocols({"LL12": {}}, "x.json")


def test_protocol_choice_shows_in_trace_breakdown():
    from simcluster.engine import Engine
    from simcluster.program import RankClass, collective

    ctx = _ctx("dgx-a100", 1)
    ranks = tuple(range(8))
    prog = RankClass("all", ranks)
    prog.add(collective("small", CollectiveCall("allreduce", (ranks,), 8.0), "allreduce"))
    prog.add(collective("big", CollectiveCall("allreduce", (ranks,), float(1 << 30)), "allreduce"))
    trace = Engine(ctx).run([prog])
    labels = trace.by_algorithm()
    assert "ring/LL" in labels and "ring/Simple" in labels
    assert sum(labels.values()) == pytest.approx(trace.end_time)


@pytest.mark.parametrize("protocol", ["auto", "LL", "LL128", "Simple"])
def test_every_algorithm_lowers_under_every_protocol(protocol):
    from simcluster.collectives import ALGORITHMS

    ctx = _ctx("dgx1-v100", 2)
    g = tuple(range(16))
    for op, algs in ALGORITHMS.items():
        groups = (g,) if op != "p2p" else ((0, 15), (3, 9))
        for a in algs:
            if a == "nvls":  # needs a multicast NVSwitch node: tests of its own below
                continue
            name, phases = lower(ctx, CollectiveCall(op, groups, 1e6, a, protocol=protocol))
            assert name.startswith(a + "/")
            assert protocol == "auto" or name.endswith("/" + protocol)
            small = estimate_phases(ctx, lower(ctx, CollectiveCall(op, groups, 8.0, a))[1])
            assert 0 < small <= estimate_phases(ctx, phases)


def test_odd_node_count_rings_stay_on_rails_through_pxn():
    """3 DGX A100 (one NIC per GPU): the wrap-around hop of each ring changes
    rail; NCCL's PXN relays it over NVSwitch, so busbw stays near 2 nodes'."""
    ctx = _ctx("dgx-a100", 3)
    c = ctx.cluster
    group = (tuple(range(c.num_ranks)),)
    _, phases = lower(
        ctx, CollectiveCall("allreduce", group, float(1 << 30), "ring", protocol="Simple")
    )
    t3 = estimate_phases(ctx, phases)
    ctx2 = _ctx("dgx-a100", 2)
    group2 = (tuple(range(16)),)
    _, phases2 = lower(
        ctx2, CollectiveCall("allreduce", group2, float(1 << 30), "ring", protocol="Simple")
    )
    bus3 = (1 << 30) / t3 * 2 * 23 / 24
    bus2 = (1 << 30) / estimate_phases(ctx2, phases2) * 2 * 15 / 16
    assert bus3 > 0.9 * bus2
    for links in [c.route(0, 8)]:  # plain routes are unchanged
        assert links == ctx.cluster.route(0, 8)


def test_nvls_allreduce_closed_form_and_auto_choice_on_h100():
    """NVLS: each GPU moves (P+1)/P bytes per byte each way at efficiency x link."""
    ctx = _ctx("h100-nvswitch", 1)
    nv = ctx.nvls
    assert nv is not None and ctx.cluster.template.multicast
    n = float(1 << 30)
    group = (tuple(range(8)),)
    name, phases = lower(ctx, CollectiveCall("allreduce", group, n, "nvls"))
    assert name == "nvls/Simple"
    link = 450e9 * 0.8  # 18 x 25 GB/s NVSwitch port x nccl-spec's nvswitch efficiency
    want = nv.latency_s + n * 9 / 8 / nv.efficiency / link
    assert estimate_phases(ctx, phases) == pytest.approx(want, rel=1e-6)
    assert lower(ctx, CollectiveCall("allreduce", group, n))[0] == "nvls/Simple"
    assert lower(ctx, CollectiveCall("allreduce", group, 8.0))[0].endswith("/LL")


def test_nvls_only_where_the_switch_multicasts():
    from simcluster.errors import UserError

    a100 = _ctx("dgx-a100", 1)
    group = (tuple(range(8)),)
    assert not lower(a100, CollectiveCall("allreduce", group, float(1 << 30)))[0].startswith("nvls")
    with pytest.raises(UserError, match="multicast"):
        lower(a100, CollectiveCall("allreduce", group, 1e6, "nvls"))
    h100 = _ctx("h100-nvswitch", 2)  # across nodes NCCL runs NVLS only with CollNet
    whole = (tuple(range(16)),)
    assert not lower(h100, CollectiveCall("allreduce", whole, float(1 << 30)))[0].startswith("nvls")
    with pytest.raises(UserError, match="protocol"):
        lower(
            _ctx("h100-nvswitch", 1), CollectiveCall("allreduce", group, 1e6, "nvls", protocol="LL")
        )


def test_nvls_section_is_checked():
    from simcluster.collectives.protocols import parse_nvls

    assert parse_nvls({"LL": {}}) is None
    with pytest.raises(ConfigError, match="efficiency"):
        parse_nvls({"NVLS": {"efficiency": 2.0, "latency_s": 1e-5}}, "p.json")
    with pytest.raises(ConfigError, match="latency_s"):
        parse_nvls({"NVLS": {"efficiency": 0.8}}, "p.json")


def test_puhti_node_allreduce_runs_at_three_pair_bandwidths():
    """4 x V100, NV2 between every pair: the 6 rings (merged to one flow per
    NVLink direction) give 3 x 50 GB/s x 0.8 = 120 GB/s busbw."""
    ctx = _ctx("puhti", 1)
    group = (tuple(range(4)),)

    def t(n):
        call = CollectiveCall("allreduce", group, n, "ring", protocol="Simple")
        return estimate_phases(ctx, lower(ctx, call)[1])

    n = float(1 << 30)
    assert t(n) - t(1.0) == pytest.approx(2 * 3 / 4 * (n - 1) / 120e9, rel=1e-6)

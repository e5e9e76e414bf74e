"""Tests of simcluster.topology: YAML files, graph, link table, routes, errors."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import numpy as np
import pytest
import yaml

from simcluster.errors import ConfigError, UnknownNameError
from simcluster.topology import (
    Cluster,
    build_cluster,
    dgx1_cube_mesh_node,
    list_topologies,
    load_topology,
    parse_bandwidth,
    parse_latency,
    topologies_dir,
    topology_cli,
)

VERTEX_KINDS = {"gpu", "cpu", "nic", "switch", "pcie"}
LINK_KINDS = {"nvlink", "nvswitch", "pcie", "infiniband", "ethernet", "qpi", "memory"}
SHIPPED = [
    "puhti",
    "dgx1-v100",
    "dgx-a100",
    "ssfusion-a100-pcie",
    "ssfusion-v100s",
    "deep-est-esb",
    "ceta-ciemat",
    "haswell-ib",
    "dgx2",
    "h100-nvswitch",
]


def _puhti_dict() -> dict:
    return yaml.safe_load((topologies_dir() / "puhti.yaml").read_text())


def _write(tmp_path: Path, data: dict, name: str = "topo.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(p)


def _fat_tree_spec(max_nodes: int, **fabric) -> dict:
    fab = {"type": "fat_tree", "levels": 2, "nodes_per_leaf": 16}
    fab.update(fabric)
    return {
        "name": "ft",
        "max_nodes": max_nodes,
        "node": {
            "template": "nvlink_full",
            "gpus": 4,
            "nvlink": {"link_bandwidth": "25 GB/s", "links_per_pair": 2, "latency": "0.7 us"},
            "host": {"sockets": 2, "pcie_switches": 2},
            "nics": {"count": 2, "bandwidth": "100 Gb/s", "latency": "0.6 us"},
        },
        "fabric": fab,
    }


def _check_chain(c: Cluster, src: int, dst: int) -> list[str]:
    """The route's links join up from src's vertex to dst's vertex; returns vertices."""
    links = c.route(src, dst)
    ends = c.link_ends
    cur = c.rank_vertex[src]
    verts = [cur]
    for i in links:
        u, v = ends[i]
        assert u == cur
        cur = v
        verts.append(v)
    assert cur == c.rank_vertex[dst]
    return verts


# ------------------------------------------------------------------ shipped files


def test_all_required_files_are_listed():
    names = list_topologies()
    for n in SHIPPED:
        assert n in names


@pytest.mark.parametrize("name", list_topologies())
def test_every_shipped_file_loads(name):
    c = load_topology(name)
    assert c.num_ranks == c.num_nodes * c.ranks_per_node > 0
    assert c.sources, "every file cites its sources"
    assert c.assumptions, "every file lists its assumptions"
    assert len(c.rank_vertex) == c.num_ranks
    assert c.link_bandwidth.shape == (c.num_links,)
    assert c.link_latency.shape == (c.num_links,)
    assert len(c.link_kind) == len(c.link_ends) == c.num_links
    assert np.all(c.link_bandwidth > 0) and np.all(c.link_latency >= 0)
    g = c.graph
    assert g.number_of_edges() * 2 == c.num_links
    for _v, a in g.nodes(data=True):
        assert a["kind"] in VERTEX_KINDS
        assert "node" in a and "local" in a
    for u, v, a in g.edges(data=True):
        assert a["kind"] in LINK_KINDS
        i = c.link_id[(u, v)]
        assert c.link_id[(v, u)] == i ^ 1
        assert c.link_bandwidth[i] == a["bandwidth"] == c.link_bandwidth[i ^ 1]
        assert c.link_latency[i] == a["latency"]
        assert c.link_kind[i] == a["kind"]
    # a few routes chain correctly
    rng = random.Random(1)
    for _ in range(50):
        _check_chain(c, rng.randrange(c.num_ranks), rng.randrange(c.num_ranks))
    c1 = load_topology(name, 1)
    assert c1.num_nodes == 1


def test_default_nodes_and_max_nodes():
    assert load_topology("puhti").num_nodes == 80
    assert load_topology("dgx-a100").num_nodes == 4  # file's default_nodes
    assert load_topology("dgx-a100", 10).num_nodes == 10


def test_load_by_path(tmp_path):
    path = _write(tmp_path, _puhti_dict(), "mine.yaml")
    c = load_topology(path, 2)
    assert c.name == "puhti" and c.num_ranks == 8
    assert load_topology(str(topologies_dir() / "puhti.yaml"), 3).num_nodes == 3


# ------------------------------------------------------------------------ Puhti


def test_puhti_16_nodes_ranks_and_intra_node_route():
    c = load_topology("puhti", 16)
    assert (c.num_nodes, c.ranks_per_node, c.num_ranks) == (16, 4, 64)
    assert c.rank_vertex[0] == "n0.gpu0" and c.rank_vertex[63] == "n15.gpu3"
    assert list(c.rank_node[:8]) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert c.node_ranks(2) == [8, 9, 10, 11]
    assert c.is_intra_node(4, 7) and not c.is_intra_node(3, 4)
    r = c.route(0, 1)
    assert len(r) == 1
    assert c.link_kind[r[0]] == "nvlink"
    assert c.link_ends[r[0]] == ("n0.gpu0", "n0.gpu1")
    assert c.link_bandwidth[r[0]] == pytest.approx(50e9)  # 2 links x 25 GB/s
    assert c.route(5, 5) == ()
    assert c.path_latency(5, 5) == 0.0


def test_puhti_cross_node_route_shape():
    c = load_topology("puhti", 16)
    src, dst = 1, 4 * 9 + 2
    verts = _check_chain(c, src, dst)
    kinds = [c.graph.nodes[v]["kind"] for v in verts]
    assert kinds[0] == "gpu" and kinds[-1] == "gpu"
    assert kinds[1] == "pcie" and kinds[2] == "nic"
    assert kinds[-2] == "pcie" and kinds[-3] == "nic"
    assert all(k == "switch" for k in kinds[3:-3]) and verts[3].startswith("leaf")
    links = c.route(src, dst)
    ib = [i for i in links if c.link_kind[i] == "infiniband"]
    assert len(ib) >= 2
    assert all(c.link_bandwidth[i] == pytest.approx(12.5e9) for i in ib)
    assert c.path_latency(src, dst) == pytest.approx(sum(c.link_latency[i] for i in links))


def test_puhti_multi_leaf_route_goes_through_a_spine():
    c = load_topology("puhti", 80)
    verts = _check_chain(c, 0, 79 * 4 + 3)
    switches = [v for v in verts if c.graph.nodes[v]["kind"] == "switch"]
    assert switches[0].startswith("leaf") and switches[1].startswith("spine")
    assert switches[2].startswith("leaf") and len(switches) == 3
    assert c.summary()["fabric"]["oversubscription"] == 1


def test_puhti_nic_affinity():
    c = load_topology("puhti", 4)
    assert c.template.rank_nic == [0, 0, 1, 1]
    for node in range(4):
        for local, nic in enumerate([0, 0, 1, 1]):
            r = node * 4 + local
            assert c.rank_nic[r] == f"n{node}.nic{nic}"
            other = ((node + 1) % 4) * 4 + local
            verts = _check_chain(c, r, other)
            assert verts[2] == f"n{node}.nic{nic}"


# ------------------------------------------------------------------- node shapes


def test_dgx1_cube_mesh_degree():
    t = dgx1_cube_mesh_node()
    g = t.graph()
    nv = [(u, v, a) for u, v, a in g.edges(data=True) if a["kind"] == "nvlink"]
    assert len(nv) == 16  # 12 cube edges + 4 face diagonals
    for gpu in range(8):
        vid = f"gpu{gpu}"
        links = sum(a["links"] for u, v, a in nv if vid in (u, v))
        assert links == 6
        bw = sum(a["bandwidth"] for u, v, a in nv if vid in (u, v))
        assert bw == pytest.approx(6 * 25e9)
    assert g["gpu0"]["gpu3"]["links"] == 2 and g["gpu0"]["gpu1"]["links"] == 1
    assert not g.has_edge("gpu0", "gpu5")
    c = load_topology("dgx1-v100", 2)
    assert c.ranks_per_node == 8
    assert c.template.rank_nic == [0, 0, 1, 1, 2, 2, 3, 3]
    # 0 -> 5 has no direct NVLink: one GPU relays it over NVLink (NCCL's NVB
    # path), never PCIe + QPI
    kinds = {c.link_kind[i] for i in c.route(0, 5)}
    assert kinds == {"nvlink"}


@pytest.mark.parametrize("name", SHIPPED)
def test_template_adjacency_is_networkx_order(name):
    # compute_paths reads plain dicts in the order networkx's graph of the template
    # would give them (path ties are broken by that order)
    from simcluster.topology.nodes import _adjacency, _edge_list

    t = load_topology(name, 1).template
    extra = [("x0", t.ranks[0], {"kind": "pcie", "latency": 1.0})]  # a vertex met in an edge
    g = t.graph()
    g.add_edges_from(extra)
    adj = _adjacency(t.vertices, [*t.edges, *extra])
    assert [(u, list(n.items())) for u, n in adj.items()] == [
        (u, list(n.items())) for u, n in g.adjacency()
    ]
    assert list(_edge_list(adj)) == list(g.edges(data=True))


def test_nvswitch_node_routes_through_switch():
    c = load_topology("dgx-a100", 2)
    r = c.route(0, 7)
    assert [c.link_kind[i] for i in r] == ["nvswitch", "nvswitch"]
    assert c.link_bandwidth[r[0]] == pytest.approx(300e9)
    assert c.template.rank_nic == list(range(8))
    h = load_topology("h100-nvswitch", 2)
    assert h.link_bandwidth[h.route(1, 2)[0]] == pytest.approx(450e9)
    assert h.fabric.nic_bandwidth == pytest.approx(50e9)


def test_pcie_and_cpu_core_nodes():
    c = load_topology("ssfusion-a100-pcie", 2)
    assert {c.link_kind[i] for i in c.route(0, 1)} == {"pcie"}
    assert "qpi" in {c.link_kind[i] for i in c.route(0, 3)}
    h = load_topology("haswell-ib", 32)
    assert h.ranks_per_node == 16 and h.num_ranks == 512
    assert h.graph.nodes[h.rank_vertex[0]]["kind"] == "cpu"
    assert [h.link_kind[i] for i in h.route(0, 1)] == ["memory", "memory"]
    assert [h.link_kind[i] for i in h.route(0, 8)] == ["memory", "qpi", "memory"]
    assert h.fabric.nic_bandwidth == pytest.approx(4e9)
    one = load_topology("ssfusion-v100s", 8)
    assert one.ranks_per_node == 1 and one.num_ranks == 8


# ---------------------------------------------------------------------- fabrics


def test_oversubscription_halves_leaf_uplinks():
    caps = {}
    for ratio in (1, 2):
        c = build_cluster(_fat_tree_spec(64, oversubscription=ratio), 64)
        up = sum(
            a["bandwidth"]
            for _u, v, a in c.graph.edges("leaf0", data=True)
            if v.startswith("spine")
        )
        down = sum(a["bandwidth"] for _u, v, a in c.graph.edges("leaf0", data=True) if ".nic" in v)
        assert up == pytest.approx(c.summary()["fabric"]["leaf_uplink_capacity"])
        caps[ratio] = (up, down)
    assert caps[2][0] == pytest.approx(caps[1][0] / 2)
    assert caps[1][1] == caps[2][1] == pytest.approx(32 * 12.5e9)
    assert caps[1][0] == pytest.approx(caps[1][1])


def test_three_level_fat_tree_paths():
    c = build_cluster(_fat_tree_spec(1024, levels=3, nodes_per_leaf=4, leaves_per_pod=4), 256)
    f = c.summary()["fabric"]
    assert f["levels"] == 3 and f["pods"] == 16 and f["leaves"] == 64

    def fabric_hops(s, d):
        return sum(1 for i in c.route(s, d) if c.link_kind[i] == "infiniband")

    assert fabric_hops(0, 4) == 2  # same leaf
    assert fabric_hops(0, 4 * 4) == 4  # same pod, other leaf
    assert fabric_hops(0, 4 * 16) == 6  # other pod
    spines = set()
    for d in range(64, 256):
        verts = _check_chain(c, 0, d * 4 % c.num_ranks + 1)
        spines.update(v for v in verts if v.startswith("spine"))
    assert len(spines) > 2  # ECMP spreads the flows


def test_rail_aligned_and_dmodk():
    c = build_cluster(_fat_tree_spec(64, rail_aligned=True, routing="dmodk"), 32)
    assert c.summary()["fabric"]["rail_aligned"]
    # NIC j of every node sits on a leaf of rail j; rails share no leaf
    leaves = {
        j: {next(w for w in c.graph.adj[f"n{n}.nic{j}"] if w.startswith("leaf")) for n in range(32)}
        for j in (0, 1)
    }
    assert not leaves[0] & leaves[1]
    assert len(c.route(0, 4 * 20)) == len(c.route(4 * 20, 0))


def test_routes_deterministic_and_symmetric_in_length():
    spec = _fat_tree_spec(256)
    a = build_cluster(spec, 200)
    b = build_cluster(copy.deepcopy(spec), 200)
    rng = random.Random(7)
    pairs = [(rng.randrange(a.num_ranks), rng.randrange(a.num_ranks)) for _ in range(2000)]
    for s, d in pairs:
        assert a.route(s, d) == b.route(s, d) == a.route(s, d)
        assert len(a.route(s, d)) == len(a.route(d, s))
        assert a.path_latency(s, d) == pytest.approx(a.path_latency(d, s))
    assert a.link_ends == b.link_ends
    assert np.array_equal(a.link_bandwidth, b.link_bandwidth)


def test_large_fat_tree_builds_and_routes():
    c = build_cluster(_fat_tree_spec(4096), 4096)
    assert c.num_ranks == 4096 * 4
    rng = random.Random(0)
    pairs = [(rng.randrange(c.num_ranks), rng.randrange(c.num_ranks)) for _ in range(10_000)]
    for s, d in pairs:
        c.route(s, d)
    for s, d in pairs[:200]:
        _check_chain(c, s, d)


def test_16k_node_three_level_cluster_builds_and_routes():
    c = load_topology("puhti-xl", 16384)
    assert c.num_ranks == 65536
    rng = random.Random(3)
    for _ in range(5000):
        c.route(rng.randrange(c.num_ranks), rng.randrange(c.num_ranks))
    verts = _check_chain(c, 0, c.num_ranks - 1)
    assert [v for v in verts if not v.startswith("n")][2].startswith("core")
    assert c.route(np.int64(5), np.int64(9)) == c.route(5, 9)
    assert all(type(i) is int for i in c.route(np.int64(1), np.int64(70000 - 10000)))
    with pytest.raises(IndexError):
        c.route(0, c.num_ranks)


# ------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("25 GB/s", 25e9),
        ("100 Gb/s", 12.5e9),
        ("200 Gbit/s", 25e9),
        ("100Gbps", 12.5e9),
        ("1 GiB/s", 2.0**30),
        (12.5e9, 12.5e9),
        ("12.5e9", 12.5e9),
    ],
)
def test_parse_bandwidth(text, value):
    assert parse_bandwidth(text) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "value"), [("1.5 us", 1.5e-6), ("500 ns", 5e-7), ("0.2 ms", 2e-4), (1e-6, 1e-6)]
)
def test_parse_latency(text, value):
    assert parse_latency(text) == pytest.approx(value)


# ------------------------------------------------------------------------ errors


def test_bad_unit_is_config_error(tmp_path):
    data = _puhti_dict()
    data["node"]["nics"]["bandwidth"] = "100 Gbs"
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as exc:
        load_topology(path)
    msg = str(exc.value)
    assert path in msg and "node.nics.bandwidth" in msg and "Gbs" in msg and "Gb/s" in msg
    data["node"]["nvlink"]["latency"] = "3 fortnights"
    data["node"]["nics"]["bandwidth"] = "100 Gb/s"
    with pytest.raises(ConfigError, match=r"node\.nvlink\.latency"):
        load_topology(_write(tmp_path, data))


def test_unknown_key_suggests(tmp_path):
    data = _puhti_dict()
    data["fabric"]["oversubscripton"] = 2
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as exc:
        load_topology(path)
    msg = str(exc.value)
    assert path in msg and "fabric.oversubscripton" in msg
    assert "did you mean 'oversubscription'" in msg
    assert "Traceback" not in msg and "pydantic" not in msg.lower()


def test_bad_template_name_suggests(tmp_path):
    data = _puhti_dict()
    data["node"]["template"] = "nvlink_ful"
    with pytest.raises(ConfigError, match=r"node\.template.*did you mean 'nvlink_full'"):
        load_topology(_write(tmp_path, data))


def test_num_nodes_above_max_nodes(tmp_path):
    path = _write(tmp_path, _puhti_dict())
    with pytest.raises(ConfigError) as exc:
        load_topology(path, 81)
    msg = str(exc.value)
    assert path in msg and "num_nodes" in msg and "80" in msg
    with pytest.raises(ConfigError, match="num_nodes"):
        load_topology("puhti", 0)


def test_unknown_topology_name():
    with pytest.raises(UnknownNameError) as exc:
        load_topology("puhtii")
    assert "puhti" in exc.value.suggestions


def test_semantic_errors_name_the_field(tmp_path):
    data = _puhti_dict()
    data["node"]["nics"]["affinity"] = [0, 0, 1, 2]
    with pytest.raises(ConfigError, match=r"node\.nics\.affinity\[3\]"):
        load_topology(_write(tmp_path, data))
    data = _puhti_dict()
    del data["fabric"]["nodes_per_leaf"]
    with pytest.raises(ConfigError, match=r"fabric\.nodes_per_leaf"):
        load_topology(_write(tmp_path, data))
    (tmp_path / "broken.yaml").write_text("node: [1,\n")
    with pytest.raises(ConfigError, match="YAML"):
        load_topology(str(tmp_path / "broken.yaml"))


# --------------------------------------------------------------- summary / draw


def test_summary_and_cli(tmp_path):
    c = load_topology("puhti", 16)
    s = c.summary()
    assert s["num_ranks"] == 64 and s["vertices"]["gpu"] == 64
    assert s["links"]["nvlink"]["count"] == 16 * 6
    assert s["fabric"]["bisection_bandwidth"] == pytest.approx(16 * 2 * 12.5e9 / 2)
    text = topology_cli("puhti", None, 16)
    assert "puhti" in text and "64 ranks" in text and "assumptions" in text


def test_draw_topology(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "puhti.png"
    text = topology_cli("puhti", str(out), 16)
    assert out.exists() and out.stat().st_size > 10_000
    assert str(out) in text
    out3 = tmp_path / "ft3.png"
    from simcluster.topology import draw_topology

    draw_topology(
        build_cluster(_fat_tree_spec(1024, levels=3, nodes_per_leaf=4, leaves_per_pod=4), 300),
        str(out3),
    )
    assert out3.exists()


@pytest.mark.parametrize(
    "spec, nodes",
    [
        (_fat_tree_spec(64), 40),
        (_fat_tree_spec(64, oversubscription=2), 40),
        (_fat_tree_spec(64, rail_aligned=True, routing="dmodk"), 32),
        (_fat_tree_spec(1024, levels=3, nodes_per_leaf=4, leaves_per_pod=4), 300),
        ("dgx1-v100", 3),
        ("haswell-ib", 5),
        ("h100-nvswitch", 2),
        ("localhost", 1),
    ],
)
def test_array_routes_equal_scalar_routes(spec, nodes):
    c = load_topology(spec, nodes) if isinstance(spec, str) else build_cluster(spec, nodes)
    rng = np.random.default_rng(7)
    src = rng.integers(0, c.num_ranks, 2000)
    dst = rng.integers(0, c.num_ranks, 2000)
    dst[:50] = src[:50]  # some self-sends: no links
    entry_flow, entry_link = c.routes(src, dst)
    want = [c.route(int(s), int(d)) for s, d in zip(src, dst, strict=True)]
    assert entry_link.tolist() == [x for r in want for x in r]
    assert entry_flow.tolist() == [i for i, r in enumerate(want) for _ in r]


def test_array_routes_reject_bad_ranks():
    c = load_topology("dgx1-v100", 2)
    with pytest.raises(IndexError, match="destination rank 99"):
        c.routes(np.array([0, 1]), np.array([1, 99]))


@pytest.mark.parametrize("name", list_topologies())
def test_inter_node_links_from_the_table_match_the_graph(name: str) -> None:
    c = load_topology(name, min(2, load_topology(name, 1).max_nodes))
    g = c.graph
    want = [
        g.nodes[u].get("node") is None
        or g.nodes[v].get("node") is None
        or g.nodes[u]["node"] != g.nodes[v]["node"]
        for u, v in c.link_ends
    ]
    assert c.inter_node_link.tolist() == want
    nics = sum(1 for _, a in g.nodes(data=True) if a.get("kind") == "nic" and a.get("node") == 0)
    assert c.nics_per_node == nics


# ------------------------------------------------- routing by capacity (issue 11)


@pytest.mark.parametrize("name", list_topologies())
def test_intra_node_routes_use_nvlink_where_a_path_exists(name):
    """Every GPU pair of every shipped template with an all-NVLink/NVSwitch
    path is routed over NVLink/NVSwitch links only; direct neighbours directly."""
    import networkx as nx

    from simcluster.topology.nodes import NVLINK_KINDS

    c = load_topology(name, num_nodes=1)
    g = c.graph
    nv = nx.Graph([(u, v) for u, v, a in g.edges(data=True) if a["kind"] in NVLINK_KINDS])
    checked = 0
    for a in range(c.ranks_per_node):
        for b in range(c.ranks_per_node):
            va, vb = c.rank_vertex[a], c.rank_vertex[b]
            if a == b or va not in nv or vb not in nv or not nx.has_path(nv, va, vb):
                continue
            kinds = [c.link_kind[i] for i in c.route(a, b)]
            assert set(kinds) <= NVLINK_KINDS, (name, a, b, c.route_vertices(a, b))
            if nv.has_edge(va, vb) and g[va][vb]["kind"] == "nvlink":
                assert len(kinds) == 1, (name, a, b)
            checked += 1
    template = c.template.name
    if template in ("nvswitch", "nvlink_full", "dgx1_cube_mesh", "nvlink_mesh"):
        assert checked == c.ranks_per_node * (c.ranks_per_node - 1)


def test_dgx_a100_pair_behind_one_pcie_switch_uses_nvswitch():
    c = load_topology("dgx-a100", num_nodes=1)
    assert [c.link_kind[i] for i in c.route(0, 1)] == ["nvswitch", "nvswitch"]


def test_dgx1_non_neighbours_relay_through_one_gpu_over_nvlink():
    c = load_topology("dgx1-v100", num_nodes=1)
    v = c.route_vertices(0, 5)
    assert len(v) == 3 and v[1] in ("n0.gpu1", "n0.gpu4")
    assert [c.link_kind[i] for i in c.route(0, 5)] == ["nvlink", "nvlink"]

"""The Cluster: an attributed networkx graph plus the link table and routes.

Link table: every undirected edge ``i`` of the cluster (node edges first, node
by node in template order, then fabric edges) stored as ``(u, v)`` gives the
directed links ``2*i`` (``u -> v``) and ``2*i + 1`` (``v -> u``). Bandwidths are
bytes/s per direction, latencies seconds.

Routes are hierarchical and never search the whole graph: inside a node the
template's precomputed path is shifted by the node's link offset; between nodes
it is rank -> its NIC (template) -> fabric path (structural, see
:mod:`simcluster.topology.fabric`) -> NIC -> rank. Routes are cached per
(src, dst) and are a pure function of the file and node count.
"""

from __future__ import annotations

import math
from functools import cached_property
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from simcluster import paths
from simcluster.errors import ConfigError, UnknownNameError
from simcluster.paths import near_yaml_files, topologies_dir, topology_dirs
from simcluster.topology.builders import FABRICS, NODE_BUILDERS, Fabric, defaults_used
from simcluster.topology.fabric import FatTree
from simcluster.topology.nodes import NodeTemplate
from simcluster.topology.spec import TopologySpec, read_spec, spec_from_dict

__all__ = [
    "Cluster",
    "build_cluster",
    "load_topology",
    "load_topology_for_ranks",
    "list_topologies",
    "topologies_dir",
]


class Cluster:
    """A built cluster: graph, rank placement, directed link table, routes.

    Build with :func:`load_topology` or :func:`build_cluster`. ``graph``,
    ``link_ends``, ``link_id`` and ``link_kind`` are computed on first use so
    that very large clusters used only for routing stay cheap.
    """

    def __init__(
        self,
        name: str,
        description: str,
        template: NodeTemplate,
        fabric: Fabric,
        num_nodes: int,
        max_nodes: int,
        assumptions: list[str] | None = None,
        sources: list[str] | None = None,
        file: str | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.file = file
        self.template = template
        self.fabric = fabric
        self.num_nodes = int(num_nodes)
        self.max_nodes = int(max_nodes)
        self.assumptions = list(assumptions or [])
        self.sources = list(sources or [])
        self.ranks_per_node = R = template.ranks_per_node
        self.num_ranks = self.num_nodes * R
        self.rank_kind = template.rank_kind
        self.nics_per_node = len(template.nics)
        self.rank_vertex: list[str] = [
            f"n{n}.{r}" for n in range(self.num_nodes) for r in template.ranks
        ]
        self.rank_node: np.ndarray = np.repeat(np.arange(self.num_nodes, dtype=np.int64), R)
        #: NIC vertex used by each rank for inter-node traffic
        self.rank_nic: list[str] = (
            [f"n{n}.{template.nics[j]}" for n in range(self.num_nodes) for j in template.rank_nic]
            if template.nics
            else []
        )

        self._edges_per_node = E = len(template.edges)
        self._node_edges = self.num_nodes * E
        n_edges = self._node_edges + fabric.num_edges
        self.num_links = 2 * n_edges
        tbw = np.array([a["bandwidth"] for _, _, a in template.edges], dtype=np.float64)
        tlat = np.array([a["latency"] for _, _, a in template.edges], dtype=np.float64)
        fbw, flat = fabric.edge_arrays()
        ebw = np.concatenate([np.tile(tbw, self.num_nodes), fbw])
        elat = np.concatenate([np.tile(tlat, self.num_nodes), flat])
        self.link_bandwidth: np.ndarray = np.repeat(ebw, 2)
        self.link_latency: np.ndarray = np.repeat(elat, 2)
        self._route_cache: dict[tuple[int, int], tuple[int, ...]] = {}
        self._lat_cache: dict[tuple[int, int], float] = {}

    # ------------------------------------------------------------ lazy tables
    def iter_edges(self):
        """Undirected edges ``(u, v, attrs)`` in link-table order."""
        for n in range(self.num_nodes):
            p = f"n{n}."
            for u, v, a in self.template.edges:
                yield p + u, p + v, a
        yield from self.fabric.edges(self._endpoint_vertex)

    def _endpoint_vertex(self, e: int) -> str:
        k = self.nics_per_node
        return f"n{e // k}.{self.template.nics[e % k]}"

    @cached_property
    def graph(self) -> nx.Graph:
        """Vertices: kind, node, local, role; edges: bandwidth, latency, kind, links."""
        g = nx.Graph(name=self.name)
        for n in range(self.num_nodes):
            p = f"n{n}."
            g.add_nodes_from((p + vid, {**a, "node": n}) for vid, a in self.template.vertices)
        g.add_nodes_from(self.fabric.vertices())
        g.add_edges_from(self.iter_edges())
        return g

    @cached_property
    def link_ends(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for u, v, _a in self.iter_edges():
            out.append((u, v))
            out.append((v, u))
        return out

    @cached_property
    def link_id(self) -> dict[tuple[str, str], int]:
        return {ends: i for i, ends in enumerate(self.link_ends)}

    @cached_property
    def link_kind(self) -> list[str]:
        node = [a["kind"] for _, _, a in self.template.edges for _ in (0, 1)]
        return node * self.num_nodes + [self.fabric.kind] * (2 * self.fabric.num_edges)

    @cached_property
    def link_kind_index(self) -> tuple[list[str], np.ndarray]:
        """(distinct link kinds, each directed link's index into them): :attr:`link_kind`
        as arrays, built without a string per link."""
        node = [a["kind"] for _, _, a in self.template.edges for _ in (0, 1)]
        kinds = sorted({*node, self.fabric.kind})
        code = {k: i for i, k in enumerate(kinds)}
        per_node = np.array([code[k] for k in node], dtype=np.int64)
        index = np.concatenate(
            [
                np.tile(per_node, self.num_nodes),
                np.full(2 * self.fabric.num_edges, code[self.fabric.kind], dtype=np.int64),
            ]
        )
        return kinds, index

    @cached_property
    def inter_node_link(self) -> np.ndarray:
        """Boolean per directed link: outside every node (a NIC's fabric port or a switch
        link)? Node links come first in the table, then the fabric's."""
        out = np.ones(self.num_links, dtype=bool)
        out[: 2 * self._node_edges] = False
        return out

    # ---------------------------------------------------------------- routing
    def _check_rank(self, r: int, what: str) -> None:
        if not 0 <= r < self.num_ranks:
            raise IndexError(f"{what} rank {r} out of range 0..{self.num_ranks - 1}")

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        """Directed link ids from rank ``src`` to rank ``dst``; ``()`` when equal."""
        key = (src, dst)
        r = self._route_cache.get(key)
        if r is not None:
            return r
        src, dst = int(src), int(dst)
        self._check_rank(src, "source")
        self._check_rank(dst, "destination")
        R = self.ranks_per_node
        ns, ls = divmod(src, R)
        nd, ld = divmod(dst, R)
        t = self.template
        E2 = 2 * self._edges_per_node
        if src == dst:
            r = ()
        elif ns == nd:
            off = ns * E2
            r = tuple(x + off for x in t.pair_path[ls][ld])
        else:
            k = self.nics_per_node
            offs, offd = ns * E2, nd * E2
            a = ns * k + t.rank_nic[ls]
            b = nd * k + t.rank_nic[ld]
            r = (
                tuple(x + offs for x in t.rank_to_nic[ls])
                + self.fabric.path(a, b, src, dst)
                + tuple(x + offd for x in t.nic_to_rank[ld])
            )
        self._route_cache[key] = r
        return r

    @cached_property
    def _local_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The template's local paths as ``-1``-padded arrays: pair paths (row
        ``a * R + b``), rank -> NIC, NIC -> rank; and each rank's NIC index."""

        def pad(seqs: list[tuple[int, ...]]) -> np.ndarray:
            out = np.full((len(seqs), max((len(x) for x in seqs), default=0)), -1, np.int64)
            for i, x in enumerate(seqs):
                out[i, : len(x)] = x
            return out

        t, R = self.template, self.ranks_per_node
        pairs = pad([t.pair_path[a][b] for a in range(R) for b in range(R)])
        nic = np.asarray(t.rank_nic if t.nics else [0] * R, dtype=np.int64)
        return pairs, pad(t.rank_to_nic), pad(t.nic_to_rank), nic

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`route` of every (src, dst) rank pair at once.

        Returns ``(entry_flow, entry_link)``: one entry per link of every route,
        pair ``i``'s links in path order (the layout of :class:`FlowBatch`).
        """
        src = np.asarray(src, dtype=np.int64).reshape(-1)
        dst = np.asarray(dst, dtype=np.int64).reshape(-1)
        for arr, what in ((src, "source"), (dst, "destination")):
            # two reductions test the range; the first bad rank is looked for only then
            if arr.size and (
                np.minimum.reduce(arr) < 0 or np.maximum.reduce(arr) >= self.num_ranks
            ):
                bad = (arr < 0) | (arr >= self.num_ranks)
                self._check_rank(int(arr[bad][0]), what)
        pairs, to_nic, from_nic, rank_nic = self._local_tables
        R, E2 = self.ranks_per_node, 2 * self._edges_per_node
        ns, ls = np.divmod(src, R)
        nd, ld = np.divmod(dst, R)
        intra = (ns == nd) & (src != dst)
        inter = ns != nd

        def shifted(table: np.ndarray, rows: np.ndarray, offset: np.ndarray, mask: np.ndarray):
            # every pair's row of ``table`` shifted by its offset, -1 outside ``mask``:
            # the same array as filling -1 and writing the masked rows, in fewer
            # operations (rows outside the mask index the table too, and are dropped)
            part = table[rows]
            return np.where((part >= 0) & mask[:, None], part + offset[:, None], -1)

        blocks = [shifted(pairs, ls * R + ld, ns * E2, intra)]
        if inter.any():
            k = self.nics_per_node
            fabric = np.full((src.size, 6), -1, dtype=np.int64)
            fabric[inter] = self.fabric.paths(
                (ns * k + rank_nic[ls])[inter], (nd * k + rank_nic[ld])[inter],
                src[inter], dst[inter],
            )  # fmt: skip
            blocks += [
                shifted(to_nic, ls, ns * E2, inter),
                fabric,
                shifted(from_nic, ld, nd * E2, inter),
            ]
        table = np.concatenate(blocks, axis=1)
        valid = table >= 0
        entry_flow = np.repeat(np.arange(src.size, dtype=np.int64), valid.sum(axis=1))
        return entry_flow, table[valid]

    def path_latency(self, src: int, dst: int) -> float:
        """Sum of link latencies along :meth:`route`, seconds."""
        key = (src, dst)
        v = self._lat_cache.get(key)
        if v is None:
            lat = self.link_latency
            v = float(sum(lat[i] for i in self.route(src, dst)))
            self._lat_cache[key] = v
        return v

    def route_vertices(self, src: int, dst: int) -> list[str]:
        """Vertex ids along the route (for reading and tests)."""
        links = self.route(src, dst)
        if not links:
            return [self.rank_vertex[src]]
        ends = self.link_ends
        return [ends[links[0]][0]] + [ends[i][1] for i in links]

    def node_ranks(self, node: int) -> list[int]:
        """Ranks hosted on ``node``."""
        if not 0 <= node < self.num_nodes:
            raise IndexError(f"node {node} out of range 0..{self.num_nodes - 1}")
        R = self.ranks_per_node
        return list(range(node * R, (node + 1) * R))

    def is_intra_node(self, src: int, dst: int) -> bool:
        R = self.ranks_per_node
        return src // R == dst // R

    # ---------------------------------------------------------------- summary
    def summary(self) -> dict[str, Any]:
        """Counts and capacities; bandwidths bytes/s per direction, latencies s."""
        vert: dict[str, int] = {}
        for _vid, a in self.template.vertices:
            vert[a["kind"]] = vert.get(a["kind"], 0) + self.num_nodes
        for _vid, a in self.fabric.vertices():
            vert[a["kind"]] = vert.get(a["kind"], 0) + 1
        links: dict[str, dict[str, Any]] = {}

        def add(kind: str, bw: float, lat: float, count: int, nlinks: int) -> None:
            d = links.setdefault(
                kind, {"count": 0, "physical_links": 0, "bandwidths": set(), "latencies": set()}
            )
            d["count"] += count
            d["physical_links"] += count * nlinks
            d["bandwidths"].add(float(bw))
            d["latencies"].add(float(lat))

        for _u, _v, a in self.template.edges:
            add(a["kind"], a["bandwidth"], a["latency"], self.num_nodes, a["links"])
        f = self.fabric
        fbw, flat = f.edge_arrays()
        if f.num_edges:
            pairs, counts = np.unique(np.stack([fbw, flat], axis=1), axis=0, return_counts=True)
            for (bw, lat), cnt in zip(pairs, counts, strict=True):
                add(f.kind, bw, lat, int(cnt), 1)
        for d in links.values():
            d["bandwidths"] = sorted(d["bandwidths"])
            d["latencies"] = sorted(d["latencies"])
        t = self.template
        intra = [
            (a, b) for a in range(self.ranks_per_node) for b in range(self.ranks_per_node) if a != b
        ]
        node_facts: dict[str, Any] = {
            "template": t.name,
            "rank_kind": t.rank_kind,
            "ranks_per_node": self.ranks_per_node,
            "nics_per_node": self.nics_per_node,
            "rank_nic": list(t.rank_nic),
            "injection_bandwidth": self.nics_per_node * f.nic_bandwidth,
        }
        if intra:
            hops = [len(t.pair_path[a][b]) for a, b in intra]
            node_facts["intra_node_hops"] = [min(hops), max(hops)]
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "file": self.file,
            "num_nodes": self.num_nodes,
            "max_nodes": self.max_nodes,
            "ranks_per_node": self.ranks_per_node,
            "num_ranks": self.num_ranks,
            "num_vertices": sum(vert.values()),
            "num_links": self.num_links,
            "vertices": dict(sorted(vert.items())),
            "links": dict(sorted(links.items())),
            "node": node_facts,
            "fabric": f.info(),
            "assumptions": list(self.assumptions),
            "sources": list(self.sources),
        }
        if self.num_nodes > 1:
            out["inter_node_latency"] = self.path_latency(0, self.ranks_per_node)
        return out

    def __repr__(self) -> str:
        return (
            f"Cluster({self.name!r}, nodes={self.num_nodes}, ranks={self.num_ranks}, "
            f"links={self.num_links})"
        )


# --------------------------------------------------------------------- building


def _template_from_spec(spec: TopologySpec, file: str | None, notes: list[str]) -> NodeTemplate:
    node = spec.node
    tpl = node.template

    def err(path: str, value: Any, problem: str, allowed: Any = None) -> ConfigError:
        return ConfigError(file, path, value, problem, allowed)

    builder = NODE_BUILDERS.lookup(tpl, file, "node.template")
    uses = builder.sections
    for section in ("nvlink", "nvswitch", "cores"):
        if getattr(node, section) is not None and section not in uses:
            raise err(
                f"node.{section}",
                section,
                f"section not used by template {tpl!r}",
                f"sections for {tpl}: "
                + (", ".join(sorted(uses)) or "none of nvlink/nvswitch/cores"),
            )
    n_ranks, gpus = builder.ranks(node, err)

    host, nics = node.host, node.nics
    slots = host.pcie_switches or host.sockets
    slot_word = "PCIe switch" if host.pcie_switches else "socket"
    if host.gpu_attach is not None:
        if gpus is None:
            raise err("node.host.gpu_attach", host.gpu_attach, f"no GPUs in template {tpl!r}")
        if len(host.gpu_attach) != gpus:
            raise err("node.host.gpu_attach", host.gpu_attach, f"needs one entry per GPU ({gpus})")
        for i, s in enumerate(host.gpu_attach):
            if not 0 <= s < slots:
                raise err(
                    f"node.host.gpu_attach[{i}]", s, f"no such {slot_word}", f"0..{slots - 1}"
                )
    if host.nic_attach is not None:
        if len(host.nic_attach) != nics.count:
            raise err(
                "node.host.nic_attach", host.nic_attach, f"needs one entry per NIC ({nics.count})"
            )
        for i, s in enumerate(host.nic_attach):
            if not 0 <= s < slots:
                raise err(
                    f"node.host.nic_attach[{i}]", s, f"no such {slot_word}", f"0..{slots - 1}"
                )
    if nics.affinity is not None:
        if len(nics.affinity) != n_ranks:
            raise err(
                "node.nics.affinity",
                nics.affinity,
                f"needs one NIC index per rank of a node ({n_ranks})",
            )
        for i, j in enumerate(nics.affinity):
            if not 0 <= j < nics.count:
                raise err(
                    f"node.nics.affinity[{i}]",
                    j,
                    "no such NIC",
                    f"0..{nics.count - 1}" if nics.count else "no NICs defined",
                )
    if nics.count == 0 and spec.max_nodes > 1:
        raise err(
            "node.nics.count",
            0,
            "a multi-node topology needs at least one NIC per node",
            "an integer >= 1",
        )

    # which physical numbers came from built-in defaults
    host_fields = ["pcie.bandwidth", "pcie.latency"]
    if host.pcie_switches and host.pcie_uplink is not None:
        host_fields += ["pcie_uplink.bandwidth", "pcie_uplink.latency"]
    if host.sockets > 1:
        host_fields += ["inter_socket.bandwidth", "inter_socket.latency"]
    defaults_used(node, "node", ["host." + f for f in host_fields], notes)
    if nics.count:
        defaults_used(node, "node", ["nics.bandwidth", "nics.latency"], notes)

    return builder.build(node, gpus, err, notes)


def _fabric_from_spec(
    spec: TopologySpec,
    num_nodes: int,
    base: int,
    nics_per_node: int,
    file: str | None,
    notes: list[str],
) -> Fabric:
    fab = spec.fabric
    nics = spec.node.nics
    M = num_nodes * nics_per_node
    common = dict(
        num_endpoints=M,
        nics_per_node=max(nics_per_node, 1),
        nic_bandwidth=nics.bandwidth,
        nic_latency=nics.latency,
        kind=fab.kind,
        routing=fab.routing,
        base=base,
        switch_latency=fab.switch_latency,
    )
    build = FABRICS.lookup(fab.type, file, "fabric.type")
    return build(spec, num_nodes, nics_per_node, common, file, notes)


def _single_switch(
    spec: TopologySpec,
    num_nodes: int,
    nics_per_node: int,
    common: dict[str, Any],
    file: str | None,
    notes: list[str],
) -> Fabric:
    """Every NIC on one switch."""
    fab = spec.fabric
    for key in ("nodes_per_leaf", "radix", "spines", "leaves_per_pod", "cores_per_group"):
        if getattr(fab, key) is not None:
            raise ConfigError(
                file,
                f"fabric.{key}",
                getattr(fab, key),
                "not used by fabric type 'single_switch'",
                "type: fat_tree to use it",
            )
    return FatTree(nodes_per_leaf=max(num_nodes, 1), levels=1, **common)


def _fat_tree(
    spec: TopologySpec,
    num_nodes: int,
    nics_per_node: int,
    common: dict[str, Any],
    file: str | None,
    notes: list[str],
) -> Fabric:
    """Two or three levels of switches (see :class:`FatTree`)."""
    fab = spec.fabric
    defaults_used(spec, "", ["fabric.switch_latency"], notes)
    ratio = fab.oversubscription
    per_leaf_ports = 1 if (fab.rail_aligned and nics_per_node > 1) else nics_per_node
    npl = fab.nodes_per_leaf
    if npl is None:
        if fab.radix is None:
            raise ConfigError(
                file,
                "fabric.nodes_per_leaf",
                None,
                "a fat_tree needs nodes_per_leaf or radix",
                "an integer >= 1",
            )
        down = int(fab.radix * ratio / (1.0 + ratio))
        npl = down // per_leaf_ports
        if npl < 1:
            raise ConfigError(
                file,
                "fabric.radix",
                fab.radix,
                f"too few ports: {down} down ports cannot hold one node's {per_leaf_ports} NIC(s)",
            )
    elif fab.radix is not None:
        up = math.ceil(npl * per_leaf_ports / ratio)
        if npl * per_leaf_ports + up > fab.radix:
            raise ConfigError(
                file,
                "fabric.nodes_per_leaf",
                npl,
                f"needs {npl * per_leaf_ports} down + {up} up ports, more than radix {fab.radix}",
                f"at most {int(fab.radix * ratio / (1 + ratio)) // per_leaf_ports}",
            )
    if fab.levels == 2:
        if fab.leaves_per_pod is not None or fab.cores_per_group is not None:
            key = "leaves_per_pod" if fab.leaves_per_pod is not None else "cores_per_group"
            raise ConfigError(
                file,
                f"fabric.{key}",
                getattr(fab, key),
                "only used by a three-level fat-tree",
                "levels: 3 to use it",
            )
        tree = FatTree(
            nodes_per_leaf=npl,
            levels=2,
            oversubscription=ratio,
            spines=fab.spines,
            rail_aligned=fab.rail_aligned,
            **common,
        )
        if fab.radix is not None and tree.L > fab.radix:
            raise ConfigError(
                file,
                "num_nodes",
                num_nodes,
                f"{tree.L} leaves need spines with {tree.L} ports, more than "
                f"radix {fab.radix}; use fabric.levels: 3 or fewer nodes",
            )
        return tree
    lpp = fab.leaves_per_pod
    if lpp is None:
        if fab.radix is None:
            raise ConfigError(
                file,
                "fabric.leaves_per_pod",
                None,
                "a three-level fat_tree needs leaves_per_pod (or radix)",
                "an integer >= 1",
            )
        lpp = max(1, fab.radix // 2)
    tree = FatTree(
        nodes_per_leaf=npl,
        levels=3,
        oversubscription=ratio,
        spines=fab.spines,
        leaves_per_pod=lpp,
        cores_per_group=fab.cores_per_group,
        core_oversubscription=fab.core_oversubscription,
        rail_aligned=fab.rail_aligned,
        **common,
    )
    if fab.radix is not None and tree.P > fab.radix:
        raise ConfigError(
            file,
            "num_nodes",
            num_nodes,
            f"{tree.P} pods need core switches with {tree.P} ports, more than radix {fab.radix}",
        )
    return tree


FABRICS.add("single_switch", _single_switch)
FABRICS.add("fat_tree", _fat_tree)


def build_cluster(
    spec: TopologySpec | dict, num_nodes: int | None = None, file: str | None = None
) -> Cluster:
    """Build a :class:`Cluster` from a validated spec (or a plain dict)."""
    if not isinstance(spec, TopologySpec):
        spec = spec_from_dict(spec, file)
    if spec.default_nodes is not None and spec.default_nodes > spec.max_nodes:
        raise ConfigError(
            file,
            "default_nodes",
            spec.default_nodes,
            f"larger than max_nodes = {spec.max_nodes}",
            f"1..{spec.max_nodes}",
        )
    if num_nodes is None:
        num_nodes = spec.default_nodes or spec.max_nodes
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)):
        raise ConfigError(
            file, "num_nodes", num_nodes, "must be an integer", f"1..{spec.max_nodes}"
        )
    if num_nodes < 1 or num_nodes > spec.max_nodes:
        raise ConfigError(
            file,
            "num_nodes",
            int(num_nodes),
            f"out of range for this topology (max_nodes = {spec.max_nodes})",
            f"1..{spec.max_nodes}",
        )
    template, notes = _template(spec, file)
    base = int(num_nodes) * len(template.edges)
    fabric = _fabric_from_spec(spec, int(num_nodes), base, len(template.nics), file, notes)
    name = spec.name or (Path(file).stem if file else "cluster")
    return Cluster(
        name=name,
        description=spec.description,
        template=template,
        fabric=fabric,
        num_nodes=int(num_nodes),
        max_nodes=spec.max_nodes,
        assumptions=list(spec.assumptions) + notes,
        sources=list(spec.sources),
        file=file,
    )


def _template(spec: TopologySpec, file: str | None) -> tuple[NodeTemplate, list[str]]:
    """The spec's node template and the notes made building it; built once per spec."""
    hit = _TEMPLATES.get(id(spec))
    if hit is None or hit[0] is not spec:
        notes: list[str] = []
        template = _template_from_spec(spec, file, notes)
        if len(_TEMPLATES) >= 64:
            _TEMPLATES.clear()
        _TEMPLATES[id(spec)] = (spec, template, tuple(notes))
        return template, notes
    return hit[1], list(hit[2])


def list_topologies() -> list[str]:
    """Names of the topology files on the search path (user folders, then the shipped
    ``topologies/<name>.yaml``; see :mod:`simcluster.paths`)."""
    dirs = [d for d in topology_dirs() if d.is_dir()]
    return sorted({p.stem for d in dirs for p in d.glob("*.yaml") if paths.is_file(p)})


def _named(filename: str) -> Path | None:
    """``filename`` in the first topology search folder that has it."""
    dirs = topology_dirs()
    hit = next((d / filename for d in dirs if paths.is_file(d / filename)), None)
    # a folder or broken link of that name is reported by _resolve, not "unknown topology"
    return hit or next((d / filename for d in dirs if paths.is_entry(d / filename)), None)


def _resolve(name_or_path: str) -> Path:
    s = str(name_or_path)
    p = Path(s)
    looks_like_path = s.endswith((".yaml", ".yml")) or "/" in s or "\\" in s
    if looks_like_path:
        if paths.exists(p) or paths.is_entry(p):
            return _readable(p, s)
        shipped = _named(p.name) if p.parent == Path(".") else None
        if shipped is not None:
            return _readable(shipped, s)
        raise ConfigError(
            s,
            "<root>",
            s,
            "topology file not found",
            "a shipped name (" + ", ".join(list_topologies()) + ") or a .yaml path",
            near_yaml_files(p),
        )
    shipped = _named(f"{s}.yaml")
    if shipped is not None:
        return _readable(shipped, s)
    raise UnknownNameError("topology", s, list_topologies())


def _readable(path: Path, given: str) -> Path:
    """``path`` when it is a file or a folder (the reader names a folder); a broken link
    or a link loop is a ConfigError saying so (``stat`` would raise)."""
    if paths.is_file(path) or path.is_dir():
        return path
    raise ConfigError(
        str(path), "<root>", given, f"topology file {paths.why_not_a_file(path)}",
        "a shipped name or a .yaml file",
    )  # fmt: skip


#: node templates built from a spec object (kept alive beside them), by id
_TEMPLATES: dict[int, tuple[TopologySpec, NodeTemplate, tuple[str, ...]]] = {}
#: specs read from a file, by (path, modification time, size): a file read once
#: per process serves every node count (the study's sizes, ``nodes_for``)
_SPECS: dict[tuple[str, int, int], TopologySpec] = {}


def load_topology(name_or_path: str, num_nodes: int | None = None) -> Cluster:
    """Load a shipped topology by name (``"puhti"``) or any ``.yaml`` path.

    ``num_nodes`` defaults to the file's ``default_nodes`` or else ``max_nodes``;
    outside ``1..max_nodes`` it is a :class:`~simcluster.errors.ConfigError`.
    A file unchanged since it was last read (same path, mtime and size) is not
    parsed again, and its node template is built once.
    """
    path = _resolve(name_or_path)
    return build_cluster(_spec_at(path), num_nodes, file=str(path))


def _spec_at(path: Path) -> TopologySpec:
    """The spec in the file at ``path``, read again only when the file changed."""
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    spec = _SPECS.get(key)
    if spec is None:
        spec = read_spec(path)
        if len(_SPECS) >= 64:
            _SPECS.clear()
        _SPECS[key] = spec
    return spec


def load_topology_for_ranks(name_or_path: str, ranks: int) -> Cluster:
    """:func:`load_topology` with the nodes that ``ranks`` ranks fill (the last one may
    be partial): ``num_nodes = ceil(ranks / topology_ranks_per_node(...))``, the file
    found and checked once for both."""
    path = _resolve(name_or_path)
    spec = _spec_at(path)
    per_node = _template(spec, str(path))[0].ranks_per_node
    return build_cluster(spec, math.ceil(ranks / per_node), file=str(path))


def topology_ranks_per_node(name_or_path: str) -> int:
    """Ranks on one node of a topology (name or ``.yaml`` path): its node template's,
    as :func:`load_topology` builds it, without building a cluster around it."""
    path = _resolve(name_or_path)
    return _template(_spec_at(path), str(path))[0].ranks_per_node

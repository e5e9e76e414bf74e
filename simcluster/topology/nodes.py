"""Node templates: the inside of one host.

Every node of a cluster is a copy of one :class:`NodeTemplate`. A template holds
its vertices and links (local ids such as ``"gpu1"``, ``"pcie0"``, ``"nic1"``;
the cluster prefixes them with ``"n<node>."``), the vertices that are ranks, and
the paths between ranks and from each rank to its NIC, computed once here and
reused for every node.

Units everywhere: bandwidth in bytes/s **per direction** (links are full
duplex), latency in seconds.

Vertex attributes: ``kind`` (gpu, cpu, nic, switch, pcie), ``local`` (index
among vertices of that role in the host) and ``role`` (rank, socket,
pcie_switch, nic, nvswitch). Link attributes: ``bandwidth``, ``latency``,
``kind`` (nvlink, nvswitch, pcie, qpi, memory) and ``links`` (physical lanes or
links bundled into the edge, e.g. 2 NVLinks).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from heapq import heappop, heappush
from itertools import count
from typing import Any

import networkx as nx

from simcluster.errors import ConfigError
from simcluster.topology.spec import HostSpec, LinkSpec, NICSpec

__all__ = [
    "NodeTemplate",
    "DGX1_V100_NVLINK_PAIRS",
    "nvlink_full_node",
    "dgx1_cube_mesh_node",
    "nvlink_mesh_node",
    "nvswitch_node",
    "pcie_node",
    "single_gpu_node",
    "cpu_core_node",
]

#: DGX-1 (V100) hybrid cube-mesh: (gpu_a, gpu_b, NVLink links). Two fully
#: connected quads (0-3, 4-7) plus cross links i <-> i+4; every GPU uses its 6
#: NVLink2 links. Source: NVIDIA DGX-1 System Architecture white paper
#: (WP-08437-001) and the NCCL topology dump of a DGX-1V in NVIDIA/nccl#671.
DGX1_V100_NVLINK_PAIRS: tuple[tuple[int, int, int], ...] = (
    (0, 1, 1),
    (0, 2, 1),
    (0, 3, 2),
    (0, 4, 2),
    (1, 2, 2),
    (1, 3, 1),
    (1, 5, 2),
    (2, 3, 2),
    (2, 6, 1),
    (3, 7, 1),
    (4, 5, 1),
    (4, 6, 1),
    (4, 7, 2),
    (5, 6, 2),
    (5, 7, 1),
    (6, 7, 2),
)


@dataclass
class NodeTemplate:
    """One host: vertices, links, ranks, NICs and the precomputed local paths.

    ``pair_path[a][b]`` and ``rank_to_nic[a]`` / ``nic_to_rank[a]`` hold *local
    directed link ids*: template edge ``i`` (in ``edges`` order, ``u -> v`` as
    stored) is ``2*i`` forward and ``2*i + 1`` backward.
    """

    name: str
    vertices: list[tuple[str, dict]] = field(default_factory=list)
    edges: list[tuple[str, str, dict]] = field(default_factory=list)
    ranks: list[str] = field(default_factory=list)
    nics: list[str] = field(default_factory=list)
    rank_kind: str = "gpu"
    rank_nic: list[int] = field(default_factory=list)
    pair_path: list[list[tuple[int, ...]]] = field(default_factory=list)
    rank_to_nic: list[tuple[int, ...]] = field(default_factory=list)
    nic_to_rank: list[tuple[int, ...]] = field(default_factory=list)
    #: the node's NVSwitch reduces and multicasts (NVLink SHARP; NCCL's NVLS)
    multicast: bool = False

    # ----------------------------------------------------------------- building
    def add_vertex(self, vid: str, kind: str, local: int, role: str) -> str:
        self.vertices.append((vid, {"kind": kind, "local": local, "role": role}))
        return vid

    def add_link(
        self, u: str, v: str, bandwidth: float, latency: float, kind: str, links: int = 1
    ) -> None:
        self.edges.append(
            (
                u,
                v,
                {
                    "bandwidth": float(bandwidth),
                    "latency": float(latency),
                    "kind": kind,
                    "links": int(links),
                },
            )
        )

    def graph(self) -> nx.Graph:
        """The template as a small networkx graph with local vertex ids."""
        g = nx.Graph(name=self.name)
        g.add_nodes_from(self.vertices)
        g.add_edges_from(self.edges)
        return g

    @property
    def ranks_per_node(self) -> int:
        return len(self.ranks)

    # ------------------------------------------------------------------ routing
    def compute_paths(self, affinity: Sequence[int] | None = None) -> None:
        """Fill ``pair_path``, ``rank_nic``, ``rank_to_nic``, ``nic_to_rank``.

        Rank-to-rank paths follow capacity, as NCCL's topology search does
        (its path types NVL < NVB < PIX/PXB/PHB/SYS): a path over NVLink /
        NVSwitch links alone wins over any path that touches PCIe or QPI; among
        those, fewer GPUs in the middle win (NCCL's NVB: a GPU forwards NVLink
        traffic), then the widest
        bottleneck bandwidth, then the lower total latency, then fewer hops,
        then construction order. Without an NVLink path, paths cross only
        sockets, PCIe switches and NICs (CUDA peer copies over PCIe do not hop
        through a third GPU) and minimise hop count, then latency. The NIC of a rank is
        ``affinity[rank]`` when given, else the nearest NIC (ties: the NIC whose
        index is closest to ``local * nics // ranks``).
        """
        index: dict[tuple[str, str], int] = {}
        seen: set[frozenset] = set()
        for i, (u, v, _a) in enumerate(self.edges):
            key = frozenset((u, v))
            if key in seen or u == v:
                raise ValueError(f"template {self.name}: duplicate link {u}-{v}")
            seen.add(key)
            index[(u, v)] = 2 * i
            index[(v, u)] = 2 * i + 1
        total_lat = sum(a["latency"] for _, _, a in self.edges) or 1.0
        scale = 0.5 / total_lat

        g = _adjacency(self.vertices, self.edges)
        for _u, _v, a in _edge_list(g):
            a["w"] = 1.0 + a["latency"] * scale
        rank_set = set(self.ranks)
        dist: dict[str, dict[str, float]] = {}
        paths: dict[str, dict[str, list[str]]] = {}
        adj = {
            u: {v: a["w"] for v, a in nbrs_u.items() if v not in rank_set}
            for u, nbrs_u in g.items()
            if u not in rank_set
        }  # the links between non-rank vertices (networkx's subgraph of them)
        for src in adj:
            dist[src], paths[src] = _dijkstra(adj, src)

        def nbrs(r: str) -> list[tuple[str, float]]:
            return [(u, a["w"]) for u, a in g[r].items() if u not in rank_set]

        def best(a: str, b: str) -> list[str] | None:
            cand: tuple[float, list[str]] | None = None
            if b in g[a]:
                cand = (g[a][b]["w"], [a, b])
            for u, wa in nbrs(a):
                du = dist[u]
                for v, wb in nbrs(b) if b in rank_set else [(b, 0.0)]:
                    if v not in du:
                        continue
                    c = wa + du[v] + wb
                    if cand is None or c < cand[0] - 1e-12:
                        tail = [] if v == b else [b]
                        cand = (c, [a] + paths[u][v] + tail)
            return None if cand is None else cand[1]

        def to_ids(vs: list[str]) -> tuple[int, ...]:
            return tuple(index[(vs[i], vs[i + 1])] for i in range(len(vs) - 1))

        R = len(self.ranks)
        nv_best = _nvlink_paths(g, self.ranks)
        self.pair_path = []
        for a in self.ranks:
            row = []
            for b in self.ranks:
                if a == b:
                    row.append(())
                    continue
                p = nv_best.get((a, b)) or best(a, b)
                if p is None:
                    raise ValueError(f"template {self.name}: no path from {a} to {b}")
                row.append(to_ids(p))
            self.pair_path.append(row)

        self.rank_nic, self.rank_to_nic, self.nic_to_rank = [], [], []
        N = len(self.nics)
        if N == 0:
            return
        for local, r in enumerate(self.ranks):
            options = []
            for nic in self.nics:
                p = best(r, nic)
                cost = (
                    float("inf")
                    if p is None
                    else sum(g[p[i]][p[i + 1]]["w"] for i in range(len(p) - 1))
                )
                options.append((cost, p))
            if affinity is not None:
                j = affinity[local]
            else:
                low = min(c for c, _ in options)
                ties = [j for j, (c, _) in enumerate(options) if c <= low + 1e-9]
                pref = local * N // R
                j = min(ties, key=lambda k: (abs(k - pref), k))
            p = options[j][1]
            if p is None:
                raise ValueError(f"template {self.name}: no path from {r} to {self.nics[j]}")
            self.rank_nic.append(j)
            self.rank_to_nic.append(to_ids(p))
            self.nic_to_rank.append(to_ids(list(reversed(p))))


#: Link kinds that carry NVLink traffic (direct GPU links and NVSwitch ports).
NVLINK_KINDS = frozenset({"nvlink", "nvswitch"})


def _adjacency(
    vertices: Sequence[tuple[str, dict]], edges: Sequence[tuple[str, str, dict]]
) -> dict[str, dict[str, dict]]:
    """``{u: {v: edge attributes}}`` as ``networkx.Graph`` builds it from ``vertices``
    then ``edges`` (``add_nodes_from``, ``add_edges_from``): vertices in order of first
    appearance, each one's neighbours in edge order, one attribute dict per edge (a
    copy, shared by both directions; a repeated edge updates it). Plain dicts: a first
    networkx graph of the process cost about 0.3 ms to build."""
    adj: dict[str, dict[str, dict]] = {v: {} for v, _ in vertices}
    for u, v, a in edges:
        nu = adj.get(u)
        if nu is None:
            nu = adj[u] = {}
        nv = adj.get(v)
        if nv is None:
            nv = adj[v] = {}
        d = nu.get(v)
        if d is None:
            d = {}
        d.update(a)
        nu[v] = d
        nv[u] = d
    return adj


def _edge_list(adj: dict[str, dict[str, dict]]) -> Iterator[tuple[str, str, dict]]:
    """Each edge of ``adj`` once, as ``networkx.Graph.edges(data=True)`` lists them:
    from the earlier vertex, vertices in order, neighbours in order."""
    seen: set[str] = set()
    for u, nbrs in adj.items():
        for v, a in nbrs.items():
            if v not in seen:
                yield u, v, a
        seen.add(u)


def _nvlink_paths(g: dict[str, dict[str, dict]], ranks: Sequence[str], max_hops: int = 4) -> dict:
    """Best all-NVLink path per ordered rank pair that has one (vertex lists), over
    the adjacency ``g`` (:func:`_adjacency`).

    Order: fewer GPU relays, wider bottleneck (bytes/s), lower
    latency (s), fewer hops; paths of at most ``max_hops`` links (an NVSwitch
    hop is two links, GPU -> switch -> GPU).
    """
    adj = _adjacency((), [e for e in _edge_list(g) if e[2].get("kind") in NVLINK_KINDS])
    rank_set = set(ranks)
    out: dict[tuple[str, str], list[str]] = {}
    for a in ranks:
        if a not in adj:
            continue
        for b in ranks:
            if b == a or b not in adj:
                continue
            best_key, best_path = None, None
            # with a direct link (no relay) a path through another GPU (a relay) never
            # wins: the search does not go through one (the paths it still lists come
            # in the same order)
            through = rank_set - {b} if b in adj[a] else frozenset()
            for path in _simple_paths(adj, a, b, max_hops, through):
                hops = list(zip(path[:-1], path[1:], strict=True))
                relay = sum(v in rank_set for v in path[1:-1])
                width = min(adj[u][v]["bandwidth"] for u, v in hops)
                lat = sum(adj[u][v]["latency"] for u, v in hops)
                key = (relay, -width, round(lat, 15), len(hops))
                if best_key is None or key < best_key:
                    best_key, best_path = key, path
            if best_path is not None:
                out[(a, b)] = best_path
    return out


def _dijkstra(
    adj: dict[str, dict[str, float]], source: str
) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Shortest distances and paths from ``source`` over edge weights ``adj[u][v]``,
    the way networkx's ``single_source_dijkstra`` finds them (same ties: the
    first neighbour, in adjacency order, to reach a vertex at its least distance
    names its predecessor). Plain Python: no networkx dispatch on the hot path."""
    dist: dict[str, float] = {}
    seen = {source: 0.0}
    pred: dict[str, str] = {}
    c = count()
    fringe: list[tuple[float, int, str]] = [(0.0, next(c), source)]
    while fringe:
        d, _, v = heappop(fringe)
        if v in dist:
            continue
        dist[v] = d
        for u, w in adj[v].items():
            vu = d + w
            if u in dist:
                continue
            if u not in seen or vu < seen[u]:
                seen[u] = vu
                heappush(fringe, (vu, next(c), u))
                pred[u] = v
    paths: dict[str, list[str]] = {source: [source]}
    for v in dist:
        if v != source:
            paths[v] = paths[pred[v]] + [v]
    return dist, paths


def _simple_paths(
    adj: Any, source: str, target: str, cutoff: int, avoid: Any = frozenset()
) -> Iterator[list[str]]:
    """Every simple path from ``source`` to ``target`` of at most ``cutoff`` links,
    depth first in adjacency order (networkx's ``all_simple_paths`` order); with
    ``avoid``, only those that pass through none of its vertices."""
    path = [source]
    on_path = {source}
    stack = [iter(adj[source])]
    while stack:
        nxt = next((v for v in stack[-1] if v not in on_path), None)
        if nxt is None:
            stack.pop()
            on_path.discard(path.pop())
            continue
        if nxt == target:
            yield [*path, nxt]
        elif len(path) < cutoff and nxt not in avoid:
            path.append(nxt)
            on_path.add(nxt)
            stack.append(iter(adj[nxt]))


# ----------------------------------------------------------------------- host


def _spread(i: int, n_items: int, n_slots: int) -> int:
    return i * n_slots // n_items


def _add_host(
    t: NodeTemplate,
    host: HostSpec,
    nics: NICSpec,
    devices: Sequence[str],
    socket_prefix: str = "cpu",
    device_attach: Sequence[int] | None = None,
) -> list[str]:
    """Sockets, PCIe switches and NICs; attach ``devices`` (GPUs) to PCIe.

    Sockets are linked pairwise (kind qpi, ``host.inter_socket``). PCIe switch
    ``p`` hangs off socket ``p * sockets // switches`` (``host.pcie_uplink``,
    default ``host.pcie``). Device ``i`` and NIC ``j`` attach with a
    ``host.pcie`` link to the switch (or, with no switches, the socket) given by
    ``gpu_attach`` / ``nic_attach`` or spread evenly in index order.
    Returns the socket vertex ids.
    """
    S, P = host.sockets, host.pcie_switches
    sockets = [t.add_vertex(f"{socket_prefix}{s}", "cpu", s, "socket") for s in range(S)]
    for a in range(S):
        for b in range(a + 1, S):
            t.add_link(
                sockets[a],
                sockets[b],
                host.inter_socket.bandwidth,
                host.inter_socket.latency,
                "qpi",
            )
    up: LinkSpec = host.pcie_uplink or host.pcie
    switches = [t.add_vertex(f"pcie{p}", "pcie", p, "pcie_switch") for p in range(P)]
    for p, sw in enumerate(switches):
        t.add_link(sw, sockets[_spread(p, P, S)], up.bandwidth, up.latency, "pcie")
    slots = switches or sockets
    attach = device_attach if device_attach is not None else host.gpu_attach
    for i, dev in enumerate(devices):
        slot = attach[i] if attach is not None else _spread(i, len(devices), len(slots))
        t.add_link(dev, slots[slot], host.pcie.bandwidth, host.pcie.latency, "pcie")
    for j in range(nics.count):
        nic = t.add_vertex(f"nic{j}", "nic", j, "nic")
        t.nics.append(nic)
        slot = (
            host.nic_attach[j]
            if host.nic_attach is not None
            else _spread(j, nics.count, len(slots))
        )
        t.add_link(nic, slots[slot], host.pcie.bandwidth, host.pcie.latency, "pcie")
    return sockets


def _gpus(t: NodeTemplate, n: int) -> list[str]:
    out = [t.add_vertex(f"gpu{g}", "gpu", g, "rank") for g in range(n)]
    t.ranks.extend(out)
    t.rank_kind = "gpu"
    return out


def _finish(t: NodeTemplate, nics: NICSpec) -> NodeTemplate:
    t.compute_paths(nics.affinity)
    return t


# ------------------------------------------------------------------- builders


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ConfigError(None, name, value, "must be an integer >= 1", "an integer >= 1")


def nvlink_mesh_node(
    gpus: int,
    pairs: Sequence[tuple[int, int, int]],
    link_bandwidth: float = 25e9,
    latency: float = 7e-7,
    host: HostSpec | None = None,
    nics: NICSpec | None = None,
    name: str = "nvlink_mesh",
) -> NodeTemplate:
    """GPUs with NVLink between the listed pairs, plus a PCIe host.

    ``pairs``: ``(a, b, links)``; the edge a-b gets ``links * link_bandwidth``
    bytes/s per direction and attribute ``links``. ``latency`` in seconds.
    A pair naming a GPU outside ``0..gpus-1``, a GPU twice, fewer than one link
    or a pair listed twice is a :class:`~simcluster.errors.ConfigError` whose
    path is ``pairs[i]``.
    """
    _check_count("gpus", gpus)
    seen: set[frozenset[int]] = set()
    for i, pair in enumerate(pairs):
        p = f"pairs[{i}]"
        if len(pair) != 3:
            raise ConfigError(None, p, list(pair), "a pair is [gpu_a, gpu_b, links]")
        a, b, k = pair
        if not (0 <= a < gpus and 0 <= b < gpus) or a == b:
            raise ConfigError(
                None, p, [a, b, k], "GPU indices must be two different GPUs", f"0..{gpus - 1}"
            )
        if k < 1:
            raise ConfigError(None, p, [a, b, k], "links must be at least 1")
        if frozenset((a, b)) in seen:
            raise ConfigError(None, p, [a, b, k], "pair listed twice; give the total links once")
        seen.add(frozenset((a, b)))
    host = host or HostSpec()
    nics = nics or NICSpec()
    t = NodeTemplate(name)
    g = _gpus(t, gpus)
    for a, b, links in pairs:
        t.add_link(g[a], g[b], links * link_bandwidth, latency, "nvlink", links)
    _add_host(t, host, nics, g)
    return _finish(t, nics)


def nvlink_full_node(
    gpus: int,
    link_bandwidth: float = 25e9,
    links_per_pair: int = 1,
    latency: float = 7e-7,
    host: HostSpec | None = None,
    nics: NICSpec | None = None,
) -> NodeTemplate:
    """Fully connected NVLink (e.g. 4 x V100 SXM2): every GPU pair linked.

    Pair bandwidth = ``links_per_pair * link_bandwidth`` bytes/s per direction.
    """
    pairs = [(a, b, links_per_pair) for a in range(gpus) for b in range(a + 1, gpus)]
    return nvlink_mesh_node(gpus, pairs, link_bandwidth, latency, host, nics, "nvlink_full")


def dgx1_cube_mesh_node(
    link_bandwidth: float = 25e9,
    latency: float = 7e-7,
    host: HostSpec | None = None,
    nics: NICSpec | None = None,
) -> NodeTemplate:
    """DGX-1 (V100) hybrid cube-mesh of 8 GPUs, 6 NVLinks per GPU.

    See :data:`DGX1_V100_NVLINK_PAIRS`; ``link_bandwidth`` bytes/s per
    direction per NVLink (25 GB/s for NVLink2).
    """
    return nvlink_mesh_node(
        8, DGX1_V100_NVLINK_PAIRS, link_bandwidth, latency, host, nics, "dgx1_cube_mesh"
    )


def nvswitch_node(
    gpus: int,
    bandwidth: float,
    latency: float = 5e-7,
    links_per_gpu: int = 1,
    host: HostSpec | None = None,
    nics: NICSpec | None = None,
    multicast: bool = False,
) -> NodeTemplate:
    """GPUs on an NVSwitch system (DGX-2, DGX A100, DGX H100).

    The NVSwitch chips are modelled as one non-blocking switch vertex
    ``nvswitch0``; each GPU has one link of ``bandwidth`` bytes/s per direction
    (e.g. 12 x 25 GB/s = 300 GB/s on A100) and ``latency`` seconds to it.
    ``multicast``: the switch reduces and multicasts (NVLink SHARP).
    """
    _check_count("gpus", gpus)
    host = host or HostSpec()
    nics = nics or NICSpec()
    t = NodeTemplate("nvswitch", multicast=bool(multicast))
    g = _gpus(t, gpus)
    sw = t.add_vertex("nvswitch0", "switch", 0, "nvswitch")
    for v in g:
        t.add_link(v, sw, bandwidth, latency, "nvswitch", links_per_gpu)
    _add_host(t, host, nics, g)
    return _finish(t, nics)


def pcie_node(gpus: int, host: HostSpec | None = None, nics: NICSpec | None = None) -> NodeTemplate:
    """GPUs that talk only over PCIe: GPU -> PCIe switch (or CPU root port) -> ... -> GPU.

    Link rates come from ``host.pcie`` (GPU/NIC links), ``host.pcie_uplink``
    (switch to socket) and ``host.inter_socket``; bytes/s per direction.
    """
    _check_count("gpus", gpus)
    host = host or HostSpec()
    nics = nics or NICSpec()
    t = NodeTemplate("pcie" if gpus > 1 else "single_gpu")
    g = _gpus(t, gpus)
    _add_host(t, host, nics, g)
    return _finish(t, nics)


def single_gpu_node(host: HostSpec | None = None, nics: NICSpec | None = None) -> NodeTemplate:
    """One GPU on PCIe with its host and NIC(s)."""
    return pcie_node(1, host, nics)


def cpu_core_node(
    cores_per_socket: int,
    memory: LinkSpec | None = None,
    host: HostSpec | None = None,
    nics: NICSpec | None = None,
) -> NodeTemplate:
    """CPU cores as ranks (one MPI rank per core).

    Cores ``cpu<c>`` (kind cpu, role rank) link to their socket vertex
    ``socket<s>`` (kind cpu, role socket) with a ``memory`` link: a core's share
    of memory bandwidth, bytes/s per direction; core to core on one socket is
    core -> socket -> core, across sockets it adds the qpi link
    ``host.inter_socket``. NICs attach by PCIe as in GPU nodes.
    """
    _check_count("cores_per_socket", cores_per_socket)
    host = host or HostSpec()
    nics = nics or NICSpec()
    memory = memory or LinkSpec(bandwidth=10e9, latency=1e-7)
    t = NodeTemplate("cpu_cores")
    t.rank_kind = "cpu"
    n = host.sockets * cores_per_socket
    cores = [t.add_vertex(f"cpu{c}", "cpu", c, "rank") for c in range(n)]
    t.ranks.extend(cores)
    sockets = _add_host(t, host, nics, [], socket_prefix="socket")
    for c, core in enumerate(cores):
        t.add_link(core, sockets[c // cores_per_socket], memory.bandwidth, memory.latency, "memory")
    return _finish(t, nics)

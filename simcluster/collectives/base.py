"""What a collective is, and the context its algorithms lower it in.

A collective algorithm turns one call on a group of ranks into *phases*: a
phase is a list of flows that start together; the next phase starts when every
flow of the previous one has ended. Steps that are provably identical (the
P-1 steps of a ring, the stages of a pipelined chain) are folded into one flow
that carries the bytes of all of them and pays the start-up latency of each:
on a ring where each step's flows see the same rates this is exact, and
contention between concurrent flows is still computed for every phase.

Sizes are bytes, times seconds, bandwidths bytes/s.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import cached_property

import numpy as np

from simcluster.collectives.protocols import (
    Nvls,
    Protocol,
    family_of,
    parse_nvls,
    parse_protocols,
    parse_selection,
    parse_tree_channel_max,
    parse_tree_correction,
)
from simcluster.collectives.route_memo import RouteMemo
from simcluster.errors import UserError
from simcluster.network.flow import FlowBatch, FlowSpec
from simcluster.program import OPS, CollectiveCall  # the op vocabulary lives with the programs
from simcluster.topology.nodes import NVLINK_KINDS

__all__ = ["CollectiveCall", "CommContext", "Phase", "OPS"]

Phase = list[FlowSpec]


class CommContext:
    """Cluster routes plus the network profile's per-message costs.

    cluster: a :class:`simcluster.topology.Cluster`.
    per_message_overhead: software start-up per message and per pipeline step
        (seconds), from the network profile.
    link_efficiency: achievable fraction of nominal bandwidth per link kind,
        from the network profile (1.0 where absent).
    """

    def __init__(
        self,
        cluster,
        per_message_overhead: float = 0.0,
        link_efficiency: dict[str, float] | None = None,
        protocols: dict[str, Protocol] | None = None,
        nvls: Nvls | None = None,
        tree_channel_max: tuple[float, float, float] | None = None,
        selection: str = "tuner",
        tree_correction: dict[str, tuple[float, ...]] | None = None,
    ) -> None:
        self.cluster = cluster
        #: how ``auto`` picks (protocols.parse_selection): ``tuner`` or ``nccl-2.4``
        self.selection = selection
        #: one process created every rank's communicator (ncclCommInitAll, nccl-tests
        #: without MPI); NCCL 2.4's thread threshold depends on it (nccl24.py)
        self.one_process = False
        #: NCCL's tuner cap on the tree's bus bandwidth per channel, bytes/s, for
        #: 1, 2 and more nodes (protocols.parse_tree_channel_max), or None
        self.tree_channel_max = tree_channel_max
        #: NCCL's size factors of the tree allreduce's bandwidth, per protocol
        #: (protocols.parse_tree_correction); empty: none
        self.tree_correction = dict(tree_correction or {})
        #: NCCL's NVLS allreduce numbers (network.protocols.NVLS), or None
        self.nvls = nvls
        self.per_message_overhead = float(per_message_overhead)
        #: LL / LL128 / Simple from the network profile; empty: the path latency
        #: plus ``per_message_overhead`` model, one protocol
        self.protocols: dict[str, Protocol] = dict(protocols or {})
        #: while a shape is lowered under the protocols: per hop class, the
        #: step latency of every protocol (s, one column per protocol in
        #: :attr:`protocols` order), and each protocol's ``net_overhead_s``
        self.active: dict | None = None
        eff = link_efficiency or {}
        if hasattr(cluster, "link_kind_index"):  # per kind, not per link (millions of links)
            kinds, index = cluster.link_kind_index
            factors = np.array([eff.get(k, 1.0) for k in kinds], dtype=np.float64)[index]
        else:
            factors = np.array([eff.get(k, 1.0) for k in cluster.link_kind], dtype=np.float64)
        #: effective capacity of each directed link, bytes/s
        self.capacity = np.asarray(cluster.link_bandwidth, dtype=np.float64) * factors
        bad = ~(np.isfinite(self.capacity) & (self.capacity > 0))
        if bad.any():  # NaN or zero capacity would stall max-min; profiles are checked first
            i = int(np.argmax(bad))
            raise UserError(
                f"link kind {cluster.link_kind[i]!r}: effective bandwidth "
                f"{self.capacity[i]!r} B/s is not a positive finite number"
            )
        self._alpha: dict[tuple[int, int], float] = {}
        self._pxn: dict[tuple[int, int], tuple[int, ...]] = {}
        #: lowered collective shapes (per-unit-byte flow batches), see registry.lower
        self.shapes: dict[tuple, list] = {}

    @classmethod
    def from_profile(cls, cluster, netp) -> CommContext:
        """A context from a loaded network profile (protocols included)."""
        protocols = parse_protocols(netp.protocols, netp.file) if netp.protocols else None
        nvls = parse_nvls(netp.protocols, netp.file) if netp.protocols else None
        cap = parse_tree_channel_max(netp.protocols, netp.file) if netp.protocols else None
        sel = parse_selection(netp.protocols, netp.file)
        corr = parse_tree_correction(netp.protocols, netp.file) if netp.protocols else None
        return cls(
            cluster, netp.per_message_overhead_s, netp.link_efficiency, protocols, nvls, cap, sel,
            corr,
        )  # fmt: skip

    @contextmanager
    def lowering(self, algorithm: str | None):
        """Lower ``algorithm`` under every protocol at once (None: no protocols).

        Inside, :meth:`alpha` returns one latency per protocol (a vector in
        :attr:`protocols` order) and flows carry such vectors as latency.
        """
        prev = self.active
        if algorithm is None or not self.protocols:
            self.active = None
        else:
            fam = family_of(algorithm)
            ps = list(self.protocols.values())
            self.active = {
                c: np.array([p.hop(fam, c) for p in ps]) for c in ("nvlink", "pcie", "net")
            }
            self.active["overhead"] = np.array([p.net_overhead_s for p in ps])
            # tuning.cc: with one rank per node the network latency is fully
            # exposed, so NCCL charges such rings the tree's network step latency
            self.active["net_ppn1"] = np.array([p.hop("tree", "net") for p in ps])
            self.active["family"] = fam
        try:
            yield
        finally:
            self.active = prev

    @cached_property
    def _local_nvlink_only(self) -> np.ndarray:
        """(R, R) bool: does the intra-node route a -> b use NVLink/NVSwitch only?"""
        t = self.cluster.template
        kinds = [a["kind"] for _, _, a in t.edges]
        R = self.cluster.ranks_per_node
        out = np.zeros((R, R), dtype=bool)
        for a in range(R):
            for b in range(R):
                path = t.pair_path[a][b]
                out[a, b] = bool(path) and all(kinds[i // 2] in NVLINK_KINDS for i in path)
        return out

    @cached_property
    def _local_hop_class(self) -> list[list[str]]:
        return [["nvlink" if x else "pcie" for x in row] for row in self._local_nvlink_only]

    def hop_classes(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """:meth:`hop_class` of every (src, dst) pair: 0 nvlink, 1 pcie, 2 net."""
        R = self.cluster.ranks_per_node
        ns, ls = np.divmod(np.asarray(src, dtype=np.int64).reshape(-1), R)
        nd, ld = np.divmod(np.asarray(dst, dtype=np.int64).reshape(-1), R)
        return np.where(ns != nd, 2, np.where(self._local_nvlink_only[ls, ld], 0, 1))

    @cached_property
    def _pxn_relay(self) -> np.ndarray:
        """(R, R) local index of the PXN relay GPU for local ranks a -> b on
        different nodes (see :meth:`pxn_route`), ``-1`` where there is none."""
        c = self.cluster
        t = getattr(c, "template", None)
        R = c.ranks_per_node
        out = np.full((R, R), -1, dtype=np.int64)
        if t is None or not t.nics:
            return out
        for ls in range(R):
            for ld in range(R):
                rail = t.rank_nic[ld]
                if t.rank_nic[ls] == rail:
                    continue
                near = [
                    x for x in range(R) if t.rank_nic[x] == rail and self._local_nvlink_only[ls, x]
                ]
                if near:
                    out[ls, ld] = near[0]
        return out

    def pxn_routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`pxn_route` of every (src, dst) pair, as :meth:`Cluster.routes`
        returns routes: ``(entry_flow, entry_link)`` in path order."""
        src = np.asarray(src, dtype=np.int64).reshape(-1)
        dst = np.asarray(dst, dtype=np.int64).reshape(-1)
        R = self.cluster.ranks_per_node
        ns, ls = np.divmod(src, R)
        nd, ld = np.divmod(dst, R)
        relay = self._pxn_relay[ls, ld]
        use = (ns != nd) & (relay >= 0)
        if not use.any():
            return self.cluster.routes(src, dst)
        mid = np.where(use, ns * R + relay, dst)
        f1, l1 = self.cluster.routes(src, mid)
        f2, l2 = self.cluster.routes(mid[use], dst[use])
        flow = np.concatenate([f1, np.flatnonzero(use)[f2]])
        link = np.concatenate([l1, l2])
        order = np.argsort(flow, kind="stable")  # each flow: to the relay, then onwards
        return flow[order], link[order]

    def path_latencies(self, entry_flow: np.ndarray, entry_link: np.ndarray, n: int) -> np.ndarray:
        """Per flow, the sum of its links' latencies in path order (s), as
        :meth:`Cluster.path_latency` sums them."""
        lat = self.cluster.link_latency[entry_link]
        return np.bincount(entry_flow, weights=lat, minlength=n)

    def hop_class(self, src: int, dst: int) -> str:
        """What one step src -> dst crosses: ``nvlink``, ``pcie`` or ``net``."""
        R = self.cluster.ranks_per_node
        ns, ls = divmod(src, R)
        nd, ld = divmod(dst, R)
        if ns != nd:
            return "net"
        return self._local_hop_class[ls][ld]

    def pxn_route(self, src: int, dst: int) -> tuple[int, ...]:
        """Route src -> dst on another node that stays on dst's NIC rail.

        NCCL's PXN: when the two GPUs use NICs of different rails, the sender
        hands the data over NVLink to the GPU of its node on the receiver's
        rail, which sends it through its own NIC. Without such a GPU (or an
        all-NVLink path to it) this is :meth:`Cluster.route`.
        """
        key = (src, dst)
        hit = self._pxn.get(key)
        if hit is not None:
            return hit
        c = self.cluster
        t = getattr(c, "template", None)
        R = c.ranks_per_node
        hit = c.route(src, dst)
        if t is not None and t.nics and src // R != dst // R:
            ls, ld = src % R, dst % R
            rail = t.rank_nic[ld]
            if t.rank_nic[ls] != rail:
                near = [
                    x for x in range(R) if t.rank_nic[x] == rail and self._local_nvlink_only[ls, x]
                ]
                if near:
                    relay = (src // R) * R + near[0]
                    hit = c.route(src, relay) + c.route(relay, dst)
        self._pxn[key] = hit
        return hit

    @cached_property
    def inter_node_link(self) -> np.ndarray:
        """Boolean per directed link: does it lie outside every node (NIC/fabric)?"""
        table = getattr(self.cluster, "inter_node_link", None)
        if table is not None:  # a Cluster knows it from its link table: no networkx graph
            return table
        g = self.cluster.graph
        out = np.zeros(self.cluster.num_links, dtype=bool)
        for i, (u, v) in enumerate(self.cluster.link_ends):
            nu, nv = g.nodes[u].get("node"), g.nodes[v].get("node")
            out[i] = nu is None or nv is None or nu != nv
        return out

    @cached_property
    def nics_per_node(self) -> int:
        if hasattr(self.cluster, "nics_per_node"):
            return max(self.cluster.nics_per_node, 1)
        g = self.cluster.graph
        n = sum(1 for _, a in g.nodes(data=True) if a.get("kind") == "nic" and a.get("node") == 0)
        return max(n, 1)

    def node_of(self, rank: int) -> int:
        return int(self.cluster.rank_node[rank])

    def alpha(self, src: int, dst: int) -> float | np.ndarray:
        """Start-up latency of one message src -> dst (s): path latency plus
        overhead; while lowering under protocols, each protocol's step latency
        for what the step crosses (a vector, see :meth:`lowering`)."""
        act = self.active
        if act is not None:
            return act[self.hop_class(src, dst)]
        key = (src, dst)
        a = self._alpha.get(key)
        if a is None:
            a = self.cluster.path_latency(src, dst) + self.per_message_overhead
            self._alpha[key] = a
        return a

    def flow(self, src: int, dst: int, nbytes: float, steps: int = 1) -> FlowSpec:
        """A flow standing for ``steps`` pipelined messages src -> dst."""
        return FlowSpec(
            links=self.cluster.route(src, dst),
            nbytes=float(nbytes),
            latency=steps * self.alpha(src, dst),
            src=src,
            dst=dst,
        )

    @cached_property
    def route_memo(self) -> RouteMemo:
        """Routes of the rank pairs that :meth:`flow_batch` with ``memo`` saw."""
        return RouteMemo(self.cluster)

    def flow_batch(
        self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, memo: bool = False
    ) -> FlowBatch:
        """:meth:`flow` (one message each) for every (src, dst) pair, as arrays.

        memo: route through :attr:`route_memo` (the same arrays), for calls
        whose pairs recur from call to call while the calls themselves differ.
        """
        n = int(np.asarray(src).size)
        lengths = None
        if memo:
            entry_flow, entry_link, path, lengths = self.route_memo.routes(src, dst)
        else:
            entry_flow, entry_link = self.cluster.routes(src, dst)
            path = None
        if self.active is not None:
            hops = np.stack([self.active[c] for c in ("nvlink", "pcie", "net")])
            latency = hops[self.hop_classes(src, dst)]
        else:
            if path is None:  # summed link by link in path order, as path_latency does
                path = self.path_latencies(entry_flow, entry_link, n)
            latency = path + self.per_message_overhead
        nbytes = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), (n,)).copy()
        batch = FlowBatch(entry_flow, entry_link, nbytes, latency)
        if lengths is not None:  # entries in flow order, so many links each
            batch.know_flow_order(lengths)
        return batch

    def flow_with_latency(self, src: int, dst: int, nbytes: float, latency) -> FlowSpec:
        """A flow whose start-up latency (s) the caller computed (pipelines;
        a vector per protocol while lowering under protocols)."""
        lat = latency if isinstance(latency, np.ndarray) else float(latency)
        return FlowSpec(self.cluster.route(src, dst), float(nbytes), lat, src, dst)

    def rail_flow(self, src: int, dst: int, nbytes: float, latency) -> FlowSpec:
        """:meth:`flow_with_latency`, but a step between nodes takes NCCL's PXN route
        (:meth:`pxn_route`: it stays on the receiver's NIC rail), as the rings' and
        chains' steps do under protocols."""
        R = self.cluster.ranks_per_node
        if src // R == dst // R:
            return self.flow_with_latency(src, dst, nbytes, latency)
        lat = latency if isinstance(latency, np.ndarray) else float(latency)
        return FlowSpec(self.pxn_route(src, dst), float(nbytes), lat, src, dst)

    def split_by_node(self, group: tuple[int, ...]) -> list[list[int]]:
        """The group's ranks bucketed by host, hosts in order of first appearance."""
        R = self.cluster.ranks_per_node
        n = len(group)
        whole = n >= 4 * R and n % R == 0 and group[0] % R == 0 and group[-1] == group[0] + n - 1
        if whole and getattr(self.cluster, "template", None) is not None:
            g = np.asarray(group, dtype=np.int64)
            if np.array_equal(g, np.arange(group[0], group[0] + n)):  # whole nodes in order
                return g.reshape(-1, R).tolist()
        order: dict[int, list[int]] = {}
        for r in group:
            order.setdefault(self.node_of(r), []).append(r)
        return list(order.values())

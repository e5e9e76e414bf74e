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

from functools import cached_property

import numpy as np

from simcluster.network.flow import FlowBatch, FlowSpec
from simcluster.program import OPS, CollectiveCall  # the op vocabulary lives with the programs

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
    ) -> None:
        self.cluster = cluster
        self.per_message_overhead = float(per_message_overhead)
        eff = link_efficiency or {}
        factors = np.array([eff.get(k, 1.0) for k in cluster.link_kind], dtype=np.float64)
        #: effective capacity of each directed link, bytes/s
        self.capacity = np.asarray(cluster.link_bandwidth, dtype=np.float64) * factors
        self._alpha: dict[tuple[int, int], float] = {}
        #: lowered collective shapes (per-unit-byte flow batches), see registry.lower
        self.shapes: dict[tuple, list] = {}

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

    def alpha(self, src: int, dst: int) -> float:
        """Start-up latency of one message src -> dst: path latency + overhead (s)."""
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

    def flow_batch(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> FlowBatch:
        """:meth:`flow` (one message each) for every (src, dst) pair, as arrays."""
        n = int(np.asarray(src).size)
        entry_flow, entry_link = self.cluster.routes(src, dst)
        # Summed link by link in path order, as path_latency does.
        path = np.bincount(entry_flow, weights=self.cluster.link_latency[entry_link], minlength=n)
        latency = path + self.per_message_overhead
        nbytes = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), (n,)).copy()
        return FlowBatch(entry_flow, entry_link, nbytes, latency)

    def flow_with_latency(self, src: int, dst: int, nbytes: float, latency: float) -> FlowSpec:
        """A flow whose start-up latency (s) the caller computed (pipelines)."""
        return FlowSpec(self.cluster.route(src, dst), float(nbytes), float(latency), src, dst)

    def split_by_node(self, group: tuple[int, ...]) -> list[list[int]]:
        """The group's ranks bucketed by host, hosts in order of first appearance."""
        order: dict[int, list[int]] = {}
        for r in group:
            order.setdefault(self.node_of(r), []).append(r)
        return list(order.values())

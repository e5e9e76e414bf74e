"""Fabrics: the switches between nodes and their structural routing.

A fabric connects *endpoints* (NIC ports; endpoint ``e`` is NIC ``e % nics`` of
node ``e // nics``) through switches. Paths are built from the structure,
never by a graph search: leaf -> spine -> leaf in two levels, leaf -> pod spine
-> core -> pod spine -> leaf in three. Among equal-cost paths the choice is a
deterministic function of the (src, dst) rank pair (``routing="hash"``, an
ECMP-like stable hash) or of the destination endpoint (``routing="dmodk"``,
InfiniBand-style destination-mod-k).

Link ids: the fabric owns undirected edges ``base .. base + num_edges - 1`` of
the cluster's edge list; edge ``i`` stored as ``(u, v)`` is directed link
``2*i`` for ``u -> v`` and ``2*i + 1`` for ``v -> u``. Layout:

* ``base + e``: endpoint ``e`` <-> its leaf, stored (nic, leaf);
* 2 levels: ``base + M + leaf * S + s``: (leaf, spine s);
* 3 levels: ``base + M + leaf * A + a``: (leaf, spine ``pod*A + a``), then
  ``base + M + L*A + (pod*A + a) * C + c``: (spine ``pod*A + a``, core ``a*C + c``).

Units: bytes/s per direction, seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

__all__ = ["FatTree", "ecmp_hash", "ecmp_hash_array"]

_M32 = 0xFFFFFFFF


def ecmp_hash(src: int, dst: int) -> int:
    """Stable 32-bit hash of a (src, dst) pair (not Python's salted ``hash``)."""
    h = (src * 2654435761 + dst * 2246822519 + 374761393) & _M32
    h ^= h >> 15
    h = (h * 2246822519) & _M32
    h ^= h >> 13
    h = (h * 3266489917) & _M32
    h ^= h >> 16
    return h


def ecmp_hash_array(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """:func:`ecmp_hash` of every (src, dst) pair (int64 arrays; same values)."""
    # uint64 arithmetic wraps modulo 2**64, which keeps the low 32 bits exact.
    s = np.asarray(src).astype(np.uint64)
    d = np.asarray(dst).astype(np.uint64)
    m = np.uint64(_M32)
    h = (s * np.uint64(2654435761) + d * np.uint64(2246822519) + np.uint64(374761393)) & m
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(2246822519)) & m
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(3266489917)) & m
    h ^= h >> np.uint64(16)
    return h.astype(np.int64)


class FatTree:
    """Single switch (1 leaf), two-level or three-level fat-tree.

    Parameters
    ----------
    num_endpoints: NIC ports attached (nodes x NICs per node).
    nics_per_node: NICs per node.
    nodes_per_leaf: nodes per leaf switch (per rail when ``rail_aligned``).
    levels: 1 (one switch), 2 or 3.
    nic_bandwidth, nic_latency: endpoint <-> leaf link, bytes/s per direction, s.
    oversubscription: leaf downlink capacity / leaf uplink capacity (>= 1).
    spines: 2 levels: spine count; 3 levels: spines per pod. Default: leaf
        uplink ports = ceil(endpoints_per_leaf / oversubscription).
    leaves_per_pod, cores_per_group, core_oversubscription: 3 levels only.
    switch_latency: each switch-switch link, seconds.
    rail_aligned: NIC j of every node goes to the leaves of rail j.
    kind: link kind of every fabric link (infiniband / ethernet).
    routing: "hash" or "dmodk".
    base: index of the fabric's first undirected edge in the cluster edge list.
    """

    def __init__(
        self,
        num_endpoints: int,
        nics_per_node: int,
        nodes_per_leaf: int,
        levels: int,
        nic_bandwidth: float,
        nic_latency: float,
        oversubscription: float = 1.0,
        spines: int | None = None,
        leaves_per_pod: int | None = None,
        cores_per_group: int | None = None,
        core_oversubscription: float = 1.0,
        switch_latency: float = 1.5e-7,
        rail_aligned: bool = False,
        kind: str = "infiniband",
        routing: str = "hash",
        base: int = 0,
    ) -> None:
        self.M = M = num_endpoints
        self.nics_per_node = Nn = nics_per_node
        self.levels = levels
        self.kind = kind
        self.routing = routing
        self.base = base
        self.rail_aligned = rail_aligned and Nn > 1
        self.nic_bandwidth = nic_bandwidth
        self.nic_latency = nic_latency
        self.switch_latency = switch_latency
        self.oversubscription = oversubscription if levels > 1 else 1.0
        self.core_oversubscription = core_oversubscription if levels == 3 else 1.0
        num_nodes = M // Nn if Nn else 0

        # leaf of every endpoint
        e = np.arange(M, dtype=np.int64)
        if levels == 1:
            self.nodes_per_leaf = max(num_nodes, 1)
            self.endpoints_per_leaf = max(M, 1)
            leaf_of = np.zeros(M, dtype=np.int64)
            L = 1
        elif self.rail_aligned:
            self.nodes_per_leaf = nodes_per_leaf
            self.endpoints_per_leaf = nodes_per_leaf
            per_rail = max(1, math.ceil(num_nodes / nodes_per_leaf))
            leaf_of = (e % Nn) * per_rail + (e // Nn) // nodes_per_leaf
            L = Nn * per_rail
        else:
            self.nodes_per_leaf = nodes_per_leaf
            self.endpoints_per_leaf = nodes_per_leaf * Nn
            leaf_of = (e // Nn) // nodes_per_leaf
            L = max(1, math.ceil(num_nodes / nodes_per_leaf))
        self.L = L
        self.leaf_of = leaf_of.tolist()

        epl = self.endpoints_per_leaf
        self.leaf_down_capacity = epl * nic_bandwidth
        self.leaf_up_capacity = self.leaf_down_capacity / self.oversubscription
        self.S = self.A = self.C = self.P = 0
        self.leaves_per_pod = 0
        self.F1 = base + M
        self.F2 = self.F1
        if levels == 2:
            self.S = spines or max(1, math.ceil(epl / self.oversubscription))
            self.spine_link_bandwidth = self.leaf_up_capacity / self.S
            self.F2 = self.F1 + L * self.S
            self.num_edges = M + L * self.S
        elif levels == 3:
            self.A = spines or max(1, math.ceil(epl / self.oversubscription))
            self.leaves_per_pod = lpp = leaves_per_pod or L
            self.P = max(1, math.ceil(L / lpp))
            self.spine_link_bandwidth = self.leaf_up_capacity / self.A
            spine_down = lpp * self.spine_link_bandwidth
            self.spine_down_capacity = spine_down
            self.spine_up_capacity = spine_down / self.core_oversubscription
            self.C = cores_per_group or max(1, math.ceil(lpp / self.core_oversubscription))
            self.core_link_bandwidth = self.spine_up_capacity / self.C
            self.F2 = self.F1 + L * self.A
            self.num_edges = M + L * self.A + self.P * self.A * self.C
        else:
            self.num_edges = M

    # ------------------------------------------------------------- description
    @property
    def type(self) -> str:
        return "single_switch" if self.levels == 1 else "fat_tree"

    def vertices(self) -> list[tuple[str, dict]]:
        """Switch vertices with attributes (kind switch, node None, local, role, level)."""
        out = [
            (f"leaf{i}", {"kind": "switch", "node": None, "local": i, "role": "leaf", "level": 1})
            for i in range(self.L)
        ]
        if self.levels == 2:
            out += [
                (
                    f"spine{s}",
                    {"kind": "switch", "node": None, "local": s, "role": "spine", "level": 2},
                )
                for s in range(self.S)
            ]
        elif self.levels == 3:
            out += [
                (
                    f"spine{i}",
                    {
                        "kind": "switch",
                        "node": None,
                        "local": i,
                        "role": "spine",
                        "level": 2,
                        "pod": i // self.A,
                    },
                )
                for i in range(self.P * self.A)
            ]
            out += [
                (
                    f"core{i}",
                    {"kind": "switch", "node": None, "local": i, "role": "core", "level": 3},
                )
                for i in range(self.A * self.C)
            ]
        return out

    def edges(self, endpoint_vertex: Callable[[int], str]) -> Iterator[tuple[str, str, dict]]:
        """Undirected edges in link-id order (see module docstring)."""
        nic = {
            "bandwidth": self.nic_bandwidth,
            "latency": self.nic_latency,
            "kind": self.kind,
            "links": 1,
        }
        for e, leaf in enumerate(self.leaf_of):
            yield endpoint_vertex(e), f"leaf{leaf}", nic
        if self.levels == 2:
            up = {
                "bandwidth": self.spine_link_bandwidth,
                "latency": self.switch_latency,
                "kind": self.kind,
                "links": 1,
            }
            for leaf in range(self.L):
                for s in range(self.S):
                    yield f"leaf{leaf}", f"spine{s}", up
        elif self.levels == 3:
            up = {
                "bandwidth": self.spine_link_bandwidth,
                "latency": self.switch_latency,
                "kind": self.kind,
                "links": 1,
            }
            A, C = self.A, self.C
            for leaf in range(self.L):
                pod = leaf // self.leaves_per_pod
                for a in range(A):
                    yield f"leaf{leaf}", f"spine{pod * A + a}", up
            core = {
                "bandwidth": self.core_link_bandwidth,
                "latency": self.switch_latency,
                "kind": self.kind,
                "links": 1,
            }
            for pod in range(self.P):
                for a in range(A):
                    for c in range(C):
                        yield f"spine{pod * A + a}", f"core{a * C + c}", core

    def edge_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(bandwidth, latency) per undirected fabric edge, in link-id order."""
        bw = np.empty(self.num_edges)
        lat = np.empty(self.num_edges)
        M = self.M
        bw[:M] = self.nic_bandwidth
        lat[:M] = self.nic_latency
        lat[M:] = self.switch_latency
        if self.levels == 2:
            bw[M:] = self.spine_link_bandwidth
        elif self.levels == 3:
            k = M + self.L * self.A
            bw[M:k] = self.spine_link_bandwidth
            bw[k:] = self.core_link_bandwidth
        return bw, lat

    # ----------------------------------------------------------------- routing
    def path(self, a: int, b: int, src: int, dst: int) -> tuple[int, ...]:
        """Directed link ids from endpoint ``a`` to endpoint ``b`` (``a != b``).

        ``src`` / ``dst`` (ranks) seed the choice among equal-cost paths.
        """
        base = self.base
        up = 2 * (base + a)
        down = 2 * (base + b) + 1
        la, lb = self.leaf_of[a], self.leaf_of[b]
        if la == lb or self.levels == 1:
            return (up, down)
        h = b if self.routing == "dmodk" else ecmp_hash(src, dst)
        F1 = self.F1
        if self.levels == 2:
            S = self.S
            s = h % S
            return (up, 2 * (F1 + la * S + s), 2 * (F1 + lb * S + s) + 1, down)
        A = self.A
        x = h % A
        pa, pb = la // self.leaves_per_pod, lb // self.leaves_per_pod
        if pa == pb:
            return (up, 2 * (F1 + la * A + x), 2 * (F1 + lb * A + x) + 1, down)
        C = self.C
        c = (h // A) % C
        F2 = self.F2
        return (
            up,
            2 * (F1 + la * A + x),
            2 * (F2 + (pa * A + x) * C + c),
            2 * (F2 + (pb * A + x) * C + c) + 1,
            2 * (F1 + lb * A + x) + 1,
            down,
        )

    def paths(self, a: np.ndarray, b: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """:meth:`path` of every (a, b) endpoint pair at once (``a != b``).

        Returns an int64 array of shape ``(n, 6)``: row ``i`` holds the link ids
        of pair ``i`` in path order, padded with ``-1``.
        """
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        out = np.full((a.size, 6), -1, dtype=np.int64)
        if a.size == 0:
            return out
        out[:, 0] = 2 * (self.base + a)
        down = 2 * (self.base + b) + 1
        leaf = np.asarray(self.leaf_of, dtype=np.int64)
        la, lb = leaf[a], leaf[b]
        near = (la == lb) | (self.levels == 1)
        out[near, 1] = down[near]
        far = ~near
        if not far.any():
            return out
        h = b if self.routing == "dmodk" else ecmp_hash_array(src, dst)
        la, lb, h, down = la[far], lb[far], h[far], down[far]
        F1 = self.F1
        if self.levels == 2:
            S = self.S
            s = h % S
            out[far, 1] = 2 * (F1 + la * S + s)
            out[far, 2] = 2 * (F1 + lb * S + s) + 1
            out[far, 3] = down
            return out
        A, C, F2 = self.A, self.C, self.F2
        x = h % A
        pa, pb = la // self.leaves_per_pod, lb // self.leaves_per_pod
        pod = pa == pb
        rows = np.flatnonzero(far)
        r, p = rows[pod], ~pod
        out[r, 1] = 2 * (F1 + la[pod] * A + x[pod])
        out[r, 2] = 2 * (F1 + lb[pod] * A + x[pod]) + 1
        out[r, 3] = down[pod]
        r = rows[p]
        c = (h[p] // A) % C
        out[r, 1] = 2 * (F1 + la[p] * A + x[p])
        out[r, 2] = 2 * (F2 + (pa[p] * A + x[p]) * C + c)
        out[r, 3] = 2 * (F2 + (pb[p] * A + x[p]) * C + c) + 1
        out[r, 4] = 2 * (F1 + lb[p] * A + x[p]) + 1
        out[r, 5] = down[p]
        return out

    # ----------------------------------------------------------------- facts
    def info(self) -> dict:
        """Structural facts: switch counts, capacities (bytes/s per direction)."""
        out: dict = {
            "type": self.type,
            "levels": self.levels,
            "link_kind": self.kind,
            "routing": self.routing,
            "endpoints": self.M,
            "rail_aligned": self.rail_aligned,
            "leaves": self.L,
            "nodes_per_leaf": self.nodes_per_leaf,
            "endpoints_per_leaf": self.endpoints_per_leaf,
            "nic_bandwidth": self.nic_bandwidth,
            "leaf_downlink_capacity": self.leaf_down_capacity,
        }
        tiers = [self.M * self.nic_bandwidth / 2]
        if self.levels >= 2:
            out.update(
                oversubscription=self.oversubscription,
                leaf_uplink_capacity=self.leaf_up_capacity,
                spine_link_bandwidth=self.spine_link_bandwidth,
            )
            if self.L > 1:
                tiers.append(self.L * self.leaf_up_capacity / 2)
        if self.levels == 2:
            out["spines"] = self.S
        if self.levels == 3:
            out.update(
                pods=self.P,
                leaves_per_pod=self.leaves_per_pod,
                spines_per_pod=self.A,
                spines=self.P * self.A,
                cores=self.A * self.C,
                core_oversubscription=self.core_oversubscription,
                spine_uplink_capacity=self.spine_up_capacity,
                core_link_bandwidth=self.core_link_bandwidth,
            )
            if self.P > 1:
                tiers.append(self.P * self.A * self.spine_up_capacity / 2)
        out["bisection_bandwidth"] = min(tiers)
        return out

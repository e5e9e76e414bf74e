"""How NCCL moves bytes between nodes: InfiniBand verbs or sockets, with or without
GPUDirect RDMA. A network profile's optional ``network.transport`` section.

Fields (the defaults are today's behaviour: the profile's numbers apply unchanged)::

    "transport": {
      "net": "ib",                 # "ib": NCCL's IB verbs transport; "socket": NCCL's
                                   #   socket transport (TCP, e.g. over IPoIB or Ethernet)
      "gpudirect_rdma": true,      # the NIC reads/writes GPU memory directly
      "connections": 1,            # socket: TCP connections carrying one NIC's traffic
      "connection_bandwidth": ..., # socket: bytes/s one TCP connection reaches (required)
      "socket_per_message_s": ..., # socket: seconds per message (TCP stack, required)
      "staging_bandwidth": ...,    # no GDR: bytes/s through host memory (default: the
                                   #   node's slowest PCIe link x its link efficiency)
      "staging_per_message_s": 0,  # no GDR: extra seconds per network step
      "source": "..."              # where the numbers come from
    }

Model (stated):

* without GPUDirect RDMA NCCL stages every network message through a pinned host
  buffer (the GPU writes it over PCIe, the NIC reads it from host memory), so a
  NIC's rate is capped at the staging bandwidth; NCCL's socket transport only
  registers host memory (``NCCL_PTR_HOST``, src/transport/net_socket.cc), so
  sockets always stage;
* over sockets a NIC's rate is capped at ``connections x connection_bandwidth``.
  NCCL opens ``NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD`` sockets per peer and
  channel, auto-detected as 1 x 1 except on AWS (2 x 8) (``ncclSocketGetNsockNthread``
  in the same file): hence the default of 1;
* the cap becomes the fabric link kind's efficiency: ``min(efficiency,
  cap / port bandwidth)``, where the port bandwidth is the slowest inter-node link
  (a NIC's port). Every fabric link scales by the same factor, as a link efficiency
  does;
* per-message costs add to every protocol's network step latency
  (``hop_latency_s.<family>.net``), or to ``per_message_overhead_s`` in a profile
  without protocols (where they then also apply to intra-node messages).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np

from simcluster.errors import ConfigError

__all__ = ["Transport", "parse_transport", "with_transport"]


@dataclasses.dataclass(frozen=True)
class Transport:
    """A checked ``network.transport`` section (see the module docstring); bytes/s, s."""

    net: str = "ib"
    gpudirect_rdma: bool = True
    connections: int = 1
    connection_bandwidth: float | None = None
    socket_per_message_s: float = 0.0
    staging_bandwidth: float | None = None
    staging_per_message_s: float = 0.0
    source: str = ""

    @property
    def default(self) -> bool:
        """IB verbs with GPUDirect RDMA: nothing to change."""
        return self.net == "ib" and self.gpudirect_rdma

    @property
    def staged(self) -> bool:
        """Does network traffic pass through host memory?"""
        return self.net == "socket" or not self.gpudirect_rdma


def parse_transport(data: dict[str, Any] | None, file: str | None = None) -> Transport:
    """A :class:`Transport` from a profile's ``network.transport`` (already schema-checked);
    ConfigError when sockets lack their measured numbers."""
    if not data:
        return Transport()
    fields = {f.name for f in dataclasses.fields(Transport)}
    t = Transport(**{k: v for k, v in data.items() if k in fields})
    if t.net == "socket":
        for key in ("connection_bandwidth", "socket_per_message_s"):
            if data.get(key) is None:
                raise ConfigError(
                    file,
                    f"network.transport.{key}",
                    None,
                    "missing: the socket transport needs its measured per-connection "
                    "bandwidth (bytes/s) and per-message cost (s)",
                )
    return t


def _staging_bandwidth(t: Transport, cluster, efficiency: dict[str, float]) -> float:
    if t.staging_bandwidth is not None:
        return float(t.staging_bandwidth)
    pcie = [float(a["bandwidth"]) for _, _, a in cluster.template.edges if a.get("kind") == "pcie"]
    if not pcie:
        raise ConfigError(
            None,
            "network.transport.staging_bandwidth",
            None,
            "without GPUDirect RDMA the staging bandwidth is taken from the node's PCIe "
            "links, and this topology's nodes have none: give staging_bandwidth (bytes/s)",
        )
    return min(pcie) * efficiency.get("pcie", 1.0)


def with_transport(netp, cluster):
    """``netp`` (a NetworkProfile) with its transport's caps and per-message costs
    folded into the fabric's link efficiency and the network step latencies; the
    profile itself when the transport is the default (IB verbs with GPUDirect RDMA).
    The result's transport is empty (applied, recorded under provenance
    ``transport_applied``), so applying it twice is applying it once."""
    t = parse_transport(getattr(netp, "transport", None), netp.file)
    if t.default:
        return netp
    eff = dict(netp.link_efficiency)
    caps = []
    if t.staged:
        caps.append(_staging_bandwidth(t, cluster, eff))
    if t.net == "socket":
        caps.append(t.connections * float(t.connection_bandwidth))
    inter = np.asarray(cluster.inter_node_link, dtype=bool)
    extra = (t.staging_per_message_s if t.staged else 0.0) + (
        t.socket_per_message_s if t.net == "socket" else 0.0
    )
    if inter.any():
        kind = cluster.fabric.kind
        port = float(np.min(np.asarray(cluster.link_bandwidth)[inter]))
        eff[kind] = max(1e-6, min(eff.get(kind, 1.0), min(caps) / port))
    protocols = copy.deepcopy(netp.protocols)
    for name, proto in protocols.items():
        if name == "source" or not isinstance(proto, dict):
            continue
        for fam in proto.get("hop_latency_s", {}).values():
            if isinstance(fam, dict) and "net" in fam:
                fam["net"] = float(fam["net"]) + extra
    provenance = {**netp.provenance, "transport_applied": dict(netp.transport)}
    return dataclasses.replace(
        netp,
        transport={},  # applied: a second call changes nothing
        provenance=provenance,
        link_efficiency=eff,
        per_message_overhead_s=netp.per_message_overhead_s + (0.0 if protocols else extra),
        protocols=protocols,
    )

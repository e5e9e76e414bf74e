"""The schema of ``topologies/*.yaml`` (pydantic v2) and its loader.

Every mistake in a file becomes a :class:`~simcluster.errors.ConfigError` that
names the file, the dotted field path, the bad value and what is allowed (with
"did you mean" for misspelt keys and names); no pydantic dump reaches the user.

Units: bandwidths are bytes/s per direction, latencies seconds; both may be
written with units (see :mod:`simcluster.topology.units`).

Example (the shipped ``topologies/puhti.yaml`` in short)::

    name: puhti
    description: 80 nodes, 4 x V100 NVLink, dual-rail HDR100
    max_nodes: 80              # num_nodes may be 1..max_nodes
    default_nodes: 16          # optional; else num_nodes defaults to max_nodes
    node:
      template: nvlink_full    # nvlink_full | dgx1_cube_mesh | nvlink_mesh | nvswitch
                               # | pcie | single_gpu | cpu_cores
      gpus: 4
      nvlink: {link_bandwidth: 25 GB/s, links_per_pair: 2, latency: 0.7 us}
      host:
        sockets: 2
        pcie_switches: 2
        pcie: {bandwidth: 15.75 GB/s, latency: 0.25 us}
        inter_socket: {bandwidth: 41.6 GB/s, latency: 0.2 us}
      nics: {count: 2, bandwidth: 100 Gb/s, latency: 0.6 us, affinity: [0, 0, 1, 1]}
    fabric:
      type: fat_tree           # single_switch | fat_tree
      levels: 2                # 2 | 3 (then leaves_per_pod)
      nodes_per_leaf: 20       # or radix
      oversubscription: 1
      switch_latency: 0.15 us
    assumptions: ["..."]       # every number not taken from a source
    sources: ["..."]
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from simcluster.errors import ConfigError
from simcluster.registry import Registered, check_registered
from simcluster.schema import ListTuple, pydantic_to_config_error
from simcluster.topology.units import parse_bandwidth, parse_latency

__all__ = [
    "Bandwidth",
    "Latency",
    "LinkSpec",
    "NVLinkSpec",
    "NVSwitchSpec",
    "HostSpec",
    "CoresSpec",
    "NICSpec",
    "NodeSpec",
    "FabricSpec",
    "TopologySpec",
    "TEMPLATES",
    "read_spec",
    "spec_from_dict",
]

Bandwidth = Annotated[float, BeforeValidator(parse_bandwidth)]
"""Bytes per second, per direction (number or unit string)."""
Latency = Annotated[float, BeforeValidator(parse_latency)]
"""Seconds (number or unit string)."""

TEMPLATES = (
    "nvlink_full",
    "dgx1_cube_mesh",
    "nvlink_mesh",
    "nvswitch",
    "pcie",
    "single_gpu",
    "cpu_cores",
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, strict=True, allow_inf_nan=False)


class LinkSpec(_Model):
    """One kind of point-to-point link: per-direction bandwidth and one-way latency."""

    bandwidth: Bandwidth
    latency: Latency = 5e-7


class NVLinkSpec(_Model):
    """Direct GPU-to-GPU NVLink (templates nvlink_full, dgx1_cube_mesh, nvlink_mesh)."""

    link_bandwidth: Bandwidth = 25e9
    """one NVLink link, bytes/s per direction (NVLink2 on V100: 25 GB/s)"""
    links_per_pair: int = Field(1, ge=1, le=64)
    """nvlink_full: links between every GPU pair (the edge carries the sum)"""
    latency: Latency = 7e-7
    pairs: list[ListTuple[tuple[int, int, int]]] | None = None
    """nvlink_mesh: explicit [gpu_a, gpu_b, links] triples"""


class NVSwitchSpec(_Model):
    """GPUs attached to one non-blocking NVSwitch vertex (template nvswitch)."""

    bandwidth: Bandwidth | None = None
    """per GPU, bytes/s per direction; or give links_per_gpu and link_bandwidth"""
    links_per_gpu: int | None = Field(None, ge=1, le=64)
    link_bandwidth: Bandwidth | None = None
    latency: Latency = 5e-7
    """GPU <-> switch; a GPU-to-GPU transfer crosses two such links"""
    multicast: bool = False
    """the switch reduces and multicasts (NVLink SHARP, third-generation NVSwitch
    of HGX H100 / H200 boards): NCCL's NVLS allreduce runs on it"""


class HostSpec(_Model):
    """CPU sockets and the PCIe tree inside one node."""

    sockets: int = Field(1, ge=1, le=64)
    pcie_switches: int = Field(0, ge=0, le=256)
    """0: GPUs and NICs hang directly off the CPU root ports"""
    pcie: LinkSpec = LinkSpec(bandwidth=15.75e9, latency=2.5e-7)
    """GPU/NIC <-> PCIe switch (or socket); default PCIe Gen3 x16"""
    pcie_uplink: LinkSpec | None = None
    """PCIe switch <-> socket; default: same as pcie"""
    inter_socket: LinkSpec = LinkSpec(bandwidth=20.8e9, latency=2e-7)
    """socket <-> socket (QPI/UPI/Infinity Fabric), kind 'qpi'"""
    gpu_attach: list[int] | None = None
    """PCIe switch (or socket if pcie_switches == 0) of each GPU; default: spread evenly"""
    nic_attach: list[int] | None = None
    """PCIe switch (or socket) of each NIC; default: spread evenly"""


class CoresSpec(_Model):
    """CPU cores as ranks (template cpu_cores)."""

    per_socket: int = Field(ge=1, le=1024)  # ranks of a node: at most 1,024, as node.gpus
    memory: LinkSpec = LinkSpec(bandwidth=10e9, latency=1e-7)
    """core <-> its socket, kind 'memory': a core's share of memory bandwidth"""


class NICSpec(_Model):
    """Network adapters of one node; each is one fabric port."""

    count: int = Field(1, ge=0, le=256)
    bandwidth: Bandwidth = 12.5e9
    """per NIC port, bytes/s per direction (the NIC <-> leaf link)"""
    latency: Latency = 6e-7
    """NIC <-> leaf link, including NIC processing"""
    affinity: list[int] | None = None
    """NIC used by each local rank; default: the nearest NIC"""


class NodeSpec(_Model):
    """One host; every node of the cluster is built from this template."""

    template: Annotated[str, Registered("node template")]
    """a registered node builder (simcluster.topology.builders)"""
    gpus: int | None = Field(None, ge=1, le=1024)
    """ranks per node; at most 1,024: building a node routes every rank pair (n^2 paths;
    on the shared 2-core machine a 1,024-GPU PCIe node builds in 6 s of CPU time, a 4,000-GPU
    one made an 8-rank run take 77 s)"""
    nvlink: NVLinkSpec | None = None
    nvswitch: NVSwitchSpec | None = None
    cores: CoresSpec | None = None
    host: HostSpec = HostSpec()
    nics: NICSpec = NICSpec()


class FabricSpec(_Model):
    """The network between nodes.

    ``single_switch``: every NIC on one switch (named ``leaf0``).
    ``fat_tree`` with ``levels: 2``: leaves and spines; every leaf links to every
    spine; uplink capacity of a leaf = its downlink capacity / oversubscription.
    ``levels: 3``: leaves grouped in pods, each leaf links to every spine of its
    pod, spine ``a`` of every pod links to the cores of core group ``a``.
    """

    type: Annotated[str, Registered("fabric")] = "single_switch"
    kind: Literal["infiniband", "ethernet"] = "infiniband"
    levels: Literal[2, 3] = 2
    nodes_per_leaf: int | None = Field(None, ge=1, le=100_000)
    radix: int | None = Field(None, ge=2, le=100_000)
    """switch ports; gives nodes_per_leaf when that is not set"""
    oversubscription: float = Field(1.0, ge=1.0, le=1e6)
    """leaf downlink capacity / leaf uplink capacity"""
    spines: int | None = Field(None, ge=1, le=100_000)
    """2 levels: spine count; 3 levels: spines per pod (default: leaf uplink ports)"""
    leaves_per_pod: int | None = Field(None, ge=1, le=100_000)
    cores_per_group: int | None = Field(None, ge=1, le=100_000)
    core_oversubscription: float = Field(1.0, ge=1.0, le=1e6)
    """3 levels: pod spine downlink / uplink capacity"""
    rail_aligned: bool = False
    """NIC j of every node on the leaves of rail j"""
    switch_latency: Latency = 1.5e-7
    """each switch-to-switch link (cable + one switch traversal)"""
    routing: Literal["hash", "dmodk"] = "hash"
    """choice among equal-cost paths: hash of (src, dst) ranks, or destination mod k"""


class TopologySpec(_Model):
    """A whole topology file."""

    name: str | None = None
    description: str = ""
    max_nodes: int = Field(ge=1, le=10_000_000)
    default_nodes: int | None = Field(None, ge=1, le=10_000_000)
    node: NodeSpec
    fabric: FabricSpec = FabricSpec()
    assumptions: list[str] = []
    sources: list[str] = []


# --------------------------------------------------------------------------- errors


def spec_from_dict(data: Any, file: str | None = None) -> TopologySpec:
    """Validate an already-parsed mapping; errors name ``file``."""
    if not isinstance(data, dict):
        raise ConfigError(
            file,
            "<root>",
            type(data).__name__,
            "a topology file must be a mapping of keys to values",
            allowed="keys: " + ", ".join(TopologySpec.model_fields),
        )
    from simcluster.inputs import check_kind

    check_kind(data, file, "topology")
    import simcluster.topology.cluster  # noqa: F401  (registers node builders and fabrics)

    try:
        spec = TopologySpec.model_validate(data)
    except ValidationError as err:
        raise pydantic_to_config_error(err, file, TopologySpec) from None
    check_registered(NodeSpec, {"template": spec.node.template}, file, "node")
    check_registered(FabricSpec, {"type": spec.fabric.type}, file, "fabric")
    return spec


def read_spec(path: str | Path) -> TopologySpec:
    """Read and validate one topology YAML file."""
    p = Path(path)
    file = str(path)
    from simcluster.inputs import load_yaml

    if not p.exists():
        raise ConfigError(file, "<root>", file, "topology file not found")
    return spec_from_dict(load_yaml(p, "topology file"), file)

"""Cluster topologies: YAML files -> attributed networkx graph + routes.

Public API::

    cluster = load_topology("puhti", num_nodes=16)
    cluster.route(src_rank, dst_rank)   # directed link ids
    cluster.link_bandwidth[link]        # bytes/s per direction
    list_topologies(); draw_topology(cluster, "puhti.png")

See ``topologies/*.yaml`` for the file format and
:mod:`simcluster.topology.spec` for every field.
"""

from simcluster.topology.cluster import (
    Cluster,
    build_cluster,
    list_topologies,
    load_topology,
    load_topology_for_ranks,
    topologies_dir,
    topology_ranks_per_node,
)
from simcluster.topology.fabric import FatTree, ecmp_hash
from simcluster.topology.nodes import (
    NodeTemplate,
    cpu_core_node,
    dgx1_cube_mesh_node,
    nvlink_full_node,
    nvlink_mesh_node,
    nvswitch_node,
    pcie_node,
    single_gpu_node,
)
from simcluster.topology.spec import TopologySpec, read_spec, spec_from_dict
from simcluster.topology.units import (
    format_bandwidth,
    format_latency,
    parse_bandwidth,
    parse_latency,
)


def draw_topology(cluster: Cluster, path: str) -> None:
    """PNG picture of ``cluster`` (imports matplotlib only when called)."""
    from simcluster.topology.draw import draw_topology as _draw

    _draw(cluster, path)


def topology_cli(path_or_name: str, out_png: str | None, num_nodes: int | None) -> str:
    """Summary text of a topology; draws ``out_png`` when given."""
    from simcluster.topology.summary import topology_cli as _cli

    return _cli(path_or_name, out_png, num_nodes)


__all__ = [
    "Cluster",
    "FatTree",
    "NodeTemplate",
    "TopologySpec",
    "build_cluster",
    "cpu_core_node",
    "dgx1_cube_mesh_node",
    "draw_topology",
    "ecmp_hash",
    "format_bandwidth",
    "format_latency",
    "list_topologies",
    "load_topology",
    "load_topology_for_ranks",
    "nvlink_full_node",
    "nvlink_mesh_node",
    "nvswitch_node",
    "parse_bandwidth",
    "parse_latency",
    "pcie_node",
    "read_spec",
    "single_gpu_node",
    "spec_from_dict",
    "topologies_dir",
    "topology_cli",
    "topology_ranks_per_node",
]

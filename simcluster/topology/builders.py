"""Node builders and fabrics, registered by name.

A node builder turns a topology file's ``node`` section into a
:class:`~simcluster.topology.nodes.NodeTemplate`; a fabric builder turns its
``fabric`` section into a :class:`Fabric` (the switches between the nodes' NICs:
fat trees today; the fabric builders are registered in
:mod:`simcluster.topology.cluster`).

Each builder says which optional sections it reads (``nvlink``, ``nvswitch``,
``cores``), how many ranks a node has, and builds the template from its own
section; the checks every template shares (host and NIC attachment, affinity)
stay in :mod:`simcluster.topology.cluster`. A new kind of node is a new
registered builder; ``node.template`` names it and is checked against
:data:`NODE_BUILDERS` when the file loads.

Bandwidths are bytes/s per direction, latencies seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from simcluster.errors import ConfigError
from simcluster.registry import Registry
from simcluster.topology.nodes import (
    NodeTemplate,
    cpu_core_node,
    dgx1_cube_mesh_node,
    nvlink_mesh_node,
    nvswitch_node,
    pcie_node,
)
from simcluster.topology.spec import NodeSpec, NVLinkSpec
from simcluster.topology.units import format_bandwidth, format_latency

__all__ = ["Fabric", "FABRICS", "NodeBuilder", "NODE_BUILDERS", "defaults_used"]

#: (field path, value, problem, allowed) -> the ConfigError to raise (names the file)
Err = Callable[..., ConfigError]


@dataclass(frozen=True)
class NodeBuilder:
    """How one node template is built.

    sections: the optional node sections it reads (others are an error).
    ranks: (node, err) -> (ranks per node, GPUs per node or None); checks ``node.gpus``.
    build: (node, gpus, err, notes) -> the template; appends "built-in default" notes.
    """

    sections: frozenset[str]
    ranks: Callable[[NodeSpec, Err], tuple[int, int | None]]
    build: Callable[[NodeSpec, int | None, Err, list[str]], NodeTemplate]


class Fabric(Protocol):
    """What the :class:`~simcluster.topology.Cluster` needs of the network between nodes.

    It owns undirected edges ``base .. base + num_edges - 1`` of the cluster's link
    table; endpoint ``e`` is NIC ``e % nics_per_node`` of node ``e // nics_per_node``.
    """

    kind: str  # link kind of every fabric edge (``infiniband``, ``ethernet``)
    num_edges: int

    def vertices(self) -> list[tuple[str, dict]]: ...

    def edges(self, endpoint_vertex: Callable[[int], str]) -> Any: ...

    def edge_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(bandwidth bytes/s, latency s) per fabric edge."""
        ...

    def path(self, a: int, b: int, src: int, dst: int) -> tuple[int, ...]:
        """Link ids from endpoint ``a`` to ``b`` for the flow of rank ``src`` to ``dst``."""
        ...

    def paths(self, a: np.ndarray, b: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """:meth:`path` for many pairs at once, ``-1``-padded rows."""
        ...


#: fabrics by name (``fabric.type``): (spec, num_nodes, nics_per_node, common FatTree
#: arguments, file, notes) -> a Fabric
FABRICS: Registry[Callable[..., Fabric]] = Registry("fabric")

#: node templates by name (``node.template`` in a topology file)
NODE_BUILDERS: Registry[NodeBuilder] = Registry("node template")


def defaults_used(model: Any, path: str, fields: list[str], out: list[str]) -> None:
    """Note every dotted field that the file left at its built-in default."""
    for dotted in fields:
        cur = model
        defaulted = False
        for part in dotted.split("."):
            if cur is None:
                break
            if part not in cur.model_fields_set:
                defaulted = True
            cur = getattr(cur, part)
        if defaulted and cur is not None:
            name = dotted.rsplit(".", 1)[-1]
            val = format_latency(cur) if "latency" in name else format_bandwidth(cur)
            out.append(f"{path}.{dotted} = {val} is a built-in default (assumption)")


# --------------------------------------------------------------------------- ranks


def _gpus_given(tpl: str) -> Callable[[NodeSpec, Err], tuple[int, int | None]]:
    def ranks(node: NodeSpec, err: Err) -> tuple[int, int | None]:
        if node.gpus is None:
            raise err(
                "node.gpus",
                None,
                f"template {tpl!r} needs the number of GPUs per node",
                "an integer >= 1",
            )
        return node.gpus, node.gpus

    return ranks


def _gpus_fixed(count: int, problem: str) -> Callable[[NodeSpec, Err], tuple[int, int | None]]:
    def ranks(node: NodeSpec, err: Err) -> tuple[int, int | None]:
        if node.gpus not in (None, count):
            raise err("node.gpus", node.gpus, problem, str(count))
        return count, count

    return ranks


def _cpu_ranks(node: NodeSpec, err: Err) -> tuple[int, int | None]:
    if node.gpus is not None:
        raise err("node.gpus", node.gpus, "template 'cpu_cores' has no GPUs; leave gpus out")
    if node.cores is None:
        raise err(
            "node.cores",
            None,
            "template 'cpu_cores' needs a cores section",
            "cores: {per_socket: N, memory: {bandwidth, latency}}",
        )
    return node.host.sockets * node.cores.per_socket, None


# --------------------------------------------------------------------------- builders


def _nvlink(node: NodeSpec, notes: list[str]) -> NVLinkSpec:
    defaults_used(node, "node", ["nvlink.link_bandwidth", "nvlink.latency"], notes)
    return node.nvlink or NVLinkSpec()


def _nvlink_full(node: NodeSpec, gpus: int | None, err: Err, notes: list[str]) -> NodeTemplate:
    nv = _nvlink(node, notes)
    if nv.pairs is not None:
        raise err(
            "node.nvlink.pairs",
            nv.pairs,
            "pairs are only for template 'nvlink_mesh'; nvlink_full links every pair",
        )
    assert gpus is not None
    pairs = [(a, b, nv.links_per_pair) for a in range(gpus) for b in range(a + 1, gpus)]
    return nvlink_mesh_node(
        gpus, pairs, nv.link_bandwidth, nv.latency, node.host, node.nics, "nvlink_full"
    )


def _dgx1(node: NodeSpec, gpus: int | None, err: Err, notes: list[str]) -> NodeTemplate:
    nv = _nvlink(node, notes)
    if nv.pairs is not None:
        raise err(
            "node.nvlink.pairs",
            nv.pairs,
            "the cube-mesh layout is fixed; use template 'nvlink_mesh' for your own pairs",
        )
    return dgx1_cube_mesh_node(nv.link_bandwidth, nv.latency, node.host, node.nics)


def _nvlink_mesh(node: NodeSpec, gpus: int | None, err: Err, notes: list[str]) -> NodeTemplate:
    nv = _nvlink(node, notes)
    if not nv.pairs:
        raise err(
            "node.nvlink.pairs",
            nv.pairs,
            "template 'nvlink_mesh' needs the linked GPU pairs",
            "a list of [gpu_a, gpu_b, links]",
        )
    assert gpus is not None
    try:  # the builder checks its own pairs; name the file's field
        return nvlink_mesh_node(gpus, nv.pairs, nv.link_bandwidth, nv.latency, node.host, node.nics)
    except ConfigError as exc:
        raise err(f"node.nvlink.{exc.path}", exc.value, exc.problem, exc.allowed) from None


def _nvswitch(node: NodeSpec, gpus: int | None, err: Err, notes: list[str]) -> NodeTemplate:
    sw = node.nvswitch
    if sw is None:
        raise err(
            "node.nvswitch",
            None,
            "template 'nvswitch' needs an nvswitch section",
            "nvswitch: {bandwidth: per-GPU rate} or {links_per_gpu, link_bandwidth}",
        )
    if sw.bandwidth is not None:
        bw = sw.bandwidth
        links = sw.links_per_gpu or 1
        if sw.link_bandwidth is not None and sw.links_per_gpu is not None:
            want = sw.link_bandwidth * sw.links_per_gpu
            if not math.isclose(want, bw, rel_tol=1e-6):
                raise err(
                    "node.nvswitch.bandwidth",
                    bw,
                    f"disagrees with links_per_gpu x link_bandwidth = {format_bandwidth(want)}",
                )
    elif sw.links_per_gpu is not None and sw.link_bandwidth is not None:
        bw = sw.links_per_gpu * sw.link_bandwidth
        links = sw.links_per_gpu
    else:
        raise err(
            "node.nvswitch.bandwidth",
            None,
            "give the per-GPU bandwidth, or links_per_gpu and link_bandwidth",
            "e.g. bandwidth: 300 GB/s",
        )
    defaults_used(node, "node", ["nvswitch.latency"], notes)
    assert gpus is not None
    return nvswitch_node(gpus, bw, sw.latency, links, node.host, node.nics, sw.multicast)


def _pcie(node: NodeSpec, gpus: int | None, err: Err, notes: list[str]) -> NodeTemplate:
    assert gpus is not None
    return pcie_node(gpus, node.host, node.nics)


def _cpu_cores(node: NodeSpec, gpus: int | None, err: Err, notes: list[str]) -> NodeTemplate:
    defaults_used(node, "node", ["cores.memory.bandwidth", "cores.memory.latency"], notes)
    assert node.cores is not None
    return cpu_core_node(node.cores.per_socket, node.cores.memory, node.host, node.nics)


_NVLINK = frozenset({"nvlink"})
NODE_BUILDERS.add("nvlink_full", NodeBuilder(_NVLINK, _gpus_given("nvlink_full"), _nvlink_full))
NODE_BUILDERS.add(
    "dgx1_cube_mesh",
    NodeBuilder(_NVLINK, _gpus_fixed(8, "the DGX-1 cube-mesh has exactly 8 GPUs"), _dgx1),
)
NODE_BUILDERS.add("nvlink_mesh", NodeBuilder(_NVLINK, _gpus_given("nvlink_mesh"), _nvlink_mesh))
NODE_BUILDERS.add(
    "nvswitch", NodeBuilder(frozenset({"nvswitch"}), _gpus_given("nvswitch"), _nvswitch)
)
NODE_BUILDERS.add("pcie", NodeBuilder(frozenset(), _gpus_given("pcie"), _pcie))
NODE_BUILDERS.add(
    "single_gpu",
    NodeBuilder(frozenset(), _gpus_fixed(1, "template 'single_gpu' has one GPU"), _pcie),
)
NODE_BUILDERS.add("cpu_cores", NodeBuilder(frozenset({"cores"}), _cpu_ranks, _cpu_cores))

"""Printable summary of a topology (backs ``simcluster topo FILE``)."""

from __future__ import annotations

from simcluster.topology.cluster import Cluster, load_topology
from simcluster.topology.units import format_bandwidth, format_latency

__all__ = ["format_summary", "topology_cli"]


def _bw_list(values: list[float]) -> str:
    return ", ".join(format_bandwidth(v) for v in values)


def format_summary(cluster: Cluster) -> str:
    """Multi-line text: sizes, vertices and links by kind, fabric facts, sources."""
    s = cluster.summary()
    node = s["node"]
    fab = s["fabric"]
    out = [f"{s['name']}: {s['description']}".rstrip(": ")]
    if s["file"]:
        out.append(f"  file: {s['file']}")
    out.append(
        f"  {s['num_nodes']} nodes (max {s['max_nodes']}) x {s['ranks_per_node']} "
        f"{node['rank_kind'].upper()} ranks = {s['num_ranks']} ranks; "
        f"node template {node['template']}, {node['nics_per_node']} NIC(s) per node"
    )
    if node["nics_per_node"]:
        out.append(
            f"  NIC of each local rank: {node['rank_nic']}; injection "
            f"{format_bandwidth(node['injection_bandwidth'])} per node"
        )
    if "intra_node_hops" in node:
        lo, hi = node["intra_node_hops"]
        out.append(f"  intra-node route length: {lo}..{hi} links")
    out.append(
        f"  vertices: {s['num_vertices']} ("
        + ", ".join(f"{k} {v}" for k, v in s["vertices"].items())
        + ")"
    )
    out.append(f"  links: {s['num_links'] // 2} full-duplex ({s['num_links']} directed)")
    for kind, d in s["links"].items():
        lat = ", ".join(format_latency(x) for x in d["latencies"])
        phys = f", {d['physical_links']} physical" if d["physical_links"] != d["count"] else ""
        out.append(
            f"    {kind:<11} {d['count']:>8}{phys}; {_bw_list(d['bandwidths'])} "
            f"per direction; latency {lat}"
        )
    if fab["type"] == "single_switch":
        out.append(f"  fabric: one {fab['link_kind']} switch, {fab['endpoints']} ports")
    else:
        desc = f"  fabric: {fab['levels']}-level {fab['link_kind']} fat-tree"
        if fab["rail_aligned"]:
            desc += " (rail-aligned)"
        desc += f", {fab['leaves']} leaves x {fab['nodes_per_leaf']} nodes"
        if fab["levels"] == 2:
            desc += f", {fab['spines']} spines"
        else:
            desc += (
                f", {fab['pods']} pods x {fab['leaves_per_pod']} leaves, "
                f"{fab['spines']} spines, {fab['cores']} cores"
            )
        out.append(desc + f", routing {fab['routing']}")
        out.append(
            f"    leaf down {format_bandwidth(fab['leaf_downlink_capacity'])}, up "
            f"{format_bandwidth(fab['leaf_uplink_capacity'])} "
            f"(oversubscription {fab['oversubscription']:g}:1)"
        )
        if fab["levels"] == 3:
            out.append(
                f"    pod spine up {format_bandwidth(fab['spine_uplink_capacity'])} "
                f"(core oversubscription {fab['core_oversubscription']:g}:1)"
            )
    out.append(
        f"  bisection bandwidth: {format_bandwidth(fab['bisection_bandwidth'])} per direction"
    )
    if "inter_node_latency" in s:
        out.append(
            f"  rank 0 -> first rank of node 1: latency {format_latency(s['inter_node_latency'])}"
        )
    if s["assumptions"]:
        out.append("  assumptions:")
        out.extend(f"    - {a}" for a in s["assumptions"])
    if s["sources"]:
        out.append("  sources:")
        out.extend(f"    - {x}" for x in s["sources"])
    return "\n".join(out)


def topology_cli(path_or_name: str, out_png: str | None, num_nodes: int | None) -> str:
    """Load a topology, draw it to ``out_png`` when given, return the summary text."""
    cluster = load_topology(path_or_name, num_nodes)
    text = format_summary(cluster)
    if out_png:
        from simcluster.topology.draw import draw_topology

        draw_topology(cluster, out_png)
        text += f"\n  picture: {out_png}"
    return text

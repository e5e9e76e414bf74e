"""Shared fixtures: tiny hand-built clusters with known closed forms, and the
ResNet-50 / V100 spec pair the schedule tests build on."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from simcluster.compute import load_profile
from simcluster.workload import build_model


class RingCluster:
    """P ranks, one per host, on a bidirectional ring of identical links.

    Every directed link has ``bandwidth`` bytes/s and ``latency`` seconds;
    a route goes clockwise when that is no longer than counter-clockwise.
    """

    def __init__(self, p: int, bandwidth: float, latency: float) -> None:
        self.name = f"ring{p}"
        self.num_nodes = p
        self.ranks_per_node = 1
        self.num_ranks = p
        self.graph = nx.Graph()
        for i in range(p):
            self.graph.add_node(f"g{i}", kind="gpu", node=i, local=0)
        self.link_ends: list[tuple[str, str]] = []
        for i in range(p):
            j = (i + 1) % p
            self.graph.add_edge(
                f"g{i}", f"g{j}", bandwidth=bandwidth, latency=latency, kind="infiniband"
            )
            self.link_ends += [(f"g{i}", f"g{j}"), (f"g{j}", f"g{i}")]
        self.num_links = len(self.link_ends)
        self.link_id = {e: k for k, e in enumerate(self.link_ends)}
        self.link_bandwidth = np.full(self.num_links, float(bandwidth))
        self.link_latency = np.full(self.num_links, float(latency))
        self.link_kind = ["infiniband"] * self.num_links
        self.rank_node = np.arange(p)
        self.rank_vertex = [f"g{i}" for i in range(p)]

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        p = self.num_ranks
        cw = (dst - src) % p
        step = 1 if cw <= p - cw else -1
        links, cur = [], src
        while cur != dst:
            nxt = (cur + step) % p
            links.append(self.link_id[(f"g{cur}", f"g{nxt}")])
            cur = nxt
        return tuple(links)

    def routes(self, src, dst) -> tuple[np.ndarray, np.ndarray]:
        """route() of every pair, as (entry_flow, entry_link) arrays."""
        paths = [self.route(int(a), int(b)) for a, b in zip(src, dst, strict=True)]
        entry_flow = np.repeat(np.arange(len(paths), dtype=np.int64), [len(p) for p in paths])
        entry_link = np.fromiter((x for p in paths for x in p), np.int64, entry_flow.size)
        return entry_flow, entry_link

    def path_latency(self, src: int, dst: int) -> float:
        return float(sum(self.link_latency[list(self.route(src, dst))]))


@pytest.fixture
def ring_cluster():
    return RingCluster


class StarCluster(RingCluster):
    """P ranks, one per host, each with one link to a single switch."""

    def __init__(self, p: int, bandwidth: float, latency: float) -> None:
        self.name = f"star{p}"
        self.num_nodes = p
        self.ranks_per_node = 1
        self.num_ranks = p
        self.graph = nx.Graph()
        self.graph.add_node("sw", kind="switch", node=None, local=0)
        self.link_ends = []
        for i in range(p):
            self.graph.add_node(f"g{i}", kind="gpu", node=i, local=0)
            self.graph.add_edge(
                f"g{i}", "sw", bandwidth=bandwidth, latency=latency, kind="infiniband"
            )
            self.link_ends += [(f"g{i}", "sw"), ("sw", f"g{i}")]
        self.num_links = len(self.link_ends)
        self.link_id = {e: k for k, e in enumerate(self.link_ends)}
        self.link_bandwidth = np.full(self.num_links, float(bandwidth))
        self.link_latency = np.full(self.num_links, float(latency))
        self.link_kind = ["infiniband"] * self.num_links
        self.rank_node = np.arange(p)
        self.rank_vertex = [f"g{i}" for i in range(p)]

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        if src == dst:
            return ()
        return (self.link_id[(f"g{src}", "sw")], self.link_id[("sw", f"g{dst}")])


@pytest.fixture
def star_cluster():
    return StarCluster


@pytest.fixture
def tiny_scenario() -> dict:
    """A small valid scenario mapping (ResNet-18 CIFAR on 4 and 8 Puhti GPUs)."""
    return {
        "name": "tiny",
        "topology": "puhti",
        "profile": "v100-sxm2-32gb",
        "workload": {"model": "resnet18-cifar", "dataset": "cifar10", "batch_per_gpu": 128},
        "schedules": [{"name": "ddp"}, {"name": "hsadmm", "options": {"keep": 0.5}}],
        "study": {"kind": "strong", "gpus": [4, 8]},
    }


@pytest.fixture(scope="module")
def model():
    """ResNet-50 at 224 px, 1,000 classes."""
    return build_model("resnet50", 224, 1000)


@pytest.fixture(scope="module")
def profile():
    """The V100 SXM2 spec profile."""
    return load_profile("v100-sxm2-32gb")

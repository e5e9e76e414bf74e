"""Up-front size estimate of a scenario: refuse work that would not fit the machine.

Before anything is built, the largest study size gives ranks, nodes, directed
links, flows of one ring phase, distinct rank programs and a memory estimate:

    memory = BASE + ranks * PER_RANK + programs * ops * PER_OP     (bytes)

The constants are measured (peak RSS of ``simcluster run --no-plots`` on this
repository's 2-core machine, resnet152 DDP on puhti-xl / puhti-2l):

- BASE 100 MB: 64 ranks peaked at 77 MB;
- PER_RANK 10 KB: 16,384 ranks without jitter peaked at 211 MB, 8.2 KB per rank
  over 64 ranks (graph, routing tables, one rank class per node position);
- PER_OP 0.5 KB: ``stragglers1024`` when jitter ran 1,024 distinct programs of
  about 1,250 ops each peaked at 707 MB, 0.49 KB per op;
- PER_FACTOR 8 B: jitter now keeps one program per class and a float64 factor
  per rank and timed op (``stragglers1024`` peaks at 88 MB).

    memory += ranks * ops * PER_FACTOR    (with jitter)

Over the limit (default: three quarters of this machine's memory; raised with
``--max-memory GB``) the run stops with exit code 2 and the estimate.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from simcluster.errors import ConfigError

__all__ = [
    "SizeEstimate",
    "estimate_size",
    "check_size",
    "check_topology_size",
    "machine_memory",
    "MAX_RANKS",
]

BASE_BYTES = 100e6
PER_RANK_BYTES = 10e3
#: one float64 duration factor per rank and timed op (jitter)
PER_FACTOR_BYTES = 8.0
PER_OP_BYTES = 0.5e3
#: ranks beyond which nothing is attempted whatever the memory (event counts explode)
MAX_RANKS = 1_000_000


def machine_memory() -> float:
    """Physical memory of this machine, bytes (0 if unknown)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 0.0


@dataclass(frozen=True)
class SizeEstimate:
    """Sizes of the largest configuration of a study (units in the field names)."""

    ranks: int
    nodes: int
    links: int
    flows_per_phase: int
    programs: int
    ops_per_program: int
    memory_bytes: float

    def describe(self) -> str:
        return (
            f"{self.ranks:,} ranks on {self.nodes:,} nodes, ~{self.links:,} links, "
            f"~{self.flows_per_phase:,} flows per phase, {self.programs:,} distinct programs "
            f"of ~{self.ops_per_program:,} ops, ~{self.memory_bytes / 1e9:.2f} GB"
        )


def estimate_size(sc: Any) -> SizeEstimate:
    """The estimate for a validated scenario's largest study size."""
    from simcluster.scenario import resolved_input_size, resolved_num_classes
    from simcluster.topology import load_topology
    from simcluster.workload import build_model

    ranks = max(sc.study.gpus)
    probe = load_topology(sc.topology, num_nodes=1)
    per_node = max(1, probe.ranks_per_node)
    nodes = -(-ranks // per_node)
    # a one-node cluster's links (its node and the fabric above), plus each further node's
    per_node_links = 2 * probe._edges_per_node + 4  # its own edges, NIC uplinks (both ways)
    links = probe.num_links + (nodes - 1) * per_node_links
    layers = 64
    w = sc.workload
    if w.model is not None:
        model = build_model(w.model, resolved_input_size(w), resolved_num_classes(w))
        layers = len(model.layers)
    ops = 4 * layers + 16
    het = sc.heterogeneity
    jitter = het is not None and (het.jitter > 0 or het.step_jitter > 0)
    # jittered classes stay folded (one program, a factor per rank and timed op)
    programs = min(ranks, 2 * per_node + 2) * len(sc.schedules)
    factors = ranks * ops * len(sc.schedules) if jitter else 0
    memory = (
        BASE_BYTES
        + ranks * PER_RANK_BYTES
        + programs * ops * PER_OP_BYTES
        + factors * PER_FACTOR_BYTES
    )
    return SizeEstimate(ranks, nodes, links, ranks, programs, ops, memory)


def check_topology_size(name: str, num_nodes: int | None, max_links: int = 20_000_000) -> None:
    """Refuse (exit 2) building a topology of more than ``max_links`` directed links."""
    from simcluster.topology import load_topology

    probe = load_topology(name, num_nodes=1)
    nodes = num_nodes if num_nodes is not None else getattr(probe, "max_nodes", 1) or 1
    links = probe.num_links + (nodes - 1) * (2 * probe._edges_per_node + 4)
    if links > max_links:
        raise ConfigError(
            None, "--nodes", nodes, f"too large to build: ~{links:,} links",
            f"at most {max_links:,} links",
        )  # fmt: skip


def check_size(sc: Any, max_memory_gb: float | None = None) -> SizeEstimate:
    """Raise ConfigError (exit 2) with the estimate when it exceeds the limit."""
    if max_memory_gb is not None and not (math.isfinite(max_memory_gb) and max_memory_gb > 0):
        raise ConfigError(None, "--max-memory", max_memory_gb, "out of range", "a number of GB > 0")
    est = estimate_size(sc)
    limit = max_memory_gb * 1e9 if max_memory_gb is not None else 0.75 * machine_memory()
    file = getattr(sc, "source", None)
    if est.ranks > MAX_RANKS:
        raise ConfigError(
            file, "study.gpus", est.ranks, f"too large to simulate: {est.describe()}",
            f"at most {MAX_RANKS:,} ranks",
        )  # fmt: skip
    if limit > 0 and est.memory_bytes > limit and math.isfinite(est.memory_bytes):
        raise ConfigError(
            file, "study.gpus", max(sc.study.gpus),
            f"would not fit in memory: {est.describe()}",
            f"at most {limit / 1e9:.1f} GB (raise with --max-memory GB)",
        )  # fmt: skip
    return est

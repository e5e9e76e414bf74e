"""One way to set up a simulation: topology, network profile and engine together.

``Simulation.for_scenario(sc, gpus)`` builds the scenario's cluster for that
many GPUs, the communication context with the network profile's per-message
cost and link efficiencies, and the engine with the scenario's network model.
The study, the validation (paper cases and live runs), the sweep (through the
study) and the benchmark all set up their runs here.

Times are seconds, sizes bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from simcluster.collectives import CommContext, estimate_phases
from simcluster.compute import NetworkProfile, load_network_profile
from simcluster.engine import Engine, Trace
from simcluster.network.transport import with_transport
from simcluster.program import CollectiveCall, RankClass
from simcluster.schedules import BuildContext
from simcluster.topology import load_topology, load_topology_for_ranks, topology_ranks_per_node

__all__ = ["Simulation", "nodes_for"]


def nodes_for(topology: str, gpus: int) -> int:
    """Nodes of ``topology`` that ``gpus`` ranks fill (the last one may be partial)."""
    return math.ceil(gpus / topology_ranks_per_node(topology))


@dataclass
class Simulation:
    """A cluster with its network profile and an engine ready to run programs."""

    cluster: Any
    network_profile: NetworkProfile
    engine: Engine

    @classmethod
    def for_topology(
        cls,
        topology: str,
        gpus: int,
        network_profile: str | NetworkProfile = "nccl-spec",
        network_model: str = "maxmin",
        clusters: dict[int, Any] | None = None,
        nodes: int | None = None,
    ) -> Simulation:
        """Set up ``gpus`` ranks of ``topology`` (a name or a YAML path).

        clusters: a cache of built clusters by node count, shared between calls.
        nodes: the node count when it is not the one ``gpus`` fills.
        """
        cache = clusters if clusters is not None else {}
        if nodes is None:
            built = next(iter(cache.values()), None)
            if built is None:  # nodes_for's count and that cluster, the file looked up once
                built = load_topology_for_ranks(topology, gpus)
                cache[built.num_nodes] = built
            per_node = built.ranks_per_node
            nodes = math.ceil(gpus / per_node) if per_node else nodes_for(topology, gpus)
        if nodes not in cache:
            cache[nodes] = load_topology(topology, num_nodes=nodes)
        netp = (
            network_profile
            if isinstance(network_profile, NetworkProfile)
            else load_network_profile(network_profile)
        )
        ctx = CommContext.from_profile(cache[nodes], with_transport(netp, cache[nodes]))
        return cls(cache[nodes], netp, Engine(ctx, network_model))

    @classmethod
    def for_scenario(
        cls,
        sc: Any,
        gpus: int,
        clusters: dict[int, Any] | None = None,
        network_profile: NetworkProfile | None = None,
    ) -> Simulation:
        """The scenario's topology, network profile and network model at ``gpus`` ranks."""
        return cls.for_topology(
            sc.topology,
            gpus,
            network_profile or sc.network_profile,
            sc.network_model,
            clusters,
        )

    @property
    def ctx(self) -> CommContext:
        return self.engine.ctx

    def estimate(self, call: CollectiveCall) -> float:
        """Seconds ``call`` would take alone on this cluster (static max-min)."""
        return estimate_phases(self.engine.ctx, self.engine.lowered(call)[1])

    def build_context(
        self,
        gpus: int,
        model: Any,
        profile: Any,
        batch: int,
        precision: str = "fp32",
        accumulation: int = 1,
        seed: int = 0,
        optimizer: str = "sgd",
        input_load: Any = None,
    ) -> BuildContext:
        """What a schedule builds its programs from, with this cluster's estimator
        (``input_load``: the workload's input pipeline cost, None for none)."""
        return BuildContext(
            self.cluster,
            gpus,
            model,
            profile,
            batch,
            precision,
            accumulation,
            seed,
            self.estimate,
            optimizer,
            input_load,
        )

    def run(self, classes: list[RankClass]) -> Trace:
        """One iteration of ``classes``."""
        return self.engine.run(classes)

"""Row partitioning of sparse DNNs for model-parallel SpMV training.

The multi-phase hypergraph model with fixed vertices of the SpMV paper
(shared/papers/004_*, section 5), three backends (``kahypar``, ``mtkahypar``,
``random``), communication sets per layer and the paper's Table 1 metrics.

>>> from simcluster.workload.radixnet import graph_challenge_radixnet
>>> net = graph_challenge_radixnet(1024, 12)
>>> part = partition_network(net, 32, "random")  # doctest: +SKIP
>>> table1_metrics(comm_plan(net, part), part)  # doctest: +SKIP
"""

from simcluster.partition.backends import (
    BACKENDS,
    KAHYPAR_PRESET,
    MTKAHYPAR_PRESETS,
    MissingBackendError,
    kahypar_config_path,
    partition_phase,
)
from simcluster.partition.comm import (
    LayerComm,
    PartitionMetrics,
    comm_plan,
    layer_comm,
    table1_metrics,
)
from simcluster.partition.hypergraph import (
    NET_COST,
    PhaseHypergraph,
    build_phase,
    connectivity_cut,
    input_owners,
)
from simcluster.partition.network import NetworkPartition, default_cache_dir, partition_network

__all__ = [
    "BACKENDS",
    "KAHYPAR_PRESET",
    "MTKAHYPAR_PRESETS",
    "NET_COST",
    "LayerComm",
    "MissingBackendError",
    "NetworkPartition",
    "PartitionMetrics",
    "PhaseHypergraph",
    "build_phase",
    "comm_plan",
    "connectivity_cut",
    "default_cache_dir",
    "input_owners",
    "kahypar_config_path",
    "layer_comm",
    "partition_network",
    "partition_phase",
    "table1_metrics",
]

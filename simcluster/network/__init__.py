"""Network layer: flows over directed links, max-min fair or contention-free."""

from simcluster.network.backend import (
    BACKENDS,
    ClosedFormNetwork,
    FoldedMaxMinNetwork,
    MaxMinNetwork,
    NetworkBackend,
    make_network,
)
from simcluster.network.flow import FlowBatch, FlowSpec
from simcluster.network.maxmin import maxmin_rates

__all__ = [
    "BACKENDS",
    "ClosedFormNetwork",
    "FlowBatch",
    "FlowSpec",
    "FoldedMaxMinNetwork",
    "MaxMinNetwork",
    "NetworkBackend",
    "make_network",
    "maxmin_rates",
]

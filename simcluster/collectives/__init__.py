"""Collective algorithms, one module each, lowered to phases of flows."""

from simcluster.collectives.base import OPS, CollectiveCall, CommContext, Phase
from simcluster.collectives.registry import (
    ALGORITHMS,
    AUTO_CANDIDATES,
    algorithms_for,
    estimate_phases,
    lower,
)

__all__ = [
    "ALGORITHMS",
    "AUTO_CANDIDATES",
    "OPS",
    "CollectiveCall",
    "CommContext",
    "Phase",
    "algorithms_for",
    "estimate_phases",
    "lower",
]

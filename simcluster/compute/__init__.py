"""Compute cost: device profiles (kernel times) and network profiles."""

from simcluster.compute.loader import (
    SCHEMA_VERSION,
    NetworkProfile,
    list_network_profiles,
    list_profiles,
    load_network_profile,
    load_profile,
)
from simcluster.compute.profile import PASSES, PRECISIONS, DeviceProfile, SpecProfile

__all__ = [
    "PASSES",
    "PRECISIONS",
    "SCHEMA_VERSION",
    "DeviceProfile",
    "NetworkProfile",
    "SpecProfile",
    "list_network_profiles",
    "list_profiles",
    "load_network_profile",
    "load_profile",
]

"""Where the project's data folders are (topologies, profiles, scenarios)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["project_root", "profiles_dir", "network_profiles_dir", "topologies_dir"]


def project_root() -> Path:
    """The checkout that holds ``simcluster/``, ``topologies/`` and ``calibrate/``."""
    return Path(__file__).resolve().parents[1]


def profiles_dir() -> Path:
    return project_root() / "calibrate" / "profiles"


def network_profiles_dir() -> Path:
    return profiles_dir() / "network"


def topologies_dir() -> Path:
    return project_root() / "topologies"

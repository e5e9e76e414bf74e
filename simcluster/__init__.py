"""simcluster: discrete-event cluster simulator with real-kernel calibration.

The Python API (:mod:`simcluster.api`): ``load_scenario``, ``run_scenario`` and
``records``, importable from here; they load on first use, so ``import
simcluster`` stays light.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "load_scenario", "run_scenario", "records"]


def __getattr__(name: str) -> Any:
    if name in ("load_scenario", "run_scenario", "records"):
        from simcluster import api

        return getattr(api, name)
    raise AttributeError(f"module 'simcluster' has no attribute {name!r}")

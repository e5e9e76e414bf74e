"""What-if sweeps: a scenario run over a grid of field values (``simcluster sweep``).

See :mod:`simcluster.sweep.runner` for points.csv, resume and executors,
:mod:`simcluster.sweep.overrides` for field paths (scenario, topology, profiles)
and :mod:`simcluster.sweep.plots` for the PNGs.
"""

from simcluster.sweep.overrides import PointSpec, build_point, materialize, parse_path, set_path
from simcluster.sweep.runner import (
    METRIC_COLUMNS,
    Axis,
    SweepResult,
    make_grid,
    parse_axis,
    read_points,
    run_point,
    run_sweep,
)

__all__ = [
    "METRIC_COLUMNS",
    "Axis",
    "PointSpec",
    "SweepResult",
    "build_point",
    "make_grid",
    "materialize",
    "parse_axis",
    "parse_path",
    "read_points",
    "run_point",
    "run_sweep",
    "set_path",
]

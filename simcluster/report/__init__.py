"""Interface layer: tables, result files, plots and traces from records."""

from simcluster.report.chrome_trace import trace_events, write_chrome_trace
from simcluster.report.files import flatten, write_csv, write_json
from simcluster.report.plots import plot_breakdown, plot_scaling
from simcluster.report.progress import ProgressBar
from simcluster.report.table import (
    format_table,
    human_bytes,
    human_seconds,
    scaling_table,
    segment_table,
)

__all__ = [
    "ProgressBar",
    "flatten",
    "format_table",
    "human_bytes",
    "human_seconds",
    "plot_breakdown",
    "plot_scaling",
    "scaling_table",
    "segment_table",
    "trace_events",
    "write_chrome_trace",
    "write_csv",
    "write_json",
]

"""Validation against real runs (``simcluster validate``).

Reference cases live as data in ``scenarios/references/*.yaml``
(:mod:`simcluster.validation.cases`); :mod:`simcluster.validation.runner` runs them,
:mod:`simcluster.validation.report` prints and plots the errors, and
:mod:`simcluster.validation.live` compares a live run (``calibrate/live``) with its
simulation phase by phase. Validation reports; it never tunes a constant.
"""

from simcluster.validation.cases import Case, Metric, ReferenceFile, load_references
from simcluster.validation.report import case_table, plot_scatter, summary, summary_table
from simcluster.validation.runner import CaseResult, run_cases

__all__ = [
    "Case",
    "CaseResult",
    "Metric",
    "ReferenceFile",
    "case_table",
    "load_references",
    "plot_scatter",
    "run_cases",
    "summary",
    "summary_table",
]

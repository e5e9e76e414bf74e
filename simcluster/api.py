"""A Python API for notebooks and scripts: load a scenario, run it, get rows.

    import pandas as pd
    import simcluster

    sc = simcluster.load_scenario("puhti64", {"study.gpus": [8, 16]})
    result = simcluster.run_scenario(sc)
    df = pd.DataFrame(simcluster.records(result))

The functions are the ones the CLI uses; errors are the same
:class:`simcluster.errors.UserError` lines (raised, not printed). Times in the
records are seconds, sizes bytes.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from simcluster.report.files import flatten
from simcluster.scenario import Scenario, _read_yaml, parse_scenario
from simcluster.schedules import scenario_schedules
from simcluster.study import ScenarioResult
from simcluster.study import run_scenario as _run_study

__all__ = ["load_scenario", "run_scenario", "records"]


def load_scenario(name_or_path: str | Path, overrides: dict[str, Any] | None = None) -> Scenario:
    """A validated scenario: a shipped or user scenario's name (``puhti64``) or a YAML path.

    overrides: field path -> value, with the dotted paths of ``simcluster sweep --set``
        (``workload.batch_per_gpu``, ``schedules[1].options.keep``, ``study.gpus``);
        checked like the file itself (a ConfigError names the field).
    """
    from simcluster.paths import find_scenario
    from simcluster.sweep.overrides import parse_path, set_path

    path = find_scenario(name_or_path)
    data = _read_yaml(path)
    if overrides:
        data = copy.deepcopy(data)
        for key, value in overrides.items():
            set_path(data, parse_path(key), value, str(path))
    return parse_scenario(data, str(path))


def run_scenario(
    scenario: Scenario | str | Path, network_model: str | None = None, progress: bool = False
) -> ScenarioResult:
    """Simulate every schedule at every size of the scenario's study.

    scenario: a :class:`Scenario` or what :func:`load_scenario` takes.
    network_model: ``maxmin`` or ``closed-form`` instead of the scenario's.
    progress: draw a progress bar on stderr.
    """
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    if network_model is not None:
        sc = parse_scenario({**_as_data(sc), "network_model": network_model}, sc.source)
    for cls in scenario_schedules(sc):
        cls.prepare(sc)
    bar = None
    if progress:
        from simcluster.report import ProgressBar

        bar = ProgressBar()
    return _run_study(sc, progress=bar)


def records(result: ScenarioResult) -> list[dict[str, Any]]:
    """One flat dict per schedule x size (``pandas.DataFrame(records(result))``).

    Nested figures become ``outer.inner`` keys (``breakdown_s.forward``); the
    per-segment detail stays in ``result.records``.
    """
    return [flatten({k: v for k, v in r.items() if k != "segments"}) for r in result.records]


def _as_data(sc: Scenario) -> dict[str, Any]:
    return sc.model_dump(exclude={"source"}, exclude_none=True)

"""Running reference cases: one simulation per distinct (scenario, overrides), then metrics.

A case is *skipped* (with the reason) when its scenario file or one of its
schedules is not available in this checkout, and *failed* (with the error) when
the simulation or the metric cannot be computed; neither stops the others. A
case is *fitted* when a profile it used was fitted to it (the profile's
``provenance.fitted_from`` lists the case id, or the case says ``fitted_from``):
it is shown but left out of the summary. A case marked ``dropped`` (a reading
too doubtful to score) is listed with its reason and not run.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simcluster.errors import UserError
from simcluster.paths import exists, is_file, project_root
from simcluster.validation.cases import Case, ReferenceFile
from simcluster.validation.metrics import (
    MetricError,
    collective_time,
    compared_value,
    nccl_tests_value,
    read_metric,
    relative_error,
)

__all__ = ["CaseResult", "run_cases", "resolve_scenario"]

#: metric kinds that simulate the network alone (no study run)
NETWORK_ONLY = ("collective", "nccl_tests")

Progress = Callable[[int, int, str], None]


@dataclass
class CaseResult:
    paper: str
    case: Case
    status: str  # ok | skipped | failed | dropped
    predicted: float | None = None
    profiles: str = ""
    fitted: bool = False
    message: str = ""
    #: failed on an unexpected exception (a bug), not on the case's input
    bug: bool = False

    @property
    def error(self) -> float | None:
        """Signed relative error (:func:`relative_error`): against the reference, or 0
        inside ``reference_range`` and relative to its nearest bound outside."""
        if self.predicted is None:
            return None
        return relative_error(self.predicted, self.case.reference, self.case.reference_range)

    @property
    def counts(self) -> bool:
        """Whether the case enters the summary."""
        return self.status == "ok" and not self.fitted

    def to_json(self) -> dict[str, Any]:
        c = self.case
        return {
            "paper": self.paper,
            "id": c.id,
            "what": c.what,
            "source": c.source,
            "scenario": c.scenario,
            "overrides": c.overrides,
            "status": self.status,
            "predicted": self.predicted,
            "reference": c.reference,
            "reference_range": list(c.reference_range) if c.reference_range else None,
            "unit": c.unit,
            "transform": c.metric.transform,
            "error": self.error,
            "confidence": c.confidence,
            "profiles": self.profiles,
            "fitted": self.fitted,
            "note": c.note,
            "dropped": c.dropped,
            "group": c.group,
            "message": self.message,
        }


def resolve_scenario(path: str) -> Path:
    """A case's scenario path: as given when it exists, else relative to the project."""
    p = Path(path)
    if p.is_absolute() or exists(p):
        return p
    return project_root() / p


def _group_key(case: Case) -> str:
    return json.dumps(
        [case.scenario, case.overrides, sorted(case.requires), case.metric.kind in NETWORK_ONLY],
        sort_keys=True,
        default=str,
    )


def _fitted_ids(sc) -> set[str]:
    """Case ids the scenario's profiles were fitted to (``provenance.fitted_from``)."""
    from simcluster.compute import load_network_profile, load_profile

    ids: set[str] = set()
    for prov in (
        load_profile(sc.profile).provenance,
        load_network_profile(sc.network_profile).provenance,
    ):
        got = prov.get("fitted_from") if isinstance(prov, dict) else None
        if isinstance(got, str):
            ids.add(got)
        elif isinstance(got, list | tuple):
            ids.update(str(x) for x in got)
        elif isinstance(got, dict):
            ids.update(str(x) for x in got)
    return ids


def _prepare(case: Case, workdir: Path):
    """The case's Scenario with overrides applied, or a skip reason."""
    from simcluster.schedules import list_schedules
    from simcluster.sweep.overrides import build_point, materialize

    known = set(list_schedules())
    for name in case.requires:
        if name not in known:
            return None, f"skipped: schedule {name} not available"
    path = resolve_scenario(case.scenario)
    if not is_file(path):
        return None, f"skipped: scenario file {case.scenario} not available"
    from simcluster.inputs import load_yaml

    data = load_yaml(path, "scenario file")
    point = build_point(data, dict(case.overrides), str(path))
    for s in point.scenario.get("schedules", []):
        name = s.get("name") if isinstance(s, dict) else None
        if name not in known:
            return None, f"skipped: schedule {name} not available"
    return materialize(point, workdir), ""


#: one case's outcome from a group run: (status, predicted, profiles, fitted, message,
#: where, bug); ``where`` is the case field a failure is about (``metric.field``) or "",
#: ``bug`` whether it failed on an unexpected exception rather than on its input
Outcome = tuple[str, float | None, str, bool, str, str, bool]


def _run_group(cases: Sequence[Case], workdir: str) -> list[Outcome]:
    """Simulate one (scenario, overrides) and read every case's metric."""
    from simcluster.study import run_scenario

    out: list[Outcome] = []
    try:
        sc, skip = _prepare(cases[0], Path(workdir))
    except UserError as exc:  # the scenario, or the case's overrides of it
        where = "overrides" if cases[0].overrides else "scenario"
        return [("failed", None, "", False, str(exc), where, False)] * len(cases)
    if sc is None:
        return [("skipped", None, "", False, skip, "", False)] * len(cases)
    try:
        fitted_ids = _fitted_ids(sc)
        records = None
        if cases[0].metric.kind not in NETWORK_ONLY:
            records = run_scenario(sc).records
    except Exception as exc:  # noqa: BLE001 - report, do not stop the other cases
        bug = not isinstance(exc, UserError)
        msg = f"{type(exc).__name__}: {exc}" if bug else str(exc)
        return [("failed", None, "", False, msg, "", bug)] * len(cases)
    for c in cases:
        fitted = c.fitted_from is not None or c.id in fitted_ids
        try:
            if c.metric.kind == "collective":
                value, profiles = collective_time(c.metric, sc)
            elif c.metric.kind == "nccl_tests":
                value, profiles = nccl_tests_value(c.metric, sc)
            else:
                value = read_metric(c.metric, records)
                rec = records[0]
                profiles = f"{rec['profile']} / {rec['network_profile']}"
            out.append(("ok", compared_value(c.metric, value), profiles, fitted, "", "", False))
        except MetricError as exc:
            out.append(("failed", None, "", fitted, str(exc), exc.path, False))
        except UserError as exc:
            out.append(("failed", None, "", fitted, str(exc), "", False))
    return out


def failure_line(file: str | None, index: int, case: Case, where: str, message: str) -> str:
    """A failed case's message naming its reference file, its place and its id:
    ``refs.yaml: cases[2].metric.field: no field 'x' ... (case h100-rn50)``."""
    path = f"cases[{index}]" + (f".{where}" if where else "")
    return f"{file or '<references>'}: {path}: {message} (case {case.id})"


def run_cases(
    files: Sequence[ReferenceFile],
    progress: Progress | None = None,
    jobs: int = 1,
    workdir: str | Path | None = None,
) -> list[CaseResult]:
    """Run every case of ``files``; results in file and case order."""
    order: list[tuple[str, Case]] = [(f.paper, c) for f in files for c in f.cases]
    places = [(f.file, j) for f in files for j in range(len(f.cases))]
    groups: dict[str, list[int]] = {}
    results: list[CaseResult | None] = [None] * len(order)
    for i, (paper, c) in enumerate(order):
        if c.dropped:
            results[i] = CaseResult(paper, c, "dropped", message=f"dropped: {c.dropped}")
        else:
            groups.setdefault(_group_key(c), []).append(i)
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="simcluster-validate-")
        workdir = tmp.name
    keys = list(groups)
    done = 0
    try:

        def store(key: str, outs) -> None:
            nonlocal done
            for i, outcome in zip(groups[key], outs, strict=True):
                status, value, profiles, fitted, msg, where, bug = outcome
                paper, case = order[i]
                if status == "failed":
                    msg = failure_line(*places[i], case, where, msg)
                results[i] = CaseResult(paper, case, status, value, profiles, fitted, msg, bug)
            done += 1
            if progress:
                progress(done, len(keys), order[groups[key][0]][1].id)

        if jobs > 1 and len(keys) > 1:
            from simcluster.workers import process_pool

            with process_pool(min(jobs, len(keys))) as pool:
                futs = {
                    k: pool.submit(_run_group, [order[i][1] for i in groups[k]], str(workdir))
                    for k in keys
                }
                for k in keys:
                    store(k, futs[k].result())
        else:
            for k in keys:
                store(k, _run_group([order[i][1] for i in groups[k]], str(workdir)))
    finally:
        if tmp is not None:
            tmp.cleanup()
    return [r for r in results if r is not None]

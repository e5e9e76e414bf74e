"""Reference cases as data: ``scenarios/references/*.yaml``.

One file per source (a paper, or a family of live runs). Each case names the
scenario it runs (with overrides set by the same dotted paths as ``simcluster
sweep``), the metric it reads from the simulation, the reference value, where
that value comes from, and how far to trust the reading::

    paper: PRUNEX
    source: shared/papers/000_eb18df3bc26c601f.txt
    cases:
      - id: prunex-speedup-ddp-64
        what: DDP strong-scaling speedup, 8 -> 64 GPUs
        source: Fig. 9a and section 5.4
        scenario: scenarios/puhti64.yaml
        overrides: {study.gpus: [8, 64]}
        metric: {kind: field, field: speedup, schedule: ddp, gpus: 64}
        reference: 5.81
        reference_range: null       # [lo, hi] when the paper gives a range: 0 error inside
        unit: x
        confidence: high            # high | medium | low
        note: ...                   # why the confidence is what it is
        fitted_from: null           # set when a profile constant was fitted to this value
        dropped: null               # why the case is listed but not scored (not run)
        group: null                 # a sub-set of the file (e.g. a system kind) whose
                                    # median is also reported on its own

Metric kinds (see :mod:`simcluster.validation.metrics`): ``field`` (a record
field), ``ratio`` (a field of one record over the same or another field of
another), ``segments`` (a per-segment value aggregated over the run),
``segment_share`` (one breakdown category's share of several; ``ranks: all``
sums it over every rank, ``timing: net`` times collectives from their last
participant's arrival),
``segment_ratio`` (two aggregated segment values), ``collective`` (one
collective alone on the scenario's cluster), ``nccl_tests`` (one row of the
simulated nccl-tests table: ``nccl_op``, ``nbytes`` = size, ``gpus``,
``value`` = ``busbw_GBps`` or ``time_us``, and ``gpus_per_thread`` = the
run's ``-g``, whose launches use the scenario's device profile).

The compared quantity is the metric's value, then ``transform`` (a ratio
turned into the unit the paper reports: ``percent_gain`` = (r - 1) x 100 for a
"X % faster / higher throughput", ``percent_reduction`` = (1 - r) x 100 for a
"X % less time"), then ``scale`` (a unit change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from simcluster import paths
from simcluster.errors import ConfigError
from simcluster.schema import ListTuple, StrictModel, pydantic_to_config_error

__all__ = [
    "Select",
    "Metric",
    "Case",
    "ReferenceFile",
    "load_reference_file",
    "load_references",
    "references_dir",
]


class Select(StrictModel):
    """One record of a run: a schedule label and a GPU count (default: the largest)."""

    schedule: str
    gpus: int | None = Field(None, ge=1)


class Metric(StrictModel):
    kind: Literal[
        "field", "ratio", "segments", "segment_share", "segment_ratio", "collective", "nccl_tests"
    ]
    # field / segments / segment_share / segment_ratio
    schedule: str | None = None
    gpus: int | None = Field(None, ge=1)
    field: str | None = None
    # ratio: field(num) / field(den)
    num: Select | None = None
    den: Select | None = None
    den_field: str | None = None
    # segments: label prefix, value, aggregate
    segments: str | None = Field(None, description="segment label prefix; all when absent")
    value: str | None = Field(None, description="comm_s, time_s, extra.<k>, breakdown_s.<k>")
    aggregate: Literal["mean", "sum"] = "mean"
    categories: list[str] | None = None
    share_of: str | None = None
    # segment_share: whose breakdown (the lowest rank's class, or every rank's
    # summed) and how a collective is timed (booked from the rank's arrival, so
    # with its wait for the other participants, or net: from the last arrival)
    ranks: Literal["first", "all"] = Field(
        "first", description="segment_share over the lowest rank's class (first) or every rank"
    )
    timing: Literal["booked", "net"] = Field(
        "booked", description="segment_share: collectives with (booked) or without (net) the wait"
    )
    num_value: str | None = None
    den_value: str | None = None
    # collective
    op: Literal["allreduce", "allgather", "broadcast", "reduce_scatter"] | None = None
    nbytes: float | Literal["model_fp32", "model_fp16"] | None = None
    algorithm: str = "auto"
    # nccl_tests: an nccl-tests binary's row (op, nbytes = its size column, gpus;
    # value: busbw_GBps or time_us)
    nccl_op: str | None = None
    gpus_per_thread: int | None = Field(
        None, ge=1, description="nccl-tests -g: GPUs one host thread drives (default 1)"
    )
    # every kind
    transform: Literal["percent_gain", "percent_reduction"] | None = Field(
        None, description="ratio -> percent: (r - 1) x 100 or (1 - r) x 100"
    )
    scale: float = Field(1.0, gt=0, description="multiplies the prediction (unit change)")

    @field_validator("nbytes")
    @classmethod
    def _size(cls, v: float | str | None) -> float | str | None:
        from simcluster.report.nccl_tests import MAX_SIZE  # as nccl-tests' -e may name

        if isinstance(v, (int, float)) and not (0 < v <= MAX_SIZE):
            raise ValueError(f"out of range; allowed: a size in bytes, 1 to 2^50 ({MAX_SIZE})")
        return v

    @model_validator(mode="after")
    def _needs(self) -> Metric:
        need = {
            "field": ("schedule", "field"),
            "ratio": ("num", "den"),
            "segments": ("schedule", "value"),
            "segment_share": ("schedule", "categories", "share_of"),
            "segment_ratio": ("schedule", "num_value", "den_value"),
            "collective": ("op", "nbytes", "gpus"),
            "nccl_tests": ("nccl_op", "nbytes", "gpus", "value"),
        }[self.kind]
        missing = [k for k in need if getattr(self, k) in (None, "")]  # "" names nothing
        if self.kind != "segment_share" and (self.ranks, self.timing) != ("first", "booked"):
            raise ValueError("ranks and timing apply to metric kind 'segment_share' only")
        if self.kind == "ratio" and not self.field and not self.value:
            missing.append("field or value")
        if missing:
            raise ValueError(f"metric kind {self.kind!r} needs {', '.join(missing)}")
        return self

    def schedules(self) -> list[str]:
        names = [self.schedule] if self.schedule else []
        names += [s.schedule for s in (self.num, self.den) if s is not None]
        return names


class Case(StrictModel):
    id: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    what: str
    source: str
    scenario: str | None = None
    requires: list[str] = Field(
        default_factory=list, description="schedules the case needs; skipped when one is absent"
    )
    overrides: dict[str, Any] = Field(default_factory=dict)
    metric: Metric
    reference: float
    reference_range: ListTuple[tuple[float, float]] | None = None
    unit: str = ""
    confidence: Literal["high", "medium", "low"]
    note: str = ""
    fitted_from: str | None = Field(
        None, description="profile constant fitted to this value: the case leaves the summary"
    )
    dropped: str | None = Field(
        None, description="why the reading is too doubtful to score: listed, not run"
    )
    group: str | None = Field(
        None, description="sub-set of the file (e.g. a system kind) also summarised on its own"
    )

    @field_validator("group")
    @classmethod
    def _named_group(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():  # was summarised as a group with no name
            raise ValueError("an empty group name (leave group out for none)")
        return v

    @field_validator("scenario")
    @classmethod
    def _usable_path(cls, v: str | None) -> str | None:
        if v is not None and (
            not v
            or len(v.encode()) > 4000
            or any(len(part.encode()) > 255 for part in Path(v).parts)
        ):  # the file system would refuse it (ENAMETOOLONG) when the case runs
            raise ValueError("not a usable path (empty, or a name over 255 bytes)")
        return v

    @model_validator(mode="after")
    def _scenario(self) -> Case:
        if self.scenario is None:
            raise ValueError("missing scenario")
        if self.reference == 0:
            raise ValueError("reference must be non-zero (errors are relative)")
        if self.reference_range is not None:
            lo, hi = self.reference_range
            if lo == 0 or hi == 0 or lo > hi:
                raise ValueError("reference_range is [lo, hi] with lo <= hi, both non-zero")
            if not lo <= self.reference <= hi:
                raise ValueError("reference must lie inside reference_range")
        return self


class ReferenceFile(StrictModel):
    paper: str
    source: str
    description: str = ""
    cases: list[Case] = Field(min_length=1)
    # filled by the loader
    file: str | None = None


def references_dir() -> Path:
    return paths.references_dir()


def load_reference_file(path: str | Path) -> ReferenceFile:
    p = Path(path)
    from simcluster.inputs import load_yaml

    if not p.exists():
        raise ConfigError(str(p), "<root>", str(p), "reference file not found")
    data = load_yaml(p, "reference file")
    if not isinstance(data, dict):
        raise ConfigError(str(p), "<root>", type(data).__name__, "a reference file is a mapping")
    from simcluster.inputs import check_kind

    check_kind(data, str(p), "reference-case")
    if "file" in data:
        raise ConfigError(str(p), "file", data["file"], "unknown key")
    try:
        ref = ReferenceFile.model_validate({**data, "file": str(p)})
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, str(p), ReferenceFile) from None
    ids = [c.id for c in ref.cases]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup:
        raise ConfigError(str(p), "cases", dup, "two cases share an id")
    return ref


def load_references(folder: str | Path | None = None) -> list[ReferenceFile]:
    """Every ``*.yaml`` in the references folder, sorted by file name."""
    d = Path(folder) if folder else references_dir()
    if not d.is_dir():
        raise ConfigError(None, "--references", str(d), "no such folder of reference files")
    if folder and d.is_dir() and not any(d.glob("*.yaml")):
        raise ConfigError(None, "--references", str(d), "no reference files (*.yaml) in it")
    files = [load_reference_file(p) for p in sorted(d.glob("*.yaml"))]
    ids: dict[str, str] = {}
    for f in files:
        for c in f.cases:
            if c.id in ids:
                raise ConfigError(f.file, "cases", c.id, f"case id already used in {ids[c.id]}")
            ids[c.id] = str(f.file)
    return files

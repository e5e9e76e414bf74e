"""Scenario files: YAML schema, validation with precise errors, defaults.

A scenario names a topology, a device profile, a network profile, a workload,
one or more schedules with options, a study and a seed. Every problem is a
:class:`simcluster.errors.ConfigError` naming the file, the field path, the bad
value, what is allowed and, for near misses, what was probably meant.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from simcluster.compute.input_pipeline import MAX_PER_SAMPLE_S
from simcluster.errors import ConfigError, UserError
from simcluster.registry import Registered
from simcluster.schema import StrictModel, pydantic_to_config_error

if TYPE_CHECKING:
    from simcluster.compute.input_pipeline import InputLoad

__all__ = [
    "Scenario",
    "Workload",
    "ScheduleSpec",
    "Study",
    "Heterogeneity",
    "InputPipeline",
    "Transient",
    "DATASETS",
    "load_scenario",
    "parse_scenario",
    "resolved_input_load",
    "workload_model",
    "workload_profile",
]


#: dataset name -> (training samples, classes, native input size)
DATASETS: dict[str, tuple[int, int, int]] = {
    "cifar10": (50_000, 10, 32),
    "cifar100": (50_000, 100, 32),
    "imagenet": (1_281_167, 1000, 224),
    "wikitext103": (1_801_350, 0, 512),
}


class InputPipeline(StrictModel):
    """The training input pipeline's CPU cost (:mod:`simcluster.compute.input_pipeline`)."""

    profile: str | None = Field(
        None,
        description="input profile (calibrate/profiles/input) with the measured "
        "CPU seconds per sample; or give per_sample_s",
    )
    per_sample_s: float | None = Field(
        None, gt=0, le=MAX_PER_SAMPLE_S, description="CPU seconds per sample on the training host"
    )
    workers: int = Field(
        0,
        ge=0,
        le=1024,
        description="loader worker processes; 0: the training process "
        "makes each batch before its forward (in series with the step)",
    )
    host_clock_ghz: float | None = Field(
        None,
        ge=0.1,
        le=10,
        description="the training host's nominal clock: the profile's "
        "per-sample seconds are scaled by its clock_ghz / host_clock_ghz",
    )

    @model_validator(mode="after")
    def _one_source(self) -> InputPipeline:
        if (self.profile is None) == (self.per_sample_s is None):
            raise ValueError("give exactly one of profile and per_sample_s")
        if self.host_clock_ghz is not None and self.profile is None:
            raise ValueError("host_clock_ghz transfers a profile; leave it out with per_sample_s")
        return self


class Workload(StrictModel):
    model: str | dict[str, Any] | None = Field(
        None,
        description="zoo model (simcluster list) or a family mapping {family: gpt|bert|vit|"
        "resnet, ...}; every schedule but spmv needs a model or a trace",
    )
    trace: str | None = Field(
        None, description="Kineto trace of one training iteration (instead of model)"
    )
    execution_trace: str | None = Field(
        None, description="the trace's ExecutionTraceObserver file (shapes it may lack)"
    )
    trace_profile: str | None = Field(
        None, description="profile of the device the trace ran on; scaled to `profile` if set"
    )
    dataset: str | None = Field(None, description="dataset name; sets defaults below")
    input_size: int | None = Field(None, ge=1, le=65536, description="image side px or seq length")
    num_classes: int | None = Field(None, ge=1, le=10_000_000)
    dataset_size: int | None = Field(None, ge=1, description="training samples per epoch")
    batch_per_gpu: int = Field(ge=1, le=1_000_000)
    precision: Literal["fp32", "tf32", "amp"] = Field(
        "fp32", description="fp32 (strict), tf32 (TF32 tensor cores), amp (autocast)"
    )
    amp_dtype: Literal["fp16", "bf16"] | None = Field(
        None, description="autocast dtype under precision amp (default fp16)"
    )
    optimizer: Literal["sgd", "adam", "adamw", "lamb"] = Field(
        "sgd", description="optimizer step: SGD with momentum, Adam, AdamW, LAMB"
    )
    grad_accumulation: int = Field(1, ge=1, le=4096)
    #: from 0.001 (a thousandth of the dataset): fewer rounds every per-epoch figure to
    #: an infinity (5e-324 did)
    epochs: float = Field(1.0, ge=0.001, le=100_000)
    input_pipeline: InputPipeline | None = Field(
        None, description="CPU cost of making each batch (default: none, batches are free)"
    )


class ScheduleSpec(StrictModel):
    """One schedule of the scenario: a mapping, or its bare name (``- ddp``) for the
    schedule with its default options."""

    name: str
    label: str | None = Field(None, description="name shown in tables; defaults to name")
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"name": value}
        if not isinstance(value, dict):
            raise ValueError("a schedule is its name or a mapping (name, label, options)")
        return value

    @property
    def display(self) -> str:
        return self.label or self.name


#: steps a ``distribution`` study draws when ``samples`` is not given
DEFAULT_SAMPLES = 20


class Study(StrictModel):
    kind: Literal["strong", "weak", "single", "distribution"] = Field(
        "strong",
        description="distribution: strong scaling plus the spread of the full-batch step "
        "time over `samples` steps, each with its own draws (p50, p99)",
    )
    gpus: list[int] = Field(min_length=1)
    samples: int | None = Field(
        None, ge=1, le=100_000, description="distribution only: steps drawn (default 20)"
    )

    @model_validator(mode="after")
    def _samples_need_distribution(self) -> Study:
        if self.samples is not None and self.kind != "distribution":
            raise ValueError(f"samples is for kind: distribution (kind is {self.kind!r})")
        return self

    @property
    def num_samples(self) -> int:
        """Steps a distribution study draws (default :data:`DEFAULT_SAMPLES`)."""
        return self.samples or DEFAULT_SAMPLES


class Stragglers(StrictModel):
    fraction: float = Field(gt=0, le=1, description="fraction of ranks that are slow")
    slowdown: float = Field(gt=0, le=1000, description="their compute takes this many times longer")


class Transient(StrictModel):
    fraction: float = Field(
        gt=0, le=1, description="each rank is slow in this fraction of steps (drawn per step)"
    )
    slowdown: float = Field(gt=0, le=1000, description="its compute takes this many times longer")


class Heterogeneity(StrictModel):
    stragglers: Stragglers | None = Field(
        None, description="persistent: the same ranks are slow in every step"
    )
    jitter: float = Field(0.0, ge=0, le=10, description="coefficient of variation per kernel")
    step_jitter: float = Field(
        0.0,
        ge=0,
        le=10,
        description="coefficient of variation of each rank's whole-step compute, drawn per "
        "rank and step (OS noise, a busy neighbour): what a synchronous collective waits for",
    )
    transient: Transient | None = Field(
        None, description="slowdowns that hit a rank in some steps only"
    )
    network_noise: float = Field(
        0.0, ge=0, le=1, description="coefficient of variation of each link's speed per step"
    )

    @property
    def varies_per_step(self) -> bool:
        """Do draws differ from step to step (jitter, transient slowdowns, noise)?"""
        return (
            self.jitter > 0
            or self.step_jitter > 0
            or self.transient is not None
            or self.network_noise > 0
        )


class Scenario(StrictModel):
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    topology: str
    profile: str
    network_profile: str = "nccl-spec"
    network_model: Annotated[str, Registered("network model")] = "maxmin"
    workload: Workload
    schedules: list[ScheduleSpec] = Field(min_length=1)
    study: Study
    seed: int = Field(0, ge=0, le=2**63 - 1)
    heterogeneity: Heterogeneity | None = None
    output: str | None = Field(None, description="results folder; default results/<name>")

    # Filled by load_scenario: where it came from.
    source: str | None = None

    @field_validator("name")
    @classmethod
    def _not_dots(cls, v: str) -> str:
        if set(v) == {"."}:
            raise ValueError("a name of dots only would name a folder above the results")
        return v


# --- loading ------------------------------------------------------------------------------


def _read_yaml(path: Path) -> Any:
    from simcluster.inputs import load_yaml

    if not path.exists():
        from simcluster.paths import no_such_scenario

        raise UserError(no_such_scenario(path))
    return load_yaml(path, "scenario file")


def parse_scenario(data: Any, file: str | None = None) -> Scenario:
    """Validate a scenario mapping (names included); raises ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(
            file, "<root>", type(data).__name__, "a scenario is a mapping", "a mapping"
        )
    from simcluster.inputs import check_kind

    check_kind(data, file, "scenario")
    if "source" in data:
        raise ConfigError(
            file, "source", data["source"], "unknown key", sorted(Scenario.model_fields)
        )
    data = _relative_to_file(data, file)
    try:
        sc = Scenario.model_validate({**data, "source": file})
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, file, Scenario) from None
    _check_names(sc, file)
    return sc


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file, or a shipped / user scenario by name
    (``puhti64``; see :func:`simcluster.paths.find_scenario`)."""
    from simcluster.paths import find_scenario

    p = find_scenario(path)
    return parse_scenario(_read_yaml(p), str(p))


#: fields whose value may be a file path (else a shipped name)
_FILE_FIELDS = {"topology": (".yaml", ".yml"), "profile": (".json",), "network_profile": (".json",)}


def _home(path: str) -> str:
    """``~/x`` or ``~user/x`` expanded as a shell would (unchanged when it cannot be)."""
    try:
        return os.path.expanduser(path)
    except (RuntimeError, KeyError):  # no home folder known
        return path


def _relative_to_file(data: dict[str, Any], file: str | None) -> dict[str, Any]:
    """Relative file paths in the scenario, resolved against the scenario's folder.

    A path that exists beside the scenario file is rewritten to it; anything else
    (a name, an absolute path, a path only found from the working folder) is kept.
    ``~/x`` in ``output`` and the file fields is expanded as a shell would (written in a
    file, no shell saw it: ``output: ~/runs`` made a folder named ``~``).
    """
    out = dict(data)
    for key in ("output", *_FILE_FIELDS):
        value = data.get(key)
        if isinstance(value, str) and value.startswith("~"):
            out[key] = _home(value)
    if not file:
        return out
    folder = Path(file).parent
    for key, suffixes in _FILE_FIELDS.items():
        value = out.get(key)
        if isinstance(value, str) and value.endswith(suffixes) and not Path(value).is_absolute():
            beside = folder / value
            if beside.is_file():
                out[key] = str(beside)
    return out


def _check_names(sc: Scenario, file: str | None) -> None:
    from simcluster.collectives import ALGORITHMS  # noqa: F401  (fills the algorithm registries)
    from simcluster.compute import (
        list_network_profiles,
        list_profiles,
        load_network_profile,
        load_profile,
    )
    from simcluster.network import BACKENDS  # noqa: F401  (fills the network-model registry)
    from simcluster.registry import check_registered
    from simcluster.schedules import get_schedule
    from simcluster.topology import list_topologies, load_topology
    from simcluster.workload import list_models

    def unknown(kind: str, path: str, value: str, known: list[str]) -> ConfigError:
        from simcluster.errors import UnknownNameError

        return UnknownNameError(kind, value, known, file=file, path=path)

    check_registered(Scenario, {"network_model": sc.network_model}, file, "")
    w = sc.workload
    if w.trace is None and (w.execution_trace or w.trace_profile):
        key = "execution_trace" if w.execution_trace else "trace_profile"
        raise ConfigError(file, f"workload.{key}", getattr(w, key),
                          "only with workload.trace", "leave it out")  # fmt: skip
    if isinstance(w.model, str) and w.model not in list_models():
        raise unknown("model", "workload.model", w.model, list_models())
    if w.trace is not None:
        _check_trace(sc, file)
    if w.dataset is not None and w.dataset not in DATASETS:
        raise unknown("dataset", "workload.dataset", w.dataset, list(DATASETS))
    if w.dataset is None and w.dataset_size is None:
        raise ConfigError(
            file,
            "workload.dataset_size",
            None,
            "missing: give workload.dataset or workload.dataset_size",
        )
    if w.model is not None:
        try:
            workload_model(w)
        except ConfigError as exc:
            raise ConfigError(
                file, exc.path, exc.value, exc.problem, exc.allowed, exc.suggestions
            ) from None

    def named_or_file(value: str, known: list[str], suffixes: tuple[str, ...]) -> bool:
        return value in known or (Path(value).suffix in suffixes and Path(value).is_file())

    from simcluster.paths import network_profiles_dir, not_found, profiles_dir, topology_dirs

    for kind, field, value, known, suffixes, folders in (
        ("profile", "profile", sc.profile, list_profiles(), (".json",), [profiles_dir()]),
        ("network profile", "network_profile", sc.network_profile, list_network_profiles(),
         (".json",), [network_profiles_dir()]),
        ("topology", "topology", sc.topology, list_topologies(), (".yaml", ".yml"),
         topology_dirs()),
    ):  # fmt: skip
        if not named_or_file(value, known, suffixes):
            raise not_found(kind, value, known, suffixes, folders, file=file, field=field)
    prof = load_profile(sc.profile)
    load_network_profile(sc.network_profile)
    resolved_input_load(w, file)
    _check_precision(sc, prof, file)
    for i, spec in enumerate(sc.schedules):
        try:
            cls = get_schedule(spec.name)
        except ConfigError as exc:
            raise unknown("schedule", f"schedules[{i}].name", spec.name, exc.allowed) from None
        try:
            opts = cls.Options.model_validate(spec.options)
        except ValidationError as exc:
            raise pydantic_to_config_error(
                exc, file, cls.Options, ("schedules", i, "options")
            ) from None
        # option fields that name a registered thing (an algorithm): known names only
        check_registered(cls.Options, spec.options, file, f"schedules[{i}].options")
        try:
            cls.check_options(opts)
        except (UserError, ValueError) as exc:
            msg = str(exc).removeprefix(f"{spec.name} options: ").removeprefix("spmv options: ")
            raise ConfigError(file, f"schedules[{i}].options", spec.display, msg) from None
        _check_algorithms(spec.options, file, f"schedules[{i}].options")
        if w.model is None and w.trace is None and cls.needs_model:
            raise ConfigError(
                file,
                "workload.model",
                None,
                f"missing: schedule {spec.name!r} trains a zoo model "
                "(`simcluster list models`); only spmv runs without one",
            )
    labels = [s.display for s in sc.schedules]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise ConfigError(file, "schedules", dup, "two schedules share a name; give each a label")
    # Study sizes against the topology.
    probe = load_topology(sc.topology, num_nodes=1)
    per_node = probe.ranks_per_node
    max_nodes = getattr(probe, "max_nodes", None)
    if sc.study.kind == "single" and len(sc.study.gpus) != 1:
        raise ConfigError(
            file, "study.gpus", sc.study.gpus, "a single-size study names one GPU count"
        )
    if sorted(set(sc.study.gpus)) != list(sc.study.gpus):
        raise ConfigError(
            file, "study.gpus", sc.study.gpus, "GPU counts must be increasing and distinct"
        )
    for i, g in enumerate(sc.study.gpus):
        if g < 1 or (g > per_node and g % per_node):
            raise ConfigError(
                file,
                f"study.gpus[{i}]",
                g,
                f"must fill whole nodes of {per_node} ranks",
                f"1..{per_node} or a multiple of {per_node}",
            )
        nodes = -(-g // per_node)
        if max_nodes is not None and nodes > max_nodes:
            raise ConfigError(
                file,
                f"study.gpus[{i}]",
                g,
                f"needs {nodes} nodes; topology {sc.topology!r} has at most {max_nodes}",
                f"at most {max_nodes * per_node}",
            )


def _check_precision(sc: Scenario, profile, file: str | None) -> None:
    """``amp_dtype`` only with ``amp``; the device must have the precision's math units."""
    from simcluster.compute.precision import compute_key

    w = sc.workload
    if w.amp_dtype is not None and w.precision != "amp":
        raise ConfigError(
            file, "workload.amp_dtype", w.amp_dtype,
            f"applies to precision amp only (precision is {w.precision!r})",
            "leave it out, or set workload.precision: amp",
        )  # fmt: skip
    problem = profile.precision_problem(resolved_precision(w))
    if problem is not None:
        field = "workload.amp_dtype" if w.amp_dtype == "bf16" else "workload.precision"
        value = w.amp_dtype if field == "workload.amp_dtype" else w.precision
        allowed = [
            p for p in ("fp32", "tf32", "amp") if profile.precision_problem(compute_key(p)) is None
        ]
        raise ConfigError(file, field, value, problem, allowed)


def resolved_precision(w: Workload) -> str:
    """The compute key (``fp32``, ``tf32``, ``amp``, ``amp_bf16``) profiles time."""
    from simcluster.compute.precision import compute_key

    return compute_key(w.precision, w.amp_dtype)


def _check_trace(sc: Scenario, file: str | None) -> None:
    """A trace workload: the file reads, and batch, precision, model agree with it."""
    from simcluster.compute import list_profiles

    w = sc.workload
    if w.model is not None:
        raise ConfigError(file, "workload.trace", w.trace, "give workload.model or "
                          "workload.trace, not both", "one of them")  # fmt: skip
    try:
        model = workload_model(w)
    except ConfigError as exc:
        raise ConfigError(exc.file or file, exc.path, exc.value, exc.problem, exc.allowed,
                          exc.suggestions) from None  # fmt: skip
    if model.batch is not None and model.batch != w.batch_per_gpu:
        raise ConfigError(file, "workload.batch_per_gpu", w.batch_per_gpu,
                          f"the trace {w.trace} was recorded at batch {model.batch}",
                          str(model.batch))  # fmt: skip
    traced = str(model.header.get("precision", "fp32"))
    if w.precision != traced:
        raise ConfigError(file, "workload.precision", w.precision,
                          f"the trace's kernels ran in {traced}", traced)  # fmt: skip
    tp = w.trace_profile
    if (
        tp is not None
        and tp not in list_profiles()
        and not (Path(tp).suffix == ".json" and Path(tp).is_file())
    ):
        from simcluster.errors import UnknownNameError

        raise UnknownNameError("profile", tp, list_profiles(), file=file,
                               path="workload.trace_profile")  # fmt: skip
    if tp is not None and tp != sc.profile:
        workload_profile(sc, model)  # both profiles state the rates the transfer model needs


def workload_model(w: Workload):
    """The workload's layer table: a zoo model, a family mapping, or a trace (or None)."""
    from simcluster.workload import build_model

    if w.trace is not None:
        from simcluster.workload.trace import read_trace

        return read_trace(w.trace, w.execution_trace)
    if w.model is None:
        return None
    if isinstance(w.model, dict):
        # the dataset's native size yields to the mapping's own size / class fields
        size = w.input_size
        if size is None and not _has_size(w.model):
            size = resolved_input_size(w)
        classes = w.num_classes
        if classes is None and not _has_classes(w.model):
            classes = resolved_num_classes(w)
        return build_model(w.model, size, classes)
    return build_model(w.model, resolved_input_size(w), resolved_num_classes(w))


def _has_size(spec: dict[str, Any]) -> bool:
    return "seq" in spec or "image" in spec


def _has_classes(spec: dict[str, Any]) -> bool:
    return "vocab" in spec or "classes" in spec


def workload_profile(sc: Scenario, model: Any):
    """The scenario's device profile; for a trace workload, wrapped so the trace's
    measured layer times are used (scaled by the transfer model when the trace ran on
    ``workload.trace_profile`` and that differs from ``profile``)."""
    from simcluster.compute import load_profile

    base = load_profile(sc.profile)
    if sc.workload.trace is None:
        return base
    from simcluster.compute.traced import TracedProfile, device_spec

    tp = sc.workload.trace_profile
    if tp is None or tp == sc.profile:
        return TracedProfile(base, model)
    return TracedProfile(base, model, device_spec(tp), device_spec(sc.profile))


def _check_algorithms(options: dict[str, Any], file: str | None, where: str) -> None:
    """Any option named ``algorithm`` or ``*_algorithm`` must name a collective algorithm."""
    from simcluster.collectives.registry import ALGORITHMS
    from simcluster.errors import UnknownNameError

    known = sorted({"auto", *(a for table in ALGORITHMS.values() for a in table)})
    for key, value in options.items():
        if (key == "algorithm" or key.endswith("_algorithm")) and isinstance(value, str):
            if value not in known:
                raise UnknownNameError(
                    "collective algorithm", value, known, file=file, path=f"{where}.{key}"
                )


def resolved_input_size(w: Workload) -> int | None:
    if w.input_size is not None:
        return w.input_size
    return DATASETS[w.dataset][2] if w.dataset else None


def resolved_num_classes(w: Workload) -> int | None:
    if w.num_classes is not None:
        return w.num_classes
    if w.dataset and DATASETS[w.dataset][1] > 0:
        return DATASETS[w.dataset][1]
    return None


def resolved_dataset_size(w: Workload) -> int:
    if w.dataset_size is not None:
        return w.dataset_size
    assert w.dataset is not None
    return DATASETS[w.dataset][0]


def resolved_input_load(w: Workload, file: str | None = None) -> InputLoad | None:
    """The workload's :class:`simcluster.compute.input_pipeline.InputLoad` (None without
    ``input_pipeline``): a profile's per-sample seconds, moved to ``host_clock_ghz`` by
    the clock ratio when both clocks are known. A profile without ``clock_ghz`` cannot
    be moved: a ConfigError naming the field."""
    from simcluster.compute.input_pipeline import InputLoad, clock_transfer, load_input_profile

    ip = w.input_pipeline
    if ip is None:
        return None
    if ip.per_sample_s is not None:
        return InputLoad(ip.per_sample_s, ip.workers)
    assert ip.profile is not None
    prof = load_input_profile(ip.profile, "workload.input_pipeline.profile", file)
    per_sample = prof.per_sample_s
    if ip.host_clock_ghz is not None:
        if prof.clock_ghz is None:
            raise ConfigError(
                file,
                "workload.input_pipeline.host_clock_ghz",
                ip.host_clock_ghz,
                f"input profile {prof.name!r} states no clock_ghz to transfer from",
                "leave host_clock_ghz out",
            )
        per_sample = clock_transfer(per_sample, prof.clock_ghz, ip.host_clock_ghz)
        if per_sample > MAX_PER_SAMPLE_S:
            raise ConfigError(
                file, "workload.input_pipeline.host_clock_ghz", ip.host_clock_ghz,
                f"moves {prof.name!r} ({prof.per_sample_s:.3g} s at {prof.clock_ghz:g} GHz) "
                f"to {per_sample:.3g} s per sample",
                f"a clock that keeps it <= {MAX_PER_SAMPLE_S:g} s per sample",
            )  # fmt: skip
    return InputLoad(per_sample, ip.workers)

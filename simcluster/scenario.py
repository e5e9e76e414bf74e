"""Scenario files: YAML schema, validation with precise errors, defaults.

A scenario names a topology, a device profile, a network profile, a workload,
one or more schedules with options, a study and a seed. Every problem is a
:class:`simcluster.errors.ConfigError` naming the file, the field path, the bad
value, what is allowed and, for near misses, what was probably meant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from simcluster.errors import ConfigError, UserError
from simcluster.schema import StrictModel, pydantic_to_config_error

__all__ = [
    "Scenario",
    "Workload",
    "ScheduleSpec",
    "Study",
    "Heterogeneity",
    "DATASETS",
    "load_scenario",
    "parse_scenario",
]


#: dataset name -> (training samples, classes, native input size)
DATASETS: dict[str, tuple[int, int, int]] = {
    "cifar10": (50_000, 10, 32),
    "cifar100": (50_000, 100, 32),
    "imagenet": (1_281_167, 1000, 224),
    "wikitext103": (1_801_350, 0, 512),
}


class Workload(StrictModel):
    model: str | None = Field(
        None, description="zoo model (simcluster list); every schedule but spmv needs one"
    )
    dataset: str | None = Field(None, description="dataset name; sets defaults below")
    input_size: int | None = Field(None, ge=1, le=65536, description="image side px or seq length")
    num_classes: int | None = Field(None, ge=1, le=10_000_000)
    dataset_size: int | None = Field(None, ge=1, description="training samples per epoch")
    batch_per_gpu: int = Field(ge=1, le=1_000_000)
    precision: Literal["fp32", "amp"] = "fp32"
    grad_accumulation: int = Field(1, ge=1, le=4096)
    epochs: float = Field(1.0, gt=0, le=100_000)


class ScheduleSpec(StrictModel):
    name: str
    label: str | None = Field(None, description="name shown in tables; defaults to name")
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def display(self) -> str:
        return self.label or self.name


class Study(StrictModel):
    kind: Literal["strong", "weak", "single"] = "strong"
    gpus: list[int] = Field(min_length=1)


class Stragglers(StrictModel):
    fraction: float = Field(gt=0, le=1, description="fraction of ranks that are slow")
    slowdown: float = Field(gt=0, le=1000, description="their compute takes this many times longer")


class Heterogeneity(StrictModel):
    stragglers: Stragglers | None = None
    jitter: float = Field(0.0, ge=0, le=10, description="coefficient of variation per kernel")


class Scenario(StrictModel):
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    topology: str
    profile: str
    network_profile: str = "nccl-spec"
    network_model: Literal["maxmin", "closed-form"] = "maxmin"
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
        raise UserError(f"{path}: no such scenario file")
    return load_yaml(path, "scenario file")


def parse_scenario(data: Any, file: str | None = None) -> Scenario:
    """Validate a scenario mapping (names included); raises ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(
            file, "<root>", type(data).__name__, "a scenario is a mapping", "a mapping"
        )
    if "source" in data:
        raise ConfigError(
            file, "source", data["source"], "unknown key", sorted(Scenario.model_fields)
        )
    try:
        sc = Scenario.model_validate({**data, "source": file})
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, file, Scenario) from None
    _check_names(sc, file)
    return sc


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file."""
    p = Path(path)
    return parse_scenario(_read_yaml(p), str(p))


def _check_names(sc: Scenario, file: str | None) -> None:
    from simcluster.compute import (
        list_network_profiles,
        list_profiles,
        load_network_profile,
        load_profile,
    )
    from simcluster.schedules import get_schedule
    from simcluster.topology import list_topologies, load_topology
    from simcluster.workload import build_model, list_models

    def unknown(kind: str, path: str, value: str, known: list[str]) -> ConfigError:
        from simcluster.errors import UnknownNameError

        return UnknownNameError(kind, value, known, file=file, path=path)

    w = sc.workload
    if w.model is not None and w.model not in list_models():
        raise unknown("model", "workload.model", w.model, list_models())
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
            build_model(w.model, resolved_input_size(w), resolved_num_classes(w))
        except ConfigError as exc:
            raise ConfigError(file, exc.path, exc.value, exc.problem, exc.allowed) from None

    def named_or_file(value: str, known: list[str], suffixes: tuple[str, ...]) -> bool:
        return value in known or (Path(value).suffix in suffixes and Path(value).is_file())

    if not named_or_file(sc.profile, list_profiles(), (".json",)):
        raise unknown("profile", "profile", sc.profile, list_profiles())
    if not named_or_file(sc.network_profile, list_network_profiles(), (".json",)):
        raise unknown(
            "network profile", "network_profile", sc.network_profile, list_network_profiles()
        )
    if not named_or_file(sc.topology, list_topologies(), (".yaml", ".yml")):
        raise unknown("topology", "topology", sc.topology, list_topologies())
    load_profile(sc.profile)
    load_network_profile(sc.network_profile)
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
        try:
            cls.check_options(opts)
        except (UserError, ValueError) as exc:
            msg = str(exc).removeprefix(f"{spec.name} options: ").removeprefix("spmv options: ")
            raise ConfigError(file, f"schedules[{i}].options", spec.display, msg) from None
        _check_algorithms(spec.options, file, f"schedules[{i}].options")
        if w.model is None and cls.needs_model:
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

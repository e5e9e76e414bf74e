"""What a schedule is: options, a registry, and the context it builds in.

A schedule turns a model, a cluster and its options into per-rank programs
(:class:`simcluster.program.RankClass`) for one iteration. It never touches
SimPy or a link: it emits compute ops with durations from the device profile
and collective ops on groups of ranks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from simcluster.compute.input_pipeline import InputLoad
from simcluster.compute.profile import DeviceProfile
from simcluster.program import RankClass
from simcluster.registry import Registered, Registry

__all__ = [
    "Options",
    "Schedule",
    "BuildContext",
    "Iteration",
    "Segment",
    "RunShape",
    "register",
    "get_schedule",
    "list_schedules",
    "SCHEDULES",
    "algorithm_name",
    "scenario_schedules",
]


class Options(BaseModel):
    """Base of every schedule's options: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def algorithm_name(*ops: str) -> Any:
    """Annotation of an option naming a collective algorithm (or ``auto``) for ``ops``.

    The name must exist for every op the option is used with; it is checked
    against the algorithm registries when the scenario loads (exit 2 naming
    the field), not when the collective runs.
    """
    return Annotated[str, Registered(*(f"{op} algorithm" for op in ops), also=("auto",))]


@dataclass(frozen=True)
class BuildContext:
    """Everything a schedule needs to build one iteration.

    cluster: the :class:`simcluster.topology.Cluster` (ranks 0..gpus-1 used).
    gpus: number of ranks taking part.
    model: the workload's layer table (None when the scenario names no model:
        only schedules with ``needs_model = False`` are built then).
    profile: kernel times.
    batch: samples per rank per micro-step.
    precision: compute key: ``fp32``, ``tf32``, ``amp`` (fp16) or ``amp_bf16``.
    accumulation: micro-steps per iteration (only the last one synchronises).
    seed: for any random choice.
    input_load: the CPU cost of making each batch (None: batches are free).
    """

    cluster: Any
    gpus: int
    model: Any
    profile: DeviceProfile
    batch: int
    precision: str
    accumulation: int
    seed: int
    #: seconds a collective would take alone on this cluster (an offline alpha-beta
    #: estimate, as SSFusion measures); set by the study, None in bare tests
    comm_estimate: Callable[[Any], float] | None = None
    #: optimizer of the step (``sgd``, ``adam``, ``adamw``, ``lamb``)
    optimizer: str = "sgd"
    #: the input pipeline's cost per batch (``workload.input_pipeline``); None: free
    input_load: InputLoad | None = None

    def with_batch(self, batch: int) -> BuildContext:
        return replace(self, batch=batch)

    def estimate(self, call) -> float:
        """Seconds ``call`` would take alone (0 when no estimator is attached)."""
        return self.comm_estimate(call) if self.comm_estimate is not None else 0.0

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(range(self.gpus))

    @property
    def ranks_per_node(self) -> int:
        return min(self.cluster.ranks_per_node, self.gpus)

    def node_groups(self) -> tuple[tuple[int, ...], ...]:
        """Ranks of each node in use, node by node."""
        g = self.ranks_per_node
        return tuple(tuple(range(s, min(s + g, self.gpus))) for s in range(0, self.gpus, g))


@dataclass(frozen=True)
class Iteration:
    """Programs of one iteration and how many samples it processes in total."""

    classes: list[RankClass]
    samples: int
    label: str = "iteration"
    #: schedule-specific figures for the record (JSON-serialisable)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Segment:
    """A program run ``count`` times over the whole training run."""

    label: str
    iteration: Iteration
    count: float
    steps: float  # training steps (optimizer updates) each run stands for
    #: an ordinary training step (full or partial batch): shown in the scaling
    #: table, not listed among the other programs (consensus, averaging steps)
    plain: bool = False


@dataclass(frozen=True)
class RunShape:
    """The training run a schedule plans: per epoch ``steps`` steps, the last of
    them with ``last_batch`` samples per rank and micro-step; ``epochs`` epochs."""

    steps: int
    last_batch: int
    epochs: float


class Schedule(ABC):
    """A training schedule, found by ``name`` in the registry."""

    name: ClassVar[str]
    summary: ClassVar[str]
    Options: ClassVar[type[Options]] = Options
    #: trains ``workload.model``; False for schedules that bring their own network
    needs_model: ClassVar[bool] = True

    def __init__(self, options: Options | None = None) -> None:
        self.options = options if options is not None else self.Options()

    # --- hooks for the whole scenario (the CLI and the API call them, never a module) ---
    @classmethod
    def prepare(cls, scenario: Any) -> None:
        """Work done once before ``scenario``'s study runs, for every schedule of this
        class in it at once (e.g. partitions computed in parallel). Default: none."""
        return None

    @classmethod
    def tables(
        cls, scenario: Any, records: list[dict[str, Any]] | None = None
    ) -> list[tuple[str, list[str], list[list[Any]]]]:
        """Extra (title, headers, rows) tables for the report of ``scenario``; with
        ``records`` of a run, or without any run (``simcluster spmv-table``). Default: none."""
        return []

    @classmethod
    def check_options(cls, options: Options) -> None:
        """Checks beyond the Options schema, run when the scenario is loaded (before
        simulating): raise ``UserError`` or ``ValueError`` with one sentence. Default: none."""
        return None

    @abstractmethod
    def build(self, ctx: BuildContext) -> Iteration:
        """Programs for one (typical) training step."""

    def plan(self, ctx: BuildContext, run: RunShape) -> list[Segment]:
        """Every distinct program of the run and how often it runs.

        The default is one program per step, plus a partial last step per epoch.
        Schedules whose steps differ (periodic consensus, outer iterations)
        override this.
        """
        full = self.build(ctx)
        if run.last_batch == ctx.batch:
            return [Segment("step", full, run.steps * run.epochs, 1, plain=True)]
        last = self.build(ctx.with_batch(run.last_batch))
        return [
            Segment("step", full, (run.steps - 1) * run.epochs, 1, plain=True),
            Segment("last step", last, run.epochs, 1, plain=True),
        ]


def register(cls: type[Schedule]) -> type[Schedule]:
    """Class decorator: make a schedule findable by its ``name``."""
    return SCHEDULES.add(cls.name, cls)


_HELPER_MODULES = {"base", "training"}


def _ensure_loaded() -> None:
    """Import every schedule module of this package once (each registers itself)."""
    import importlib
    import pkgutil

    import simcluster.schedules as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in _HELPER_MODULES and not info.name.startswith("_"):
            importlib.import_module(f"simcluster.schedules.{info.name}")


#: every schedule by name; reading it imports the schedule modules first
SCHEDULES: Registry[type[Schedule]] = Registry("schedule", loader=_ensure_loaded)


def scenario_schedules(scenario: Any) -> list[type[Schedule]]:
    """The distinct schedule classes a scenario uses, in order of first use."""
    out: list[type[Schedule]] = []
    for spec in scenario.schedules:
        cls = get_schedule(spec.name)
        if cls not in out:
            out.append(cls)
    return out


def list_schedules() -> list[str]:
    return SCHEDULES.names()


def get_schedule(name: str) -> type[Schedule]:
    return SCHEDULES.lookup(name)

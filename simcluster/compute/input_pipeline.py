"""The training input pipeline's CPU cost: input profiles and the per-step load.

An *input profile* (``calibrate/profiles/input/<name>.json``, written by
``python -m calibrate.input_pipeline``) holds the measured CPU seconds one sample of a
named transform pipeline takes on one thread of the measuring machine
(``per_sample_s``, a median), the nominal clock of that machine (``clock_ghz``) and
the provenance. A scenario's ``workload.input_pipeline`` names a profile (or gives
``per_sample_s`` itself), the loader's worker count, and optionally the training
host's nominal clock, to which the profile is transferred by the ratio of clocks:
``per_sample_s * clock_ghz / host_clock_ghz`` (a stated model: equal work per clock
cycle on both CPUs).

:class:`InputLoad` is what a schedule builds with (:func:`simcluster.schedules.
training.micro_steps`): with ``workers == 0`` the training process makes each batch
itself before the forward, ``batch * per_sample_s`` seconds in series with the step;
with ``workers > 0`` worker processes make batches while the step runs, and a step
waits only when they are slower than it: a step takes at least
``batch * per_sample_s / workers``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simcluster.errors import ConfigError
from simcluster.inputs import load_json
from simcluster.paths import is_file, not_found, profiles_dir

__all__ = [
    "InputLoad",
    "InputProfile",
    "input_profiles_dir",
    "list_input_profiles",
    "load_input_profile",
    "clock_transfer",
]


@dataclass(frozen=True)
class InputLoad:
    """The input pipeline as a step pays it.

    per_sample_s: CPU seconds per sample on the training host, one thread.
    workers: loader worker processes (0: the training process loads each batch).
    """

    per_sample_s: float
    workers: int = 0

    def batch_seconds(self, batch: int) -> float:
        """Seconds one process takes to make a batch of ``batch`` samples."""
        return batch * self.per_sample_s

    def step_floor(self, samples: int) -> float:
        """With workers: the least seconds a step of ``samples`` samples per rank can
        take, the workers' time to make them together."""
        return self.batch_seconds(samples) / self.workers if self.workers else 0.0


@dataclass(frozen=True)
class InputProfile:
    """A measured input profile (module docstring)."""

    name: str
    per_sample_s: float
    clock_ghz: float | None
    pipeline: str
    provenance: dict[str, Any]
    path: Path

    def describe(self) -> str:
        clock = f" at {self.clock_ghz:g} GHz" if self.clock_ghz else ""
        return f"{self.name} ({self.per_sample_s * 1e6:.1f} us/sample{clock})"


def input_profiles_dir() -> Path:
    """``calibrate/profiles/input``."""
    return profiles_dir() / "input"


def list_input_profiles() -> list[str]:
    folder = input_profiles_dir()
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.json") if is_file(p))


#: the most CPU seconds one sample's input may cost (a profile's ``per_sample_s``, and a
#: scenario's own or a profile's moved to the scenario's host clock)
MAX_PER_SAMPLE_S = 10.0

#: the largest value each field may hold: seconds per sample and a nominal clock in GHz
_LIMITS = {"per_sample_s": (MAX_PER_SAMPLE_S, "seconds per sample"), "clock_ghz": (100.0, "GHz")}


def _positive(data: dict[str, Any], key: str, path: str, optional: bool = False) -> float | None:
    value = data.get(key)
    if value is None and optional:
        return None
    top, unit = _LIMITS[key]
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not 0 < value <= top:
        raise ConfigError(path, key, value, f"must be a positive number of {unit}",
                          f"a number > 0 and <= {top:g}")  # fmt: skip
    return float(value)


def load_input_profile(
    name_or_path: str, field: str | None = None, file: str | None = None
) -> InputProfile:
    """An input profile by name (``calibrate/profiles/input``) or ``.json`` path; an
    unknown name is a ConfigError naming ``field`` of ``file`` and the known profiles."""
    p = Path(name_or_path)
    if not (p.suffix == ".json" and is_file(p)):
        p = input_profiles_dir() / f"{name_or_path}.json"
        if not is_file(p):
            raise not_found(
                "input profile",
                str(name_or_path),
                list_input_profiles(),
                (".json",),
                [input_profiles_dir()],
                file=file,
                field=field,
            )
    data = load_json(p, "input profile")
    where = str(p)
    if not isinstance(data, dict):
        raise ConfigError(where, "<root>", type(data).__name__, "an input profile is an object")
    if data.get("kind") != "input":
        raise ConfigError(where, "kind", data.get("kind"), "not an input profile", ["input"])
    if data.get("schema_version") != 1:
        raise ConfigError(where, "schema_version", data.get("schema_version"),
                          "unsupported input profile schema", ["1"])  # fmt: skip
    if not isinstance(data.get("provenance"), dict):
        raise ConfigError(where, "provenance", data.get("provenance"), "must be a mapping")
    return InputProfile(
        name=str(data.get("name") or p.stem),
        per_sample_s=_positive(data, "per_sample_s", where),  # type: ignore[arg-type]
        clock_ghz=_positive(data, "clock_ghz", where, optional=True),
        pipeline=str(data.get("pipeline", "")),
        provenance=data["provenance"],
        path=p,
    )


def clock_transfer(per_sample_s: float, from_ghz: float, to_ghz: float) -> float:
    """Seconds per sample on a CPU of nominal clock ``to_ghz``, from ``per_sample_s``
    measured at ``from_ghz``: the ratio of clocks (equal work per cycle assumed)."""
    return per_sample_s * from_ghz / to_ghz

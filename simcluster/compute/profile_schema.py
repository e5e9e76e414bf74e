"""Schemas of the numbers in device and network profiles (pydantic, strict).

Every constant a kernel or message time is built from is checked here the way
scenario fields are: a real number (no ``true``, no ``"900 GB/s"``, no null),
finite, strictly positive where it is a physical rate, and within the bounds
below; a bad one is a :class:`~simcluster.errors.ConfigError` naming the file
and the field path. Sections may carry fields this module does not know
(provenance notes, fields added by newer code): those pass, unless one is a near
miss of a known field (``memory_bandwith``, a ``link_efficiency`` kind ``nvlnk``),
which is refused with "did you mean" since its value would go unread; every number
anywhere in a profile file must already be finite (:mod:`simcluster.inputs`).

Bounds (units):

- peak FLOP/s: 1e6 .. 1e19 (a slow CPU core to a rack of accelerators);
- bandwidths: 1e3 .. 1e16 bytes/s (the topology's link bounds);
- efficiencies and fractions: 1e-6 .. 1 (a loaded loopback measured 9e-5; far below,
  rates vanish into float round-off: 5e-324 stalled max-min);
- per-launch and per-message overheads: 0 .. 1 s;
- fitted coefficients (measured profiles): finite and >= 0; a fixed cost (``const``,
  ``alpha_s``) at most 1 s like an overhead, a cost per unit (per FLOP, byte, element)
  at most 1e-3 s, the slowest rate above (1e3 per second): beyond, a kernel of a
  billion bytes would take longer than the float range holds (1e300 gave NaN results).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from simcluster.compute.precision import PEAK_NAMES
from simcluster.errors import ConfigError
from simcluster.schema import STRICT_CONFIG, StrictModel, pydantic_to_config_error

__all__ = [
    "SpecDevice",
    "SparsifyTable",
    "SparsifyTables",
    "NetworkSection",
    "TransportSection",
    "validate_spec_device",
    "validate_sparsify_tables",
    "validate_network",
    "check_number",
    "check_near_misses",
]

Flops = Annotated[float, Field(ge=1e6, le=1e19, description="FLOP/s")]
Rate = Annotated[float, Field(ge=1e3, le=1e16, description="bytes/s")]
Fraction = Annotated[float, Field(ge=1e-6, le=1, description="fraction of peak")]
Overhead = Annotated[float, Field(ge=0, le=1, description="seconds")]
Bytes = Annotated[float, Field(ge=1e6, le=1e15, description="bytes")]

#: largest fitted coefficients (seconds; seconds per FLOP, byte or element)
MAX_FIXED_S, MAX_S_PER_UNIT = 1.0, 1e-3

#: profile sections: strict numbers, unknown keys allowed (notes, newer fields)
_OPEN = ConfigDict(**{**STRICT_CONFIG, "extra": "allow"})


class HostSection(StrictModel):
    """The host CPU offloaded kernels run on."""

    model_config = _OPEN
    memory_bandwidth: Rate = 20e9
    efficiency: Fraction = 0.5
    launch_overhead_s: Overhead = 2e-6
    #: PyTorch DDP's host-bound costs, seconds (defaults: simcluster.compute.profile)
    ddp_hook_s: Overhead | None = None
    ddp_bucket_s: Overhead | None = None


class SparsifyTable(StrictModel):
    """A sparsification implementation's time per call, measured at a few sizes.

    ``numel``: tensor sizes (fp32 elements, strictly increasing); ``seconds``: the
    time of one call at each size (the whole call as the implementation runs it:
    its kernels, launches, host syncs and Python); ``density``: the fraction kept
    when it was timed; ``source``: where the figures come from.
    """

    model_config = _OPEN
    numel: list[Annotated[float, Field(gt=0, le=1e13)]] = Field(min_length=2)
    seconds: list[Overhead] = Field(min_length=2)
    density: Fraction
    source: str = Field(min_length=1)

    @field_validator("numel")
    @classmethod
    def _increasing(cls, v: list[float]) -> list[float]:
        if any(b <= a for a, b in zip(v, v[1:], strict=False)):
            raise ValueError("sizes must be strictly increasing")
        return v

    @model_validator(mode="after")
    def _one_time_per_size(self) -> SparsifyTable:
        if len(self.seconds) != len(self.numel):
            raise ValueError(
                f"seconds has {len(self.seconds)} entries, numel {len(self.numel)}: "
                "one time per size"
            )
        return self


def _sparsify_table_keys(v: dict[str, SparsifyTable]) -> dict[str, SparsifyTable]:
    """Keys of ``sparsify_measured``: ``{device,host}.{method}``."""
    from simcluster.compute.profile import SPARSIFY_METHODS

    allowed = [f"{w}.{m}" for w in ("device", "host") for m in SPARSIFY_METHODS]
    for key in v:
        if key not in allowed:
            raise ValueError(f"unknown key {key!r}; allowed: {', '.join(allowed)}")
    return v


class SparsifyTables(StrictModel):
    """``device.sparsify_measured`` of a measured or derived profile: the same sourced
    per-call tables a spec profile may carry, which replace the fits for their method
    and side (a derived profile takes them from its target's spec sheet)."""

    model_config = _OPEN
    sparsify_measured: dict[str, SparsifyTable] = {}
    _keys = field_validator("sparsify_measured")(_sparsify_table_keys)


class SpecDevice(StrictModel):
    """``device`` of a spec profile: a roofline's constants."""

    model_config = _OPEN
    peak_flops: dict[str, Flops]
    memory_bandwidth: Rate
    memory_efficiency: Fraction = 1.0
    launch_overhead_s: Overhead
    efficiency: dict[str, Fraction]
    host_link_bandwidth: Rate | None = None
    host: HostSection = HostSection()
    #: device memory (bytes) and streaming multiprocessors, from the spec sheet
    memory_bytes: Bytes | None = None
    sm_count: int | None = Field(None, ge=1, le=100_000)
    #: FP32 CUDA-core lanes per SM (whitepaper): 64 on Volta and GA100, 128 on Hopper
    fp32_lanes_per_sm: int | None = Field(None, ge=1, le=4096)
    #: sparsification timed as a whole call ("device.dgc", "host.dgc", ...): when an
    #: entry is present it replaces the roofline's pass count for that method and side
    sparsify_measured: dict[str, SparsifyTable] = {}

    _sparsify_keys = field_validator("sparsify_measured")(_sparsify_table_keys)

    @field_validator("peak_flops")
    @classmethod
    def _fp32(cls, v: dict[str, float]) -> dict[str, float]:
        if "fp32" not in v:
            raise ValueError("needs an fp32 entry")
        return v


class TransportSection(StrictModel):
    """``network.transport``: IB verbs or sockets, GPUDirect RDMA on or off
    (:mod:`simcluster.network.transport`); the defaults are IB verbs with GDR."""

    model_config = _OPEN
    net: Literal["ib", "socket"] = "ib"
    gpudirect_rdma: bool = True
    connections: int = Field(1, ge=1, le=4096)
    connection_bandwidth: Rate | None = None
    socket_per_message_s: Overhead = 0.0
    staging_bandwidth: Rate | None = None
    staging_per_message_s: Overhead = 0.0
    source: str = ""

    @model_validator(mode="after")
    def _socket_numbers(self) -> TransportSection:
        if self.net == "socket":  # measured numbers, no default stands in for them
            missing = [
                k
                for k in ("connection_bandwidth", "socket_per_message_s")
                if k not in self.model_fields_set or getattr(self, k) is None
            ]
            if missing:
                raise ValueError(
                    f"net: socket needs {' and '.join(missing)} (measured per-connection "
                    "bytes/s and seconds per message)"
                )
        return self


class NetworkSection(StrictModel):
    """``network`` of a network profile."""

    model_config = _OPEN
    per_message_overhead_s: Overhead
    link_efficiency: dict[str, Fraction] = {}
    collectives: dict[str, Any] = {}
    #: LL / LL128 / Simple numbers, checked by simcluster.collectives.protocols
    protocols: dict[str, Any] = {}
    #: how NCCL crosses nodes; absent: IB verbs with GPUDirect RDMA (no change)
    transport: TransportSection | None = None


#: link kinds the topology builders make (``link_efficiency`` keys)
LINK_KINDS = ("nvlink", "nvswitch", "pcie", "infiniband", "ethernet", "qpi", "memory")
#: open sections' mappings whose keys are names from a known set: section -> field -> names
_NAMED_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "NetworkSection": {"link_efficiency": LINK_KINDS},
    "SpecDevice": {"peak_flops": tuple(PEAK_NAMES)},
}


def check_near_misses(data: Any, model: Any, file: str | None, prefix: tuple = ()) -> None:
    """Refuse a key an open section does not know that is a near miss of one it does
    (``memory_bandwith``): it would be carried along unread, and the value the user
    meant to set would not be used. Far-off keys (notes, newer fields) still pass."""
    from simcluster.errors import did_you_mean, format_path
    from simcluster.schema import annotation_at

    model = annotation_at(model, ())
    if not isinstance(data, dict) or not (isinstance(model, type) and issubclass(model, BaseModel)):
        return
    for name, known in _NAMED_KEYS.get(model.__name__, {}).items():
        section = data.get(name)
        if not isinstance(section, dict):  # a number, text, a list: its type is refused below
            continue
        for key in section:
            if key in known:
                continue
            near = did_you_mean(str(key), known)
            if near:
                raise ConfigError(
                    file, format_path((*prefix, name, key)), key, "unknown key", known, near
                )
    fields = sorted(model.model_fields)
    open_section = model.model_config.get("extra") == "allow"  # strict ones refuse any key
    for key, value in data.items():
        if key in model.model_fields:
            if isinstance(value, dict):  # nothing to check in a plain value: skip the look-ups
                check_near_misses(value, annotation_at(model, (key,)), file, (*prefix, key))
            continue
        near = did_you_mean(str(key), fields) if open_section else []
        if near:
            raise ConfigError(file, format_path((*prefix, key)), key, "unknown key", fields, near)


def validate_spec_device(data: Any, file: str) -> SpecDevice:
    """The ``device`` section of a spec profile, checked; raises ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(file, "device", type(data).__name__, "must be a mapping")
    check_near_misses(data, SpecDevice, file, ("device",))
    try:
        return SpecDevice.model_validate(data)
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, file, SpecDevice, ("device",)) from None


def validate_sparsify_tables(
    data: Any, file: str
) -> dict[str, tuple[tuple[float, ...], tuple[float, ...]]]:
    """``device.sparsify_measured`` of a measured or derived profile, checked:
    ``{"device.dgc": (numel, seconds), ...}``; raises ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(
            file, "device.sparsify_measured", type(data).__name__, "must be a mapping"
        )
    wrapped = {"sparsify_measured": data}
    check_near_misses(wrapped, SparsifyTables, file, ("device",))
    try:
        tables = SparsifyTables.model_validate(wrapped).sparsify_measured
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, file, SparsifyTables, ("device",)) from None
    return {k: (tuple(t.numel), tuple(t.seconds)) for k, t in tables.items()}


def validate_network(data: Any, file: str) -> NetworkSection:
    """The ``network`` section of a network profile, checked; raises ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(file, "network", type(data).__name__, "must be a mapping")
    check_near_misses(data, NetworkSection, file, ("network",))
    try:
        net = NetworkSection.model_validate(data)
    except ValidationError as exc:
        raise pydantic_to_config_error(exc, file, NetworkSection, ("network",)) from None
    # fitted collective times (measured profiles): t = alpha + n * beta, both >= 0
    for scope, ops in net.collectives.items():
        if not isinstance(ops, dict):
            continue
        for op, fit in ops.items():
            if not isinstance(fit, dict):
                continue
            for key, top in (("alpha_s", MAX_FIXED_S), ("beta_s_per_byte", MAX_S_PER_UNIT)):
                if key in fit:
                    check_number(
                        fit[key], file, f"network.collectives.{scope}.{op}.{key}", 0.0, top
                    )
    return net


def check_number(
    value: Any,
    file: str,
    path: str,
    minimum: float | None = None,
    maximum: float | None = None,
) -> float:
    """``value`` as a float if it is a real, finite number within bounds; else ConfigError."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(file, path, value, "not a number", "a number")
    if not math.isfinite(value):
        raise ConfigError(file, path, value, "not a finite number", "a finite number")
    if minimum is not None and value < minimum:
        raise ConfigError(file, path, value, "out of range", f"a value >= {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigError(file, path, value, "out of range", f"a value <= {maximum}")
    return float(value)

"""Loading device and network profiles from ``calibrate/profiles``.

A profile file is JSON with ``schema_version``, ``name``, ``kind`` (measured,
derived or spec), ``provenance`` and either a ``device`` section (device
profiles, ``calibrate/profiles/*.json``) or a ``network`` section (network
profiles, ``calibrate/profiles/network/*.json``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simcluster.compute.profile import DeviceProfile, SpecProfile
from simcluster.compute.profile_schema import validate_network, validate_spec_device
from simcluster.errors import ConfigError, did_you_mean
from simcluster.inputs import check_kind, load_json
from simcluster.paths import is_file, network_profiles_dir, not_found, profiles_dir
from simcluster.registry import Registry

__all__ = [
    "SCHEMA_VERSION",
    "PROFILE_KINDS",
    "NetworkProfile",
    "load_profile",
    "load_network_profile",
    "read_profile_data",
    "profile_path",
    "list_profiles",
    "list_network_profiles",
]

SCHEMA_VERSION = 1
#: the keys of a profile file (others pass, as notes, unless one is a near miss of these)
TOP_KEYS = ("schema_version", "name", "kind", "provenance", "device", "network", "samples")


@dataclass(frozen=True)
class NetworkProfile:
    """Per-message software overhead (s) and achievable fraction of each link kind."""

    name: str
    kind: str
    per_message_overhead_s: float
    link_efficiency: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    #: measured profiles: per scope and op, fitted ``alpha_s`` (s) and ``beta_s_per_byte``
    collectives: dict[str, Any] = field(default_factory=dict)
    #: ``network.protocols`` as written (LL / LL128 / Simple numbers), parsed by
    #: :func:`simcluster.collectives.protocols.parse_protocols`; empty: none
    protocols: dict[str, Any] = field(default_factory=dict)
    #: the file it was read from
    file: str | None = None
    #: ``network.transport`` as checked (IB verbs / sockets, GPUDirect RDMA); empty:
    #: the default, see :mod:`simcluster.network.transport`
    transport: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.name} ({self.kind})"


def _names(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.json") if is_file(p)) if folder.is_dir() else []


def list_profiles() -> list[str]:
    return _names(profiles_dir())


def list_network_profiles() -> list[str]:
    return _names(network_profiles_dir())


def _resolve(
    name_or_path: str,
    folder: Path,
    kind: str,
    known: Callable[[], list[str]],
    path: str | None = None,
) -> Path:
    """The file of ``name_or_path``: a ``.json`` path, else ``folder/<name>.json``;
    else a ConfigError: why a path is not a file, or an unknown name listing ``known()``."""
    p = Path(name_or_path)
    if p.suffix == ".json" and is_file(p):
        return p
    candidate = folder / f"{name_or_path}.json"
    if is_file(candidate):
        return candidate
    raise not_found(kind, str(name_or_path), known(), (".json",), [folder], field=path)


def profile_path(name_or_path: str, flag: str | None = None) -> Path:
    """The file of a device profile (name or path); an unknown one is an UnknownNameError
    naming ``flag`` (``--from``) when given."""
    return _resolve(name_or_path, profiles_dir(), "profile", list_profiles, flag)


def _read(path: Path, kind: str | None = None) -> dict[str, Any]:
    """The checked top level of a profile; ``kind`` ("device profile", "network profile")
    refuses a file of another kind by name (:func:`simcluster.inputs.check_kind`)."""
    data = load_json(path, "profile")
    if not isinstance(data, dict):
        raise ConfigError(str(path), "<root>", type(data).__name__, "a profile is a JSON object")
    if kind is not None:
        check_kind(data, str(path), kind)
    version = data.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise ConfigError(
            str(path),
            "schema_version",
            version,
            "unsupported profile schema",
            [str(SCHEMA_VERSION)],
        )
    for key in data:  # a near miss of a known key is a typo, not a note
        if key in TOP_KEYS:
            continue
        near = did_you_mean(str(key), TOP_KEYS)
        if near:
            raise ConfigError(str(path), str(key), key, "unknown key", TOP_KEYS, near)
    for key in ("name", "kind", "provenance"):
        if key not in data:
            raise ConfigError(str(path), key, None, "missing field")
    for key in ("name", "kind"):
        if not isinstance(data[key], str) or not data[key]:
            raise ConfigError(str(path), key, data[key], "must be a non-empty string")
    if not isinstance(data["provenance"], dict):
        raise ConfigError(str(path), "provenance", data["provenance"], "must be a mapping")
    _check_fit_record(data["provenance"], path)
    if data["kind"] not in ("measured", "derived", "spec", "fitted"):
        raise ConfigError(
            str(path),
            "kind",
            data["kind"],
            "unknown kind",
            ["measured", "derived", "spec", "fitted"],
        )
    return data


#: ``provenance.fit`` (written by ``python -m simcluster.validation.fit``): field -> kind
FIT_FIELDS = {
    "parameter": "text",
    "value": "number",
    "case": "text",
    "reference": "number",
    "reference_unit": "text",
    "case_source": "text",
}
FIT_REQUIRED = ("parameter", "value", "case", "reference")


def _check_fit_record(prov: dict[str, Any], path: Path) -> None:
    """``provenance.fit``, where present, as the fit tool writes it: the listing under
    every run's table prints it (a string value there was a traceback)."""
    fit = prov.get("fit")
    if fit is None:
        return
    if not isinstance(fit, dict):
        raise ConfigError(str(path), "provenance.fit", fit, "must be a mapping")
    for key in FIT_REQUIRED:
        if key not in fit:
            raise ConfigError(str(path), f"provenance.fit.{key}", None, "missing field")
    for key, kind in FIT_FIELDS.items():
        if key not in fit:
            continue
        v = fit[key]
        if kind == "text":
            ok = isinstance(v, str)
        else:
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not ok:
            raise ConfigError(
                str(path),
                f"provenance.fit.{key}",
                v,
                "must be a finite number" if kind == "number" else "must be a string",
            )


def read_profile_data(name_or_path: str, flag: str | None = None) -> dict[str, Any]:
    """A device profile's JSON as written (samples included), checked like
    :func:`load_profile` checks it; an unknown name names ``flag`` when given."""
    path = _resolve(name_or_path, profiles_dir(), "profile", list_profiles, flag)
    return _read(path, "device profile")


def load_profile(name_or_path: str) -> DeviceProfile:
    """A device profile by name (``v100-sxm2-32gb``) or path to a JSON file."""
    path = _resolve(name_or_path, profiles_dir(), "profile", list_profiles)
    data = _read(path, "device profile")
    if "device" not in data:
        raise ConfigError(str(path), "device", None, "missing field")
    loader = PROFILE_KINDS.get(data["kind"])
    if loader is None:
        raise ConfigError(
            str(path),
            "kind",
            data["kind"],
            "no loader for this profile kind yet",
            list(PROFILE_KINDS),
        )
    return loader(data, path)


def _load_spec(data: dict[str, Any], path: Path) -> DeviceProfile:
    dev = validate_spec_device(data["device"], str(path)).model_dump(exclude_none=True)
    return SpecProfile(data["name"], dev, data["provenance"])


def _load_measured(data: dict[str, Any], path: Path) -> DeviceProfile:
    from simcluster.compute.measured import MeasuredProfile

    return MeasuredProfile.from_data(data, path)


#: device-profile kind -> loader (checked JSON data, its path) -> profile
PROFILE_KINDS: Registry[Callable[[dict[str, Any], Path], DeviceProfile]] = Registry("profile kind")
PROFILE_KINDS.add("spec", _load_spec)
PROFILE_KINDS.add("measured", _load_measured)
PROFILE_KINDS.add("derived", _load_measured)


def load_network_profile(name_or_path: str) -> NetworkProfile:
    """A network profile by name (``nccl-spec``) or path to a JSON file."""
    path = _resolve(name_or_path, network_profiles_dir(), "network profile", list_network_profiles)
    data = _read(path, "network profile")
    if "network" not in data:
        raise ConfigError(str(path), "network.per_message_overhead_s", None, "missing field")
    net = validate_network(data["network"], str(path))
    return NetworkProfile(
        name=data["name"],
        kind=data["kind"],
        per_message_overhead_s=net.per_message_overhead_s,
        link_efficiency=dict(net.link_efficiency),
        provenance=data["provenance"],
        collectives=dict(net.collectives),
        protocols=dict(net.protocols),
        file=str(path),
        transport=net.transport.model_dump() if net.transport is not None else {},
    )

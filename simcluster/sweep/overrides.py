"""Setting scenario fields by dotted path, including fields of the topology and profiles.

A path names a field of the scenario YAML: ``workload.batch_per_gpu``,
``schedules[1].options.keep``, ``study.gpus``. Three prefixes reach into the files
a scenario names instead of the scenario itself:

- ``topology.<field>``: a field of the topology YAML (``topology.fabric.oversubscription``,
  ``topology.node.nics.bandwidth``); ``topology`` alone still replaces the name;
- ``profile.<field>``: a field of the device profile JSON;
- ``network_profile.<field>``: a field of the network profile JSON
  (``network_profile.network.per_message_overhead_s``).

A modified file is carried as data in a :class:`PointSpec` and written, under a
name derived from its content, only where the point runs
(:func:`materialize`), so a point can travel to another machine (Dask).

Values given on the command line are parsed as YAML scalars (``64`` is an int,
``0.5`` a float, ``50 Gb/s`` a string, ``[8, 16]`` a list). A scalar set on a
field that holds a list (``study.gpus=64``) becomes a one-element list.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simcluster.errors import ConfigError, UserError

__all__ = [
    "PointSpec",
    "parse_path",
    "get_path",
    "set_path",
    "split_values",
    "parse_value",
    "build_point",
    "materialize",
    "FILE_PREFIXES",
]

#: path prefixes that modify a file the scenario names, and the scenario key naming it
FILE_PREFIXES = ("topology", "profile", "network_profile")

_TOKEN = re.compile(r"([^.\[\]]+)|\[(-?\d+)\]")


def parse_path(path: str) -> list[str | int]:
    """``"schedules[1].options.keep"`` -> ``["schedules", 1, "options", "keep"]``."""
    text = path.strip()
    if not text:
        raise ConfigError(None, "--set", path, "empty field path", "a dotted path like a.b[0].c")
    parts: list[str | int] = []
    pos = 0
    while pos < len(text):
        if text[pos] == "." and parts and pos + 1 < len(text) and text[pos + 1] != ".":
            pos += 1
        m = _TOKEN.match(text, pos)
        if not m:
            raise ConfigError(
                None, "--set", path, "cannot parse field path", "a dotted path like a.b[0].c"
            )
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    return parts


def _fmt(parts: list[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + p
    return out


def get_path(data: Any, parts: list[str | int]) -> Any:
    """The value at ``parts`` (``KeyError``/``IndexError`` when absent)."""
    cur = data
    for p in parts:
        cur = cur[p]
    return cur


def set_path(data: Any, parts: list[str | int], value: Any, file: str | None = None) -> None:
    """Set ``parts`` in nested dicts/lists in place; missing mapping keys are created.

    A scalar assigned where a list stands becomes a one-element list. Errors name
    the path: indexing a list out of range, or stepping into a scalar.
    """
    cur = data
    for i, p in enumerate(parts):
        last = i == len(parts) - 1
        where = _fmt(parts[: i + 1])
        if isinstance(p, int):
            if not isinstance(cur, list):
                raise ConfigError(file, where, p, "not a list here; cannot index it")
            if not -len(cur) <= p < len(cur):
                raise ConfigError(
                    file, where, p, "index out of range", f"0..{len(cur) - 1}" if cur else "none"
                )
        elif not isinstance(cur, dict):
            near: list[str] = []
            allowed = None
            if isinstance(cur, list):  # schedules.0.name: the index goes in brackets
                allowed = f"an index in brackets, 0..{len(cur) - 1}" if cur else None
                if p.lstrip("-").isdigit():
                    near = [_fmt([*parts[:i], int(p), *parts[i + 1 :]])]
            raise ConfigError(
                file, where, p, f"cannot set a field inside a value of type {type(cur).__name__}",
                allowed, near,
            )  # fmt: skip
        if last:
            old = cur[p] if (isinstance(p, int) or p in cur) else None
            if isinstance(old, list) and not isinstance(value, list):
                value = [value]
            cur[p] = value
            return
        if isinstance(p, str) and p not in cur:
            cur[p] = {}
        cur = cur[p]


def split_values(text: str) -> list[str]:
    """Split ``"a,b,[1, 2],'x,y'"`` at top-level commas (brackets and quotes nest)."""
    out, buf, depth, quote = [], [], 0, ""
    for ch in text:
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(buf).strip())
            buf = []
            continue
        buf.append(ch)
    out.append("".join(buf).strip())
    return [v for v in out if v != ""]


def parse_value(text: str) -> Any:
    """A command-line value as YAML (``64`` -> 64, ``50 Gb/s`` stays a string)."""
    from simcluster.errors import ConfigError
    from simcluster.inputs import parse_yaml

    try:
        return parse_yaml(text, "--set")
    except ConfigError:
        return text


@dataclass(frozen=True)
class PointSpec:
    """Everything one point needs, as plain data (picklable, machine-independent).

    scenario: the scenario mapping with the point's values set.
    files: modified files the scenario names: prefix -> (suffix, content mapping).
    values: the swept values of this point, path -> value, in grid order.
    source: the scenario file the point came from (for error messages).
    """

    scenario: dict[str, Any]
    files: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    source: str | None = None

    @property
    def key(self) -> str:
        """Stable identity of the point (its swept values), for resuming."""
        return json.dumps(self.values, sort_keys=False, default=str, separators=(",", ":"))


def _read_named_file(prefix: str, name: str, source: str | None) -> tuple[str, dict[str, Any]]:
    """The mapping of the topology / profile a scenario names, and its suffix."""
    from simcluster.paths import network_profiles_dir, profiles_dir, topology_dirs

    p = Path(name)
    if prefix == "topology":
        candidates = [p] if p.suffix in (".yaml", ".yml") else []
        candidates += [d / f"{name}.yaml" for d in topology_dirs()]
        suffix = ".yaml"
    else:
        folder = profiles_dir() if prefix == "profile" else network_profiles_dir()
        candidates = [p] if p.suffix == ".json" else []
        candidates.append(folder / f"{name}.json")
        suffix = ".json"
    for c in candidates:
        if c.is_file():
            from simcluster.inputs import load_json, load_yaml

            data = load_yaml(c) if suffix == ".yaml" else load_json(c)
            if not isinstance(data, dict):
                raise ConfigError(str(c), "<root>", type(data).__name__, "not a mapping")
            return suffix, data
    raise ConfigError(source, prefix, name, f"cannot find the {prefix.replace('_', ' ')} file")


def _check_profile_path(
    content: dict[str, Any], head: str, parts: list[str | int], source: str | None
) -> None:
    """Refuse a profile field that is neither in the file nor known to the profile schema:
    profile sections keep unknown keys as notes, so the swept value would go unread."""
    from simcluster.compute.loader import TOP_KEYS
    from simcluster.compute.profile_schema import NetworkSection, SpecDevice
    from simcluster.errors import did_you_mean
    from simcluster.schema import annotation_at

    rest = parts[1:]
    try:
        get_path(content, rest)
        return
    except (KeyError, IndexError, TypeError):
        pass
    section = {"device": SpecDevice, "network": NetworkSection}.get(str(rest[0]))
    if section is not None and len(rest) > 1 and annotation_at(section, tuple(rest[1:])):
        return
    if len(rest) == 1 and rest[0] in TOP_KEYS:
        return
    cur: Any = content
    for i, p in enumerate(rest):  # the deepest mapping that exists, for what is allowed
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
            continue
        keys = sorted(cur) if isinstance(cur, dict) else []
        raise ConfigError(
            source, _fmt(parts[: i + 2]), str(p),
            f"no such field in the {head.replace('_', ' ')} (a new key there would go unread)",
            keys or None, did_you_mean(str(p), keys),
        )  # fmt: skip


def build_point(
    base: dict[str, Any],
    values: dict[str, Any],
    source: str | None = None,
    files: dict[str, tuple[str, dict[str, Any]]] | None = None,
) -> PointSpec:
    """Apply ``values`` (path -> value) to a copy of the scenario mapping ``base``."""
    data = copy.deepcopy(base)
    out_files = copy.deepcopy(files) if files else {}
    for path, value in values.items():
        parts = parse_path(path)
        head = parts[0]
        if head in FILE_PREFIXES and len(parts) > 1:
            if head not in out_files:
                name = data.get(head)
                if name is None and head == "network_profile":
                    name = "nccl-spec"
                if not isinstance(name, str):
                    raise ConfigError(source, head, name, "must name a file to modify it")
                out_files[head] = _read_named_file(head, name, source)
            if head != "topology":  # a strict schema: an unknown key is refused when loaded
                _check_profile_path(out_files[head][1], head, parts, source)
            set_path(out_files[head][1], parts[1:], value, f"{head} of {source or 'scenario'}")
        else:
            set_path(data, parts, value, source)
            if head in FILE_PREFIXES:
                out_files.pop(head, None)
    return PointSpec(data, out_files, dict(values), source)


def _digest(content: dict[str, Any]) -> str:
    blob = json.dumps(content, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def materialize(point: PointSpec, folder: Path):
    """Write the point's modified files under ``folder`` and validate its scenario.

    Returns the :class:`simcluster.scenario.Scenario`; any bad value raises a
    ConfigError naming the path (prefixed with the swept values).
    """
    from simcluster.scenario import parse_scenario

    data = copy.deepcopy(point.scenario)
    written: dict[str, str] = {}  # the file the point wrote -> what it is, for errors
    for prefix, (suffix, content) in point.files.items():
        sub = folder / {"topology": "topologies", "profile": "profiles"}.get(prefix, "network")
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"{_digest(content)}{suffix}"
        if not path.exists():
            tmp = path.with_suffix(path.suffix + ".tmp")
            text = (
                yaml.safe_dump(content, sort_keys=False)
                if suffix == ".yaml"
                else json.dumps(content, indent=2)
            )
            tmp.write_text(text)
            tmp.replace(path)
        data[prefix] = str(path)
        name = point.scenario.get(prefix) or "nccl-spec"
        written[str(path)] = f"{prefix.replace('_', ' ')} {name} with the point's values"
    try:
        return parse_scenario(data, point.source)
    except ConfigError as exc:
        if exc.file in written:  # name the user's file, not the hashed copy under --out
            exc = ConfigError(
                written[exc.file], exc.path, exc.value, exc.problem, exc.allowed, exc.suggestions
            )
        if point.values:
            where = ", ".join(f"{k}={v}" for k, v in point.values.items())
            raise UserError(f"sweep point {where}: {exc}") from None
        raise exc from None

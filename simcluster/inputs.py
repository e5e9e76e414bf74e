"""The one guarded reader for every input file (YAML, JSON, CSV text).

Scenarios, topologies, device and network profiles, ``points.csv``, live-run
JSON and reference cases all come through here, so every one of them gets the
same limits and the same one-line :class:`~simcluster.errors.ConfigError`:

- the file must be UTF-8 (the error names the byte offset and line of the first
  bad byte);
- at most :data:`MAX_BYTES` bytes (a scenario is a few KB; a measured profile
  with its samples a few MB);
- nesting at most :data:`MAX_DEPTH` deep, checked on the parser's event stream
  before any object is built (no ``RecursionError``);
- YAML aliases may expand the document to at most :data:`MAX_NODES` values
  ("billion laughs" is refused before anything walks or prints it);
- a mapping may not name a key twice;
- numbers must be finite: ``.nan``, ``.inf``, JSON ``NaN`` / ``Infinity`` are
  refused wherever they appear, so a new field added to any schema gets this
  check for free.

YAML is parsed by libyaml's C parser (``yaml.CSafeLoader``) when PyYAML was
built with it, else by the pure-Python ``SafeLoader``; both only build plain
data (no Python objects).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from simcluster.errors import ConfigError, UserError

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "read_text",
    "load_yaml",
    "load_json",
    "parse_yaml",
    "parse_json",
    "check_tree",
    "check_kind",
]


def _max_bytes_from_env(default: int = 32 * 2**20) -> tuple[int, str | None]:
    """(limit, None), or (default, the bad text) when $SIMCLUSTER_MAX_INPUT_BYTES is not an
    integer > 0: the first read then reports it (an import must not raise)."""
    text = os.environ.get("SIMCLUSTER_MAX_INPUT_BYTES")
    if text is None:
        return default, None
    try:
        value = int(text.strip())
    except ValueError:
        return default, text
    return (value, None) if value > 0 else (default, text)


#: largest input file read, bytes (override: SIMCLUSTER_MAX_INPUT_BYTES)
MAX_BYTES, _BAD_MAX_BYTES = _max_bytes_from_env()


def _check_env() -> None:
    if _BAD_MAX_BYTES is not None:
        raise ConfigError(
            None, "$SIMCLUSTER_MAX_INPUT_BYTES", _BAD_MAX_BYTES, "not a number of bytes",
            "an integer > 0, e.g. 33554432 (unset: 32 MiB)",
        )  # fmt: skip


#: deepest nesting of mappings and lists
MAX_DEPTH = 64
#: most values a document may hold once its YAML aliases are expanded
MAX_NODES = 2_000_000

_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """Safe loader that refuses a key written twice in one mapping."""


def _construct_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> dict:
    own: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark
            ) from None
        if key in own:
            raise _DuplicateKey(key, key_node.start_mark)
        own.add(key)
    return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep=deep)


class _DuplicateKey(Exception):
    def __init__(self, key: Any, mark: Any) -> None:
        super().__init__(key)
        self.key = key
        self.mark = mark


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
# YAML 1.1 (PyYAML) reads 1e14 as a string (it wants 1.0e+14); YAML 1.2 and JSON read a
# number, and so does a user writing ``--set profile.device.memory_bandwidth=1e11``
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "?"


def read_text(path: str | Path, what: str = "file") -> str:
    """The text of ``path``: UTF-8, at most :data:`MAX_BYTES`; errors are ConfigErrors."""
    _check_env()
    p = Path(path)
    file = str(p)
    try:
        st = os.stat(file)  # once: is_dir, exists, is_file and stat each asked again
        if stat.S_ISDIR(st.st_mode):
            raise ConfigError(file, "<root>", file, f"is a folder, not a {what}")
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
            raise ConfigError(file, "<root>", file, f"not a regular file, so not a {what}")
        size = st.st_size
        if size > MAX_BYTES:
            raise ConfigError(
                file, "<root>", f"{size} bytes", f"{what} too large", f"at most {MAX_BYTES} bytes"
            )
        with p.open("rb") as fh:
            raw = _read_at_most(fh, MAX_BYTES + 1)  # a growing or /proc-like file: no size
    except FileNotFoundError:
        raise ConfigError(file, "<root>", file, f"no such {what}") from None
    except OSError as exc:
        raise ConfigError(file, "<root>", file, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise ConfigError(
            file, "<root>", f">{MAX_BYTES} bytes", f"{what} too large", f"at most {MAX_BYTES} bytes"
        )
    return decode(raw, file)


def _read_at_most(fh, limit: int, chunk: int = 1 << 20) -> bytes:
    """Up to ``limit`` bytes of ``fh``, read in pieces of ``chunk`` bytes: a limit far
    beyond the file (``$SIMCLUSTER_MAX_INPUT_BYTES`` set huge) is never allocated."""
    parts: list[bytes] = []
    left = limit
    while left > 0:
        part = fh.read(min(chunk, left))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


#: byte-order marks of the encodings a file may be saved in that are not UTF-8
_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def decode(raw: bytes, file: str | None) -> str:
    """UTF-8 ``raw`` as text (a leading BOM dropped); a bad byte is a ConfigError."""
    for bom, name in _BOMS:
        if raw.startswith(bom):  # a Windows editor's "Unicode": name it, not its first byte
            raise ConfigError(
                file, "<root>", f"{name} byte-order mark {bom.hex(' ')}", f"{name} text, not UTF-8",
                "UTF-8 (save the file as UTF-8)",
            )  # fmt: skip
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            file,
            "<root>",
            f"byte 0x{raw[exc.start]:02x} at offset {exc.start} (line {line})",
            "not UTF-8 text",
            "UTF-8",
        ) from None
    return text.removeprefix("\ufeff")


_OPEN, _CLOSE, _SCALAR, _ALIAS, _OTHER = range(5)


def _event_kind(ev: Any) -> int:
    """What :func:`_scan_events` does with a parser event."""
    if isinstance(ev, yaml.MappingStartEvent | yaml.SequenceStartEvent):
        return _OPEN
    if isinstance(ev, yaml.MappingEndEvent | yaml.SequenceEndEvent):
        return _CLOSE
    if isinstance(ev, yaml.AliasEvent):
        return _ALIAS
    if isinstance(ev, yaml.ScalarEvent):
        return _SCALAR
    return _OTHER


#: :func:`_event_kind` of PyYAML's event classes, looked up by exact class (a
#: dictionary look-up per event instead of up to four isinstance tests)
_EVENT_KIND: dict[type, int] = {
    yaml.MappingStartEvent: _OPEN,
    yaml.SequenceStartEvent: _OPEN,
    yaml.MappingEndEvent: _CLOSE,
    yaml.SequenceEndEvent: _CLOSE,
    yaml.ScalarEvent: _SCALAR,
    yaml.AliasEvent: _ALIAS,
    yaml.StreamStartEvent: _OTHER,
    yaml.StreamEndEvent: _OTHER,
    yaml.DocumentStartEvent: _OTHER,
    yaml.DocumentEndEvent: _OTHER,
}


def _scan_events(text: str, file: str | None) -> None:
    """Depth and alias-expanded size of a YAML document, from its event stream."""
    anchors: dict[str, int] = {}
    stack: list[list[Any]] = []  # per open collection: [values inside so far, anchor]
    seen = 0  # values in the document with every alias expanded
    for ev in yaml.parse(text, Loader=_Base):
        kind = _EVENT_KIND.get(type(ev))
        if kind is None:  # another class (a subclass): as the isinstance tests sort it
            kind = _event_kind(ev)
        if kind == _OPEN:
            if len(stack) >= MAX_DEPTH:
                raise ConfigError(
                    file,
                    "<root>",
                    _where(ev.start_mark),
                    "nested too deeply",
                    f"at most {MAX_DEPTH} levels",
                )
            stack.append([1, ev.anchor])
            seen += 1
        elif kind == _CLOSE:
            count, anchor = stack.pop()
            if anchor is not None:
                anchors[anchor] = count
            if stack:
                stack[-1][0] += count
        elif kind == _SCALAR or kind == _ALIAS:
            if kind == _ALIAS:
                n = anchors.get(ev.anchor, 1)
            else:
                n = 1
                if ev.anchor is not None:
                    anchors[ev.anchor] = 1
            seen += n
            if stack:
                stack[-1][0] += n
        if seen > MAX_NODES:
            raise ConfigError(
                file,
                "<root>",
                _where(getattr(ev, "start_mark", None)),
                "YAML aliases expand too far",
                f"at most {MAX_NODES} values once expanded",
            )


def parse_yaml(text: str, file: str | None = None) -> Any:
    """One YAML document from ``text`` through every guard in the module doc."""
    if len(text) > MAX_BYTES:
        raise ConfigError(file, "<root>", f"{len(text)} characters", "too large")
    try:
        _scan_events(text, file)
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except _DuplicateKey as dup:
        raise ConfigError(
            file, str(dup.key), _where(dup.mark), "key written twice in one mapping"
        ) from None
    except yaml.reader.ReaderError as exc:  # a NUL or other control character: no mark
        line = text.count("\n", 0, max(exc.position, 0)) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise ConfigError(
            file, "<yaml>", f"character 0x{code:02x} at offset {exc.position} (line {line})",
            "not valid YAML: a control character",
            "printable text, tabs and line breaks",
        ) from None  # fmt: skip
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "cannot parse"
        raise ConfigError(file, "<yaml>", _where(mark), f"not valid YAML: {problem}") from None
    except RecursionError:  # pragma: no cover - the depth scan stops this first
        raise ConfigError(file, "<root>", None, "nested too deeply") from None
    if data is None and not _has_content(text):
        raise ConfigError(file, "<root>", None, "the file is empty (no YAML document in it)")
    check_tree(data, file)
    return data


def _has_content(text: str) -> bool:
    """Anything in a YAML text besides blank lines, comments and document markers."""
    for ln in text.splitlines():
        s = ln.strip()
        if s and not s.startswith("#") and s not in ("---", "..."):
            return True
    return False


def _no_duplicates(file: str | None):
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise ConfigError(file, k, k, "key written twice in one object")
            out[k] = v
        return out

    return hook


def parse_json(text: str, file: str | None = None) -> Any:
    """One JSON document from ``text``: strict (no NaN/Infinity), no repeated keys."""
    if len(text) > MAX_BYTES:
        raise ConfigError(file, "<root>", f"{len(text)} characters", "too large")
    if not text.strip():
        raise ConfigError(file, "<root>", None, "the file is empty (no JSON value in it)")
    try:
        data = json.loads(
            text, object_pairs_hook=_no_duplicates(file), parse_constant=float
        )  # NaN / Infinity parse to floats so that check_tree names their field
    except json.JSONDecodeError as exc:
        raise ConfigError(
            file, "<root>", f"line {exc.lineno}, column {exc.colno}", f"not valid JSON: {exc.msg}"
        ) from None
    except RecursionError:
        raise ConfigError(
            file, "<root>", None, "nested too deeply", f"at most {MAX_DEPTH} levels"
        ) from None
    check_tree(data, file)
    return data


def load_yaml(path: str | Path, what: str = "YAML file") -> Any:
    """Read and parse a YAML file through every guard."""
    return parse_yaml(read_text(path, what), str(path))


def load_json(path: str | Path, what: str = "JSON file") -> Any:
    """Read and parse a JSON file through every guard."""
    return parse_json(read_text(path, what), str(path))


def check_tree(data: Any, file: str | None, prefix: tuple[Any, ...] = ()) -> None:
    """Refuse non-finite floats, mapping keys that are not text (``1:``, ``on:``, ``~:``)
    and nesting deeper than :data:`MAX_DEPTH` in parsed data."""
    if not _tree_ok(data):
        _refuse_tree(data, file, prefix)


def _tree_ok(data: Any) -> bool:
    """True when :func:`_refuse_tree` would find nothing: the same walk without the paths
    (building a path for every value cost more than the checks)."""
    budget = MAX_NODES
    todo: list[tuple[Any, int]] = [(data, 0)]
    while todo:
        value, depth = todo.pop()
        budget -= 1
        if budget < 0 or depth > MAX_DEPTH:
            return False
        if isinstance(value, float):
            if not math.isfinite(value):
                return False
        elif isinstance(value, dict):
            if not all(type(k) is str for k in value):
                return False
            todo.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list | tuple):
            todo.extend((v, depth + 1) for v in value)
    return True


def _key_kind(key: Any) -> str:
    """What YAML read a key that is not text as (``on:`` is a boolean, ``1:`` a number)."""
    if key is None:
        return "null (YAML reads ~ and null so)"
    if isinstance(key, bool):
        return "a boolean (YAML reads yes/no/on/off/true/false so)"
    if isinstance(key, int | float):
        return "a number"
    return f"a {type(key).__name__}"


def _refuse_tree(data: Any, file: str | None, prefix: tuple[Any, ...]) -> None:
    """:func:`check_tree`'s walk with every value's path, raising at the first problem."""
    from simcluster.errors import format_path

    budget = [MAX_NODES]
    # iterative walk: a deep document must not hit Python's recursion limit
    todo: list[tuple[Any, tuple[Any, ...]]] = [(data, prefix)]
    while todo:
        value, loc = todo.pop()
        budget[0] -= 1
        if budget[0] < 0:
            raise ConfigError(file, "<root>", None, "too many values", f"at most {MAX_NODES}")
        if len(loc) - len(prefix) > MAX_DEPTH:
            raise ConfigError(
                file, format_path(loc[:4]) + "...", None, "nested too deeply",
                f"at most {MAX_DEPTH} levels",
            )  # fmt: skip
        if isinstance(value, float):
            if not math.isfinite(value):
                raise ConfigError(
                    file, format_path(loc), value, "not a finite number", "finite numbers"
                )
        elif isinstance(value, dict):
            for k in value:
                if type(k) is not str:
                    where = format_path(loc) if loc else "<root>"
                    raise ConfigError(
                        file, where, k, f"a key that is {_key_kind(k)}, not a name",
                        "a field name (text); quote a key YAML reads otherwise, e.g. 'on': or '1':",
                    )  # fmt: skip
            todo.extend((v, (*loc, str(k))) for k, v in value.items())
        elif isinstance(value, list | tuple):
            todo.extend((v, (*loc, i)) for i, v in enumerate(value))


#: the top-level keys that mark each kind of input file
FILE_KINDS: dict[str, frozenset[str]] = {
    "scenario": frozenset({"workload", "schedules", "study"}),
    "topology": frozenset({"node", "fabric", "max_nodes"}),
    "device profile": frozenset({"device"}),
    "network profile": frozenset({"network"}),
    "reference-case": frozenset({"cases", "paper"}),
    "live-run": frozenset({"ranks", "gloo", "machine"}),
    "Kineto trace": frozenset({"traceEvents"}),
    # both: "nodes" alone is a word a topology or a scenario may use
    "execution trace": frozenset({"nodes", "schema"}),
}


def check_kind(data: Any, file: str | None, expected: str) -> None:
    """Refuse a mapping that carries none of ``expected``'s marking keys
    (:data:`FILE_KINDS`) and at least two of another kind's (one where that kind has only
    one): a topology given as a scenario, a network profile as a device profile. Says
    which kind it is, instead of "unknown key [and 9 more problem(s)]"."""
    if not isinstance(data, dict) or data.keys() & FILE_KINDS[expected]:
        return
    for kind, marks in FILE_KINDS.items():
        found = data.keys() & marks
        if kind != expected and len(found) >= min(2, len(marks)):
            raise ConfigError(
                file, "<root>", sorted(found),
                f"this is {_a(kind)} file, not {_a(expected)} file",
                f"{_a(expected)} file (with {', '.join(sorted(FILE_KINDS[expected]))})",
            )  # fmt: skip


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def input_error(exc: BaseException, file: str) -> UserError:
    """An unexpected parse failure as a one-line error (the last line of defence)."""
    return ConfigError(file, "<root>", None, f"cannot read: {type(exc).__name__}: {exc}")

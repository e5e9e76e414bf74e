"""NCCL's wire protocols (LL, LL128, Simple) as network-profile data.

A protocol changes two things about a collective, as in NCCL's tuning model:

- bandwidth: the fraction of the link rate that carries payload
  (``bandwidth_fraction``; LL sends a 4-byte flag with every 4 data bytes,
  LL128 8 flag bytes per 128-byte line). The simulator moves
  ``nbytes / fraction`` bytes on the wire, so contention stays exact.
- latency: a base latency per collective (``base_latency_s``) and a latency
  per pipeline step (``hop_latency_s``) that depends on what the step
  crosses: ``nvlink`` (NVLink or NVSwitch only), ``pcie`` (anything else
  inside a node) or ``net`` (between nodes). These replace the path latency
  plus ``per_message_overhead_s`` that a profile without protocols uses.
  ``net_overhead_s`` is the floor of an intra-node step's latency in a ring
  that also crosses nodes (NCCL's proxy overhead).

An optional ``NVLS`` entry holds NCCL's NVLink SHARP allreduce (Simple
protocol only, on NVSwitch nodes whose topology sets ``multicast``):
``efficiency`` (NCCL's ``nvlsEfficiency``, the fraction of the link rate the
in-switch reduction reaches) and ``latency_s`` (its fixed latency)::

    "NVLS": {"efficiency": 0.85, "latency_s": 2.5e-5}

An optional ``selection`` says how ``auto`` chooses: ``tuner`` (the default, the
least estimated time as NCCL 2.5+'s tuning model) or ``nccl-2.4`` (NCCL 2.4's byte
thresholds, :mod:`simcluster.collectives.nccl24`; LL and Simple only).

Each value is given per algorithm family: ``tree`` (double binary tree) and
``ring`` (everything else: rings, chains, point-to-point). Times in seconds.

The profile's ``network.protocols`` section::

    {"source": "...", "LL": {"bandwidth_fraction": {"ring": 0.5, "tree": 0.24},
     "base_latency_s": {"ring": 6.6e-6, "tree": 6.8e-6},
     "hop_latency_s": {"ring": {"nvlink": 6e-7, "pcie": 1e-6, "net": 2.7e-6},
                       "tree": {...}}, "net_overhead_s": 1e-6}, "LL128": ..., "Simple": ...}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simcluster.errors import ConfigError, did_you_mean

__all__ = [
    "FAMILIES",
    "HOP_CLASSES",
    "PROTOCOL_NAMES",
    "Protocol",
    "family_of",
    "parse_protocols",
    "Nvls",
    "parse_nvls",
    "parse_tree_channel_max",
    "parse_tree_correction",
    "tree_correction",
    "parse_selection",
    "SELECTIONS",
]

#: Protocol names in NCCL's order (tie-break order of ``auto``).
PROTOCOL_NAMES = ("LL", "LL128", "Simple")
#: Algorithm families a protocol's numbers are given for.
FAMILIES = ("ring", "tree")
#: What one pipeline step crosses.
HOP_CLASSES = ("nvlink", "pcie", "net")

#: Key of NCCL's per-channel tree bandwidth in ``network.protocols`` (see
#: :func:`parse_tree_channel_max`).
TREE_CAP_KEY = "tree_channel_max_GBps"

#: Key of NCCL's size correction of the tree allreduce's bandwidth in
#: ``network.protocols`` (see :func:`parse_tree_correction`).
TREE_CORRECTION_KEY = "tree_correction"
#: Sizes the correction covers: index ``floor(log2(nbytes / 64))`` from 0 up to this,
#: exclusive (NCCL applies it for ``logSize < 23``: 64 B to 512 MiB)
TREE_CORRECTION_SIZES = 23

#: Key of how ``auto`` chooses in ``network.protocols`` (see :func:`parse_selection`).
SELECTION_KEY = "selection"
#: ``tuner``: the least estimated time (NCCL 2.5 and later); ``nccl-2.4``: NCCL 2.4's
#: byte thresholds (:mod:`simcluster.collectives.nccl24`)
SELECTIONS = ("tuner", "nccl-2.4")

#: Algorithms scheduled like NCCL's tree; every other one like its ring.
_TREE_ALGORITHMS = frozenset({"tree"})


def family_of(algorithm: str) -> str:
    """The protocol family (``ring`` or ``tree``) of a registry algorithm name."""
    return "tree" if algorithm in _TREE_ALGORITHMS else "ring"


@dataclass(frozen=True)
class Protocol:
    """One protocol's numbers (see module doc). Seconds; fractions in (0, 1]."""

    name: str
    bandwidth_fraction: dict[str, float]
    base_latency_s: dict[str, float]
    hop_latency_s: dict[str, dict[str, float]]
    net_overhead_s: float = 0.0

    def hop(self, family: str, hop_class: str) -> float:
        return self.hop_latency_s[family][hop_class]


def _number(file: str | None, path: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(file, path, value, "must be a number", f"{low}..{high}")
    if not low <= float(value) <= high:
        raise ConfigError(file, path, value, "out of range", f"{low}..{high}")
    return float(value)


def _keys(file: str | None, path: str, d: Any, allowed: tuple[str, ...], required: bool) -> dict:
    if not isinstance(d, dict):
        raise ConfigError(file, path, d, "must be a mapping", ", ".join(allowed))
    for k in d:
        if k not in allowed:
            raise ConfigError(
                file, f"{path}.{k}", k, "unknown key", allowed, did_you_mean(str(k), allowed)
            )
    if required:
        for k in allowed:
            if k not in d:
                raise ConfigError(file, f"{path}.{k}", None, "missing field", ", ".join(allowed))
    return d


def parse_protocols(data: Any, file: str | None = None) -> dict[str, Protocol]:
    """The ``network.protocols`` section as :class:`Protocol` objects, checked.

    Raises :class:`ConfigError` naming the field path on anything malformed.
    Protocols absent from the section are not offered to ``auto``.
    """
    base = "network.protocols"
    _keys(
        file,
        base,
        data,
        ("source", *PROTOCOL_NAMES, "NVLS", TREE_CAP_KEY, SELECTION_KEY, TREE_CORRECTION_KEY),
        required=False,
    )
    out: dict[str, Protocol] = {}
    for name in PROTOCOL_NAMES:
        if name not in data:
            continue
        p = f"{base}.{name}"
        d = _keys(
            file,
            p,
            data[name],
            ("bandwidth_fraction", "base_latency_s", "hop_latency_s", "net_overhead_s"),
            required=False,
        )
        for k in ("bandwidth_fraction", "base_latency_s", "hop_latency_s"):
            if k not in d:
                raise ConfigError(file, f"{p}.{k}", None, "missing field", "one value per family")
        frac = {
            f: _number(file, f"{p}.bandwidth_fraction.{f}", v, 1e-3, 1.0)
            for f, v in _keys(file, f"{p}.bandwidth_fraction", d["bandwidth_fraction"],
                              FAMILIES, True).items()
        }  # fmt: skip
        base_lat = {
            f: _number(file, f"{p}.base_latency_s.{f}", v, 0.0, 1.0)
            for f, v in _keys(file, f"{p}.base_latency_s", d["base_latency_s"],
                              FAMILIES, True).items()
        }  # fmt: skip
        hops: dict[str, dict[str, float]] = {}
        for f, per in _keys(file, f"{p}.hop_latency_s", d["hop_latency_s"], FAMILIES, True).items():
            q = f"{p}.hop_latency_s.{f}"
            hops[f] = {
                c: _number(file, f"{q}.{c}", v, 0.0, 1.0)
                for c, v in _keys(file, q, per, HOP_CLASSES, True).items()
            }
        net = _number(file, f"{p}.net_overhead_s", d.get("net_overhead_s", 0.0), 0.0, 1.0)
        out[name] = Protocol(name, frac, base_lat, hops, net)
    if not out:
        raise ConfigError(file, base, data, "names no protocol", ", ".join(PROTOCOL_NAMES))
    return out


@dataclass(frozen=True)
class Nvls:
    """NCCL's NVLS (NVLink SHARP) allreduce numbers: fraction in (0, 1], seconds."""

    efficiency: float
    latency_s: float


def parse_nvls(data: Any, file: str | None = None) -> Nvls | None:
    """``network.protocols.NVLS`` checked, or None when the profile has none."""
    if not isinstance(data, dict) or "NVLS" not in data:
        return None
    p = "network.protocols.NVLS"
    d = _keys(file, p, data["NVLS"], ("efficiency", "latency_s"), required=True)
    return Nvls(
        _number(file, f"{p}.efficiency", d["efficiency"], 1e-3, 1.0),
        _number(file, f"{p}.latency_s", d["latency_s"], 0.0, 1.0),
    )


def parse_tree_channel_max(data: Any, file: str | None = None) -> tuple[float, float, float] | None:
    """``network.protocols.tree_channel_max_GBps`` as bytes/s, or None when absent.

    NCCL's tuner caps the double binary tree's bus bandwidth at this much per
    channel (``perChMaxTreeBws`` in ``src/graph/tuning.cc``), one value for 1,
    for 2 and for more nodes: ``[one, two, more]`` in GB/s (1e9 bytes/s).
    """
    if not isinstance(data, dict) or TREE_CAP_KEY not in data:
        return None
    p = f"network.protocols.{TREE_CAP_KEY}"
    v = data[TREE_CAP_KEY]
    if not isinstance(v, list) or len(v) != 3:
        raise ConfigError(file, p, v, "must be a list of 3 numbers", "[one node, two, more] GB/s")
    one, two, more = (_number(file, f"{p}[{i}]", x, 1e-3, 1e4) for i, x in enumerate(v))
    return one * 1e9, two * 1e9, more * 1e9


def parse_tree_correction(data: Any, file: str | None = None) -> dict[str, tuple[float, ...]]:
    """``network.protocols.tree_correction``: per protocol, the factor NCCL's tuner
    applies to the double binary tree's allreduce bandwidth by message size
    (``treeCorrectionFactor`` in ``src/graph/tuning.cc``; 0.4-1.0: the tree's
    pipeline runs below its model's bandwidth between a few KB and tens of MB), a
    list whose element ``i`` is for ``floor(log2(nbytes / 64)) = i``; at least
    :data:`TREE_CORRECTION_SIZES` numbers in (0, 1]. Empty when absent.
    """
    if not isinstance(data, dict) or TREE_CORRECTION_KEY not in data:
        return {}
    p = f"network.protocols.{TREE_CORRECTION_KEY}"
    table = _keys(file, p, data[TREE_CORRECTION_KEY], PROTOCOL_NAMES, required=False)
    out: dict[str, tuple[float, ...]] = {}
    for name, v in table.items():
        if not isinstance(v, list) or len(v) < TREE_CORRECTION_SIZES:
            raise ConfigError(
                file, f"{p}.{name}", v, "must be a list of factors",
                f"at least {TREE_CORRECTION_SIZES} numbers in (0, 1], one per power of two "
                "of the size from 64 B",
            )  # fmt: skip
        out[name] = tuple(_number(file, f"{p}.{name}[{i}]", x, 1e-3, 1.0) for i, x in enumerate(v))
    return out


def tree_correction(
    table: dict[str, tuple[float, ...]], protocol: str | None, nbytes: float
) -> float:
    """The factor of :func:`parse_tree_correction`'s ``table`` for a tree allreduce of
    ``nbytes`` bytes under ``protocol`` (1 outside the sizes it covers)."""
    row = table.get(protocol or "")
    if not row or nbytes < 64:
        return 1.0
    log_size = int(nbytes // 64).bit_length() - 1  # NCCL's log2i(nBytes >> 6)
    return row[log_size] if log_size < TREE_CORRECTION_SIZES else 1.0


def parse_selection(data: Any, file: str | None = None) -> str:
    """``network.protocols.selection``: how ``auto`` picks algorithm and protocol.

    ``tuner`` (the default): the least estimated time, as NCCL's tuning model
    (NCCL 2.5 and later). ``nccl-2.4``: NCCL 2.4's byte thresholds
    (:mod:`simcluster.collectives.nccl24`); NCCL 2.4 had only LL and Simple, so
    such a profile may not name ``LL128`` or ``NVLS``.
    """
    if not isinstance(data, dict) or SELECTION_KEY not in data:
        return "tuner"
    p = f"network.protocols.{SELECTION_KEY}"
    v = data[SELECTION_KEY]
    if v not in SELECTIONS:
        raise ConfigError(
            file, p, v, "unknown selection", SELECTIONS, did_you_mean(str(v), SELECTIONS)
        )
    if v == "nccl-2.4":
        for name in ("LL128", "NVLS"):
            if name in data:
                raise ConfigError(
                    file, f"network.protocols.{name}", name,
                    "NCCL 2.4 (selection nccl-2.4) had no such protocol", "LL, Simple",
                )  # fmt: skip
    return str(v)

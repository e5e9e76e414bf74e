"""Parsing and printing of bandwidths and latencies written in topology files.

Internally every bandwidth is in **bytes per second, per direction** and every
latency in **seconds** (plain floats). A file may write either a plain number in
those units or a string with a unit:

* bandwidth: ``"25 GB/s"`` (decimal bytes), ``"32 GiB/s"`` (binary bytes),
  ``"100 Gb/s"`` / ``"100 Gbit/s"`` / ``"100 Gbps"`` (bits), ``"12.5e9"`` (bytes/s);
* latency: ``"1.5 us"`` / ``"1.5 µs"``, ``"500 ns"``, ``"0.2 ms"``, ``"1e-6 s"``.

``B`` means bytes and ``b`` / ``bit`` means bits; the case matters.
"""

from __future__ import annotations

import math
import re
from typing import Any

from simcluster.errors import SimclusterError

__all__ = [
    "UnitError",
    "BANDWIDTH_UNITS",
    "LATENCY_UNITS",
    "parse_bandwidth",
    "parse_latency",
    "format_bandwidth",
    "format_latency",
]


class UnitError(SimclusterError, ValueError):
    """A value that is not a valid bandwidth / latency; carries what is allowed."""

    def __init__(self, problem: str, allowed: str) -> None:
        self.problem = problem
        self.allowed = allowed
        super().__init__(f"{problem}; allowed: {allowed}")


_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BIN_PREFIX = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}


def _bandwidth_units() -> dict[str, float]:
    units: dict[str, float] = {}
    for p, f in _PREFIX.items():
        for byte in ("B/s", "Bps", "Byte/s", "Bytes/s"):
            units[p + byte] = f
        for bit in ("b/s", "bps", "bit/s", "bits/s"):
            units[p + bit] = f / 8.0
    for p, f in _BIN_PREFIX.items():
        for byte in ("B/s", "Byte/s", "Bytes/s"):
            units[p + byte] = f
        for bit in ("b/s", "bit/s"):
            units[p + bit] = f / 8.0
    return units


#: unit string -> factor to bytes/s
BANDWIDTH_UNITS: dict[str, float] = _bandwidth_units()
#: unit string -> factor to seconds
LATENCY_UNITS: dict[str, float] = {
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ns": 1e-9,
    "ps": 1e-12,
}

#: physical bounds of a link: 1 kB/s .. 10 PB/s per direction, latency at most 10 s
#: (below 1 kB/s a gradient takes years and times overflow; no link is faster than 10 PB/s)
MIN_BANDWIDTH, MAX_BANDWIDTH, MAX_LATENCY = 1e3, 1e16, 10.0

_BW_ALLOWED = (
    "a number in bytes/s, or a number with a unit: B/s, KB/s, MB/s, GB/s, TB/s, "
    "GiB/s (bytes) or b/s, Mb/s, Gb/s, Gbit/s, Gbps (bits), e.g. '25 GB/s' or '100 Gb/s'"
)
_LAT_ALLOWED = "a number in seconds, or a number with a unit: s, ms, us, ns, e.g. '1.5 us'"

_NUM_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")


def _parse(value: Any, units: dict[str, float], what: str, allowed: str, positive: bool) -> float:
    if isinstance(value, bool) or value is None:
        raise UnitError(f"not a {what}", allowed)
    if isinstance(value, (int, float)):
        number, factor = float(value), 1.0
    elif isinstance(value, str):
        m = _NUM_UNIT.match(value)
        if not m:
            raise UnitError(f"cannot read {value!r} as a {what}", allowed)
        number = float(m.group(1))
        unit = m.group(2)
        if unit == "":
            factor = 1.0
        elif unit in units:
            factor = units[unit]
        else:
            raise UnitError(f"unknown {what} unit {unit!r}", allowed)
    else:
        raise UnitError(f"not a {what} (a {type(value).__name__})", allowed)
    out = number * factor
    if not math.isfinite(out):
        raise UnitError(f"{what} must be finite", allowed)
    if positive and out <= 0:
        raise UnitError(f"{what} must be greater than zero", allowed)
    if not positive and out < 0:
        raise UnitError(f"{what} must not be negative", allowed)
    return out


def _bounded(out: float, lo: float, hi: float, what: str, text: str) -> float:
    if not lo <= out <= hi:
        raise UnitError(
            f"{what} out of range",
            f"{text}; {_BW_ALLOWED if what == 'bandwidth' else _LAT_ALLOWED}",
        )
    return out


def parse_bandwidth(value: Any) -> float:
    """Bandwidth in bytes/s per direction from a number (bytes/s) or a unit string."""
    out = _parse(value, BANDWIDTH_UNITS, "bandwidth", _BW_ALLOWED, positive=True)
    return _bounded(out, MIN_BANDWIDTH, MAX_BANDWIDTH, "bandwidth", "1 kB/s to 10 PB/s")


def parse_latency(value: Any) -> float:
    """Latency in seconds from a number (seconds) or a unit string."""
    out = _parse(value, LATENCY_UNITS, "latency", _LAT_ALLOWED, positive=False)
    return _bounded(out, 0.0, MAX_LATENCY, "latency", "0 to 10 s")


def format_bandwidth(bps: float) -> str:
    """``12.5e9`` -> ``'12.5 GB/s'`` (decimal bytes per second)."""
    for unit, f in (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if abs(bps) >= f:
            return f"{bps / f:.4g} {unit}"
    return f"{bps:.4g} B/s"


def format_latency(sec: float) -> str:
    """``1.5e-6`` -> ``'1.5 us'``."""
    if sec == 0:
        return "0 s"
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(sec) >= f:
            return f"{sec / f:.4g} {unit}"
    return f"{sec / 1e-9:.4g} ns"

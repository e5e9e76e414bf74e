"""Flow specifications handed to a network backend.

A flow moves ``nbytes`` bytes over a fixed path of directed links after a
start-up delay of ``latency`` seconds (path latency plus per-message software
overheads, summed over the pipelined steps the flow stands for).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FlowSpec"]


@dataclass(frozen=True, slots=True)
class FlowSpec:
    """One transfer.

    links: directed link ids along the path (empty for a local copy).
    nbytes: payload in bytes.
    latency: start-up delay in seconds before data moves.
    src, dst: rank ids, kept for traces and inter-node accounting.
    """

    links: tuple[int, ...]
    nbytes: float
    latency: float
    src: int = -1
    dst: int = -1

"""Flows handed to a network backend: one at a time, or a batch as arrays.

A flow moves ``nbytes`` bytes over a fixed path of directed links after a
start-up delay of ``latency`` seconds (path latency plus per-message software
overheads, summed over the pipelined steps the flow stands for).

A :class:`FlowBatch` holds many flows as numpy arrays: the (flow, link)
incidence, bytes and latency per flow. Collective lowering is linear in the
message size, so a batch is built once per collective shape with per-unit
bytes and reused for every size with :meth:`FlowBatch.scaled`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["FlowSpec", "FlowBatch", "one_value"]


def one_value(a: np.ndarray) -> bool:
    """Whether a non-empty 1-D array holds a single distinct value (then ``np.unique``
    would return its first element: callers skip that sort, whose fixed cost dominates
    on the small arrays of most phases). NaN is never equal, so arrays with one are
    left to ``np.unique``."""
    return bool(a.ndim == 1 and a.size and a[0] == a[-1] and np.logical_and.reduce(a == a[0]))


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


@dataclass(eq=False)
class FlowBatch:
    """Flows as arrays (see module doc). Units: bytes, seconds, bytes/s.

    entry_flow, entry_link: one entry per (flow, link) incidence.
    nbytes, latency: per flow.
    """

    entry_flow: np.ndarray
    entry_link: np.ndarray
    nbytes: np.ndarray
    latency: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def num_flows(self) -> int:
        return int(self.nbytes.size)

    @classmethod
    def from_flows(cls, flows: Sequence[FlowSpec]) -> FlowBatch:
        lengths = np.fromiter((len(f.links) for f in flows), dtype=np.int64, count=len(flows))
        entry_flow = np.repeat(np.arange(len(flows), dtype=np.int64), lengths)
        entry_link = np.fromiter(
            (link for f in flows for link in f.links), dtype=np.int64, count=int(lengths.sum())
        )
        nbytes = np.fromiter((f.nbytes for f in flows), dtype=np.float64, count=len(flows))
        latency = np.fromiter((f.latency for f in flows), dtype=np.float64, count=len(flows))
        return cls(entry_flow, entry_link, nbytes, latency)

    def scaled(self, factor: float) -> FlowBatch:
        """The same flows carrying ``factor`` times the bytes (shares the incidence)."""
        out = FlowBatch(self.entry_flow, self.entry_link, self.nbytes * factor, self.latency)
        out._cache = self._cache  # rates and path facts do not depend on bytes
        return out

    def delayed(self, seconds: float) -> FlowBatch:
        """The same flows starting ``seconds`` later (shares the incidence and the cache:
        links, rates and path facts do not depend on latency)."""
        out = FlowBatch(self.entry_flow, self.entry_link, self.nbytes, self.latency + seconds)
        out._cache = self._cache
        return out

    def by_flow(self) -> tuple[np.ndarray, np.ndarray]:
        """(the entries' links grouped by flow: flow 0's first, each flow's in their
        order; the number of links of every flow). Cached, like everything here that
        does not depend on bytes (scaled copies share it)."""
        hit = self._cache.get("by_flow")
        if hit is None:
            flow, link = self.entry_flow, self.entry_link
            if flow.size > 1 and not bool(np.all(flow[1:] >= flow[:-1])):
                order = np.argsort(flow, kind="stable")
                flow, link = flow[order], link[order]
            self._cache["sorted_flow"] = flow
            hit = self._cache["by_flow"] = (link, np.bincount(flow, minlength=self.num_flows))
        return hit

    def know_flow_order(self, lengths: np.ndarray) -> None:
        """Record what :meth:`by_flow` would find where the caller knows it: the
        entries are in flow order (``entry_flow`` ascending) with ``lengths[f]``
        links of flow ``f`` (int64)."""
        self._cache["sorted_flow"] = self.entry_flow
        self._cache["by_flow"] = (self.entry_link, lengths)

    def _known_lengths(self) -> np.ndarray | None:
        """Links per flow when the entries are known to be in flow order (recorded by
        :meth:`know_flow_order`, or :meth:`by_flow` found them sorted), else None."""
        hit = self._cache.get("by_flow")
        if hit is None or self._cache["sorted_flow"] is not self.entry_flow:
            return None
        return hit[1]

    def sorted_entry_flow(self) -> np.ndarray:
        """The entries' flow numbers in :meth:`by_flow`'s order (ascending). Cached."""
        self.by_flow()
        return self._cache["sorted_flow"]

    def crosses(self, link_mask: np.ndarray) -> np.ndarray:
        """Per flow: does its path use any link where ``link_mask`` is true?"""
        key = ("crosses", id(link_mask))
        hit = self._cache.get(key)
        if hit is None:
            on = link_mask[self.entry_link]
            lengths = self._known_lengths()
            if on.size and lengths is not None:
                # entries in flow order: an or over each flow's run (a flow without
                # links has none: its run is empty, reduceat's value there is not used)
                starts = np.cumsum(lengths) - lengths
                hit = np.logical_or.reduceat(on, np.minimum(starts, on.size - 1))
                hit &= lengths > 0
            else:
                hit = np.zeros(self.num_flows, dtype=bool)
                hit[self.entry_flow[on]] = True
            self._cache[key] = hit
        return hit

    def bottleneck(self, capacity: np.ndarray) -> np.ndarray:
        """Per flow: the smallest link capacity on its path (inf for no links), bytes/s."""
        key = ("bottleneck", id(capacity))
        hit = self._cache.get(key)
        if hit is None:
            hit = np.full(self.num_flows, np.inf)
            np.minimum.at(hit, self.entry_flow, capacity[self.entry_link])
            self._cache[key] = hit
        return hit

    def static_rates(self, capacity: np.ndarray) -> np.ndarray:
        """Max-min rates of these flows alone, all started together (bytes/s)."""
        key = ("rates", id(capacity))
        hit = self._cache.get(key)
        if hit is None:
            from simcluster.network.maxmin import maxmin_rates

            hit = maxmin_rates(self.entry_flow, self.entry_link, self.num_flows, capacity)
            self._cache[key] = hit
            # the array itself, so that its id names it while the cache lives
            self._cache[("rates_capacity", id(capacity))] = capacity
        return hit

    def known_rates(self, capacity: np.ndarray) -> np.ndarray | None:
        """:meth:`static_rates` if already computed for this very ``capacity``
        array (the tuner's estimate computes them), else None."""
        if self._cache.get(("rates_capacity", id(capacity))) is not capacity:
            return None
        return self._cache.get(("rates", id(capacity)))

    def select(self, mask: np.ndarray) -> FlowBatch:
        """The flows where ``mask`` is true, renumbered 0..k-1."""
        lengths = self._known_lengths()
        if lengths is not None:
            # entries in flow order, lengths known: each flow's run kept or dropped
            kept = lengths[mask]
            flow = np.repeat(np.arange(kept.size, dtype=np.int64), kept)
            out = FlowBatch(
                flow,
                self.entry_link[np.repeat(mask, lengths)],
                self.nbytes[mask],
                self.latency[mask],
            )
            out.know_flow_order(kept)
            return out
        new_index = np.cumsum(mask) - 1
        keep = mask[self.entry_flow]
        return FlowBatch(
            new_index[self.entry_flow[keep]],
            self.entry_link[keep],
            self.nbytes[mask],
            self.latency[mask],
        )

"""Network backends: how a batch of flows advances in simulated time.

Two backends share one interface, ``transfer(flows) -> simpy.Event``:

- :class:`MaxMinNetwork` (``maxmin``): event-driven flow-level model. Each flow
  first waits its latency, then shares link bandwidth max-min fairly with every
  flow active at that moment, in every batch. Rates are recomputed only when a
  flow starts moving or ends.
- :class:`ClosedFormNetwork` (``closed-form``): no contention. A flow takes
  ``latency + nbytes / min(capacity on its path)``; quick estimates for sweeps.

Both count the bytes that cross inter-node links (``inter_node_bytes``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import simpy

from simcluster.network.flow import FlowSpec
from simcluster.network.maxmin import maxmin_rates

__all__ = ["NetworkBackend", "MaxMinNetwork", "ClosedFormNetwork", "make_network", "BACKENDS"]

_REL_DONE = 1e-9  # a flow whose remaining bytes fall below this fraction is done


class NetworkBackend:
    """Common state: link capacities (bytes/s) and which links leave a node."""

    name = "abstract"

    def __init__(
        self, env: simpy.Environment, capacity: np.ndarray, inter_node_link: np.ndarray
    ) -> None:
        if np.any(np.asarray(capacity) <= 0):
            raise ValueError("every link capacity must be > 0 bytes/s")
        self.env = env
        self.capacity = np.asarray(capacity, dtype=np.float64)
        self.inter_node_link = np.asarray(inter_node_link, dtype=bool)
        self.inter_node_bytes = 0.0
        self.flows_started = 0
        self.rate_updates = 0

    def _account(self, flows: Sequence[FlowSpec]) -> None:
        self.flows_started += len(flows)
        for f in flows:
            if f.links and self.inter_node_link[list(f.links)].any():
                self.inter_node_bytes += f.nbytes

    def transfer(self, flows: Sequence[FlowSpec]) -> simpy.Event:  # pragma: no cover
        raise NotImplementedError


class ClosedFormNetwork(NetworkBackend):
    """Contention-free: each flow runs at the slowest link capacity on its path."""

    name = "closed-form"

    def flow_time(self, f: FlowSpec) -> float:
        """Seconds for one flow alone: latency + bytes / bottleneck bandwidth."""
        if not f.links or f.nbytes <= 0:
            return f.latency
        return f.latency + f.nbytes / float(self.capacity[list(f.links)].min())

    def transfer(self, flows: Sequence[FlowSpec]) -> simpy.Event:
        self._account(flows)
        duration = max((self.flow_time(f) for f in flows), default=0.0)
        return self.env.timeout(duration)


class _Batch:
    __slots__ = ("event", "pending")

    def __init__(self, event: simpy.Event, pending: int) -> None:
        self.event = event
        self.pending = pending


class MaxMinNetwork(NetworkBackend):
    """Flow-level network with max-min fair bandwidth sharing (see module doc)."""

    name = "maxmin"

    def __init__(
        self, env: simpy.Environment, capacity: np.ndarray, inter_node_link: np.ndarray
    ) -> None:
        super().__init__(env, capacity, inter_node_link)
        # Active (moving) flows, kept in parallel lists.
        self._links: list[np.ndarray] = []
        self._remaining: list[float] = []
        self._size: list[float] = []
        self._batch: list[_Batch] = []
        self._rates = np.zeros(0)
        self._last = 0.0
        self._version = 0

    # -- public ---------------------------------------------------------------
    def transfer(self, flows: Sequence[FlowSpec]) -> simpy.Event:
        self._account(flows)
        event = self.env.event()
        if not flows:
            event.succeed()
            return event
        batch = _Batch(event, len(flows))
        by_latency: dict[float, list[FlowSpec]] = {}
        for f in flows:
            by_latency.setdefault(f.latency, []).append(f)
        for latency in sorted(by_latency):
            group = by_latency[latency]
            if latency > 0:
                t = self.env.timeout(latency)
                t.callbacks.append(lambda _e, g=group, b=batch: self._start(g, b))
            else:
                self._start(group, batch)
        return event

    # -- internals ------------------------------------------------------------
    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._last
        if dt > 0 and self._remaining:
            rem = np.asarray(self._remaining) - self._rates * dt
            self._remaining = rem.tolist()
        self._last = now

    def _finish(self, batch: _Batch, count: int = 1) -> None:
        batch.pending -= count
        if batch.pending == 0:
            batch.event.succeed()

    def _start(self, group: list[FlowSpec], batch: _Batch) -> None:
        self._advance()
        instant = 0
        for f in group:
            if not f.links or f.nbytes <= 0:
                instant += 1
                continue
            self._links.append(np.asarray(f.links, dtype=np.int64))
            self._remaining.append(float(f.nbytes))
            self._size.append(float(f.nbytes))
            self._batch.append(batch)
        if instant:
            self._finish(batch, instant)
        self._reschedule()

    def _reschedule(self) -> None:
        self._version += 1
        n = len(self._links)
        if n == 0:
            self._rates = np.zeros(0)
            return
        lengths = np.fromiter((len(x) for x in self._links), dtype=np.int64, count=n)
        entry_flow = np.repeat(np.arange(n), lengths)
        entry_link = np.concatenate(self._links)
        self._rates = maxmin_rates(entry_flow, entry_link, n, self.capacity)
        self.rate_updates += 1
        ttf = np.asarray(self._remaining) / self._rates
        delay = float(max(ttf.min(), 0.0))
        version = self._version
        t = self.env.timeout(delay)
        t.callbacks.append(lambda _e: self._on_wakeup(version))

    def _on_wakeup(self, version: int) -> None:
        if version != self._version:
            return  # superseded by a later arrival
        self._advance()
        rem = np.asarray(self._remaining)
        size = np.asarray(self._size)
        # Flows within a hair of completion finish together (float round-off).
        done = rem <= _REL_DONE * size + 1e-6 * (self._rates * 0 + 1)
        if not done.any():  # numerical slack: finish the closest one
            done = rem == rem.min()
        keep = ~done
        finished = [self._batch[i] for i in np.flatnonzero(done)]
        self._links = [x for x, k in zip(self._links, keep, strict=True) if k]
        self._remaining = rem[keep].tolist()
        self._size = size[keep].tolist()
        self._batch = [b for b, k in zip(self._batch, keep, strict=True) if k]
        for b in finished:
            self._finish(b)
        self._reschedule()


BACKENDS = {"maxmin": MaxMinNetwork, "closed-form": ClosedFormNetwork}


def make_network(
    name: str, env: simpy.Environment, capacity: np.ndarray, inter_node_link: np.ndarray
) -> NetworkBackend:
    """Backend by name: ``maxmin`` or ``closed-form``."""
    try:
        cls = BACKENDS[name]
    except KeyError:
        from simcluster.errors import UnknownNameError

        raise UnknownNameError("network model", name, list(BACKENDS)) from None
    return cls(env, capacity, inter_node_link)

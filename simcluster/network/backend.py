"""Network backends: how a batch of flows advances in simulated time.

Two backends share one interface, ``transfer(flows) -> simpy.Event`` where
``flows`` is a :class:`FlowBatch` (or a list of :class:`FlowSpec`):

- :class:`MaxMinNetwork` (``maxmin``): event-driven flow-level model. Each flow
  first waits its latency, then shares link bandwidth max-min fairly with every
  flow active at that moment, in every batch. Rates are recomputed only when
  flows start moving or end, over arrays of all active flows.
- :class:`ClosedFormNetwork` (``closed-form``): no contention. A flow takes
  ``latency + nbytes / min(capacity on its path)``; quick estimates for sweeps.

Both count the bytes of flows that cross an inter-node link (``inter_node_bytes``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import simpy

from simcluster.network.flow import FlowBatch, FlowSpec
from simcluster.network.maxmin import maxmin_rates

__all__ = ["NetworkBackend", "MaxMinNetwork", "ClosedFormNetwork", "make_network", "BACKENDS"]

_REL_DONE = 1e-9  # a flow whose remaining bytes fall below this fraction is done


def _as_batch(flows: FlowBatch | Sequence[FlowSpec]) -> FlowBatch:
    return flows if isinstance(flows, FlowBatch) else FlowBatch.from_flows(list(flows))


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

    def _account(self, batch: FlowBatch) -> None:
        self.flows_started += batch.num_flows
        self.inter_node_bytes += float(batch.nbytes[batch.crosses(self.inter_node_link)].sum())

    def transfer(self, flows: FlowBatch | Sequence[FlowSpec]) -> simpy.Event:  # pragma: no cover
        raise NotImplementedError


class ClosedFormNetwork(NetworkBackend):
    """Contention-free: each flow runs at the slowest link capacity on its path."""

    name = "closed-form"

    def transfer(self, flows: FlowBatch | Sequence[FlowSpec]) -> simpy.Event:
        batch = _as_batch(flows)
        self._account(batch)
        if batch.num_flows == 0:
            return self.env.timeout(0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            move = np.where(batch.nbytes > 0, batch.nbytes / batch.bottleneck(self.capacity), 0.0)
        return self.env.timeout(float((batch.latency + move).max()))


class _Group:
    """Flows that started moving together: arrays over the still-active ones."""

    __slots__ = ("entry_flow", "entry_link", "remaining", "size", "rate", "owner")

    def __init__(self, batch: FlowBatch, owner: _Owner) -> None:
        self.entry_flow = batch.entry_flow
        self.entry_link = batch.entry_link
        self.remaining = batch.nbytes.astype(np.float64).copy()
        self.size = batch.nbytes.astype(np.float64).copy()
        self.rate = np.zeros(self.remaining.size)
        self.owner = owner


class _Owner:
    __slots__ = ("event", "pending")

    def __init__(self, event: simpy.Event, pending: int) -> None:
        self.event = event
        self.pending = pending

    def finish(self, count: int) -> None:
        self.pending -= count
        if self.pending == 0:
            self.event.succeed()


class MaxMinNetwork(NetworkBackend):
    """Flow-level network with max-min fair bandwidth sharing (see module doc)."""

    name = "maxmin"

    def __init__(
        self, env: simpy.Environment, capacity: np.ndarray, inter_node_link: np.ndarray
    ) -> None:
        super().__init__(env, capacity, inter_node_link)
        self._groups: list[_Group] = []
        self._last = 0.0
        self._version = 0

    def transfer(self, flows: FlowBatch | Sequence[FlowSpec]) -> simpy.Event:
        batch = _as_batch(flows)
        self._account(batch)
        event = self.env.event()
        if batch.num_flows == 0:
            event.succeed()
            return event
        owner = _Owner(event, batch.num_flows)
        latencies = np.unique(batch.latency)
        for latency in latencies:
            part = batch if latencies.size == 1 else batch.select(batch.latency == latency)
            if latency > 0:
                t = self.env.timeout(float(latency))
                t.callbacks.append(lambda _e, p=part, o=owner: self._start(p, o))
            else:
                self._start(part, owner)
        return event

    # -- internals ------------------------------------------------------------
    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._last
        if dt > 0:
            for g in self._groups:
                g.remaining -= g.rate * dt
        self._last = now

    def _start(self, batch: FlowBatch, owner: _Owner) -> None:
        self._advance()
        has_links = np.zeros(batch.num_flows, dtype=bool)
        has_links[batch.entry_flow] = True
        moving = has_links & (batch.nbytes > 0)
        instant = int(batch.num_flows - moving.sum())
        if moving.any():
            part = batch if instant == 0 else batch.select(moving)
            self._groups.append(_Group(part, owner))
        if instant:
            owner.finish(instant)
        self._reschedule()

    def _reschedule(self) -> None:
        self._version += 1
        if not self._groups:
            return
        offsets = np.cumsum([0] + [g.remaining.size for g in self._groups])
        entry_flow = np.concatenate(
            [g.entry_flow + off for g, off in zip(self._groups, offsets[:-1], strict=True)]
        )
        entry_link = np.concatenate([g.entry_link for g in self._groups])
        rates = maxmin_rates(entry_flow, entry_link, int(offsets[-1]), self.capacity)
        self.rate_updates += 1
        delay = np.inf
        for g, lo, hi in zip(self._groups, offsets[:-1], offsets[1:], strict=True):
            g.rate = rates[lo:hi]
            delay = min(delay, float((g.remaining / g.rate).min()))
        version = self._version
        t = self.env.timeout(max(delay, 0.0))
        t.callbacks.append(lambda _e: self._on_wakeup(version))

    def _on_wakeup(self, version: int) -> None:
        if version != self._version:
            return  # superseded by a later arrival
        self._advance()
        # Flows within a hair of completion finish together (float round-off).
        dones = [g.remaining <= _REL_DONE * g.size + 1e-6 for g in self._groups]
        if not any(d.any() for d in dones):  # numerical slack: finish the closest
            closest = min(float((g.remaining / g.rate).min()) for g in self._groups)
            dones = [(g.remaining / g.rate) <= closest for g in self._groups]
        kept: list[_Group] = []
        finished: list[tuple[_Owner, int]] = []
        for g, done in zip(self._groups, dones, strict=True):
            n_done = int(done.sum())
            if n_done:
                finished.append((g.owner, n_done))
            if n_done < done.size:
                live = ~done
                new_index = np.cumsum(live) - 1
                keep = live[g.entry_flow]
                g.entry_flow = new_index[g.entry_flow[keep]]
                g.entry_link = g.entry_link[keep]
                g.remaining = g.remaining[live]
                g.size = g.size[live]
                g.rate = g.rate[live]
                kept.append(g)
        self._groups = kept
        for owner, n in finished:
            owner.finish(n)
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

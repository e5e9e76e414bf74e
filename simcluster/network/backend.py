"""Network backends: how a batch of flows advances in simulated time.

Two backends share one interface, ``transfer(flows) -> simpy.Event`` where
``flows`` is a :class:`FlowBatch` (or a list of :class:`FlowSpec`):

- :class:`MaxMinNetwork` (``maxmin``): event-driven flow-level model. Each flow
  first waits its latency, then shares link bandwidth max-min fairly with every
  flow active at that moment, in every batch. Rates are recomputed only when
  flows start moving or end, over arrays of all active flows.
- :class:`FoldedMaxMinNetwork` (``maxmin-folded``): the same, each max-min
  solve folded by symmetry where that is exact (:mod:`simcluster.network.symmetry`);
  the same rates bit for bit, so the same results.
- :class:`ClosedFormNetwork` (``closed-form``): no contention. A flow takes
  ``latency + nbytes / min(capacity on its path)``; quick estimates for sweeps.

Both count the bytes of flows that cross an inter-node link (``inter_node_bytes``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import simpy

from simcluster.network import symmetry
from simcluster.network.flow import FlowBatch, FlowSpec, one_value
from simcluster.network.maxmin import concat_ranges, filled, maxmin_rates
from simcluster.registry import Registry

__all__ = [
    "NetworkBackend",
    "MaxMinNetwork",
    "FoldedMaxMinNetwork",
    "ClosedFormNetwork",
    "make_network",
    "BACKENDS",
    "run_phases",
]

_REL_DONE = 1e-9  # a flow whose remaining bytes fall below this fraction is done
#: fewest live flows for which a table keeps its sorted order (:class:`_Order`): below
#: it a wake-up's scan of the table is cheaper than building and reading the order
_ORDER_MIN_FLOWS = 512


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
        # np.add.reduce: what ndarray.sum runs, without its Python layer (as below)
        self.inter_node_bytes += float(
            np.add.reduce(batch.nbytes[batch.crosses(self.inter_node_link)])
        )

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


class _Owner:
    """The event of one ``transfer`` call, fired when its last flow ends."""

    __slots__ = ("event", "pending")

    def __init__(self, event: simpy.Event, pending: int) -> None:
        self.event = event
        self.pending = pending

    def finish(self, count: int) -> None:
        self.pending -= count
        if self.pending == 0:
            self.event.succeed()


class _Order:
    """Live flows of a :class:`_FlowTable` sorted by ``tslack``, as of one ``epoch``
    (no rate changed since), with the least ``tdone`` and the highest rate of
    every suffix of that order.

    Within an epoch flows end only here, in ``tslack`` order: the flows from
    position ``next_slack`` on are exactly the live ones, so the least
    ``tdone`` and the highest rate of the live flows are the suffix's, read
    without a scan. (A wake-up that ends flows any other way drops the order.)
    The sort need not be stable: what is read from it (the flows at or below
    a time, a least time, a highest rate) does not depend on ties."""

    __slots__ = ("epoch", "by_slack", "slack", "rate", "done_min", "rate_max", "next_slack")

    def __init__(
        self,
        epoch: int,
        live: np.ndarray,
        tslack: np.ndarray,
        tdone: np.ndarray,
        rate: np.ndarray,
    ) -> None:
        self.epoch = epoch
        by = self.by_slack = live[np.argsort(tslack[live])]
        self.slack = tslack[by]
        self.rate = rate[by]
        n = by.size
        # least tdone / highest rate of by[p:] (inf / 0 past the end)
        self.done_min = np.full(n + 1, np.inf)
        self.rate_max = np.zeros(n + 1)
        if n:
            self.done_min[:n] = np.minimum.accumulate(tdone[by][::-1])[::-1]
            self.rate_max[:n] = np.maximum.accumulate(self.rate[::-1])[::-1]
        self.next_slack = 0

    def ending(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """(live flows with ``tslack <= now``, in no particular order; their rates);
        they count as ended from here on."""
        i = self.next_slack
        stop = int(self.slack.searchsorted(now, side="right"))
        if stop <= i:
            return self.by_slack[:0], self.rate[:0]
        self.next_slack = stop
        return self.by_slack[i:stop], self.rate[i:stop]

    def first_done(self) -> float:
        """The least ``tdone`` of the live flows (inf if none)."""
        return float(self.done_min[self.next_slack])

    def top_rate(self) -> float:
        """The highest rate of the live flows (0 if none)."""
        return float(self.rate_max[self.next_slack])


class _FlowTable:
    """The flows the network moves, as arrays (bytes, seconds, bytes/s).

    Per flow: its owner, size, the bytes ``rem`` left at time ``tref``, its
    rate, projected end ``tdone`` and the earliest time ``tslack`` at which it
    counts as done (within ``_REL_DONE`` of its size, or 1e-6 bytes); its links
    are ``links[ptr : ptr + nlinks]``. An ended flow keeps rate 0 and ``inf``
    times until the next arrival compacts the table.
    """

    def __init__(self) -> None:
        i, f = np.zeros(0, dtype=np.int64), np.zeros(0)
        self.owner, self.ptr, self.nlinks, self.links = i, i, i, i
        self.size, self.rem, self.tref, self.rate, self.tdone, self.tslack = f, f, f, f, f, f
        self.alive = np.zeros(0, dtype=bool)
        self.num_alive = 0
        #: the flow of every entry of ``links``, in order, when the last arrival found
        #: no live flow (that batch's own sorted entry_flow), else None
        self.entry_flow: np.ndarray | None = None
        #: the owner of every flow of the table when they all have one, else -1
        self.sole_owner = -1
        #: bumped whenever any live flow's rate or times change (not on ends)
        self.epoch = 0
        self._order: _Order | None = None
        self._order_wanted = -1

    @property
    def count(self) -> int:
        return int(self.size.size)

    def entries(self, flows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in ``flows``, link id) per (flow, link) incidence of ``flows``."""
        lens = self.nlinks[flows]
        local = np.repeat(np.arange(flows.size), lens)
        return local, self.links[concat_ranges(self.ptr[flows], lens)]

    def set_rates(self, flows: np.ndarray | slice, rates: np.ndarray, now: float) -> None:
        """New rates from ``now`` on (the flows' ``rem`` must be as of ``now``)."""
        self.epoch += 1
        self.rate[flows] = rates
        self.tref[flows] = now
        self.tdone[flows] = now + self.rem[flows] / rates
        slack = (_REL_DONE * self.size[flows] + 1e-6) / rates
        self.tslack[flows] = self.tdone[flows] - slack

    def order(self, build: bool = False) -> _Order | None:
        """The live flows sorted by ``tslack``, ``tdone`` and rate, if built for
        this epoch. ``build``: build it if the last call with ``build`` saw this
        epoch too (a table whose rates change at every wake-up is scanned instead)
        and at least :data:`_ORDER_MIN_FLOWS` flows live. What is read from it is
        what a scan finds (in another order, which no caller depends on).
        """
        if self._order is not None and self._order.epoch == self.epoch:
            return self._order
        if not build or self.num_alive < _ORDER_MIN_FLOWS:
            return None
        if self._order_wanted != self.epoch:
            self._order_wanted = self.epoch
            return None
        live = np.flatnonzero(self.alive)
        self._order = _Order(self.epoch, live, self.tslack, self.tdone, self.rate)
        return self._order

    def drop_order(self) -> None:
        """Forget the sorted order (flows ended out of its order)."""
        self._order = None

    def end(self, flows: np.ndarray) -> None:
        self.alive[flows] = False
        self.rate[flows] = 0.0
        self.tdone[flows] = np.inf
        self.tslack[flows] = np.inf
        self.num_alive -= int(flows.size)

    def compact_and_add(self, batch: FlowBatch, owner: int, now: float) -> None:
        """Drop ended flows, bring the live ones' ``rem`` to ``now``, append ``batch``."""
        keep = self.alive.nonzero()[0]
        new_links, lens_new = batch.by_flow()
        n_new = batch.num_flows
        size = batch.nbytes.astype(np.float64)
        if keep.size:
            links = self.entries(keep)[1]
            kept_lens, kept_size, kept = self.nlinks[keep], self.size[keep], self.owner[keep]
            rem = self.rem[keep] - self.rate[keep] * (now - self.tref[keep])
            lens = np.concatenate([kept_lens, lens_new])
            self.links = np.concatenate([links, new_links])
            self.entry_flow = None
            self.rem = np.concatenate([rem, size])
            self.size = np.concatenate([kept_size, size])
            self.sole_owner = owner if bool((kept == owner).all()) else -1
            self.owner = np.concatenate([kept, filled(n_new, owner, np.int64)])
        else:  # an idle network (most arrivals): copies of the batch's arrays, no joins
            # (new arrays, as the joins made: the batch keeps its own, and
            # FoldedMaxMinNetwork knows a table by the identity of its links)
            lens = lens_new.astype(np.int64)
            self.links = new_links.astype(np.int64)
            # sorted flows 0..n_new-1 with lens_new entries each: what np.repeat would build
            self.entry_flow = batch.sorted_entry_flow()
            self.rem = size.copy()
            self.size = size
            self.sole_owner = owner
            self.owner = filled(n_new, owner, np.int64)
        self.ptr = lens.cumsum() - lens
        self.nlinks = lens
        n = self.size.size
        self.tref = np.full(n, now)
        self.rate = np.zeros(n)
        self.tdone = filled(n, np.inf)
        self.tslack = filled(n, np.inf)
        self.alive = filled(n, True, bool)
        self.num_alive = n
        self.epoch += 1


class MaxMinNetwork(NetworkBackend):
    """Flow-level network with max-min fair bandwidth sharing (see module doc).

    On an arrival every live flow's rate is solved afresh. When flows end, only
    part is. Let ``l0`` be the slowest ended flow's rate. Every link an ended
    flow crossed saturated at ``l0`` or above, and now only gains headroom, so
    the water-filling rounds below ``l0`` run exactly as before: flows slower
    than ``l0`` keep their rates, and the flows at ``l0`` or faster are
    re-solved on the capacity the slower ones leave (exact, not approximate).
    """

    name = "maxmin"

    def __init__(
        self, env: simpy.Environment, capacity: np.ndarray, inter_node_link: np.ndarray
    ) -> None:
        super().__init__(env, capacity, inter_node_link)
        self._flows = _FlowTable()
        self._owners: dict[int, _Owner] = {}
        self._next_owner = 0
        #: bytes/s carried on each link by live flows; after a full solve, None until
        #: a re-solve reads it (see :meth:`_load_now`)
        self._load: np.ndarray | None = np.zeros(self.capacity.size)
        #: the last full solve's (links, links per flow, rates), that ``_load`` is made of
        self._solved: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        #: flows ended since ``_load`` was last brought up to date (each wake-up's
        #: in any order), with their rates: taken off in one ``np.add.at`` (the
        #: same additions in the same order: each wake-up's flows by index) only
        #: when a re-solve reads the load
        self._unloaded: list[tuple[np.ndarray, np.ndarray]] = []
        self._version = 0

    def transfer(self, flows: FlowBatch | Sequence[FlowSpec]) -> simpy.Event:
        batch = _as_batch(flows)
        self._account(batch)
        event = self.env.event()
        if batch.num_flows == 0:
            event.succeed()
            return event
        owner = _Owner(event, batch.num_flows)
        lat = np.asarray(batch.latency)
        latencies = lat[:1] if one_value(lat) else np.unique(lat)
        for latency in latencies:
            part = batch if latencies.size == 1 else batch.select(batch.latency == latency)
            if latency > 0:
                t = self.env.timeout(float(latency))
                t.callbacks.append(lambda _e, p=part, o=owner: self._start(p, o))
            else:
                self._start(part, owner)
        return event

    # -- internals ------------------------------------------------------------
    def _start(self, batch: FlowBatch, owner: _Owner) -> None:
        moving = (batch.by_flow()[1] > 0) & (batch.nbytes > 0)  # has links and bytes
        instant = batch.num_flows - np.count_nonzero(moving)
        if instant:
            owner.finish(instant)
        if instant < batch.num_flows:
            part = batch if instant == 0 else batch.select(moving)
            oid = self._next_owner
            self._next_owner += 1
            self._owners[oid] = owner
            # Alone on an idle network, the flows get their static max-min rates:
            # the same solve of the same flows, done once per collective shape.
            known = part.known_rates(self.capacity) if self._flows.num_alive == 0 else None
            self._flows.compact_and_add(part, oid, self.env.now)
            self._solve_all(known)
            self._reschedule()

    def _solve_all(self, known: np.ndarray | None = None) -> None:
        """Rates of every live flow from scratch (all were brought to ``now``);
        ``known``: those rates, when every live flow is of one batch that has them
        (max-min rates do not depend on the order of the incidences)."""
        ft = self._flows
        # compact_and_add lays every flow's links out back to back: all entries
        # are the table itself, in flow order
        links, nlinks = ft.links, ft.nlinks
        if known is not None and known.size == ft.count:
            rates = known
        else:
            local = ft.entry_flow
            if local is None:
                local = np.repeat(np.arange(ft.count), nlinks)
            rates = self._full_rates(local, links)
        self.rate_updates += 1
        ft.set_rates(slice(None), rates, self.env.now)
        # the per-link load is summed only if a re-solve reads it (most tables end
        # without one): these arrays are not changed in place, only replaced
        self._load, self._solved = None, (links, nlinks, rates)
        self._unloaded.clear()

    def _load_now(self) -> np.ndarray:
        """``_load``, summed from the last full solve's rates if not yet (bytes/s)."""
        if self._load is None:
            assert self._solved is not None
            links, nlinks, rates = self._solved
            local = np.repeat(np.arange(nlinks.size), nlinks)
            self._load = np.bincount(links, weights=rates[local], minlength=self.capacity.size)
            self._solved = None
        return self._load

    def _resolve_from(self, l0: float, now: float) -> None:
        """Re-solve the live flows at rate ``l0`` (bytes/s) or faster."""
        ft = self._flows
        # Any threshold at or below l0 is exact; the slack absorbs round-off.
        # Ended flows have rate 0 and are never picked.
        threshold = l0 * (1 - 1e-9)
        order = ft.order()
        if order is not None and order.top_rate() < threshold:
            return
        aff = (ft.rate >= threshold).nonzero()[0]
        if aff.size == 0:
            return
        ft.rem[aff] -= ft.rate[aff] * (now - ft.tref[aff])
        if self._unloaded:
            # each wake-up's flows in index order, as they were taken off
            sort = [np.argsort(f) for f, _ in self._unloaded]
            gone = np.concatenate([f[o] for (f, _), o in zip(self._unloaded, sort, strict=True)])
            neg = -np.concatenate([r[o] for (_, r), o in zip(self._unloaded, sort, strict=True)])
            self._unloaded.clear()
            local, links = ft.entries(gone)
            self._add_load(links, neg[local])
        local, links = ft.entries(aff)
        self._add_load(links, -ft.rate[aff][local])
        rates = self._partial_rates(aff, local, links)
        self.rate_updates += 1
        ft.set_rates(aff, rates, now)
        self._add_load(links, rates[local])

    def _full_rates(self, local: np.ndarray, links: np.ndarray) -> np.ndarray:
        """Max-min rates of every flow of the table (``local``, ``links``: its entries)."""
        return maxmin_rates(local, links, self._flows.count, self.capacity)

    def _partial_rates(self, aff: np.ndarray, local: np.ndarray, links: np.ndarray) -> np.ndarray:
        """Max-min rates of the flows ``aff`` (entries ``local``, ``links``) on what
        the other live flows leave of each link (``_load``, theirs only)."""
        return maxmin_rates(local, links, aff.size, self.capacity, self._load_now())

    def _add_load(self, links: np.ndarray, rates: np.ndarray) -> None:
        np.add.at(self._load_now(), links, rates)

    def _reschedule(self) -> None:
        self._version += 1
        ft = self._flows
        if ft.num_alive == 0:
            return
        self._wake_in(max(self._first_done() - self.env.now, 0.0))

    def _wake_in(self, delay: float) -> None:
        """A wake-up ``delay`` seconds from now, for the current version."""
        version = self._version
        t = self.env.timeout(delay)
        t.callbacks.append(lambda _e: self._on_wakeup(version))

    def _first_done(self) -> float:
        """The least projected end of the live flows (seconds)."""
        ft = self._flows
        order = ft.order()
        return float(np.minimum.reduce(ft.tdone)) if order is None else order.first_done()

    def _on_wakeup(self, version: int) -> None:
        """End the flows due now, and those of the wake-ups that would follow while
        nothing else can happen: a wake-up before the next queued event of the
        simulation, at a time a timeout from now lands on exactly, is run here at
        its own time (every rate and time is the same as from its own event; only
        simpy's events are spared) unless it finishes a transfer. Where the chain
        stops, the events are those the wake-ups would have made, at the same times
        and in the same order."""
        if version != self._version:
            return  # superseded by a later arrival
        env = self.env
        now = env.now
        horizon = self._horizon()  # nothing else happens before this (seconds)
        while True:
            now = self._quiet_steps(now, horizon)
            done = []  # the transfers whose last flows end now
            for oid, n in self._end_due(now):
                owner = self._owners[oid]
                if owner.pending == n:
                    done.append((oid, n))
                else:
                    owner.finish(n)  # flows left: no event fires
            if done:  # the transfer's waiters run at its own time, from its own event
                self._then(now, lambda d=done: self._finish(d))
                return
            if self._flows.num_alive == 0:
                self._version += 1
                return
            wake = now + max(self._first_done() - now, 0.0)  # where timeout() lands
            delay = exact_delay(env.now, wake)
            if wake < horizon and delay is not None:
                now = wake
                continue
            if delay is None:  # the wake-up's timeout made at its own time
                self._then(now, self._reschedule)
                return
            self._version += 1
            self._wake_in(delay)
            return

    def _horizon(self) -> float:
        """The time of the next queued event of the simulation (seconds; inf if none)."""
        return self.env.peek()

    def _quiet_steps(self, now: float, horizon: float) -> float:
        """Run the wake-ups of the chain from ``now`` (seconds) on that read only the
        sorted order of the table's one transfer: each ends flows, frees nothing
        another live flow could use (none is as fast as the slowest that ended),
        finishes not the transfer, and is followed by a wake-up before ``horizon``
        that a timeout from now lands on. Their flows end as :meth:`_end_due` would
        end them, at once; returns the time of the first wake-up left to run."""
        ft = self._flows
        order = ft.order()
        if order is None or ft.sole_owner < 0:
            return now
        owner = self._owners[ft.sole_owner]
        slack, rate, done_min, rate_max = order.slack, order.rate, order.done_min, order.rate_max
        last = slack.size
        first = i = order.next_slack
        pending = owner.pending
        env_now = self.env.now
        steps = []
        while True:
            stop = i + int(slack[i:].searchsorted(now, side="right"))
            n = stop - i
            if n <= 0 or n >= pending or stop == last:
                break  # nothing due (round-off), the transfer's end, or no flow left
            l0 = rate.item(i) if n == 1 else float(np.minimum.reduce(rate[i:stop]))
            if not rate_max.item(stop) < l0 * (1 - 1e-9):  # as in _resolve_from
                break  # a live flow as fast as an ended one: re-solve
            wake = now + max(done_min.item(stop) - now, 0.0)  # where timeout() lands
            if not (wake < horizon and exact_delay(env_now, wake) is not None):
                break
            steps.append((i, stop))
            i, pending, now = stop, pending - n, wake
        if steps:
            by, rates = order.by_slack, order.rate
            self._unloaded.extend((by[a:b], rates[a:b]) for a, b in steps)
            order.next_slack = i
            ft.end(by[first:i])
            owner.pending = pending  # none reached 0: nothing to fire
        return now

    def _then(self, when: float, action) -> None:
        """Run ``action()`` at ``when`` (now, or a time of the wake-up chain, which
        :func:`exact_delay` reaches from now)."""
        if when == self.env.now:
            action()
            return
        self._version += 1  # no wake-up pending until ``action`` schedules one
        t = self.env.timeout(exact_delay(self.env.now, when))
        t.callbacks.append(lambda _e: action())

    def _finish(self, done: list[tuple[int, int]]) -> None:
        """Finish the transfers ``done`` ((owner, flows) whose last flows ended now)
        and wait for the next end."""
        for oid, n in done:
            owner = self._owners.pop(oid)
            owner.finish(n)
        self._reschedule()

    def _end_due(self, now: float) -> list[tuple[int, int]]:
        """End the flows due at ``now`` (seconds), re-solve what they free; returns
        (owner, flows ended) per owner of the ended flows (not yet told)."""
        ft = self._flows
        # Flows within a hair of completion finish together (float round-off).
        order = ft.order(build=True)
        if order is None:
            ended = (ft.tslack <= now).nonzero()[0]
            rates = ft.rate[ended]
        else:
            ended, rates = order.ending(now)
        if ended.size == 0:  # numerical slack: finish the closest
            ended = (ft.tdone <= ft.tdone.min()).nonzero()[0]
            rates = ft.rate[ended]
            ft.drop_order()  # these may lie anywhere in its tslack order
        # A flow's rate is the level of its bottleneck, the lowest of its links.
        l0 = float(rates[rates.argmin()])  # min(): the same float, ~2 us slower a call
        self._unloaded.append((ended, rates))
        if ft.sole_owner >= 0:
            finished = [(ft.sole_owner, int(ended.size))]
        else:
            owned = ft.owner[ended]
            if owned[0] == owned[-1] and bool((owned == owned[0]).all()):
                finished = [(int(owned[0]), int(ended.size))]
            else:
                found, many = np.unique(owned, return_counts=True)
                finished = list(zip(found.tolist(), many.tolist(), strict=True))
        ft.end(ended)
        if ft.num_alive:
            self._resolve_from(l0, now)
        return finished


def exact_delay(now: float, when: float) -> float | None:
    """A delay (seconds) that simpy's ``now + delay`` turns into ``when`` bit for bit,
    or None where no float does (``now + (when - now)`` may round off ``when``: at
    ``now`` = 1 and ``when`` = 2**53 + 2 no delay lands on it)."""
    delay = when - now
    if now + delay == when:
        return delay
    for d in (math.nextafter(delay, math.inf), math.nextafter(delay, -math.inf)):
        if now + d == when and d >= 0.0:
            return d
    return None


class FoldedMaxMinNetwork(MaxMinNetwork):
    """:class:`MaxMinNetwork` whose solves fold flows and links that are the same up
    to a symmetry into classes (:mod:`simcluster.network.symmetry`): exact, so every
    rate, event and result is the unfolded model's.

    The classes are derived once per flow table (at the arrival that builds it,
    or at its first re-solve), over its live flows, with flows of different
    size, remaining bytes, rate or rate time kept apart (they may end at
    different times). A re-solve whose flows are whole classes, with the same
    load on every link of a class, is solved once per class; any other solve is
    unfolded.
    """

    name = "maxmin-folded"

    def __init__(
        self, env: simpy.Environment, capacity: np.ndarray, inter_node_link: np.ndarray
    ) -> None:
        super().__init__(env, capacity, inter_node_link)
        #: how many solves were ``folded`` and ``unfolded`` (refused, small or mixed)
        self.fold_stats: dict[str, int] = {"folded": 0, "unfolded": 0}
        #: (the table's link array it was derived for, folding or None, class per flow)
        self._folding: tuple[np.ndarray, symmetry.Folding | None, np.ndarray] | None = None

    def _classes(self) -> tuple[symmetry.Folding | None, np.ndarray]:
        ft = self._flows
        if self._folding is None or self._folding[0] is not ft.links:
            live = np.flatnonzero(ft.alive)
            local, links = ft.entries(live)
            color = symmetry.colors(ft.size[live], ft.rem[live], ft.rate[live], ft.tref[live])
            f = symmetry.fold(local, links, live.size, self.capacity, flow_color=color)
            of = np.full(ft.count, -1, dtype=np.int64)
            if f is not None:
                of[live] = f.flow_class
            self._folding = (ft.links, f, of)
        return self._folding[1], self._folding[2]

    def _fold_or(self, aff: np.ndarray, load: np.ndarray | None) -> np.ndarray | None:
        """Rates of the flows ``aff`` solved by class, or None where that is not exact."""
        if aff.size < symmetry.FOLD_MIN_FLOWS:
            return None
        f, of = self._classes()
        if f is None:
            return None
        cls = of[aff]
        count = np.bincount(cls, minlength=f.num_flow_classes)
        if cls.min() < 0 or not np.all((count == 0) | (count == f.flow_size)):
            return None  # part of a class: not a symmetric sub-problem
        rates = symmetry.class_rates(f, count > 0, self.capacity, load)
        return None if rates is None else rates[cls]

    def _count(self, rates: np.ndarray | None) -> None:
        self.fold_stats["unfolded" if rates is None else "folded"] += 1

    def _full_rates(self, local: np.ndarray, links: np.ndarray) -> np.ndarray:
        rates = self._fold_or(np.arange(self._flows.count), None)
        self._count(rates)
        return super()._full_rates(local, links) if rates is None else rates

    def _partial_rates(self, aff: np.ndarray, local: np.ndarray, links: np.ndarray) -> np.ndarray:
        rates = self._fold_or(aff, self._load_now())
        self._count(rates)
        return super()._partial_rates(aff, local, links) if rates is None else rates


#: network models by name (``network_model`` in a scenario)
BACKENDS: Registry[type[NetworkBackend]] = Registry("network model")
BACKENDS.add("maxmin", MaxMinNetwork)
BACKENDS.add("maxmin-folded", FoldedMaxMinNetwork)
BACKENDS.add("closed-form", ClosedFormNetwork)


def make_network(
    name: str, env: simpy.Environment, capacity: np.ndarray, inter_node_link: np.ndarray
) -> NetworkBackend:
    """Backend by name: ``maxmin``, ``maxmin-folded`` or ``closed-form``."""
    return BACKENDS.lookup(name)(env, capacity, inter_node_link)


def run_phases(name: str, capacity: np.ndarray, inter_node_link: np.ndarray, phases: list) -> float:
    """Seconds to run ``phases`` (flow batches) one after another on a fresh network
    ``name`` (``maxmin`` or ``closed-form``) over links of ``capacity`` bytes/s."""
    env = simpy.Environment()
    net = make_network(name, env, capacity, inter_node_link)

    def proc():
        for phase in phases:
            yield net.transfer(phase)

    env.process(proc())
    env.run()
    return float(env.now)

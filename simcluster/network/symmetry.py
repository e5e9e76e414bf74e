"""Exact symmetry folding of a max-min problem: flows and links solved by class.

Flows that are the same up to a symmetry of the topology (one flow per rank and
channel of a ring, the same hop in every pod or rail) get the same max-min rate.
This module finds such classes from the problem itself and solves the problem
once per class, with every link's contention still exact.

The classes form an *equitable partition* of the (flow, link) incidence:

* every flow of a flow class crosses the same number of links of each link class;
* every link of a link class carries the same number of flows of each flow
  class, and has the same capacity and (for partial re-solves) the same load.

Progressive filling (:func:`simcluster.network.maxmin.maxmin_rates`) then keeps
the partition: in every round the links of a class have the same count of
unfrozen flows, the same remaining capacity and so the same share, and a round
freezes whole flow classes. The folded solve below does that arithmetic once per
class, with the same integers and the same float operations in the same order,
so its rates equal the unfolded solve's bit for bit.

The partition is *derived*, never assumed: colour refinement (1-dimensional
Weisfeiler-Leman) starts from links coloured by their exact (capacity, load)
and flows all alike (or apart by a caller's seed colours), then splits flows
by the multiset of their links' classes and links by the multiset of their
flows' classes until nothing splits. The multisets are compared through sums
of random integer weights (exact in float64, so order-free); a collision of
two sums could merge classes that differ, so the final partition is checked
exactly: each flow's links in path order against its class's first flow, and
where that differs, and for links, per row the count of each class packed
base-B into float64 words, compared with the class's first row.
When the check fails, or the classes are too many to gain anything, folding is
refused (``None``) and the caller solves the problem unfolded.

Units: bytes/s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simcluster.network.maxmin import REL_TOL, _compact, maxmin_rates

__all__ = ["Folding", "class_rates", "colors", "fold", "folded_rates", "solve"]

#: random integer weights of classes in the multiset sums (< 2**20 each, so a
#: sum over up to 2**33 incidences stays an exact float64 integer); fixed seed:
#: the partition, hence the run, is deterministic
_WEIGHTS = np.random.default_rng(0x5EED).integers(1, 1 << 20, size=1 << 16).astype(np.float64)

#: problems with fewer flows are solved unfolded (deriving classes costs more)
FOLD_MIN_FLOWS = 512

#: most refinement rounds before giving up (the partitions met here settle in 2-4)
MAX_ROUNDS = 12


@dataclass(frozen=True, slots=True)
class Folding:
    """An equitable partition of one max-min problem.

    flow_class: class of every flow (0..F-1); flows with no links form their own class.
    link_class: class of every used link (0..L-1), in :func:`_compact` order of
        the problem's link ids (``used``).
    used: the link ids that occur, sorted.
    per_link: (L, F) int: flows of class F on each link of class L.
    flow_size: (F,) flows in each class; link_rep: (L,) one used-link index per class.
    """

    flow_class: np.ndarray
    link_class: np.ndarray
    used: np.ndarray
    per_link: np.ndarray
    flow_size: np.ndarray
    link_rep: np.ndarray

    @property
    def num_flow_classes(self) -> int:
        return int(self.flow_size.size)

    @property
    def num_link_classes(self) -> int:
        return int(self.link_rep.size)


def _factorize(keys: np.ndarray, limit: int) -> tuple[np.ndarray, int] | None:
    """(id of every key among the sorted distinct keys, how many), or None when
    there are more than ``limit`` distinct keys. Cost O(n log k) for k distinct
    keys: the distinct values are collected from a sample, then from the misses."""
    n = keys.size
    if n <= 4096:
        u, inv = np.unique(keys, return_inverse=True)
        return (inv.reshape(-1), int(u.size)) if u.size <= limit else None
    cand = np.unique(keys[:: max(1, n // 2048)])
    while True:
        if cand.size > limit:
            return None
        pos = np.searchsorted(cand, keys)
        np.minimum(pos, cand.size - 1, out=pos)
        miss = cand[pos] != keys
        if not miss.any():
            return pos, int(cand.size)
        extra = keys[miss]
        if extra.size > 64 * limit:  # many misses: cheaper to sort them
            extra = np.unique(extra)
        else:
            extra = np.unique(extra[: 64 * limit])
        cand = np.union1d(cand, extra)


def colors(*columns: np.ndarray) -> np.ndarray:
    """Ids 0..k-1 of the distinct rows of equal-length columns (exact values)."""
    out = np.zeros(columns[0].size, dtype=np.int64)
    for col in columns:
        ids, n = _factorize(col, col.size)  # type: ignore[misc]
        out = _factorize(out * n + ids, col.size)[0]  # type: ignore[index]
    return out


def _multiset_sums(rows: np.ndarray, cols: np.ndarray, col_class: np.ndarray, n: int) -> np.ndarray:
    """Per row 0..n-1: the sum of the random weights of the classes ``col_class``
    of its entries' columns ``cols``."""
    return np.bincount(rows, weights=_WEIGHTS.take(col_class, mode="wrap")[cols], minlength=n)


def _first_of(group: np.ndarray) -> np.ndarray:
    """Per group id 0..k-1 (every one present): the lowest index holding it."""
    first = np.full(int(group.max()) + 1, group.size, dtype=np.int64)
    np.minimum.at(first, group, np.arange(group.size, dtype=np.int64))
    return first


def _equal_rows(rows: np.ndarray, cls: np.ndarray, n: int, ncls: int, of: np.ndarray) -> bool:
    """Does every row ``r`` (0..n-1) hold, per class 0..ncls-1, as many entries
    as the first row of its group ``of[r]``? Exact: counts packed base ``B``
    into float64 words (sums of integers below 2**52 are exact in any order)."""
    if rows.size == 0:
        return True
    counts = np.bincount(rows, minlength=n)
    first = _first_of(of)[of]
    if not np.array_equal(counts, counts[first]):
        return False  # rows of one group with different entry counts
    if rows.size < 2 or bool(np.all(rows[1:] >= rows[:-1])):
        # entries grouped by row (flows in path order): the same classes in the
        # same order as the group's first row is enough, and O(entries)
        start = np.cumsum(counts) - counts
        same = start[first][rows] + (np.arange(rows.size) - start[rows])
        if np.array_equal(cls, cls[same]):
            return True
    bits = int(counts.max()).bit_length()
    per_word = max(1, 52 // bits)
    words = -(-ncls // per_word)
    if n * words > 8 * rows.size + (1 << 20):
        return False  # too many classes to check cheaply: refuse
    if words == 1:
        index, weights = rows, float(1 << bits) ** np.arange(ncls)
    else:
        index = rows * words + cls // per_word
        weights = float(1 << bits) ** np.arange(per_word)
        cls = cls % per_word
    packed = np.bincount(index, weights=weights[cls], minlength=n * words)
    packed = packed.reshape(n, words)
    return bool(np.array_equal(packed, packed[first]))


def fold(
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    num_flows: int,
    capacity: np.ndarray,
    load: np.ndarray | None = None,
    max_classes: int | None = None,
    flow_color: np.ndarray | None = None,
) -> Folding | None:
    """The coarsest equitable partition of a max-min problem (arguments as
    :func:`~simcluster.network.maxmin.maxmin_rates`), or None when it has more
    than ``max_classes`` flow classes (default ``num_flows // 8``, at least 16: too
    fine to gain), fails the exact check, or crosses no link.

    flow_color: optional ints 0..k-1 per flow that classes must not mix (e.g. flows
        that will end at different times); they only make the partition finer.
    """
    ef = np.asarray(entry_flow, dtype=np.int64)
    if ef.size == 0:
        return None  # no links: every rate is inf, nothing to solve
    if max_classes is None:
        max_classes = max(16, num_flows // 8)
    used, el = _compact(np.asarray(entry_link), capacity.size)
    nl = int(used.size)
    cap = capacity[used].astype(np.float64)
    eff = cap if load is None else np.maximum(cap - load[used], 0.0)
    # links start coloured by their exact (capacity, capacity left)
    base, nl0 = _factorize(cap, nl)  # type: ignore[misc]
    if load is not None:
        left, n_left = _factorize(eff, nl)  # type: ignore[misc]
        base, nl0 = _factorize(base * n_left + left, nl)  # type: ignore[misc]
    lc, nlc = base, nl0
    link_limit = max(nl0, 8 * max_classes)
    seeds = 1 if flow_color is None else int(flow_color.max()) + 1
    for _ in range(MAX_ROUNDS):
        got = _factorize(_multiset_sums(ef, el, lc, num_flows), max_classes)
        if got is not None and flow_color is not None:
            got = _factorize(got[0] * seeds + flow_color, max_classes)
        if got is None:
            return None
        fc, nfc = got
        sums = _multiset_sums(el, ef, fc, nl)
        shift = float(1 << int(sums.max()).bit_length())
        if nl0 * shift < 2.0**53:  # (base colour, sum) as one exact float
            got = _factorize(sums + base * shift, link_limit)
        else:
            got = _factorize(sums, link_limit)
            if got is not None:
                got = _factorize(got[0] * nl0 + base, link_limit)
        if got is None:
            return None
        # refinement only splits: as many link classes as before is the same
        # partition, and the flows' next split (from the same link classes) too
        stable = got[1] == nlc
        lc, nlc = got
        if stable:
            break
    else:
        return None
    # exact check: flows of a class cross the same multiset of link classes, and
    # links of a class carry the same multiset of flow classes
    if not _equal_rows(ef, lc[el], num_flows, nlc, fc):
        return None
    if not _equal_rows(el, fc[ef], nl, nfc, lc):
        return None
    link_rep = _first_of(lc)
    is_rep = np.zeros(nl, dtype=bool)
    is_rep[link_rep] = True
    rep_entries = np.flatnonzero(is_rep[el])  # entries on representative links
    per_link = np.zeros((nlc, nfc), dtype=np.int64)
    np.add.at(per_link, (lc[el[rep_entries]], fc[ef[rep_entries]]), 1)
    return Folding(fc, lc, used, per_link, np.bincount(fc, minlength=nfc), link_rep)


def folded_rates(
    folding: Folding, capacity: np.ndarray, load: np.ndarray | None = None
) -> np.ndarray:
    """Max-min rates (bytes/s) of every flow, solved once per class.

    The same progressive filling as :func:`~simcluster.network.maxmin.maxmin_rates`
    on the classes' representative links: the counts, shares, water level and
    saturation tests are the very numbers the unfolded solve computes for every
    link of the class, so the rates are equal bit for bit. ``capacity`` and
    ``load`` must be those the folding was derived for.
    """
    every = np.ones(folding.num_flow_classes, dtype=bool)
    return _fill(folding, every, capacity, load)[folding.flow_class]


def class_rates(
    folding: Folding, classes: np.ndarray, capacity: np.ndarray, load: np.ndarray | None
) -> np.ndarray | None:
    """Max-min rates (bytes/s) per flow class of the problem made of the flows of
    ``classes`` (bool per class) only, sharing what ``load`` leaves of each link;
    None when ``load`` is not the same on every link of a class these flows cross.

    The folding may have been derived without load: the flows of some classes of
    an equitable partition, with the same link classes, are again an equitable
    partition, so only the load needs checking (exactly, per link).
    """
    if load is not None:
        per_link = folding.per_link[:, classes].sum(axis=1)
        touched = per_link[folding.link_class] > 0
        left = load[folding.used[touched]]
        rep = load[folding.used[folding.link_rep]][folding.link_class[touched]]
        if not np.array_equal(left, rep):
            return None
    return _fill(folding, classes, capacity, load)


def _fill(
    folding: Folding, classes: np.ndarray, capacity: np.ndarray, load: np.ndarray | None
) -> np.ndarray:
    """Progressive filling of the flows of ``classes`` on the representative links."""
    rep = folding.used[folding.link_rep]
    cap = capacity[rep].astype(np.float64)
    tol = REL_TOL * cap
    if load is not None:
        cap = np.maximum(cap - load[rep], 0.0)
    per_link = np.where(classes[None, :], folding.per_link, 0)
    frozen = ~classes
    class_rate = np.full(folding.num_flow_classes, np.inf)
    counts = per_link.sum(axis=1)
    share = np.empty(cap.size)
    level = 0.0
    busy = counts > 0
    while busy.any():
        share.fill(np.inf)
        np.divide(cap, counts, out=share, where=busy)
        inc = float(share.min())
        level += inc
        cap -= inc * counts
        saturated = busy & (cap <= tol)
        if not saturated.any():
            saturated = busy & (share <= inc * (1 + 1e-12))
        hit = (per_link[saturated] > 0).any(axis=0) & ~frozen
        class_rate[hit] = level
        frozen |= hit
        counts = counts - per_link[:, hit].sum(axis=1)
        busy = counts > 0
    return class_rate


def solve(
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    num_flows: int,
    capacity: np.ndarray,
    load: np.ndarray | None = None,
    stats: dict[str, int] | None = None,
) -> np.ndarray:
    """:func:`~simcluster.network.maxmin.maxmin_rates`, folded by symmetry when
    the problem has :data:`FOLD_MIN_FLOWS` flows or more and an equitable
    partition into few classes, else unfolded: the same rates either way.
    ``stats``: counts of ``folded`` and ``unfolded`` solves, incremented."""
    f = None
    if num_flows >= FOLD_MIN_FLOWS and np.asarray(entry_flow).size:
        f = fold(entry_flow, entry_link, num_flows, capacity, load)
    if stats is not None:
        key = "unfolded" if f is None else "folded"
        stats[key] = stats.get(key, 0) + 1
    if f is None:
        return maxmin_rates(entry_flow, entry_link, num_flows, capacity, load)
    return folded_rates(f, capacity, load)

"""Max-min fair sharing of link bandwidth among concurrent flows.

The allocation is computed by progressive filling (water-filling): every
unfrozen flow's rate grows by the same amount until some link saturates; the
flows crossing a saturated link are frozen at the water level reached; repeat.
All unfrozen flows share one level, and per-link counts of unfrozen flows are
updated as flows freeze, so a round costs O(links + entries it freezes). The
number of rounds is the number of distinct bottleneck levels (one or two for
the symmetric phases of a collective).

With ``load``, the flows share what other flows leave of each link: the
network backend re-solves only part of the problem when flows end that way
(see :class:`simcluster.network.backend.MaxMinNetwork`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["maxmin_rates", "concat_ranges", "filled"]

#: relative slack under which a link counts as saturated (float round-off)
REL_TOL = 1e-12


def filled(n: int, value: float | int | bool, dtype: type = np.float64) -> np.ndarray:
    """``np.full(n, value, dtype)`` without its Python layer (a few us a call on small
    arrays, where the network makes thousands of such calls a run; for the same reason
    1-D index arrays are taken as ``a.nonzero()[0]``, ``np.flatnonzero``'s result)."""
    a = np.empty(n, dtype=dtype)
    a.fill(value)
    return a


def _compact(
    entry_link: np.ndarray, num_links: int, dtype: type = np.int64
) -> tuple[np.ndarray, np.ndarray]:
    """(sorted link ids that occur, each entry's index among them as ``dtype``)."""
    if entry_link.size * 8 < num_links:
        used, index = np.unique(entry_link, return_inverse=True)
        return used, index.astype(dtype, copy=False)
    lookup = np.zeros(num_links, dtype=dtype)
    lookup[entry_link] = 1
    used = lookup.nonzero()[0]
    lookup[used] = np.arange(used.size, dtype=dtype)
    return used, lookup.take(entry_link)


def _csr(
    keys: np.ndarray, values: np.ndarray, n: int, stable: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """``values`` grouped by ``keys`` (0..n-1): (start offsets, grouped values);
    in their order within a group when ``stable``, else in any order."""
    if keys.size < 2 or bool(np.logical_and.reduce(keys[1:] >= keys[:-1])):
        order = None
    elif n <= 1 << 16:  # a 16-bit stable sort is a radix sort
        order = np.argsort(keys.astype(np.uint16), kind="stable")
    else:
        order = np.argsort(keys, kind="stable" if stable else "quicksort")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, values if order is None else values[order]


#: most ranges :func:`concat_ranges` joins with ``np.repeat`` (half the numpy calls of
#: the running sum: 156 ranges ~13 us against ~26 us; from ~4,000 ranges the sum wins)
_FEW_RANGES = 1024


def concat_ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] .. starts[i] + lens[i] - 1`` of every ``i``, concatenated
    (int64). Up to :data:`_FEW_RANGES` ranges, each range's start (less the entries
    before it) repeated by its length plus a count; beyond, the running sum of steps of
    1 that jump to each range's start, one array (there a ``repeat`` by counts plus an
    ``arange`` took several times as long)."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    if lens.size <= _FEW_RANGES:  # few ranges: each one's start repeated, plus a count
        ends = lens.cumsum()
        total = int(ends[-1]) if ends.size else 0
        return np.repeat(starts - (ends - lens), lens) + np.arange(total, dtype=np.int64)
    if not lens.all():  # empty ranges add nothing
        keep = lens > 0
        starts, lens = starts[keep], lens[keep]
    out = filled(int(lens.sum()), 1, np.int64)
    if out.size:
        ends = lens.cumsum()
        out[0] = starts[0]
        out[ends[:-1]] = starts[1:] - (starts[:-1] + lens[:-1] - 1)
        out.cumsum(out=out)
    return out


def _by_link(
    el: np.ndarray, ef: np.ndarray, nlinks: int, num_flows: int
) -> tuple[np.ndarray, np.ndarray]:
    """The flows of every link (0..nlinks-1) of the entries ``el``, ``ef``, as
    (start offsets, flows), each link's flows in increasing order: one sort of
    (link, flow) keys packed in an integer (32 bits where they fit)."""
    lbits = max(int(nlinks - 1).bit_length(), 1)
    fbits = max(int(num_flows - 1).bit_length(), 1)
    if lbits + fbits <= 32:
        key = el.astype(np.uint32, copy=False) << np.uint32(fbits)  # one new array
        np.bitwise_or(key, ef, out=key, casting="unsafe")  # flow ids < 2**fbits
        key.sort()
        ptr = np.empty(nlinks + 1, dtype=np.int64)
        ptr[:nlinks] = key.searchsorted(np.arange(nlinks, dtype=np.uint32) << fbits)
        ptr[nlinks] = key.size
        key &= (1 << fbits) - 1
        return ptr, key
    ptr = np.zeros(nlinks + 1, dtype=np.int64)
    np.cumsum(np.bincount(el, minlength=nlinks), out=ptr[1:])
    if lbits + fbits <= 63:
        key = np.sort((el.astype(np.int64) << fbits) | ef.astype(np.int64))
        return ptr, key & ((1 << fbits) - 1)
    return _csr(el, ef, nlinks, stable=False)  # pragma: no cover (2**63 entries)


def _flow_table(ef: np.ndarray, el: np.ndarray, lens: np.ndarray, nlinks: int) -> np.ndarray | None:
    """The links of every flow (``lens[f]`` entries of flow ``f``) as a (flows,
    widest path) table, short rows padded with the spare link ``nlinks``; None
    when padding would more than double the entries (then :func:`_csr` rows
    are used)."""
    num_flows = lens.size
    width = int(np.maximum.reduce(lens))
    if width * num_flows > 2 * ef.size:
        return None
    if ef.size > 1 and not bool(np.logical_and.reduce(ef[1:] >= ef[:-1])):
        el = el[np.argsort(ef, kind="stable")]
    if el.size == width * num_flows:  # every flow has ``width`` links
        return el.reshape(num_flows, width)
    table = np.full(num_flows * width, nlinks, dtype=np.int64)
    first = np.arange(num_flows) * width - (np.cumsum(lens) - lens)
    table[np.arange(el.size) + np.repeat(first, lens)] = el
    return table.reshape(num_flows, width)


def maxmin_rates(
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    num_flows: int,
    capacity: np.ndarray,
    load: np.ndarray | None = None,
) -> np.ndarray:
    """Max-min fair rates (bytes/s) of ``num_flows`` flows.

    entry_flow, entry_link: parallel int arrays, one entry per (flow, link)
        incidence. A flow with no entries gets rate ``inf`` (it crosses no link).
    capacity: bytes/s of every link id that ``entry_link`` may name, at least 0;
        ``inf`` is a link that limits no flow (a flow on such links only gets
        ``inf``); NaN is a ValueError.
    load: bytes/s already taken on each link by flows outside this problem
        (default none); these flows share ``capacity - load``. A link counts as
        saturated when less than ``REL_TOL * capacity`` is left.

    A round costs O(links + entries of the flows it freezes): per-link counts
    of unfrozen flows are kept up to date instead of recounted, so problems
    with hundreds of distinct levels stay cheap. A round needs no mask of busy
    links: a link whose flows are all frozen has count 0, so its share is
    ``cap / 0 = inf`` while ``cap > 0``, and ``cap - inc * 0`` leaves it as it
    is; a saturated link (``cap`` may be 0 or below) gets ``cap = inf`` once its
    flows are frozen. Every busy link's share and remaining capacity are the
    same floats as with a mask; a flow's rate stays ``inf`` until it is frozen.
    """
    rates = filled(num_flows, np.inf)
    if num_flows == 0 or entry_flow.size == 0:
        return rates
    ef = np.asarray(entry_flow).astype(np.int64, copy=False)
    # link ids in 32 bits: the (link, flow) keys below are built from them
    used, el = _compact(np.asarray(entry_link), capacity.size, np.uint32)
    nlinks = used.size
    cap = capacity[used].astype(np.float64)
    # an infinite or NaN capacity (one reduction when there is none; a max, not a sum,
    # which finite capacities near the float limit would overflow)
    if not np.maximum.reduce(cap) < np.inf:
        return _without_unbounded(entry_flow, entry_link, num_flows, capacity, load)
    tol = REL_TOL * cap
    if load is not None:
        cap = np.maximum(cap - load[used], 0.0)
    # Flows on each link, in any order: a round freezes every unfrozen flow of the
    # saturated links at one level, whatever the order it meets them in.
    lptr, link_flows = _by_link(el, ef, nlinks, num_flows)
    # a (flow, link) pair listed twice puts the flow twice in the link's list
    twice = link_flows.size > 1 and bool(np.logical_or.reduce(link_flows[1:] == link_flows[:-1]))
    lens = np.bincount(ef, minlength=num_flows)  # links of each flow
    table = _flow_table(ef, el, lens, nlinks)
    if table is None:
        fptr, flow_links = _csr(ef, el, num_flows)
    # unfrozen flows per link (whole numbers), and a spare entry for the table's padding
    counts_pad = np.zeros(nlinks + 1)
    counts_pad[:nlinks] = lptr[1:] - lptr[:-1]  # np.diff, without its Python layer
    counts = counts_pad[:nlinks]
    lstart, lend = lptr[:-1].tolist(), lptr[1:].tolist()
    left = int(np.count_nonzero(lens))  # unfrozen flows
    stamp = np.empty(num_flows, dtype=np.int64)
    share = np.empty(nlinks)
    step = np.empty(nlinks)
    full = np.empty(nlinks, dtype=bool)
    level = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        while left:
            np.divide(cap, counts, out=share)
            # the least share (the first NaN if any, as min() would give): argmin and a
            # read take ~1.3 us against ~3.5 us for min() on ~2,000 links
            inc = float(share[share.argmin()])
            level += inc
            np.multiply(counts, inc, out=step)
            cap -= step
            sat = np.less_equal(cap, tol, out=full).nonzero()[0]
            if sat.size == 0:  # round-off: saturate the links that set the level
                sat = (share <= inc * (1 + 1e-12)).nonzero()[0]
            many = sat.size > 1
            if many:  # every saturated link's flows, in link order (one gather, no slices)
                hit = link_flows[concat_ranges(lptr[sat], lptr[sat + 1] - lptr[sat])]
            else:
                one = int(sat[0])
                hit = link_flows[lstart[one] : lend[one]]
            hit = hit[rates[hit] == np.inf]  # not frozen yet
            if hit.size > 1 and (twice or many):  # a flow listed twice counts once
                pos = np.arange(hit.size)
                stamp[hit] = pos
                hit = hit[stamp[hit] == pos]
            rates[hit] = level
            left -= hit.size
            if table is not None:
                # one subtraction of 1 per entry: the same whole numbers as a bincount
                np.subtract.at(counts_pad, table.take(hit, axis=0), 1.0)
            else:
                starts = fptr[hit]
                links = flow_links[concat_ranges(starts, fptr[hit + 1] - starts)]
                counts -= np.bincount(links, minlength=nlinks)
            cap[sat if many else one] = np.inf  # every flow of a saturated link is frozen now
    return rates


def _without_unbounded(
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    num_flows: int,
    capacity: np.ndarray,
    load: np.ndarray | None,
) -> np.ndarray:
    """:func:`maxmin_rates` of the problem less its entries on links of infinite
    capacity (they limit no flow); a NaN capacity on a named link is a ValueError."""
    links = np.asarray(entry_link)
    cap = np.asarray(capacity, dtype=np.float64)[links]
    if np.isnan(cap).any():
        bad = sorted({int(x) for x in links[np.isnan(cap)]})[:5]
        raise ValueError(
            f"maxmin_rates: capacity is NaN on link(s) {bad}; give bytes/s >= 0 or inf"
        )
    keep = cap < np.inf
    return maxmin_rates(np.asarray(entry_flow)[keep], links[keep], num_flows, capacity, load)

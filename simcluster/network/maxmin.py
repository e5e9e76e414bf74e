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

__all__ = ["maxmin_rates", "concat_ranges"]

#: relative slack under which a link counts as saturated (float round-off)
REL_TOL = 1e-12


def _compact(entry_link: np.ndarray, num_links: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted link ids that occur, each entry's index among them)."""
    if entry_link.size * 8 < num_links:
        return np.unique(entry_link, return_inverse=True)
    present = np.zeros(num_links, dtype=bool)
    present[entry_link] = True
    return np.flatnonzero(present), (np.cumsum(present) - 1)[entry_link]


def _csr(
    keys: np.ndarray, values: np.ndarray, n: int, stable: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """``values`` grouped by ``keys`` (0..n-1): (start offsets, grouped values);
    in their order within a group when ``stable``, else in any order."""
    if keys.size < 2 or bool(np.all(keys[1:] >= keys[:-1])):
        order = None
    elif n <= 1 << 16:  # a 16-bit stable sort is a radix sort
        order = np.argsort(keys.astype(np.uint16), kind="stable")
    else:
        order = np.argsort(keys, kind="stable" if stable else "quicksort")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, values if order is None else values[order]


def concat_ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The indices ``starts[i] .. starts[i] + lens[i] - 1`` of every ``i``, concatenated."""
    first = np.cumsum(lens) - lens
    return np.arange(int(lens.sum())) + np.repeat(starts - first, lens)


def _gather(ptr: np.ndarray, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The values of every row in ``rows`` of a CSR table, concatenated."""
    return values[concat_ranges(ptr[rows], ptr[rows + 1] - ptr[rows])]


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
    capacity: bytes/s of every link id that ``entry_link`` may name.
    load: bytes/s already taken on each link by flows outside this problem
        (default none); these flows share ``capacity - load``. A link counts as
        saturated when less than ``REL_TOL * capacity`` is left.

    A round costs O(links + entries of the flows it freezes): per-link counts
    of unfrozen flows are kept up to date instead of recounted, so problems
    with hundreds of distinct levels stay cheap.
    """
    rates = np.full(num_flows, np.inf)
    if num_flows == 0 or entry_flow.size == 0:
        return rates
    ef = np.asarray(entry_flow)
    used, el = _compact(np.asarray(entry_link), capacity.size)
    nlinks = used.size
    cap = capacity[used].astype(np.float64)
    tol = REL_TOL * cap
    if load is not None:
        cap = np.maximum(cap - load[used], 0.0)
    # Flows on each link, in any order: a round freezes every unfrozen flow of the
    # saturated links at one level, whatever the order it meets them in.
    lptr, link_flows = _csr(el, ef, nlinks, stable=False)
    fptr, flow_links = _csr(ef, el, num_flows)  # links of each flow
    counts = np.diff(lptr)  # unfrozen flows per link
    frozen = np.zeros(num_flows, dtype=bool)
    stamp = np.empty(num_flows, dtype=np.int64)
    share = np.empty(nlinks)
    level = 0.0
    busy = counts > 0
    while busy.any():
        share.fill(np.inf)
        np.divide(cap, counts, out=share, where=busy)
        inc = float(share.min())
        level += inc
        cap -= inc * counts  # idle links have count 0: unchanged
        saturated = busy & (cap <= tol)
        if not saturated.any():  # round-off: saturate the links that set the level
            saturated = busy & (share <= inc * (1 + 1e-12))
        hit = _gather(lptr, link_flows, np.flatnonzero(saturated))
        hit = hit[~frozen[hit]]
        if hit.size > 1:  # a flow on two saturated links counts once
            pos = np.arange(hit.size)
            stamp[hit] = pos
            hit = hit[stamp[hit] == pos]
        rates[hit] = level
        frozen[hit] = True
        counts = counts - np.bincount(_gather(fptr, flow_links, hit), minlength=nlinks)
        busy = counts > 0
    return rates

"""Max-min fair sharing of link bandwidth among concurrent flows.

The allocation is computed by progressive filling (water-filling): every
unfrozen flow's rate grows by the same amount until some link saturates; the
flows crossing a saturated link are frozen at their rate; repeat. Each round is
a handful of numpy operations over the (flow, link) incidence entries, so a
round costs O(entries) and the number of rounds is the number of distinct
bottleneck levels (one or two for the symmetric phases of a collective).
"""

from __future__ import annotations

import numpy as np

__all__ = ["maxmin_rates"]


def maxmin_rates(
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    num_flows: int,
    capacity: np.ndarray,
    rel_tol: float = 1e-12,
) -> np.ndarray:
    """Max-min fair rates (bytes/s) of ``num_flows`` flows.

    entry_flow, entry_link: parallel int arrays, one entry per (flow, link)
        incidence. A flow with no entries gets rate ``inf`` (it crosses no link).
    capacity: bytes/s of every link id that ``entry_link`` may name.
    """
    rates = np.zeros(num_flows, dtype=np.float64)
    if num_flows == 0:
        return rates
    has_link = np.zeros(num_flows, dtype=bool)
    has_link[entry_flow] = True
    rates[~has_link] = np.inf
    if entry_flow.size == 0:
        return rates
    # Compact the link ids that occur, so every round works on small arrays.
    used, local_link = np.unique(entry_link, return_inverse=True)
    cap = capacity[used].astype(np.float64)
    cap0 = cap.copy()
    frozen = ~has_link
    ef = entry_flow
    el = local_link
    while True:
        live = ~frozen[ef]
        if not live.any():
            break
        ef, el = ef[live], el[live]
        counts = np.bincount(el, minlength=cap.size).astype(np.float64)
        busy = counts > 0
        share = np.full(cap.size, np.inf)
        share[busy] = cap[busy] / counts[busy]
        inc = share.min()
        rates[~frozen] += inc
        cap[busy] -= inc * counts[busy]
        saturated = busy & (cap <= rel_tol * cap0 + 1e-300)
        if inc == 0.0 and not saturated.any():  # zero-capacity link; freeze its flows
            saturated = busy & (share == 0.0)
        hit = np.zeros(num_flows, dtype=bool)
        hit[ef[saturated[el]]] = True
        frozen |= hit
    return rates

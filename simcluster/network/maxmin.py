"""Max-min fair sharing of link bandwidth among concurrent flows.

The allocation is computed by progressive filling (water-filling): every
unfrozen flow's rate grows by the same amount until some link saturates; the
flows crossing a saturated link are frozen at the water level reached; repeat.
All unfrozen flows share one level, so a round touches only the incidence
entries of flows still unfrozen plus the links: O(live entries + links). The
number of rounds is the number of distinct bottleneck levels (one or two for
the symmetric phases of a collective).
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
    rates = np.full(num_flows, np.inf)
    if num_flows == 0 or entry_flow.size == 0:
        return rates
    # Compact the link ids that occur, so every round works on small arrays.
    used, el = np.unique(entry_link, return_inverse=True)
    cap = capacity[used].astype(np.float64)
    tol = rel_tol * cap
    ef = np.asarray(entry_flow)
    frozen = np.zeros(num_flows, dtype=bool)
    level = 0.0
    nlinks = cap.size
    while ef.size:
        counts = np.bincount(el, minlength=nlinks)
        busy = counts > 0
        share = np.full(nlinks, np.inf)
        share[busy] = cap[busy] / counts[busy]
        inc = float(share.min())
        level += inc
        cap[busy] -= inc * counts[busy]
        saturated = busy & (cap <= tol)
        if not saturated.any():  # round-off: saturate the links that set the level
            saturated = busy & (share <= inc * (1 + 1e-12))
        hit = ef[saturated[el]]
        rates[hit] = level
        frozen[hit] = True
        keep = ~frozen[ef]
        ef, el = ef[keep], el[keep]
    return rates

"""Routes of rank pairs asked for before, kept as sorted arrays.

Point-to-point exchanges that differ from call to call (an SpMV layer's node
pairs, say) name mostly the same rank pairs again and again. A
:class:`RouteMemo` routes each pair once with :meth:`Cluster.routes` and
answers later requests by lookup: the same links in the same order, and the
same per-pair path latency (the links' latencies summed in path order, as
:meth:`CommContext.path_latencies` sums them), so a batch built from it is
equal, array for array, to one routed afresh. Seconds.
"""

from __future__ import annotations

import numpy as np

from simcluster.network.maxmin import concat_ranges

__all__ = ["RouteMemo"]


class RouteMemo:
    """Pair routes of one cluster: pair code ``src * num_ranks + dst``, sorted,
    with each pair's span in a flat link store and its path latency (s)."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.n = int(cluster.num_ranks)
        self.keys = np.zeros(0, dtype=np.int64)  # sorted pair codes
        self.start = np.zeros(0, dtype=np.int64)  # per key: first link in ``links``
        self.length = np.zeros(0, dtype=np.int64)  # per key: links on its route
        self.latency = np.zeros(0, dtype=np.float64)  # per key: path latency (s)
        self.links = np.zeros(0, dtype=np.int64)

    def _find(self, code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position of each code among the keys, whether it is there)."""
        pos = np.searchsorted(self.keys, code)
        if self.keys.size == 0:
            return pos, np.zeros(code.size, dtype=bool)
        return pos, self.keys[np.minimum(pos, self.keys.size - 1)] == code

    def _add(self, codes: np.ndarray) -> None:
        """Route the pairs of ``codes`` (distinct, not yet kept) and keep them; the
        store stays in key order, each pair's links right after the previous key's."""
        m = codes.size
        flow, link = self.cluster.routes(codes // self.n, codes % self.n)
        length = np.bincount(flow, minlength=m)
        latency = np.bincount(flow, weights=self.cluster.link_latency[link], minlength=m)
        start = self.links.size + np.cumsum(length) - length
        links = np.concatenate([self.links, link])
        keys = np.concatenate([self.keys, codes])
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.length = np.concatenate([self.length, length])[order]
        self.latency = np.concatenate([self.latency, latency])[order]
        self.links = links[concat_ranges(np.concatenate([self.start, start])[order], self.length)]
        self.start = np.cumsum(self.length) - self.length

    def routes(
        self, src: np.ndarray, dst: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(entry_flow, entry_link, path latency per pair, links per pair)`` of every
        (src, dst) pair, the first two as :meth:`Cluster.routes` returns them (entries
        in pair order)."""
        src = np.asarray(src, dtype=np.int64).reshape(-1)
        dst = np.asarray(dst, dtype=np.int64).reshape(-1)
        n = self.n
        if src.size and not (0 <= min(src.min(), dst.min()) and max(src.max(), dst.max()) < n):
            self.cluster.routes(src, dst)  # raises the cluster's error for the bad rank
        code = src * n + dst
        pos, found = self._find(code)
        if not found.all():
            self._add(np.unique(code[~found]))
            pos = np.searchsorted(self.keys, code)
        length = self.length[pos]
        entry_flow = np.repeat(np.arange(code.size, dtype=np.int64), length)
        if pos.size > 1 and bool(np.logical_and.reduce(pos[1:] > pos[:-1])):
            # pairs in key order, each once: their spans of the store, in its order
            chosen = np.zeros(self.keys.size, dtype=bool)
            chosen[pos] = True
            entry_link = self.links[np.repeat(chosen, self.length)]
        else:
            entry_link = self.links[concat_ranges(self.start[pos], length)]
        return entry_flow, entry_link, self.latency[pos], length

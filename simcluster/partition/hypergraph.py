"""The multi-phase hypergraph model of a sparse DNN (SpMV paper, section 5).

Phase ``k`` partitions the rows of ``W^k``. Its hypergraph has

- a vertex per row ``i`` (neuron ``i`` of layer ``k``), weighted by the row's
  nonzeros: the work of its SpMV in SpFF, its transposed SpMV in SpBP and its
  outer-product update;
- a net per column ``j`` (the input ``x^{k-1}(j)``), cost 2, whose pins are the
  rows with a nonzero in column ``j``; with cost 2 the connectivity-1 cut of a
  phase is the words moved by SpFF plus SpBP in layer ``k``;
- from phase 2 on, a fixed vertex per column ``j``, pinned to the part that owns
  row ``j`` of ``W^{k-1}`` (the processor that computes ``x^{k-1}(j)``), and
  joined to net ``j`` only. Fixed vertices carry no work.

In phase 1 the input vector is not yet placed, so there are no fixed vertices;
:func:`input_owners` then gives each input to a part its net connects (the one
holding most of its pins), so that every net costs exactly ``lambda - 1``.

Columns without nonzeros get no net (nothing is communicated for them).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from simcluster.partition.keys import count_unique, unique_counts
from simcluster.workload.sparse import SparseLayer

__all__ = ["PhaseHypergraph", "build_phase", "connectivity_cut", "input_owners", "NET_COST"]

#: cost of every net: one word in SpFF plus one word in SpBP per extra part
NET_COST = 2


@dataclass(frozen=True, eq=False)
class PhaseHypergraph:
    """Hypergraph of one phase.

    Vertices ``0 .. rows-1`` are the rows; when ``fixed`` is given, vertices
    ``rows + t`` for ``t`` in ``0 .. len(net_cols)-1`` are the fixed vertices of
    the nets in order. Nets are in CSR form: ``net_ptr`` / ``net_pins`` list the
    row pins only; the fixed pin of net ``t`` is implied.

    rows: number of row vertices.
    row_weight: nonzeros per row (the work of each vertex).
    net_cols: column id of each net.
    net_ptr, net_pins: row pins of each net.
    fixed: part of the fixed vertex of each net (phase >= 2), or None (phase 1).
    """

    rows: int
    row_weight: np.ndarray
    net_cols: np.ndarray
    net_ptr: np.ndarray
    net_pins: np.ndarray
    fixed: np.ndarray | None = None
    net_cost: int = NET_COST

    @property
    def num_nets(self) -> int:
        return int(self.net_cols.size)

    @property
    def num_vertices(self) -> int:
        return self.rows + (self.num_nets if self.fixed is not None else 0)

    @cached_property
    def total_weight(self) -> int:
        return int(self.row_weight.sum())

    def net_pin_lists(self) -> list[list[int]]:
        """Every net's pins as vertex ids, fixed vertex last (for the partitioner APIs)."""
        out = []
        for t in range(self.num_nets):
            pins = self.net_pins[self.net_ptr[t] : self.net_ptr[t + 1]].tolist()
            if self.fixed is not None:
                pins.append(self.rows + t)
            out.append(pins)
        return out

    def max_part_weight(self, parts: int, epsilon: float) -> int:
        """Largest row weight a part may hold: ``(1 + epsilon) * ceil(W / parts)``, floored."""
        avg = -(-self.total_weight // parts)
        return int(np.floor((1.0 + epsilon) * avg + 1e-9))


def build_phase(layer: SparseLayer, fixed_owner: np.ndarray | None) -> PhaseHypergraph:
    """The phase hypergraph of ``layer``; ``fixed_owner[j]`` = part computing input ``j``."""
    pins = layer.csc_rows  # row pins grouped by column (cached on the layer)
    counts = layer.col_nnz
    cols = np.flatnonzero(counts > 0)
    ptr = np.concatenate(([0], np.cumsum(counts[cols]))).astype(np.int64)
    fixed = None
    if fixed_owner is not None:
        fixed_owner = np.asarray(fixed_owner)
        if fixed_owner.shape != (layer.cols,):
            raise ValueError(f"fixed_owner needs {layer.cols} entries, got {fixed_owner.shape}")
        fixed = fixed_owner[cols].astype(np.int64)
    return PhaseHypergraph(
        rows=layer.rows,
        row_weight=layer.row_nnz.astype(np.int64),
        net_cols=cols.astype(np.int64),
        net_ptr=ptr,
        net_pins=pins.astype(np.int64),
        fixed=fixed,
    )


def _net_part_keys(hg: PhaseHypergraph, parts: np.ndarray, k: int) -> np.ndarray:
    """Keys ``net * k + part`` of every pin (fixed pins included), unsorted, with repeats."""
    net_of_pin = np.repeat(np.arange(hg.num_nets, dtype=np.int64), np.diff(hg.net_ptr))
    keys = net_of_pin * k + parts[hg.net_pins]
    if hg.fixed is not None:
        keys = np.concatenate((keys, np.arange(hg.num_nets, dtype=np.int64) * k + hg.fixed))
    return keys


def connectivity_cut(hg: PhaseHypergraph, parts: np.ndarray, k: int) -> int:
    """The paper's cut size: sum over nets of ``cost * (lambda - 1)``."""
    parts = np.asarray(parts, dtype=np.int64)
    # sum(max(lambda - 1, 0)) = distinct (net, part) pairs - nets with a pin
    pairs = count_unique(_net_part_keys(hg, parts, k))
    used = hg.num_nets if hg.fixed is not None else int(np.count_nonzero(np.diff(hg.net_ptr)))
    return int(hg.net_cost * (pairs - used))


def input_owners(layer: SparseLayer, row_parts: np.ndarray, k: int) -> np.ndarray:
    """Owner of each input ``x^0(j)`` after phase 1: the part holding most pins of net ``j``.

    Ties go to the lowest part id; inputs nobody reads go to part ``j mod k``.
    """
    row_parts = np.asarray(row_parts, dtype=np.int64)
    keys = layer.indices.astype(np.int64) * k + row_parts[layer.row_of_nnz]
    uniq, counts = unique_counts(keys)
    col, part = uniq // k, uniq % k
    owner = np.arange(layer.cols, dtype=np.int64) % k
    # order by (column, -count, part) and keep the first entry of each column
    order = np.lexsort((part, -counts, col))
    first = np.ones(order.size, dtype=bool)
    first[1:] = col[order][1:] != col[order][:-1]
    owner[col[order][first]] = part[order][first]
    return owner

"""Communication sets of a partitioned sparse DNN and the paper's Table 1 metrics.

For layer ``k`` (SpMV paper, equations 8 and 9): processor ``m`` sends to ``n``
the entries ``x^{k-1}(j)`` it owns for every column ``j`` that some row of
``W^k`` owned by ``n`` uses (``Xsend_m^k``; ``Xrecv_n^k`` is the same message
seen from ``n``). Each entry goes once per destination, however many of the
destination's rows use it. In SpBP the same pairs exchange the partial sums
``s^k(j)`` in the opposite direction (``Ssend`` / ``Srecv``), so one
:class:`LayerComm` describes both passes.

Table 1 metrics (:func:`table1_metrics`), all per layer of one SpFF pass in
words (one vector entry; times the batch for SpMM), SpBP being its mirror:

- avg / max send volume: words a processor sends, summed over the layers,
  averaged / maximised over processors, divided by the number of layers;
- avg / max messages: the same for the number of messages;
- imbalance: per layer, the largest processor load over the average load
  (load = nonzeros of owned rows, proportional to the FLOPs of SpMV,
  transposed SpMV and update), averaged over layers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from simcluster.partition.keys import unique_counts, unique_counts_sorted, unique_sorted
from simcluster.partition.network import NetworkPartition, column_slots, remote_reads
from simcluster.workload.sparse import SparseDNN, SparseLayer

__all__ = ["LayerComm", "layer_comm", "comm_plan", "PartitionMetrics", "table1_metrics"]


@dataclass(frozen=True, eq=False)
class LayerComm:
    """One layer's SpFF messages and per-processor work.

    src, dst, words: one entry per message (sorted by src, then dst); int32 (a
        layer at P = 4,096 has ~half a million messages, kept for the run).
    rows: rows of ``W^k`` owned by each processor.
    nnz: nonzeros owned by each processor.
    nnz_remote: owned nonzeros whose input entry lives on another processor.
    rows_remote: owned rows with at least one such nonzero.
    """

    parts: int
    src: np.ndarray
    dst: np.ndarray
    words: np.ndarray
    rows: np.ndarray
    nnz: np.ndarray
    nnz_remote: np.ndarray
    rows_remote: np.ndarray

    @property
    def nnz_local(self) -> np.ndarray:
        return self.nnz - self.nnz_remote

    @property
    def volume(self) -> int:
        return int(self.words.sum())

    def _src_bounds(self) -> np.ndarray:
        """Where each processor's messages start in ``src`` (sorted), and the end."""
        # in src's own type: a wider one would make searchsorted convert all of src
        return np.searchsorted(self.src, np.arange(self.parts + 1, dtype=self.src.dtype))

    def send_words(self) -> np.ndarray:
        total = np.zeros(self.words.size + 1, dtype=np.int64)
        np.cumsum(self.words, out=total[1:])
        return np.diff(total[self._src_bounds()])

    def recv_words(self) -> np.ndarray:
        return np.bincount(self.dst, weights=self.words, minlength=self.parts).astype(np.int64)

    def send_messages(self) -> np.ndarray:
        return np.diff(self._src_bounds())

    def recv_messages(self) -> np.ndarray:
        return np.bincount(self.dst, minlength=self.parts)


def layer_comm(
    layer: SparseLayer,
    in_owner: np.ndarray,
    out_owner: np.ndarray,
    parts: int,
    reads: np.ndarray | None = None,
    local: np.ndarray | None = None,
) -> LayerComm:
    """Messages of one layer: ``in_owner`` places ``x^{k-1}``, ``out_owner`` the rows.

    reads: the layer's :func:`~simcluster.partition.network.remote_reads` for these
    owners (same ``in_owner`` and rows) where already computed (the random
    partitioner's cut), else None. local: with them, the positions of the nonzeros
    whose input the row's part owns (in order), else None.
    """
    p = int(parts)
    in_owner = np.asarray(in_owner, dtype=np.int64)
    out_owner = np.asarray(out_owner, dtype=np.int64)
    cols = max(int(layer.cols), 1)
    small = max(cols, p) * p < 1 << 31  # keys fit 32 bits
    dt = np.int32 if small else np.int64
    slots = column_slots(in_owner, p) if small else None
    if slots is None or reads is None or local is None:
        r = np.repeat(out_owner.astype(dt), layer.row_nnz)  # the part of every nonzero's row
        c = in_owner.astype(dt)[layer.indices]
        remote = c != r
        local = np.flatnonzero(~remote)  # few: most reads cross parts
    # per part, the nonzeros of its rows: a sum over the rows, not a count over the
    # nonzeros (exact: whole numbers far below 2**53)
    nnz = np.bincount(out_owner, weights=layer.row_nnz, minlength=p).astype(np.int64)
    local_rows = np.searchsorted(layer.indptr, local, side="right") - 1
    nnz_remote = nnz - np.bincount(out_owner[local_rows], minlength=p)
    rows = np.bincount(out_owner, minlength=p)
    # a row has a remote nonzero unless all of its nonzeros are local
    has_remote = np.bincount(local_rows, minlength=layer.rows) < layer.row_nnz
    rows_remote = np.bincount(out_owner[np.flatnonzero(has_remote)], minlength=p)
    # every (column, reader part) once; a message entry where reader != owner
    if slots is not None:  # one 32-bit sort, by (owner, reader, column): no second one
        if reads is None:
            reads = remote_reads(layer.indices, r, remote, in_owner, p)
        pairs, words = unique_counts_sorted(reads // np.int32(slots[1]))
        # src from where each owner's pairs start (a 64-bit divmod took several ms)
        # (in pairs' 32 bits: int64 bounds would make searchsorted convert all pairs)
        bounds = np.searchsorted(pairs, np.arange(p + 1, dtype=np.int32) * np.int32(p))
        counts = np.diff(bounds)
        src = np.repeat(np.arange(p, dtype=np.int32), counts)
        dst = src * np.int32(p)  # then pair - src * p, written over it (p * p fits 32 bits)
        np.subtract(pairs, dst, out=dst)
    elif small:  # 32-bit sorts: (column, reader) once, then by (owner, reader)
        p32 = np.int32(p)
        if reads is None or reads.dtype != dt:
            reads = remote_reads(layer.indices, r, remote, in_owner, p)
        col, reader = np.divmod(reads, p32)
        pairs, words = unique_counts(in_owner.astype(dt)[col] * p32 + reader)
        pairs = pairs.astype(np.int64)
    elif p * p * cols < 1 << 62:  # one sort by (owner, reader, column)
        keys = unique_sorted(((c * p + r) * cols + layer.indices)[remote])
        pairs, words = unique_counts_sorted(keys // cols)
    else:
        keys = unique_sorted(layer.indices[remote].astype(np.int64) * p + r[remote])
        col, reader = keys // p, keys % p
        pairs, words = unique_counts(in_owner[col] * p + reader)
    if slots is None:
        src, dst = np.divmod(pairs, p)
    return LayerComm(
        parts=p,
        src=src.astype(np.int32, copy=False),  # ranks and counts fit 32 bits
        dst=dst.astype(np.int32, copy=False),
        words=words.astype(np.int32),
        rows=rows,
        nnz=nnz,
        nnz_remote=nnz_remote,
        rows_remote=rows_remote,
    )


def comm_plan(
    net: SparseDNN,
    partition: NetworkPartition,
    reads: list | None = None,
    local: list | None = None,
) -> list[LayerComm]:
    """:class:`LayerComm` of every layer, ``W^1`` first.

    reads, local: each layer's remote reads and local nonzeros as
    :func:`partition_network` kept them (its ``reads`` and ``local`` arguments) for
    this partition, or None.
    """
    o = partition.owners
    L = len(net.layers)
    if not reads or len(reads) != L:
        reads = [None] * L
    if not local or len(local) != L:
        local = [None] * L
    return [
        layer_comm(w, o[k], o[k + 1], partition.parts, reads[k], local[k])
        for k, w in enumerate(net.layers)
    ]


@dataclass(frozen=True)
class PartitionMetrics:
    """Table 1 figures of one partition (see the module docstring for definitions)."""

    parts: int
    backend: str
    avg_volume: float
    max_volume: float
    avg_messages: float
    max_messages: float
    imbalance: float
    volume_per_layer: float  # words moved by all processors per layer (SpFF)
    partition_s: float  # wall-clock seconds the partitioner took (terminal table only)

    def as_dict(self) -> dict:
        """The figures for result records: everything but the wall-clock
        ``partition_s``, so the same scenario and seed write the same bytes."""
        d = asdict(self)
        d.pop("partition_s")
        return d


def table1_metrics(plan: list[LayerComm], partition: NetworkPartition) -> PartitionMetrics:
    p = partition.parts
    layers = len(plan)
    vol = np.zeros(p)
    msgs = np.zeros(p)
    imb = []
    for lc in plan:
        vol += lc.send_words()
        msgs += lc.send_messages()
        mean = lc.nnz.mean()
        imb.append(float(lc.nnz.max() / mean) if mean > 0 else 1.0)
    return PartitionMetrics(
        parts=p,
        backend=partition.backend,
        avg_volume=float(vol.mean() / layers),
        max_volume=float(vol.max() / layers),
        avg_messages=float(msgs.mean() / layers),
        max_messages=float(msgs.max() / layers),
        imbalance=float(np.mean(imb)),
        volume_per_layer=float(vol.sum() / layers),
        partition_s=partition.seconds,
    )

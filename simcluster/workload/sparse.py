"""Sparse DNNs as chains of sparse weight matrices (connectivity only).

A :class:`SparseDNN` with ``L`` layers holds the nonzero patterns of its weight
matrices ``W^1 .. W^L``. Following the SpMV training paper
(shared/papers/004_*), ``W^k(i, j) != 0`` connects neuron ``j`` of layer
``k-1`` to neuron ``i`` of layer ``k``: row ``i`` of ``W^k`` is neuron ``i`` of
layer ``k`` and the computation ``z^k(i) = W^k(i, :) x^{k-1}`` belongs to it.
Layer 0 is the input vector.

Patterns are stored as CSR (``indptr``, ``indices``; 0-based, column indices
sorted within a row, no duplicates). Values are irrelevant to the simulator.

Generators here: :func:`random_k_per_row` (each row connects to ``k``
distinct inputs chosen uniformly at random; for tests) and
:func:`from_rows` (explicit row lists, e.g. the paper's Figure 3 example).
RadiX-Nets are in :mod:`simcluster.workload.radixnet`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

__all__ = ["SparseLayer", "SparseDNN", "random_k_per_row", "from_rows"]


@dataclass(frozen=True, eq=False)
class SparseLayer:
    """Nonzero pattern of one weight matrix, ``rows x cols``, in CSR form."""

    rows: int
    cols: int
    indptr: np.ndarray  # int64, rows + 1
    indices: np.ndarray  # int32 column ids, nnz

    def __post_init__(self) -> None:
        if self.indptr.shape != (self.rows + 1,):
            raise ValueError(f"indptr must have rows + 1 = {self.rows + 1} entries")
        if self.indptr[0] != 0 or np.any(np.diff(self.indptr) < 0):
            raise ValueError("indptr must start at 0 and never decrease")
        if self.indices.shape != (int(self.indptr[-1]),):
            raise ValueError("indices must have indptr[-1] entries")
        if self.indices.size and (self.indices.min() < 0 or self.indices.max() >= self.cols):
            raise ValueError(f"column index out of range 0..{self.cols - 1}")

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @cached_property
    def row_nnz(self) -> np.ndarray:
        """Nonzeros per row (int64)."""
        return np.diff(self.indptr)

    @cached_property
    def row_of_nnz(self) -> np.ndarray:
        """Row id of every stored nonzero, aligned with ``indices``."""
        return np.repeat(np.arange(self.rows, dtype=np.int64), self.row_nnz)

    @cached_property
    def col_nnz(self) -> np.ndarray:
        return np.bincount(self.indices, minlength=self.cols)

    def csc_order(self) -> np.ndarray:
        """Stable ``argsort`` of ``indices``: the nonzeros column by column, rows ascending."""
        idx = self.indices
        if self.cols <= 1 << 16:  # NumPy radix-sorts 16-bit keys (stable, much faster)
            idx = idx.astype(np.uint16)
        return np.argsort(idx, kind="stable")

    @cached_property
    def csc_rows(self) -> np.ndarray:
        """Row id of every nonzero, column by column (rows ascending within a column)."""
        return self.row_of_nnz[self.csc_order()]

    def columns(self) -> list[np.ndarray]:
        """Row ids per column (the pins of each column net), columns in order."""
        rows = self.csc_rows.copy()
        bounds = np.concatenate(([0], np.cumsum(self.col_nnz)))
        return [rows[bounds[j] : bounds[j + 1]] for j in range(self.cols)]

    def dense(self) -> np.ndarray:
        """0/1 matrix (small layers only)."""
        out = np.zeros((self.rows, self.cols), dtype=np.int8)
        out[self.row_of_nnz, self.indices] = 1
        return out


@dataclass(frozen=True, eq=False)
class SparseDNN:
    """A sparse feed-forward network: ``layers[k-1]`` is ``W^k``.

    name: short label used in cache keys and tables (``radixnet-1024x120``).
    description: how it was generated (parameters, seed).
    """

    name: str
    layers: tuple[SparseLayer, ...]
    description: str = ""
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError("a sparse DNN needs at least one layer")
        for k in range(1, len(self.layers)):
            if self.layers[k].cols != self.layers[k - 1].rows:
                raise ValueError(
                    f"W^{k + 1} has {self.layers[k].cols} columns but layer {k} has "
                    f"{self.layers[k - 1].rows} neurons"
                )

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def widths(self) -> tuple[int, ...]:
        """Neurons per layer, input layer first (``num_layers + 1`` entries)."""
        return (self.layers[0].cols, *(w.rows for w in self.layers))

    @property
    def nnz(self) -> int:
        return sum(w.nnz for w in self.layers)

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of every layer's pattern: identifies the network in caches."""
        h = hashlib.sha256()
        for w in self.layers:
            h.update(np.asarray([w.rows, w.cols], dtype=np.int64).tobytes())
            h.update(np.ascontiguousarray(w.indptr, dtype=np.int64).tobytes())
            h.update(np.ascontiguousarray(w.indices, dtype=np.int32).tobytes())
        return h.hexdigest()


def _csr_from_sorted_rows(rows: int, cols: int, idx: np.ndarray) -> SparseLayer:
    """A layer from an array ``(rows, k)`` of column ids (any order per row)."""
    idx = np.sort(np.asarray(idx, dtype=np.int64), axis=1)
    k = idx.shape[1]
    indptr = np.arange(rows + 1, dtype=np.int64) * k
    return SparseLayer(rows, cols, indptr, idx.reshape(-1).astype(np.int32))


def random_k_per_row(neurons: int, layers: int, k: int, seed: int = 0) -> SparseDNN:
    """Every neuron connects to ``k`` distinct neurons of the previous layer, uniformly.

    Seeded and reproducible: the same (neurons, layers, k, seed) give the same network.
    """
    if not 1 <= k <= neurons:
        raise ValueError(f"k must be in 1..{neurons}, got {k}")
    rng = np.random.default_rng([seed, neurons, layers, k])
    out = []
    for _ in range(layers):
        idx = rng.integers(0, neurons, size=(neurons, k))
        while True:  # redraw rows that picked a column twice
            s = np.sort(idx, axis=1)
            bad = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1)) if k > 1 else []
            if len(bad) == 0:
                break
            idx[bad] = rng.integers(0, neurons, size=(len(bad), k))
        out.append(_csr_from_sorted_rows(neurons, neurons, idx))
    return SparseDNN(
        name=f"random{k}-{neurons}x{layers}-s{seed}",
        layers=tuple(out),
        description=f"{layers} layers of {neurons} neurons, {k} random inputs per neuron, "
        f"seed {seed}",
        params={"generator": "random", "neurons": neurons, "layers": layers, "k": k},
    )


def from_rows(
    name: str, matrices: Sequence[Sequence[Sequence[int]]], cols: int | None = None
) -> SparseDNN:
    """A network from explicit patterns: ``matrices[k][i]`` lists the columns of row ``i``.

    Indices are 0-based. ``cols`` is the input width (default: the row count of W^1).
    """
    layers = []
    width = cols
    for rows in matrices:
        n = len(rows)
        c = width if width is not None else n
        counts = np.array([len(set(r)) for r in rows], dtype=np.int64)
        indptr = np.concatenate(([0], np.cumsum(counts)))
        indices = np.array([j for r in rows for j in sorted(set(r))], dtype=np.int32)
        layers.append(SparseLayer(n, c, indptr, indices))
        width = n
    return SparseDNN(name=name, layers=tuple(layers), description="explicit patterns")

"""Partitioning a whole sparse DNN, phase by phase, with an on-disk cache.

:func:`partition_network` runs the section-5 model: phase ``k`` partitions the
rows of ``W^k`` with the inputs fixed where phase ``k-1`` put them. The result,
:class:`NetworkPartition`, holds an owner array per layer (``owners[0]`` for
the input vector, ``owners[k]`` for the rows of ``W^k``) and the time each phase
took.

Partitions are cached as ``.npz`` files keyed by the network (name and content
hash), the number of parts, the backend and its settings, epsilon and the
seed. The cache folder is ``$SIMCLUSTER_CACHE_DIR`` if set, else
``$XDG_CACHE_HOME/simcluster`` or ``~/.cache/simcluster``; never the source
tree. On a miss there, the partitions shipped with the package are tried
(:mod:`simcluster.partition.shipped`: the shipped scenarios' networks, checked
against the generator version and the network fingerprint). ``random``
partitions take milliseconds and are not cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simcluster.partition.backends import (
    BACKENDS,
    even_random_parts,
    kahypar_config_path,
    partition_phase,
)
from simcluster.partition.hypergraph import (
    NET_COST,
    build_phase,
    connectivity_cut,
    input_owners,
)
from simcluster.partition.keys import unique_sorted
from simcluster.partition.shipped import load_shipped, shipped_path
from simcluster.workload.sparse import SparseDNN

__all__ = [
    "NetworkPartition",
    "partition_network",
    "default_cache_dir",
    "cache_key",
    "find_cached",
    "CACHE_VERSION",
]

CACHE_VERSION = 1
Progress = Callable[[int, int, str], None]


def default_cache_dir() -> Path:
    """Where cached partitions live (see the module docstring)."""
    env = os.environ.get("SIMCLUSTER_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "simcluster"


@dataclass(frozen=True, eq=False)
class NetworkPartition:
    """Owners of every layer's neurons for ``parts`` processors.

    owners: ``num_layers + 1`` int arrays; ``owners[k][i]`` = processor of neuron
        ``i`` of layer ``k`` (layer 0 = input vector).
    phase_seconds: wall time of each phase's partitioning (from the run that made
        it, also when read back from the cache).
    cut: connectivity cut of each phase (cost 2 per extra part).
    """

    network: str
    parts: int
    backend: str
    epsilon: float
    seed: int
    owners: tuple[np.ndarray, ...]
    phase_seconds: tuple[float, ...]
    cut: tuple[int, ...]
    cached: bool = False
    settings: dict = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        """Total partitioning time (s)."""
        return float(sum(self.phase_seconds))


def _settings(backend: str, kahypar_config: str | None, mtkahypar_preset: str) -> dict:
    """What besides the backend's name decides its result (part of the cache key)."""
    if backend == "kahypar":
        cfg = kahypar_config_path(kahypar_config)
        return {"config": hashlib.sha256(cfg.read_bytes()).hexdigest()[:16]}
    if backend == "mtkahypar":
        return {"preset": mtkahypar_preset}
    return {}


def cache_key(
    net: SparseDNN,
    parts: int,
    backend: str,
    eps: float,
    seed: int,
    kahypar_config: str | None = None,
    mtkahypar_preset: str = "deterministic",
) -> tuple[str, dict]:
    """(cache key, backend settings) of a partition: a SHA-256 over everything it depends on.

    The key covers the network's name and content fingerprint, the parts, the
    backend and its settings (the KaHyPar configuration file's hash, the Mt-KaHyPar
    preset), epsilon and the seed.
    """
    settings = _settings(backend, kahypar_config, mtkahypar_preset)
    blob = json.dumps(
        {
            "v": CACHE_VERSION,
            "network": net.name,
            "fingerprint": net.fingerprint,
            "parts": parts,
            "backend": backend,
            "epsilon": eps,
            "seed": seed,
            "settings": settings,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest(), settings


def find_cached(
    net: SparseDNN,
    parts: int,
    backend: str,
    eps: float,
    seed: int,
    cache_dir: str | Path | None = None,
    kahypar_config: str | None = None,
    mtkahypar_preset: str = "deterministic",
) -> Path | None:
    """The file a cached or shipped partition would be read from, or None (a miss)."""
    if backend == "random":
        return None
    key = cache_key(net, parts, backend, eps, seed, kahypar_config, mtkahypar_preset)[0]
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    user = _cache_file(folder, net, parts, backend, seed, key)
    return user if user.is_file() else shipped_path(key)


def _cache_file(folder: Path, net: SparseDNN, parts: int, backend: str, seed: int, key: str):
    return folder / "partitions" / f"{net.name}-P{parts}-{backend}-s{seed}-{key[:16]}.npz"


def _load(path: Path, net: SparseDNN) -> tuple[list[np.ndarray], list[float], list[int]] | None:
    try:
        with np.load(path) as z:
            flat, phase_s, cut = z["owners"], z["phase_seconds"], z["cut"]
    except (OSError, KeyError, ValueError):
        return None  # unreadable: recompute and overwrite
    widths = net.widths
    if flat.size != sum(widths) or phase_s.size != net.num_layers:
        return None
    bounds = np.cumsum((0, *widths))
    owners = [flat[bounds[i] : bounds[i + 1]].astype(np.int64) for i in range(len(widths))]
    return owners, phase_s.tolist(), cut.tolist()


def _save(path: Path, owners, phase_s, cut) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp.npz")
    os.close(fd)
    try:
        np.savez_compressed(
            tmp,
            owners=np.concatenate(owners).astype(np.int32),
            phase_seconds=np.asarray(phase_s, dtype=np.float64),
            cut=np.asarray(cut, dtype=np.int64),
        )
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class _StatusLine:
    """Progress while partitioning, on stderr.

    On a terminal: one self-overwriting line. Otherwise (a log, a worker process of
    ``prefetch_partitions``): a plain line at most every ``log_every`` seconds, so
    that a job of minutes shows it is alive; jobs shorter than that print nothing.
    """

    def __init__(self, wanted: bool = True, log_every: float = 30.0) -> None:
        tty = sys.stderr.isatty()
        self.enabled = wanted and tty
        self.log = wanted and not tty
        self.log_every = log_every
        self.last = time.perf_counter()
        self.width = 0

    def __call__(self, text: str) -> None:
        if self.enabled:
            sys.stderr.write("\r" + text.ljust(self.width))
            self.width = len(text)
            sys.stderr.flush()
        elif self.log and time.perf_counter() - self.last >= self.log_every:
            self.last = time.perf_counter()
            sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def clear(self) -> None:
        if self.enabled and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


def _random_rows(rows: int, parts: int, seed: int) -> np.ndarray:
    """The ``random`` backend's rows for one phase (as :func:`partition_phase` draws them)."""
    return even_random_parts(rows, parts, np.random.default_rng([seed, rows, parts]))


def column_slots(in_owner: np.ndarray, parts: int) -> tuple[np.ndarray, int] | None:
    """Per input column ``j``: ``(owner(j) * parts * span + slot(j))`` in 32 bits, and
    ``span``, the most columns one part owns; ``slot(j)`` numbers the columns of
    ``j``'s owner 0, 1, ... in column order. None when ``parts * parts * span``
    does not fit 32 bits (the reads are then keyed by column, see :func:`remote_reads`).
    """
    in_owner = np.asarray(in_owner)
    p = int(parts)
    counts = np.bincount(in_owner, minlength=p)
    span = max(int(counts.max()) if counts.size else 1, 1)
    if p * p * span >= 1 << 31:
        return None
    # by owner, columns in order (NumPy radix-sorts 16-bit keys: stable, much faster)
    order = np.argsort(in_owner.astype(np.uint16) if p <= 1 << 16 else in_owner, kind="stable")
    first = np.cumsum(counts) - counts
    slot = np.empty(in_owner.size, dtype=np.int64)
    slot[order] = np.arange(in_owner.size) - np.repeat(first, counts)
    return (in_owner * (p * span) + slot).astype(np.int32), span


def remote_reads(
    indices: np.ndarray, reader: np.ndarray, remote: np.ndarray, in_owner: np.ndarray, parts: int
) -> np.ndarray:
    """Every (column, reader part) of a layer's remote reads once, sorted: the
    distinct ``(owner * parts + reader) * span + slot`` (int32; see
    :func:`column_slots`) of the nonzeros where ``remote`` (the reader does not own
    the column's input), so that reads of one (owner, reader) pair are adjacent.
    Where those keys do not fit 32 bits: the distinct ``column * parts + reader``
    (32 bits when ``columns * parts`` fits them).

    indices: column of every nonzero; reader: part of every nonzero's row;
    in_owner: part of every column.
    """
    slots = column_slots(in_owner, parts)
    if slots is not None:
        code, span = slots
        key = code[indices] + reader.astype(np.int32, copy=False) * np.int32(span)
        return unique_sorted(key[remote])
    dt = np.int32 if int(in_owner.size) * int(parts) < 1 << 31 else np.int64
    key = indices.astype(dt, copy=False) * dt(parts) + reader.astype(dt, copy=False)
    return unique_sorted(key[remote])


def _pin_cut(
    layer, in_owner: np.ndarray, rows: np.ndarray, parts: int, keep=None, keep_local=None
) -> int:
    """:func:`connectivity_cut` of a phase without its hypergraph: every net has its
    fixed vertex, so ``lambda - 1`` counts the parts other than the input's owner
    that read it (cost 2 each). ``keep``: a list the :func:`remote_reads` go to;
    ``keep_local``: one the positions of the other (local) nonzeros go to."""
    dt = np.int32 if int(layer.cols) * int(parts) < 1 << 31 else np.int64
    # the part of every nonzero's row (rows repeated by their nonzeros: no row-of-nonzero
    # table kept, ~4 MB a layer)
    reader = np.repeat(rows.astype(dt, copy=False), layer.row_nnz)
    remote = reader != np.asarray(in_owner).astype(dt)[layer.indices]  # a 32-bit gather
    reads = remote_reads(layer.indices, reader, remote, in_owner, parts)
    if keep is not None:
        keep.append(reads)
    if keep_local is not None:
        keep_local.append(np.flatnonzero(~remote))
    return NET_COST * int(reads.size)


def partition_network(
    net: SparseDNN,
    parts: int,
    backend: str = "kahypar",
    epsilon: float = 0.01,
    seed: int = 0,
    *,
    cache: bool = True,
    cache_dir: str | Path | None = None,
    kahypar_config: str | None = None,
    mtkahypar_preset: str = "deterministic",
    threads: int | None = None,
    progress: Progress | None = None,
    status: bool = True,
    reads: list | None = None,
    local: list | None = None,
) -> NetworkPartition:
    """Partition every layer of ``net`` into ``parts`` (section-5 model, or random).

    ``status``: progress on stderr (a self-overwriting line on a terminal, else a
    plain line every 30 s; see :class:`_StatusLine`). ``reads``: a list that gets
    each layer's :func:`remote_reads` where the random backend computes them (its
    cut), for :func:`~simcluster.partition.comm.comm_plan` to reuse; ``local``: one
    that gets each layer's local nonzeros there (positions, see ``comm_plan``).
    """
    if backend not in BACKENDS:
        from simcluster.errors import UnknownNameError

        raise UnknownNameError("partitioner", backend, list(BACKENDS))
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    settings = _settings(backend, kahypar_config, mtkahypar_preset)
    use_cache = cache and backend != "random"
    path = None

    def result(owners, phase_s, cut, cached: bool) -> NetworkPartition:
        return NetworkPartition(
            net.name,
            parts,
            backend,
            epsilon,
            seed,
            tuple(owners),
            tuple(phase_s),
            tuple(cut),
            cached=cached,
            settings=settings,
        )

    if use_cache:
        key = cache_key(net, parts, backend, epsilon, seed, kahypar_config, mtkahypar_preset)[0]
        folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        path = _cache_file(folder, net, parts, backend, seed, key)
        hit = _load(path, net) if path.is_file() else None
        if hit is None:
            shipped = shipped_path(key)
            hit = load_shipped(shipped, net) if shipped is not None else None
        if hit is not None:
            return result(*hit, cached=True)
    line = _StatusLine(status)
    owners: list[np.ndarray] = []
    phase_s: list[float] = []
    cut: list[int] = []
    t_start = time.perf_counter()
    prev: np.ndarray | None = None
    rng_in = np.random.default_rng([seed, parts, 7])
    for k, layer in enumerate(net.layers, start=1):
        t0 = time.perf_counter()
        if backend == "random":  # no hypergraph needed: rows at random, the cut from the pins
            rows = _random_rows(layer.rows, parts, seed * 1_000_003 + k)
            if prev is None:
                prev = even_random_parts(layer.cols, parts, rng_in)
                owners.append(prev)
            phase_s.append(time.perf_counter() - t0)
            cut.append(_pin_cut(layer, prev, rows, parts, reads, local))
            owners.append(rows)
            prev = rows
            if progress:
                progress(k, net.num_layers, f"{net.name}: {backend} P={parts} layer {k}")
            continue
        hg = build_phase(layer, prev)
        rows = partition_phase(
            hg,
            parts,
            backend,
            epsilon,
            seed * 1_000_003 + k,
            kahypar_config=kahypar_config,
            mtkahypar_preset=mtkahypar_preset,
            threads=threads,
        )
        if prev is None:  # phase 1 decides where the input vector lives
            if backend == "random":
                prev = even_random_parts(layer.cols, parts, rng_in)
            else:
                prev = input_owners(layer, rows, parts)
            owners.append(prev)
            hg = build_phase(layer, prev)
        phase_s.append(time.perf_counter() - t0)
        cut.append(connectivity_cut(hg, rows, parts))
        owners.append(rows)
        prev = rows
        label = f"{net.name}: {backend} P={parts} layer {k}/{net.num_layers}"
        if progress:
            progress(k, net.num_layers, label)
        line(f"partitioning {label} ({time.perf_counter() - t_start:.1f} s)")
    line.clear()
    if path is not None:
        try:
            _save(path, owners, phase_s, cut)
        except OSError as exc:  # $SIMCLUSTER_CACHE_DIR names a file, a read-only folder, ...
            print(
                f"simcluster: warning: cannot cache the partition in {path.parent} "
                f"({exc.strerror or exc}); it is used uncached. Set SIMCLUSTER_CACHE_DIR "
                "to a writable folder.",
                file=sys.stderr,
            )
    return result(owners, phase_s, cut, cached=False)

"""Partitions shipped with the package, so the shipped scenarios start in seconds.

Hypergraph partitions of the networks in ``scenarios/hsgd-*.yaml`` and of the SpMV
reference cases take minutes to compute on a laptop (120 KaHyPar phases per network
and processor count). They are deterministic (fixed seeds), so the package carries
them in ``simcluster/partition/data/shipped/`` as ``.npz`` files named by the same
key as the user cache (:func:`simcluster.partition.network.cache_key`; owners stored
in :func:`neuron_orders`, where they compress about tenfold), plus
``manifest.json`` recording, per file, the network name, its content fingerprint,
the parts, backend and settings, and the generator version that made it.

A shipped partition is used only when the manifest's generator version equals
:data:`simcluster.workload.radixnet.GENERATOR_VERSION` *and* the key matches, which
includes the SHA-256 fingerprint of the network's every nonzero: a changed generator
can never be served a stale partition (it misses and partitions afresh).

Refresh after changing the generator or the partitioner (minutes)::

    python -m simcluster.devtools.ship_partitions scenarios/hsgd-graphchallenge.yaml \\
        scenarios/references/scenarios/spmv-haswell.yaml
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = [
    "shipped_dir",
    "shipped_path",
    "load_shipped",
    "neuron_orders",
    "MANIFEST",
    "NETWORK_OPTIONS",
]

MANIFEST = "manifest.json"
#: the spmv options that define the network (recorded per entry, so a test can rebuild it)
NETWORK_OPTIONS = (
    "neurons",
    "layers",
    "generator",
    "connections",
    "radix",
    "permute",
    "network_seed",
)


def shipped_dir() -> Path:
    """The package-data folder of shipped partitions."""
    return Path(str(resources.files("simcluster.partition") / "data" / "shipped"))


def _manifest(folder: Path) -> dict:
    try:
        return json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def shipped_path(key: str, folder: Path | None = None) -> Path | None:
    """The shipped file for cache ``key``, or None (absent, or another generator version)."""
    from simcluster.workload.radixnet import GENERATOR_VERSION

    d = folder if folder is not None else shipped_dir()
    man = _manifest(d)
    if man.get("generator_version") != GENERATOR_VERSION:
        return None
    entry = man.get("entries", {}).get(key)
    if not entry:
        return None
    p = d / entry["file"]
    return p if p.is_file() else None


def _set_hash(ptr: np.ndarray, members: np.ndarray) -> np.ndarray:
    """One uint64 per set (CSR ``ptr`` over ``members``): equal sets, equal hashes (exact)."""
    v = members.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
    v ^= v >> np.uint64(29)
    cs = np.zeros(v.size + 1, dtype=np.uint64)
    np.cumsum(v, dtype=np.uint64, out=cs[1:])  # wraps modulo 2^64, exactly
    return cs[ptr[1:]] - cs[ptr[:-1]]


def neuron_orders(net) -> list[np.ndarray]:
    """Per layer, the neurons sorted so that neurons with the same connections are adjacent.

    Layer 0 (inputs) by the rows reading each input in ``W^1``, layer ``k`` by the
    inputs of each row of ``W^k``. Partitions keep such twins together, so owners
    in this order run in long runs and compress well. Integer-only: every machine
    computes the same order.
    """
    w1 = net.layers[0]
    col_ptr = np.concatenate(([0], np.cumsum(w1.col_nnz))).astype(np.int64)
    orders = [np.argsort(_set_hash(col_ptr, w1.csc_rows), kind="stable")]
    for w in net.layers:
        orders.append(np.argsort(_set_hash(w.indptr, w.indices), kind="stable"))
    return orders


def _save_compact(path: Path, net, owners, phase_s, cut, parts: int) -> None:
    dtype = np.uint8 if parts <= 256 else np.uint16
    flat = np.concatenate([o[order] for o, order in zip(owners, neuron_orders(net), strict=True)])
    np.savez_compressed(
        path,
        owners_by_twins=flat.astype(dtype),
        phase_seconds=np.asarray(phase_s, dtype=np.float64),
        cut=np.asarray(cut, dtype=np.int64),
    )


def load_shipped(path: Path, net) -> tuple[list[np.ndarray], list[float], list[int]] | None:
    """Owners, phase seconds and cuts of a shipped file (None if unreadable or mismatched)."""
    try:
        with np.load(path) as z:
            flat, phase_s, cut = z["owners_by_twins"], z["phase_seconds"], z["cut"]
    except (OSError, KeyError, ValueError):
        return None
    widths = net.widths
    if flat.size != sum(widths) or phase_s.size != net.num_layers:
        return None
    bounds = np.cumsum((0, *widths))
    owners = []
    for i, order in enumerate(neuron_orders(net)):
        o = np.empty(widths[i], dtype=np.int64)
        o[order] = flat[bounds[i] : bounds[i + 1]]
        owners.append(o)
    return owners, phase_s.tolist(), cut.tolist()

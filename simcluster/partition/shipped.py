"""Partitions shipped with the package, so the shipped scenarios start in seconds.

Hypergraph partitions of the networks in ``scenarios/hsgd-*.yaml`` and of the SpMV
reference cases take minutes to compute on a laptop (120 KaHyPar phases per network
and processor count). They are deterministic (fixed seeds), so the package carries
them in ``simcluster/partition/data/shipped/`` as ``.npz`` files named by the same
key as the user cache (:func:`simcluster.partition.network.cache_key`), plus
``manifest.json`` recording, per file, the network name, its content fingerprint,
the parts, backend and settings, and the generator version that made it.

A shipped partition is used only when the manifest's generator version equals
:data:`simcluster.workload.radixnet.GENERATOR_VERSION` *and* the key matches, which
includes the SHA-256 fingerprint of the network's every nonzero: a changed generator
can never be served a stale partition (it misses and partitions afresh).

Refresh after changing the generator or the partitioner (minutes)::

    python -m simcluster.partition.shipped scenarios/hsgd-graphchallenge.yaml \\
        scenarios/references/scenarios/spmv-haswell.yaml
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["shipped_dir", "shipped_path", "write_shipped", "MANIFEST", "NETWORK_OPTIONS"]

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


def _save_compact(path: Path, owners, phase_s, cut, parts: int) -> None:
    dtype = np.uint8 if parts <= 256 else np.uint16
    np.savez_compressed(
        path,
        owners=np.concatenate(owners).astype(dtype),
        phase_seconds=np.asarray(phase_s, dtype=np.float32).astype(np.float64),
        cut=np.asarray(cut, dtype=np.int64),
    )


def write_shipped(
    scenarios: list[str], folder: Path | None = None, cache_dir: str | None = None, log=print
) -> int:
    """Partition every hypergraph (network, P) job of ``scenarios`` into ``folder``.

    Partitions already in the user cache (``cache_dir``, default the usual folder)
    are copied rather than recomputed. Returns the number of manifest entries.
    """
    from simcluster.partition.network import cache_key, partition_network
    from simcluster.scenario import load_scenario
    from simcluster.schedules.spmv import network_for, spmv_specs
    from simcluster.workload.radixnet import GENERATOR_VERSION

    d = folder if folder is not None else shipped_dir()
    d.mkdir(parents=True, exist_ok=True)
    man = _manifest(d)
    if man.get("generator_version") != GENERATOR_VERSION:
        man = {}
    entries: dict = dict(man.get("entries", {}))
    for path in scenarios:
        sc = load_scenario(path)
        for label, o in spmv_specs(sc):
            if o.partitioner == "random":
                continue
            net = network_for(o)
            for p in sc.study.gpus:
                if p < 2:
                    continue
                key, settings = cache_key(
                    net, p, o.partitioner, o.epsilon, sc.seed, o.kahypar_config, o.mtkahypar_preset
                )
                if key in entries and (d / entries[key]["file"]).is_file():
                    continue
                part = partition_network(
                    net,
                    p,
                    o.partitioner,
                    o.epsilon,
                    sc.seed,
                    cache_dir=cache_dir,
                    kahypar_config=o.kahypar_config,
                    mtkahypar_preset=o.mtkahypar_preset,
                    threads=o.threads,
                    status=False,
                )
                name = f"{net.name}-P{p}-{o.partitioner}-s{sc.seed}-{key[:16]}.npz"
                _save_compact(d / name, part.owners, part.phase_seconds, part.cut, p)
                entries[key] = {
                    "file": name,
                    "options": {k: getattr(o, k) for k in NETWORK_OPTIONS},
                    "network": net.name,
                    "fingerprint": net.fingerprint,
                    "parts": p,
                    "backend": o.partitioner,
                    "epsilon": o.epsilon,
                    "seed": sc.seed,
                    "settings": settings,
                }
                log(f"{label} P={p}: {part.seconds:.1f} s -> {name}")
                (d / MANIFEST).write_text(
                    json.dumps(
                        {"generator_version": GENERATOR_VERSION, "entries": entries},
                        indent=1,
                        sort_keys=True,
                    )
                    + "\n"
                )
    return len(entries)


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    n = write_shipped(sys.argv[1:])
    print(f"{n} shipped partitions in {shipped_dir()}")

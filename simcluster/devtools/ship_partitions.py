"""Maintenance: write the shipped partition cache (``simcluster/partition/data/shipped``).

``python -m simcluster.devtools.ship_partitions SCENARIO [SCENARIO ...]`` partitions every
hypergraph (network, P) job of the scenarios' spmv schedules and stores them in the
compact form :mod:`simcluster.partition.shipped` reads. It reads scenarios and
schedules, so it lives above them (devtools), not in the partition layer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from simcluster.partition.shipped import (
    MANIFEST,
    NETWORK_OPTIONS,
    _manifest,
    _save_compact,
    shipped_dir,
)

__all__ = ["write_shipped", "main"]


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
                _save_compact(d / name, net, part.owners, part.phase_seconds, part.cut, p)
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


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - maintenance
    import argparse

    from simcluster.errors import UserError

    ap = argparse.ArgumentParser(
        prog="python -m simcluster.devtools.ship_partitions", description=__doc__
    )
    ap.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="scenario names or files")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        n = write_shipped(args.scenarios)
    except UserError as exc:
        print(f"ship_partitions: error: {exc}", file=sys.stderr)
        return 2
    print(f"{n} shipped partitions in {shipped_dir()}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

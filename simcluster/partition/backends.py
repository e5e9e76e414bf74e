"""Partitioner backends: ``kahypar``, ``mtkahypar`` and ``random``.

Each backend maps a :class:`PhaseHypergraph` to a part per row. Balance is
the paper's constraint (2) on row weights only: a part may hold at most
``floor((1 + epsilon) * ceil(W / k))`` nonzeros. The KaHyPar tools need every
vertex to weigh at least 1, so fixed vertices weigh 1 and each part's limit is
raised by the fixed vertices pinned to it; the row-weight bound is unchanged.

- ``kahypar``: KaHyPar (pip package ``kahypar``), direct k-way, connectivity
  objective, with the preset shipped in ``simcluster/partition/data`` (or a
  configuration file of your own).
- ``mtkahypar``: Mt-KaHyPar (pip package ``mtkahypar``), presets
  ``deterministic`` (reproducible; the default), ``default``, ``quality``.
- ``random``: the paper's SGD baseline (section 6.1: random partitioning "evenly
  splits" the rows by assigning them to processors uniformly at random): a seeded
  random permutation of the rows cut into ``k`` blocks whose sizes differ by at
  most one row (:func:`even_random_parts`).

A missing package raises :class:`MissingBackendError`, naming what to install.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import numpy as np

from simcluster.errors import UnknownNameError, UserError
from simcluster.partition.hypergraph import PhaseHypergraph

__all__ = [
    "BACKENDS",
    "MissingBackendError",
    "KAHYPAR_PRESET",
    "MTKAHYPAR_PRESETS",
    "partition_phase",
    "kahypar_config_path",
    "even_random_parts",
]

BACKENDS = ("kahypar", "mtkahypar", "random")
#: shipped KaHyPar configuration (package data)
KAHYPAR_PRESET = "kahypar_km1_direct_fast.ini"
MTKAHYPAR_PRESETS = ("deterministic", "default", "quality")


class MissingBackendError(UserError):
    """The partitioner's Python package is not installed."""

    def __init__(self, backend: str, package: str, exc: Exception | None = None) -> None:
        why = f" ({exc})" if exc else ""
        super().__init__(
            f"partitioner {backend!r} needs the Python package {package!r}, which cannot be "
            f"imported{why}; install it with: .venv/bin/pip install {package}"
        )


def kahypar_config_path(config: str | None = None) -> Path:
    """The KaHyPar .ini to use: ``config`` if given, else the shipped preset."""
    if config:
        p = Path(config)
        if not p.is_file():
            raise UserError(f"KaHyPar configuration file not found: {config}")
        from simcluster.errors import ConfigError
        from simcluster.inputs import read_text

        for n, line in enumerate(read_text(p, "KaHyPar configuration").splitlines(), 1):
            s = line.strip()
            if s and not s.startswith(("#", ";", "[")) and "=" not in s:
                raise ConfigError(
                    str(p), f"line {n}", s[:60], "not a KaHyPar .ini line", "key=value or # comment"
                )
        return p
    ref = resources.files("simcluster.partition") / "data" / KAHYPAR_PRESET
    return Path(str(ref))


def _targets(hg: PhaseHypergraph, k: int, epsilon: float) -> list[int]:
    """Per-part weight limits: the row-weight bound plus that part's fixed vertices."""
    cap = hg.max_part_weight(k, epsilon)
    if hg.fixed is None:
        return [cap] * k
    extra = np.bincount(hg.fixed, minlength=k)
    return [int(cap + extra[p]) for p in range(k)]


def _vertex_weights(hg: PhaseHypergraph) -> list[int]:
    w = np.maximum(hg.row_weight, 1).tolist()
    if hg.fixed is not None:
        w += [1] * hg.num_nets
    return w


def _seed32(seed: int) -> int:
    return int(seed % (2**31 - 1))


def _kahypar(hg: PhaseHypergraph, k: int, epsilon: float, seed: int, config: str | None):
    try:
        import kahypar
    except ImportError as exc:
        raise MissingBackendError("kahypar", "kahypar", exc) from None
    cfg = kahypar_config_path(config)
    pins = hg.net_pin_lists()
    ptr = np.concatenate(([0], np.cumsum([len(p) for p in pins]))).tolist()
    flat = [v for p in pins for v in p]
    h = kahypar.Hypergraph(
        hg.num_vertices,
        hg.num_nets,
        ptr,
        flat,
        k,
        [hg.net_cost] * hg.num_nets,
        _vertex_weights(hg),
    )
    if hg.fixed is not None:
        for t, part in enumerate(hg.fixed.tolist()):
            h.fixNodeToBlock(hg.rows + t, int(part))
    ctx = kahypar.Context()
    ctx.loadINIconfiguration(str(cfg))
    ctx.setK(k)
    ctx.setEpsilon(0.0)
    ctx.setCustomTargetBlockWeights(_targets(hg, k, epsilon))
    ctx.setSeed(_seed32(seed))
    ctx.suppressOutput(True)
    kahypar.partition(h, ctx)
    return np.fromiter((h.blockID(v) for v in range(hg.rows)), dtype=np.int64, count=hg.rows)


_MTK: dict[int, object] = {}


def _mtkahypar(hg: PhaseHypergraph, k: int, epsilon: float, seed: int, preset: str, threads):
    try:
        import mtkahypar
    except ImportError as exc:
        raise MissingBackendError("mtkahypar", "mtkahypar", exc) from None
    if preset not in MTKAHYPAR_PRESETS:
        raise UnknownNameError("mtkahypar preset", preset, list(MTKAHYPAR_PRESETS))
    if not _MTK:  # Mt-KaHyPar's thread pool is process-wide: start it once
        n = int(threads or os.cpu_count() or 1)
        _MTK[0] = mtkahypar.initialize(n, False)
    mtk = _MTK[0]
    kind = {
        "deterministic": mtkahypar.PresetType.DETERMINISTIC,
        "default": mtkahypar.PresetType.DEFAULT,
        "quality": mtkahypar.PresetType.QUALITY,
    }[preset]
    ctx = mtk.context_from_preset(kind)  # type: ignore[attr-defined]
    ctx.set_partitioning_parameters(k, max(epsilon, 1e-6), mtkahypar.Objective.KM1)
    ctx.set_individual_target_block_weights(_targets(hg, k, epsilon))
    ctx.logging = False
    mtkahypar.set_seed(_seed32(seed))
    h = mtk.create_hypergraph(  # type: ignore[attr-defined]
        ctx,
        hg.num_vertices,
        hg.num_nets,
        hg.net_pin_lists(),
        _vertex_weights(hg),
        [hg.net_cost] * hg.num_nets,
    )
    if hg.fixed is not None:
        h.add_fixed_vertices([-1] * hg.rows + hg.fixed.tolist(), k)
    ph = h.partition(ctx)
    return np.asarray(ph.get_partition()[: hg.rows], dtype=np.int64)


def even_random_parts(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Part of each of ``n`` items: a random permutation cut into ``k`` near-equal blocks.

    Every part gets ``n // k`` or ``n // k + 1`` items; which items is uniformly random.
    """
    out = np.empty(n, dtype=np.int64)
    out[rng.permutation(n)] = np.arange(n, dtype=np.int64) * k // max(n, 1)
    return out


def _random(hg: PhaseHypergraph, k: int, seed: int) -> np.ndarray:
    return even_random_parts(hg.rows, k, np.random.default_rng([seed, hg.rows, k]))


def partition_phase(
    hg: PhaseHypergraph,
    k: int,
    backend: str,
    epsilon: float = 0.01,
    seed: int = 0,
    kahypar_config: str | None = None,
    mtkahypar_preset: str = "deterministic",
    threads: int | None = None,
) -> np.ndarray:
    """Part (0..k-1) of every row of the phase."""
    if backend not in BACKENDS:
        raise UnknownNameError("partitioner", backend, list(BACKENDS))
    if k < 1:
        raise ValueError("k must be >= 1")
    if k == 1:
        return np.zeros(hg.rows, dtype=np.int64)
    if backend == "random":
        return _random(hg, k, seed)
    if hg.rows < k:
        raise UserError(
            f"cannot split {hg.rows} neurons into {k} non-empty parts with {backend}; "
            "use fewer ranks, more neurons, or the random partitioner"
        )
    if backend == "kahypar":
        return _kahypar(hg, k, epsilon, seed, kahypar_config)
    return _mtkahypar(hg, k, epsilon, seed, mtkahypar_preset, threads)

"""Compare published Graph Challenge sparse DNN layer files with this package's
RadiX-Net generator: structure, and Table 1 partition statistics (SpMV paper).

Reads ``n<N>-l<k>.tsv`` layer files (Graph Challenge TSV ``row<TAB>col<TAB>value``
or the MatrixMarket-headed copy of the same, 1-based ids) from a folder; nothing is
downloaded and no data ships with the package. File entry ``(i, j)`` joins input
neuron ``i`` to output neuron ``j`` (``Y W``), so it is ``W^k(j, i)`` here (rows are
output neurons, see :mod:`simcluster.workload.sparse`).

Usage (from the repository root; a few minutes of CPU for --layers 120)::

    python bench/graph_challenge_files.py /tmp/gc1024 --neurons 1024 --layers 12 \
        --parts 32 64

Prints, for the files and for ``graph_challenge_radixnet`` (same N and layers,
unpermuted and permuted): row / column degree sets, twin groups (rows with the
same inputs) per layer, how many layers are distinct matrices, the most input
twin groups of layer k + 1 that one output twin group of layer k meets (1 =
aligned), and then Table 1's average / max volume and message counts per rank
per layer for random rows (R) and hypergraph partitions (H: the repository's
partitioner with its shipped preset, epsilon 0.01; with ``--independent`` every
layer alone, inputs not pinned) with the H / R ratios. Partitions are not cached.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from simcluster.partition.backends import partition_phase
from simcluster.partition.comm import comm_plan, table1_metrics
from simcluster.partition.hypergraph import build_phase, input_owners
from simcluster.partition.network import NetworkPartition, partition_network
from simcluster.workload.radixnet import graph_challenge_radixnet
from simcluster.workload.sparse import SparseDNN, SparseLayer


def read_layer(path: Path, neurons: int) -> SparseLayer:
    """One layer file as ``W^k`` (rows = output neurons, 0-based)."""
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("%")]
    data = np.array([ln.split()[:2] for ln in lines], dtype=np.int64)
    if (
        data.shape[0]
        and data[0, 0] == neurons
        and data[0, 1] == neurons
        and len(lines[0].split()) == 3
    ):
        # MatrixMarket size line "rows cols nnz"
        if int(lines[0].split()[2]) == data.shape[0] - 1:
            data = data[1:]
    src, dst = data[:, 0] - 1, data[:, 1] - 1
    order = np.lexsort((src, dst))
    src, dst = src[order], dst[order]
    indptr = np.zeros(neurons + 1, dtype=np.int64)
    np.add.at(indptr, dst + 1, 1)
    return SparseLayer(neurons, neurons, np.cumsum(indptr), src.astype(np.int32))


def read_network(folder: Path, neurons: int, layers: int) -> SparseDNN:
    out = [read_layer(folder / f"n{neurons}-l{k}.tsv", neurons) for k in range(1, layers + 1)]
    return SparseDNN(name=f"gc-{neurons}x{layers}", layers=tuple(out), description="files")


def _classes(w: SparseLayer) -> tuple[np.ndarray, np.ndarray]:
    """Twin-group labels of the rows (same inputs) and of the columns (same outputs)."""
    d = np.zeros((w.rows, w.cols), dtype=np.int8)
    d[w.row_of_nnz, w.indices] = 1

    def label(m: np.ndarray) -> np.ndarray:
        packed = np.ascontiguousarray(np.packbits(m, axis=1))
        keys = packed.view(np.dtype((np.void, packed.shape[1]))).ravel()
        return np.unique(keys, return_inverse=True)[1].ravel()

    return label(d), label(d.T)


def structure(net: SparseDNN) -> dict:
    """Degree sets, twin groups per layer, distinct layers, and how the output twin
    groups of layer k fall on the input twin groups of layer k + 1 (1 = aligned)."""
    rdeg: set = set()
    cdeg: set = set()
    pats, keys, spread = [], [], []
    prev = None
    for w in net.layers:
        rdeg |= set(np.unique(w.row_nnz).tolist())
        cdeg |= set(np.unique(w.col_nnz).tolist())
        rl, cl = _classes(w)
        pats.append(int(rl.max()) + 1)
        keys.append(hash((w.indptr.tobytes(), w.indices.tobytes())))
        if prev is not None:
            spread.append(max(len(set(cl[prev == g].tolist())) for g in np.unique(prev)))
        prev = rl
    return {
        "row_degrees": sorted(rdeg),
        "col_degrees": sorted(cdeg),
        "twin_groups_min_max": (min(pats), max(pats)),
        "distinct_layers": len(set(keys)),
        "next_layer_groups_met_max": (min(spread), max(spread)) if spread else None,
    }


def _independent(net: SparseDNN, parts: int, backend: str) -> NetworkPartition:
    """Every layer partitioned alone (no input pinned where the previous layer put it)."""
    rows = [
        partition_phase(build_phase(w, None), parts, backend, 0.01, k)
        for k, w in enumerate(net.layers, start=1)
    ]
    owners = (input_owners(net.layers[0], rows[0], parts), *rows)
    zeros = (0.0,) * net.num_layers
    return NetworkPartition(net.name, parts, backend, 0.01, 0, owners, zeros, (0,) * len(zeros))


def table1(net: SparseDNN, parts: int, backend: str, independent: bool = False) -> tuple:
    t = time.process_time()
    reads: list = []
    if independent and backend != "random":
        part = _independent(net, parts, backend)
    else:
        part = partition_network(
            net, parts, backend, 0.01, 0, cache=False, status=False, reads=reads
        )
    m = table1_metrics(comm_plan(net, part, reads), part)
    return m, time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--neurons", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--parts", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--backend", default="kahypar", help="hypergraph backend (H rows)")
    ap.add_argument("--no-partition", action="store_true")
    ap.add_argument(
        "--independent",
        action="store_true",
        help="H: partition every layer alone (inputs not pinned to the previous layer)",
    )
    a = ap.parse_args()
    nets = {
        "files": read_network(a.folder, a.neurons, a.layers),
        "generator": graph_challenge_radixnet(a.neurons, a.layers, 32, permute=False),
        "generator-permuted": graph_challenge_radixnet(a.neurons, a.layers, 32, permute=True),
    }
    for name, net in nets.items():
        print(f"{name:20s} {structure(net)}")
    if a.no_partition:
        return
    print(f"\nTable 1 per layer ({a.layers} layers), H = {a.backend} eps 0.01, R = random rows")
    head = ("network", "P", "row", "avgV", "maxV", "avgM", "maxM")
    print("{:20s} {:>4s} {:3s} {:>8s} {:>8s} {:>7s} {:>7s}  cpu_s".format(*head))
    for name, net in nets.items():
        for p in a.parts:
            r, tr = table1(net, p, "random")
            h, th = table1(net, p, a.backend, a.independent)
            for lab, m, t in (("R", r, tr), ("H", h, th)):
                print(
                    f"{name:20s} {p:4d} {lab:3s} {m.avg_volume:8.1f} {m.max_volume:8.1f} "
                    f"{m.avg_messages:7.2f} {m.max_messages:7.2f}  {t:5.1f}"
                )
            print(
                f"{name:20s} {p:4d} H/R {h.avg_volume / r.avg_volume:8.2f} "
                f"{h.max_volume / r.max_volume:8.2f} {h.avg_messages / r.avg_messages:7.2f} "
                f"{h.max_messages / r.max_messages:7.2f}"
            )


if __name__ == "__main__":
    main()

"""Benchmark (not a test): whole published nccl-tests curves against `simcluster nccl-tests`.

Usage: python bench/nccl_curves.py [--curve NAME] [--rows] [--network-profile NAME]

``scenarios/references/nccl-tests.yaml`` scores single rows; this script compares
every row of complete public size sweeps (out-of-place time, us) with the
simulator's table on the topology, network profile and device profile the
reference cases use for the same machine (``--network-profile`` puts one network
profile on every curve, e.g. ``nccl-spec`` for the DGX-1 log as before NCCL 2.4's
selection was modelled). Per curve it prints (with ``--rows``)
measured vs predicted time and the signed error ``(predicted - measured) /
measured`` per row, then the median |error| and the worst signed error per curve
and per size band: small (<= 64 KiB), mid (64 KiB - 16 MiB, both ends exclusive)
and large (>= 16 MiB). Nothing here is fitted: the curves only read.

The curves (the rows are typed in from the logs; see each ``source``):

* ``dgx1-v100-g8``: 8 x V100-SXM2-16GB, DGX-1 hybrid cube-mesh, one process,
  ``all_reduce_perf -b 8 -e 128M -f 2 -g 8`` (2019, NCCL 2.4 era: LL and Simple
  only, no LL128; version not printed), on ``nccl-2.4-spec`` as its cases.
  github.com/konnase/konnase.github.io, source/_posts/deep_learning/NCCL.md.
* ``a100-nvswitch-g8``: 8 x A100-SXM4-40GB of one node (DGX A100 PCI bus ids
  07/0f/47/4e/87/90/b7/bd), one process, ``-b 1M -e 1G -f 2`` with nGpus 8 (the
  header line; NCCL version not printed). A recorded log used as a test fixture in
  the PKU-DAIR Hetu-Galvatron repository (hardware profiler test; path in the
  repository not resolved, found through the code index).
* ``h100-ndv5-g8-nvls``: 8 x H100 80GB HBM3 of one Azure ND H100 v5 VM (NVSwitch),
  NCCL 2.18.5, one process, ``NCCL_ALGO=NVLS all_reduce_perf -b 8 -e 8G -f 2 -g 8
  -n 40``; the published table gives only the in-place busbw (two decimals) of the
  rows 1 KiB - 8 GiB, so the measured time here is nccl-tests' own relation
  ``2 (n - 1) / n * size / busbw`` (rounding: about 7 % at 1 KiB, under 1 % from
  64 KiB), and the simulation is forced to the nvls algorithm as the run was.
  github.com/Azure/AI-benchmarking-guide, "Azure Results/NDv5 Results.md" at
  0126c3006397f3e01f7c39862eba9808e946f3cd (ND H100 v5 column).
* ``h100-msccl-doc-allgather`` and ``h100-msccl-doc-allreduce``: NCCL 2.18.1, 8 GPUs
  of one node, one process per GPU (``-g 1``), fp16, ``NCCL_MIN_NCHANNELS=32``,
  in-place times, 1 KiB - 1 GiB. github.com/Azure/msccl, docs/performance-ndmv4.md at
  cd1cea111f1929735c39d0153c049c922b602b02 ("1 node, 8 gpus/node", NCCL columns).
  The file is titled NDmv4 (A100) but its command loads ndv5-topo.xml and its 1 GiB
  rows (busbw 353 and 466 GB/s) exceed an A100's 300 GB/s of NVLink, so it is read
  as H100 (h100-nvswitch); the reference cases carry confidence low.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simcluster.collectives import CommContext  # noqa: E402
from simcluster.compute import load_network_profile, load_profile  # noqa: E402
from simcluster.errors import UserError  # noqa: E402
from simcluster.network.transport import with_transport  # noqa: E402
from simcluster.report.nccl_tests import run_nccl_tests  # noqa: E402
from simcluster.topology import load_topology  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20


@dataclass(frozen=True)
class Curve:
    """One published sweep: (size in bytes, value) rows, the value the out-of-place
    time in us unless ``column`` is ``busbw_GBps`` (then converted to a time)."""

    name: str
    source: str
    op: str
    topology: str
    nodes: int
    gpus_per_node: int | None  # None: the topology's own
    gpus_per_thread: int
    device_profile: str
    network_profile: str
    rows: tuple[tuple[int, float], ...]
    column: str = "time_us"  # or busbw_GBps (an allreduce table that prints only that)
    algorithm: str = "auto"  # NCCL_ALGO of the run

    def measured_us(self, size: int, value: float) -> float:
        """The row's time in us: as printed, or from an allreduce busbw (GB/s)."""
        if self.column == "time_us":
            return value
        n = self.nodes * (self.gpus_per_node or 0)
        return 2 * (n - 1) / n * size / (value * 1e3)


CURVES = (
    Curve(
        "dgx1-v100-g8",
        "github.com/konnase/konnase.github.io source/_posts/deep_learning/NCCL.md (2019-09-26)",
        "all_reduce", "dgx1-v100", 1, None, 8, "v100-sxm2-32gb", "nccl-2.4-spec",
        (
            (8, 48.46), (16, 48.61), (32, 48.48), (64, 48.92), (128, 48.13), (256, 48.47),
            (512, 48.56), (1024, 48.88), (2048, 49.40), (4096, 49.13), (8192, 49.14),
            (16384, 50.35), (32768, 51.06), (65536, 52.78), (131072, 56.56),
            (262144, 60.26), (524288, 61.48), (1048576, 89.27), (2097152, 119.6),
            (4194304, 147.4), (8388608, 203.8), (16777216, 324.1), (33554432, 550.8),
            (67108864, 992.7), (134217728, 1818.8),
        ),
    ),
    Curve(
        "a100-nvswitch-g8",
        "PKU-DAIR Hetu-Galvatron hardware-profiler test fixture (recorded all_reduce_perf log)",
        "all_reduce", "dgx-a100", 1, None, 8, "a100-80gb-sxm", "nccl-spec",
        (
            (1048576, 78.77), (2097152, 108.8), (4194304, 131.1), (8388608, 183.4),
            (16777216, 293.6), (33554432, 415.7), (67108864, 657.2), (134217728, 1256.7),
            (268435456, 2338.9), (536870912, 4651.2), (1073741824, 8139.9),
        ),
    ),
    Curve(
        "h100-ndv5-g8-nvls",
        "github.com/Azure/AI-benchmarking-guide 'Azure Results/NDv5 Results.md' @0126c30"
        " (in-place busbw)",
        "all_reduce", "h100-nvswitch", 1, 8, 8, "h100-sxm", "nccl-spec",
        (
            (1024, 0.07), (2048, 0.14), (4096, 0.27), (8192, 0.53), (16384, 0.95),
            (32768, 1.71), (65536, 2.72), (131072, 5.40), (262144, 10.86), (524288, 21.35),
            (1048576, 43.70), (2097152, 81.93), (4194304, 128.73), (8388608, 172.13),
            (16777216, 234.45), (33554432, 295.53), (67108864, 361.78),
            (134217728, 400.61), (268435456, 423.38), (536870912, 438.46),
            (1073741824, 466.35), (2147483648, 472.36), (4294967296, 475.54),
            (8589934592, 478.87),
        ),
        "busbw_GBps", "nvls",
    ),
    Curve(
        "h100-msccl-doc-allgather",
        "github.com/Azure/msccl docs/performance-ndmv4.md @cd1cea1 (NCCL all-gather, in-place)",
        "all_gather", "h100-nvswitch", 1, 8, 1, "h100-sxm", "nccl-spec",
        (
            (1024, 9.54), (2048, 9.8), (4096, 9.78), (8192, 9.78), (16384, 10.29),
            (32768, 12.49), (65536, 12.87), (131072, 13.16), (262144, 13.23),
            (524288, 13.39), (1048576, 18.33), (2097152, 23.18), (4194304, 33.66),
            (8388608, 44.7), (16777216, 67.19), (33554432, 104.7), (67108864, 192.4),
            (134217728, 368.3), (268435456, 699.5), (536870912, 1358.6),
            (1073741824, 2663.8),
        ),
    ),
    Curve(
        "h100-msccl-doc-allreduce",
        "github.com/Azure/msccl docs/performance-ndmv4.md @cd1cea1 (NCCL fp16 allreduce, in-place)",
        "all_reduce", "h100-nvswitch", 1, 8, 1, "h100-sxm", "nccl-spec",
        (
            (1024, 13.12), (2048, 14.39), (4096, 15.28), (8192, 15.69), (16384, 16.64),
            (32768, 19.3), (65536, 20.0), (131072, 20.42), (262144, 20.5),
            (524288, 29.89), (1048576, 31.94), (2097152, 37.95), (4194304, 49.28),
            (8388608, 77.01), (16777216, 116.0), (33554432, 187.2), (67108864, 317.4),
            (134217728, 572.5), (268435456, 1079.0), (536870912, 2071.1),
            (1073741824, 4028.7),
        ),
    ),
)  # fmt: skip

BANDS = (
    ("<= 64K", lambda s: s <= 64 * KIB),
    ("64K-16M", lambda s: 64 * KIB < s < 16 * MIB),
    (">= 16M", lambda s: s >= 16 * MIB),
)


def predict(c: Curve, network_profile: str | None = None) -> list[dict]:
    """The simulator's rows for the curve's sizes (as `simcluster nccl-tests`), on
    ``network_profile`` instead of the curve's own when given."""
    cluster = load_topology(c.topology, num_nodes=c.nodes)
    if c.gpus_per_node is not None and cluster.ranks_per_node != c.gpus_per_node:
        raise SystemExit(f"{c.name}: topology has {cluster.ranks_per_node} GPUs per node")
    netp = load_network_profile(network_profile or c.network_profile)
    ctx = CommContext.from_profile(cluster, with_transport(netp, cluster))
    launch = load_profile(c.device_profile).launch_overhead if c.gpus_per_thread > 1 else 0.0
    sizes = [s for s, _ in c.rows]
    g = c.gpus_per_thread
    return run_nccl_tests(
        ctx, c.op, sizes, "maxmin", c.algorithm, gpus_per_thread=g, launch_s=launch
    )


def _summary(errs: list[float]) -> str:
    if not errs:
        return "      -                 -"
    worst = max(errs, key=abs)
    med = statistics.median(abs(e) for e in errs)
    return f"{med * 100:6.1f} %  worst {worst * 100:+7.1f} %  ({len(errs)} rows)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--curve", choices=[c.name for c in CURVES], help="one curve only")
    ap.add_argument("--rows", action="store_true", help="print every row")
    ap.add_argument("--network-profile", help="one network profile for every curve")
    args = ap.parse_args(argv)
    every: list[tuple[int, float]] = []
    for c in CURVES:
        if args.curve and c.name != args.curve:
            continue
        netp = args.network_profile or c.network_profile
        try:
            pred = predict(c, args.network_profile)
        except UserError as exc:  # e.g. the curve's forced algorithm on a profile without it
            print(f"## {c.name}: skipped on {netp}: {exc}")
            continue
        errs = []
        print(f"## {c.name}: {c.op}, {c.topology} x {c.nodes}, -g {c.gpus_per_thread}, {netp}")
        print(f"#  {c.source}")
        if args.rows:
            print(f"#{'size':>11}  {'measured':>9}  {'predicted':>9}  {'error':>8}  algorithm")
        for (size, value), row in zip(c.rows, pred, strict=True):
            meas = c.measured_us(size, value)
            err = (row["time_us"] - meas) / meas
            errs.append((size, err))
            if args.rows:
                print(
                    f"{size:>12}  {meas:>9.2f}  {row['time_us']:>9.2f}  {err * 100:>+7.1f}%"
                    f"  {row['algorithm']}"
                )
        print(f"   all       : {_summary([e for _, e in errs])}")
        for band, inside in BANDS:
            print(f"   {band:<10}: {_summary([e for s, e in errs if inside(s)])}")
        every.extend(errs)
    if not args.curve:
        print("## every curve")
        print(f"   all       : {_summary([e for _, e in every])}")
        for band, inside in BANDS:
            print(f"   {band:<10}: {_summary([e for s, e in every if inside(s)])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

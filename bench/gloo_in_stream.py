"""Benchmark (not a test): what a gloo allgather costs inside a stream of compute, against
the aligned calls the calibration sweep times.

Usage: python bench/gloo_in_stream.py [--nproc 4,8] [--sizes 8,188744] [--trials 4]
       [--calls 10]

For each process count, ``--nproc`` processes on this host (gloo over loopback, 1 torch
thread each) make ``--calls`` allgathers per trial of each size (bytes per rank) in five
arrangements, one after the other in the same processes:

- ``sweep``: barrier, call (what ``calibrate.gloo``'s sweep times);
- ``computed``: barrier, compute, call, barrier (its after-compute test, ``wake_by_bytes``);
- ``barrier_after``: compute, call, barrier, compute (peers that finish early block);
- ``aligned``: barrier, compute, call, compute (peers that finish early compute);
- ``stream``: compute, call, compute (no barrier: the live Top-K loop's shape).

The compute is one top-k of 10,000 out of 2^20 floats (a few ms). A call's time is the
least over the ranks (from the last rank's arrival, as live validation scores it); the
mean and median over every call are printed, in ms. Issue 15: the collectives of live
runs at 4 and 8 processes on 2 cores take up to 2x the sweep's time for the same size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

MODES = ("sweep", "computed", "barrier_after", "aligned", "stream")


def _worker(rank: int, size: int, port: int, cfg: dict, q) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    grad = torch.randn(1 << 20)

    def compute() -> None:
        torch.topk(grad.abs(), 10_000, sorted=False)

    out: dict[str, dict[str, list[float]]] = {}
    for n in cfg["sizes"]:
        x = torch.ones(max(1, n // 4))
        o = torch.empty(size * x.numel())
        for _ in range(5):
            ag(o, x)
        res: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(cfg["trials"]):
            for mode in MODES:
                dist.barrier()
                for _ in range(cfg["calls"]):
                    if mode in ("sweep", "computed", "aligned"):
                        dist.barrier()
                    if mode != "sweep":
                        compute()
                    t0 = time.perf_counter()
                    ag(o, x)
                    res[mode].append(time.perf_counter() - t0)
                    if mode in ("computed", "barrier_after"):
                        dist.barrier()
                    if mode in ("barrier_after", "aligned", "stream"):
                        compute()
        out[str(n)] = res
    q.put((rank, out))
    dist.destroy_process_group()


def run(nproc: int, cfg: dict) -> dict[str, dict[str, list[float]]]:
    """Per size and mode, every call's least time over the ranks (seconds)."""
    import torch.multiprocessing as mp
    from simcluster.calibrate.gloo import free_port

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_worker, args=(r, nproc, port, cfg, q)) for r in range(nproc)]
    for p in procs:
        p.start()
    per_rank = dict(q.get() for _ in procs)
    for p in procs:
        p.join()
    calls = {}
    for n, res in per_rank[0].items():
        calls[n] = {
            m: [min(per_rank[r][n][m][i] for r in per_rank) for i in range(len(res[m]))]
            for m in MODES
        }
    return calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", default="4,8", help="process counts, comma-separated")
    ap.add_argument("--sizes", default="8,188744", help="bytes per rank, comma-separated")
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--calls", type=int, default=10, help="calls per trial and arrangement")
    a = ap.parse_args(argv)
    try:
        procs = [int(p) for p in a.nproc.split(",")]
        sizes = [int(s) for s in a.sizes.split(",")]
    except ValueError:
        ap.error("--nproc and --sizes take comma-separated integers")
    if min(procs) < 2 or min(sizes) < 4 or a.trials < 1 or a.calls < 1:
        ap.error("--nproc >= 2, --sizes >= 4 bytes, --trials and --calls >= 1")
    cfg = {"sizes": sizes, "trials": a.trials, "calls": a.calls}
    print("procs  bytes/rank  arrangement     mean ms  median ms  load")
    for p in procs:
        for n, res in run(p, cfg).items():
            load = os.getloadavg()[0]
            for m in MODES:
                v = [t * 1e3 for t in res[m]]
                print(
                    f"{p:5d}  {int(n):10d}  {m:14s}  {statistics.mean(v):7.2f}  "
                    f"{statistics.median(v):9.2f}  {load:4.1f}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark (not a test): what a small gloo allreduce costs the last rank to arrive,
by how long every rank computed before it and whether its peers computed or waited.

Usage: python bench/gloo_after_compute.py [--nproc 2,4] [--trials 15]
       [--cases 5:0,50:0,300:0,50:45,300:295] [--kinds matmul,copy,topk]

For each process count, ``--nproc`` processes on this host (gloo over loopback, 1
torch thread each) run, per case ``T:C`` and trial: a barrier, then rank 0 computes
``T`` ms and every other rank ``C`` ms of one kind of work (``matmul``: 64 x 64 fp32
matmuls; ``copy``: copies of a 32 MiB buffer, memory-bound; ``topk``: top-k of
512-element vectors, many small calls), then all
call ``all_reduce`` on 16 bytes. Rank 0 arrives last when ``T > C`` and times its
own call (seconds, ``time.perf_counter``); the median over the trials is printed.
``C = 0`` leaves the peers blocked in the call for about ``T`` ms; ``C = T - 5``
has them compute almost as long as rank 0. Issue 15 asks what a collective right
after compute costs on a host whose processes share few cores: this separates the
caller's compute length from what its peers did meanwhile.
"""

from __future__ import annotations

import argparse
import statistics
import time


def _busy(ms: float, kind: str) -> None:
    """Work of ``kind`` for ``ms`` milliseconds of wall time."""
    import torch

    end = time.perf_counter() + ms / 1e3
    if kind == "copy":
        src, dst = torch.ones(8 << 20), torch.empty(8 << 20)
        while time.perf_counter() < end:
            dst.copy_(src)
    elif kind == "topk":
        v = torch.randn(512)
        while time.perf_counter() < end:
            torch.topk(v, 64)
    else:
        a = torch.randn(64, 64)
        while time.perf_counter() < end:
            a = a @ a
            a = a / (a.norm() + 1)


def _worker(rank: int, nproc: int, port: int, cases, kinds, trials: int, queue) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=nproc
    )
    x = torch.zeros(4)
    out = {}
    for kind in kinds:
        for t_ms, c_ms in cases:
            times = []
            for _ in range(trials):
                dist.barrier()
                _busy(t_ms if rank == 0 else c_ms, kind)
                t0 = time.perf_counter()
                dist.all_reduce(x)
                times.append(time.perf_counter() - t0)
            out[(kind, t_ms, c_ms)] = statistics.median(times)
    if rank == 0:
        queue.put(out)
    dist.destroy_process_group()


def _cases(text: str) -> list[tuple[float, float]]:
    out = []
    for part in text.split(","):
        t, _, c = part.partition(":")
        out.append((float(t), float(c or 0)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", default="2,4", help="comma list of process counts")
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--cases", default="5:0,50:0,300:0,50:45,300:295", help="T:C ms pairs")
    ap.add_argument("--kinds", default="matmul", help="comma list of matmul, copy, topk")
    args = ap.parse_args()
    import torch.multiprocessing as mp
    from simcluster.calibrate.gloo import free_port

    cases = _cases(args.cases)
    kinds = args.kinds.split(",")
    bad = [k for k in kinds if k not in ("matmul", "copy", "topk")]
    if bad:
        raise SystemExit(f"--kinds: unknown kind {bad[0]!r}; allowed: matmul, copy, topk")
    print("procs  kind    rank 0 ms  peers ms  last arriver's allreduce ms (median)")
    for nproc in (int(p) for p in args.nproc.split(",")):
        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        port = free_port()
        procs = [
            ctx.Process(target=_worker, args=(r, nproc, port, cases, kinds, args.trials, queue))
            for r in range(nproc)
        ]
        for p in procs:
            p.start()
        res = queue.get()
        for p in procs:
            p.join()
        for (kind, t_ms, c_ms), sec in res.items():
            print(f"{nproc:5d}  {kind:6s}  {t_ms:9.0f}  {c_ms:8.0f}  {sec * 1e3:10.2f}")


if __name__ == "__main__":
    main()

"""Measure gloo on this host: collectives at several process counts, and CPU sharing.

``python -m calibrate.gloo --nproc 2,4,8 --out calibrate/profiles/network/gloo-host.json``
spawns P gloo processes (TCP loopback, one torch thread each, as ``calibrate.live``
runs them) for each P and times, through the same torch.distributed calls the live
patterns make:

- ``allreduce`` (``dist.all_reduce``), ``allgather`` (``all_gather_into_tensor``)
  and ``broadcast`` (``dist.broadcast``) over a sweep of sizes; every rank times
  its own call after a barrier, and a sample is the least time over ranks (the
  collective's cost from the last rank's arrival, without the wait for it);
- a skewed-arrival call per op (4 KiB; the last rank computes first while the others
  block): what waking blocked peers adds to a call (``wake_s``);
- an after-compute call per op (4, 32 and 256 KiB; every rank computes first, as in a
  stream of collectives between compute): over the aligned call of the same size, what a
  call costs when its processes' threads wake on a busy host (``wake_by_bytes``);
- ``compute``: the same CPU job (a 3x3 convolution forward + backward) timed on
  every rank at once (wall), and on rank 0 alone (thread CPU time) while the others
  sleep in a barrier: their ratio is the CPU-sharing factor at P processes here.

The sweep is fitted to the gloo cost model of :mod:`simcluster.network.gloo`
(per-message seconds ``alpha`` and per-byte seconds ``beta`` per process count;
message counts and bytes per algorithm from that module) and written, with every
sample and the provenance, as a network profile. The fit uses these
microbenchmarks only; no live-run phase enters it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "measure", "fit", "free_port"]

OPS = ("allreduce", "allgather", "broadcast")
#: bytes per rank (allgather: each rank's contribution)
SIZES = [16, 256, 4096, 32768, 262144, 1 << 20, 4 << 20, 16 << 20]


#: largest size per op in a live run's own sweep (bytes per rank): the patterns'
#: allgathers stay below 1 MiB, their allreduces and broadcasts go beyond 16 MiB
LIVE_MAX = {"allreduce": 16 << 20, "allgather": 1 << 20, "broadcast": 16 << 20}


#: the skewed-arrival test: its first size, and the suffix of its op names in the samples
SKEW_BYTES = 4096
SKEWED = "~skewed"  # as simcluster.network.gloo.SKEWED
#: the after-compute test: every rank computes the job once, then calls, as in a stream
#: of collectives between compute (fused buffers, Top-K allgathers); its sizes (bytes per
#: rank) and the suffix of its op names in the samples
COMPUTED_SIZES = [SKEW_BYTES, 32768, 262144]
COMPUTED = "~computed"  # as simcluster.network.gloo.COMPUTED


class _Job:
    """The CPU job of the sharing test: conv 3x3 64->64 on 8x64x16x16, fwd + bwd."""

    def __init__(self, torch) -> None:
        gen = torch.Generator().manual_seed(0)
        self.conv = torch.nn.Conv2d(64, 64, 3, padding=1)
        self.x = torch.randn(8, 64, 16, 16, generator=gen)

    def __call__(self, reps: int, clock=time.perf_counter) -> float:
        t0 = clock()
        for _ in range(reps):
            self.conv(self.x).sum().backward()
        return clock() - t0


def sweep(sizes: list[int], reps: int, max_bytes: dict[str, int] | None = None) -> dict[str, Any]:
    """This rank's seconds per call, per op and size, in an initialised gloo world.

    Every rank calls it at once. Each call follows a barrier and is timed from this
    rank's arrival. Returns ``{op: [{"nbytes", "samples_s"}]}``.
    """
    import torch
    import torch.distributed as dist

    size = dist.get_world_size()
    ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    warm = torch.ones(1 << 14)
    for _ in range(10):
        dist.all_reduce(warm)
    out: dict[str, Any] = {}
    for op in OPS:
        rows = []
        for n in sizes:
            if max_bytes and n > max_bytes.get(op, n):
                continue
            x = torch.ones(max(1, n // 4))
            o = torch.empty(size * x.numel()) if op == "allgather" else None

            def call(x=x, o=o, op=op):
                _collective(dist, ag, op, x, o)

            for _ in range(2):
                call()
            ts = []
            r = reps if n <= (1 << 20) else max(3, (reps + 1) // 2)
            for _ in range(r):
                dist.barrier()
                t0 = time.perf_counter()
                call()
                ts.append(time.perf_counter() - t0)
            rows.append({"nbytes": n, "samples_s": ts})
        out[op] = rows
        # skewed arrival: the last rank computes first (the others block, asleep), as in
        # training, where a collective follows each rank's own compute; per size
        out[f"{op}{SKEWED}"] = skewed(op, [SKEW_BYTES], 2 * reps)
        # after compute on every rank: the collective's threads wake on a busy host
        out[f"{op}{COMPUTED}"] = skewed(op, COMPUTED_SIZES, 2 * reps, everyone=True)
    return out


def skewed(op: str, sizes: list[int], calls: int, everyone: bool = False) -> list[dict[str, Any]]:
    """This rank's seconds per call of ``op`` when the last rank (``everyone``: every
    rank) computes the sharing test's job once before each call (a rank that finishes
    first waits inside the collective), per size: ``[{"nbytes", "samples_s"}]``. Every
    rank calls it at once."""
    import torch
    import torch.distributed as dist

    size = dist.get_world_size()
    ag = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    job = _Job(torch)
    rows = []
    for n in sizes:
        x = torch.ones(max(1, n // 4))
        o = torch.empty(size * x.numel()) if op == "allgather" else None
        _collective(dist, ag, op, x, o)
        ts = []
        for _ in range(calls):
            dist.barrier()
            if everyone or dist.get_rank() == size - 1:
                job(1)
            t0 = time.perf_counter()
            _collective(dist, ag, op, x, o)
            ts.append(time.perf_counter() - t0)
        rows.append({"nbytes": n, "samples_s": ts})
    return rows


def _collective(dist: Any, ag: Any, op: str, x: Any, o: Any) -> None:
    """One call of ``op`` on tensor ``x`` (``o``: the allgather output), root 0."""
    if op == "allreduce":
        dist.all_reduce(x)
    elif op == "allgather":
        ag(o, x)
    else:
        dist.broadcast(x, src=0)


def sharing(rounds: int, reps: int) -> dict[str, list[float]]:
    """This rank's wall seconds for the CPU job run by every rank at once, and (rank 0
    only) its thread CPU seconds run alone while the others wait in a barrier: the
    factor is wall time shared over the CPU time a device profile (``--clock cpu``)
    holds, so it includes whatever else this host runs at the time."""
    import torch
    import torch.distributed as dist

    job = _Job(torch)
    job(3)
    together, alone, alone_wall = [], [], []
    for _ in range(rounds):
        dist.barrier()
        together.append(job(reps))
    for _ in range(rounds):
        dist.barrier()
        if dist.get_rank() == 0:  # thread CPU time, the device profile's clock
            t0 = time.perf_counter()
            alone.append(job(reps, time.thread_time))
            alone_wall.append(time.perf_counter() - t0)
        dist.barrier()
    return {"together_s": together, "alone_s": alone, "alone_wall_s": alone_wall}


def reduce_ranks(per_rank: list[dict[str, Any]], reps_job: int) -> dict[str, Any]:
    """Every rank's ``{"ops": sweep(), "compute": sharing()}`` -> one world's medians.

    A call's sample is the least time over ranks: from the last rank's arrival to
    the end, without the wait for it.
    """
    ops: dict[str, Any] = {}
    for op, rows0 in per_rank[0]["ops"].items():
        rows = []
        for i, row in enumerate(rows0):
            calls = list(zip(*(g["ops"][op][i]["samples_s"] for g in per_rank), strict=True))
            samples = [min(c) for c in calls]
            means = [statistics.mean(c) for c in calls]
            rows.append(
                {
                    "nbytes": row["nbytes"],
                    "mean_s": statistics.mean(samples),
                    "median_s": statistics.median(samples),
                    "samples_s": [round(s, 7) for s in samples],
                    "rank_mean_median_s": statistics.median(means),
                }  # fmt: skip
            )
        ops[op] = rows
    together = [statistics.mean(s) for s in zip(*(g["compute"]["together_s"] for g in per_rank),
                                                strict=True)]  # fmt: skip
    alone = per_rank[0]["compute"]["alone_s"]
    alone_wall = per_rank[0]["compute"].get("alone_wall_s") or []
    wall = {}
    if alone_wall:  # against a wall-clock time taken alone (a trace): wall over wall
        ratio = statistics.median(together) / statistics.median(alone_wall)
        wall = {"alone_wall_s": alone_wall, "factor_wall": ratio}
    return {
        "world": len(per_rank),
        "ops": ops,
        "compute": {
            "job": f"{reps_job} x conv3x3 64->64 on 8x64x16x16, forward + backward, 1 torch thread",
            "together_s": together,
            "alone_s": alone,
            "factor": statistics.median(together) / statistics.median(alone),
            **wall,
        },
    }


def _worker(rank: int, size: int, cfg: dict[str, Any], init: str, q) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=size)
    out = {
        "ops": sweep(cfg["sizes"], cfg["reps"], cfg.get("max_bytes")),
        "compute": sharing(cfg["compute_rounds"], cfg["compute_reps"]),
    }
    gathered: list[Any] = [None] * size
    dist.all_gather_object(gathered, out)
    if rank == 0:
        q.put(gathered)
    dist.barrier()
    dist.destroy_process_group()


def free_port() -> int:
    """A TCP port on 127.0.0.1 free at this moment, for a local process group's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(nproc: int, cfg: dict[str, Any]) -> dict[str, Any]:
    """One world of ``nproc`` processes: per op and size the per-rank samples, and the
    compute-sharing samples. Returns medians as well as the raw samples."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    init = f"tcp://127.0.0.1:{free_port()}"
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    mp.start_processes(_worker, args=(nproc, cfg, init, q), nprocs=nproc, join=True,
                       start_method="spawn")  # fmt: skip
    gathered = q.get()
    res = reduce_ranks(gathered, cfg["compute_reps"])
    res.update({"loadavg_1min_start": load0, "loadavg_1min_end": os.getloadavg()[0],
                "seconds": round(time.perf_counter() - t0, 1)})  # fmt: skip
    return res


def fit(worlds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per process count and op: the gloo model's constants (alpha, beta, wake-up
    costs) from the sweep's samples; :func:`simcluster.network.gloo.fit_worlds`."""
    from simcluster.network.gloo import fit_worlds

    return fit_worlds(worlds)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m calibrate.gloo", description=__doc__)
    p.add_argument("--nproc", default="2,4,8", help="comma list of process counts")
    p.add_argument("--reps", type=int, default=9, help="timed calls per op and size")
    p.add_argument("--compute-rounds", type=int, default=5)
    p.add_argument("--compute-reps", type=int, default=20)
    p.add_argument("--out", default="calibrate/profiles/network/gloo-host.json")
    p.add_argument("--raw", help="also write the raw measurements here")
    p.add_argument("--from-raw", help="refit a raw file instead of measuring")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out / --raw")
    a = p.parse_args(argv)
    for flag, value in (("--reps", a.reps), ("--compute-rounds", a.compute_rounds),
                        ("--compute-reps", a.compute_reps)):  # fmt: skip
        if value < 1:
            print(f"calibrate.gloo: {flag}: out of range (got {value}); allowed: an integer >= 1",
                  file=sys.stderr)  # fmt: skip
            return 2
    from simcluster.atomic import output_file_problem

    problem = output_file_problem((("--out", a.out or None), ("--raw", a.raw or None)), a.force)
    if problem:
        print(f"calibrate.gloo: {problem}", file=sys.stderr)
        return 2
    try:
        procs = [int(x) for x in a.nproc.split(",") if x.strip()]
    except ValueError:
        print(f"calibrate.gloo: --nproc {a.nproc!r}: give a comma list of integers",
              file=sys.stderr)  # fmt: skip
        return 2
    if not procs or any(n < 2 for n in procs):
        print("calibrate.gloo: --nproc values must be >= 2 (a comma list, e.g. 2,4,8)",
              file=sys.stderr)  # fmt: skip
        return 2
    cfg = {"sizes": SIZES, "reps": a.reps, "compute_rounds": a.compute_rounds,
           "compute_reps": a.compute_reps}  # fmt: skip
    if a.from_raw:
        raw = _read_raw(a.from_raw)
        if isinstance(raw, str):
            print(f"calibrate.gloo: --from-raw {a.from_raw}: {raw}", file=sys.stderr)
            return 2
    else:
        t0 = time.perf_counter()
        worlds = []
        for n in procs:
            print(f"calibrate.gloo: {n} processes ...", file=sys.stderr, flush=True)
            worlds.append(measure(n, cfg))
        raw = {
            "config": cfg,
            "worlds": worlds,
            "machine": _machine(),
            "duration_s": round(time.perf_counter() - t0, 1),
            "command": "python -m calibrate.gloo "
            + " ".join(sys.argv[1:] if argv is None else argv),  # fmt: skip
        }
        if a.raw:
            Path(a.raw).parent.mkdir(parents=True, exist_ok=True)
            Path(a.raw).write_text(json.dumps(raw, indent=1) + "\n")
    try:
        prof = profile(raw, Path(a.out).stem)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        if not a.from_raw:  # our own measurement: a bug, not the user's file
            raise
        print(f"calibrate.gloo: --from-raw {a.from_raw}: not a raw file of `--raw` "
              f"({type(exc).__name__}: {exc})", file=sys.stderr)  # fmt: skip
        return 2
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(prof, indent=1) + "\n")
    for k, v in prof["network"]["gloo"]["worlds"].items():
        print(f"P={k}: cpu share x{v['cpu_share_factor']:.2f}")
        for op in OPS:
            f = v[op]
            print(
                f"  {op:10s} alpha {f['alpha_s'] * 1e6:8.1f} us/message, "
                f"beta {f['beta_s_per_byte'] * 1e9:.3f} ns/byte; fit median |err| "
                f"{f['rel_err_median'] * 100:.1f}%, max {f['rel_err_max'] * 100:.1f}%"
            )
    print(f"calibrate.gloo: wrote {a.out}")
    return 0


def _read_raw(path: str) -> dict[str, Any] | str:
    """A raw file written by ``--raw``, or what is wrong with it (one line)."""
    from simcluster.errors import UserError
    from simcluster.inputs import load_json

    try:
        raw = load_json(path, "raw gloo measurement file")
    except UserError as exc:
        return str(exc).removeprefix(f"{path}: ")
    keys = ("config", "worlds", "machine", "command", "duration_s")
    missing = [k for k in keys if not isinstance(raw, dict) or k not in raw]
    if missing:
        return f"not a raw file of `--raw` (no {', '.join(missing)})"
    if not isinstance(raw["machine"], dict) or not isinstance(raw["worlds"], list):
        return "not a raw file of `--raw` (machine is a mapping, worlds a list)"
    return raw


def _machine() -> dict[str, Any]:
    import torch

    from .runner import cpu_model

    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": 1,
        "python": sys.version.split()[0],
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def profile(raw: dict[str, Any], name: str = "gloo-host") -> dict[str, Any]:
    """The network profile (schema 1) with the gloo model constants and the samples."""
    cores = int(raw["machine"]["cpus"])
    fits = fit(raw["worlds"])
    return {
        "schema_version": 1,
        "name": name,
        "kind": "measured",
        "provenance": {
            "description": "gloo over TCP loopback between local processes (1 torch "
            f"thread each) on {raw['machine']['cpu_model']}, {cores} cores",
            "backend": "gloo",
            "machine": raw["machine"],
            "command": raw["command"],
            "duration_s": raw["duration_s"],
            "method": "per process count P: every op and size timed through "
            "torch.distributed after a barrier (per call the least time over ranks: from "
            "the last rank's arrival to the end; mean of the calls); per op, t = alpha * "
            "messages + beta * bytes with messages and bytes on the critical path from "
            "simcluster.network.gloo.cost_terms: alpha = mean seconds per message over "
            "the sizes <= 4 KiB, beta = (t - alpha * messages) / bytes at the largest size "
            "(>= 1 MiB; simcluster.network.gloo.fit_alpha_beta); wake_s = the "
            "skewed-arrival test (the last rank computes the conv job once first) at "
            "4 KiB minus the fit there; wake_by_bytes = the after-compute test (every "
            "rank computes the conv job once, then calls) at 4, 32 and 256 KiB minus the "
            "aligned calls of the same size; cpu_share_factor = the same conv job's wall time "
            "on every rank at once over its thread CPU time alone (median of rounds)",
            "loadavg_1min": {
                str(w["world"]): [w["loadavg_1min_start"], w["loadavg_1min_end"]]
                for w in raw["worlds"]
            },  # fmt: skip
        },
        "network": {
            # the engine's links (localhost topology) are not used by the gloo model
            "per_message_overhead_s": 0.0,
            "link_efficiency": {"memory": 1.0},
            "gloo": {
                "cores": cores,
                "worlds": fits,
            },
        },
        "samples": {
            str(w["world"]): {"ops": w["ops"], "compute": w["compute"]} for w in raw["worlds"]
        },  # fmt: skip
    }


if __name__ == "__main__":
    raise SystemExit(main())

"""Collective sweeps with torch.distributed, fitted to ``t = alpha + n * beta``.

Two ways to run:

* :func:`run_local` spawns ``world`` processes on this host (gloo on CPU tensors, or
  NCCL with one GPU each) -- what ``simcluster calibrate`` does;
* ``torchrun ... -m calibrate.collectives --out NET.json`` on a cluster: every rank runs
  :func:`main`; the sweep covers the whole job (``world``), each node's ranks
  (``intra``, all nodes at once) and one rank per node (``inter``), and rank 0 writes the
  network profile (``calibrate/jobs/`` has the Slurm script).

Sizes ``n`` are bytes of each rank's buffer: the allreduce / broadcast tensor, the
allgather contribution (the output is ``world x n``). A sample is the slowest rank's
time (barrier, ``inner`` calls, device sync; max over ranks). Each size is measured in
``rounds`` interleaved passes; the estimate is the median of the quietest round (the
smallest round median), because this kind of machine has phases of heavy interference
from neighbours that only ever slow a run down.

Fits per (scope, op): ``alpha_s`` (seconds) and ``beta_s_per_byte`` (seconds per byte);
``bus_bandwidth`` (bytes/s) is nccl-tests' bus bandwidth of the fitted asymptote
(allreduce ``2(p-1)/p / beta``, allgather ``(p-1) / beta``, broadcast ``1 / beta``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

__all__ = [
    "OPS",
    "default_sizes",
    "sweep",
    "run_local",
    "fit_sweep",
    "network_profile",
    "main",
]

OPS = ("allreduce", "allgather", "broadcast")


def default_sizes(max_bytes: int, min_bytes: int = 8, factor: int = 8) -> list[int]:
    """Message sizes (bytes) from ``min_bytes`` growing by ``factor`` up to ``max_bytes``."""
    sizes, n = [], min_bytes
    while n < max_bytes:
        sizes.append(n)
        n *= factor
    sizes.append(max_bytes)
    return sizes


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _op_call(op: str, x: torch.Tensor, out: list[torch.Tensor] | None, group, src: int):
    if op == "allreduce":
        return lambda: dist.all_reduce(x, group=group)
    if op == "allgather":
        return lambda: dist.all_gather(out, x, group=group)
    if op == "broadcast":
        return lambda: dist.broadcast(x, src=src, group=group)
    raise ValueError(f"unknown collective {op!r}")


def sweep(
    device: torch.device,
    sizes: list[int],
    ops: tuple[str, ...] = OPS,
    group=None,
    rounds: int = 3,
    reps: int = 5,
    min_sample_s: float = 2e-3,
) -> dict[str, dict[int, list[list[float]]]]:
    """Seconds per call for each op and size: ``{op: {nbytes: [round samples]}}``.

    Must be called by every rank of ``group`` (``None`` = the whole job).
    """
    world = dist.get_world_size(group)
    src = dist.get_global_rank(group, 0) if group is not None else 0
    res: dict[str, dict[int, list[list[float]]]] = {op: {n: [] for n in sizes} for op in ops}
    for _ in range(rounds):
        for op in ops:
            for nbytes in sizes:
                n = max(1, nbytes // 4)
                x = torch.ones(n, device=device)
                out = [torch.empty_like(x) for _ in range(world)] if op == "allgather" else None
                call = _op_call(op, x, out, group, src)
                call()  # warm-up (connection set-up, buffers)
                _sync(device)
                dist.barrier(group=group)
                t0 = time.perf_counter()
                call()
                _sync(device)
                one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
                dist.all_reduce(one, op=dist.ReduceOp.MAX, group=group)
                inner = max(1, min(100, math.ceil(min_sample_s / max(float(one[0]), 1e-7))))
                local = []
                for _ in range(reps):
                    dist.barrier(group=group)
                    t0 = time.perf_counter()
                    for _ in range(inner):
                        call()
                    _sync(device)
                    local.append((time.perf_counter() - t0) / inner)
                t = torch.tensor(local, dtype=torch.float64, device=device)
                dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
                res[op][nbytes].append([float(v) for v in t.cpu()])
    return res


def _estimate(rounds: list[list[float]]) -> float:
    return min(statistics.median(r) for r in rounds)


def fit_sweep(raw: dict[str, dict[int, list[list[float]]]], world: int) -> dict:
    """Per-op ``alpha + n * beta`` fits (relative errors) plus the samples."""
    from .fit import fit_alpha_beta

    out = {}
    bus = {"allreduce": 2 * (world - 1) / world, "allgather": world - 1, "broadcast": 1.0}
    for op, by_size in raw.items():
        sizes = sorted(by_size)
        est = [_estimate(by_size[n]) for n in sizes]
        rec = fit_alpha_beta(sizes, est)
        beta = rec["beta_s_per_byte"]
        rec["bus_bandwidth"] = float(f"{bus[op] / beta:.6g}") if beta > 0 else None
        rec["samples"] = [
            {"nbytes": n, "estimate_s": float(f"{e:.4g}"), "rounds_s": by_size[n]}
            for n, e in zip(sizes, est, strict=True)
        ]
        for s in rec["samples"]:
            s["rounds_s"] = [[float(f"{v:.4g}") for v in r] for r in s["rounds_s"]]
        out[op] = rec
    return out


def _messages(op: str, world: int) -> int:
    """Sequential messages of the algorithm assumed for alpha (ring / binomial tree)."""
    if op == "allreduce":
        return max(1, 2 * (world - 1))
    if op == "allgather":
        return max(1, world - 1)
    return max(1, math.ceil(math.log2(world)))


def network_profile(
    name: str,
    scopes: dict[str, dict],
    provenance: dict,
    nominal: dict[str, tuple[str, float]],
) -> dict:
    """The network profile JSON.

    scopes: ``{scope: {"world": p, "backend": b, "fits": fit_sweep(...)}}``.
    nominal: ``{link kind: (scope, nominal bytes/s)}``: the link kind's efficiency is the
    best bus bandwidth measured in that scope over the nominal rate (capped at 1).
    ``per_message_overhead_s`` is the median over scopes and ops of alpha divided by the
    number of sequential messages of a ring (allreduce ``2(p-1)``, allgather ``p-1``) or
    a binomial tree (broadcast ``ceil(log2 p)``); it includes the path latency.
    """
    per_msg = []
    for sc in scopes.values():
        for op, rec in sc["fits"].items():
            per_msg.append(rec["alpha_s"] / _messages(op, sc["world"]))
    eff = {}
    for kind, (scope, rate) in nominal.items():
        if scope in scopes and rate > 0:
            bws = [r["bus_bandwidth"] or 0 for r in scopes[scope]["fits"].values()]
            if max(bws) > 0:  # no bandwidth term fitted: no measurement, no entry (never 0)
                eff[kind] = float(f"{min(1.0, max(bws) / rate):.4g}")
    collectives = {
        scope: {
            "world": sc["world"],
            "backend": sc["backend"],
            **{
                op: {k: v for k, v in rec.items() if k != "samples"}
                for op, rec in sc["fits"].items()
            },
        }
        for scope, sc in scopes.items()
    }
    samples = {
        scope: {op: rec["samples"] for op, rec in sc["fits"].items()}
        for scope, sc in scopes.items()
    }
    prov = dict(provenance)
    prov.setdefault(
        "method",
        "torch.distributed sweep, t = alpha + n * beta per op fitted on relative errors; "
        "per_message_overhead_s = median(alpha / sequential messages); link_efficiency = "
        "bus bandwidth / nominal link rate",
    )
    prov["nominal_link_rates"] = {
        k: {"scope": s, "bytes_per_s": r} for k, (s, r) in nominal.items()
    }
    return {
        "schema_version": 1,
        "name": name,
        "kind": "measured",
        "provenance": prov,
        "network": {
            "per_message_overhead_s": float(f"{statistics.median(per_msg):.4g}"),
            "link_efficiency": eff,
            "collectives": collectives,
            "samples": samples,
        },
    }


# ----------------------------------------------------------------------------- local spawn


def run_local(
    sizes: list[int],
    world: int = 2,
    backend: str = "gloo",
    ops: tuple[str, ...] = OPS,
    rounds: int = 3,
    reps: int = 5,
    threads: int = 1,
    timeout_s: float = 1200.0,
) -> dict[str, dict[int, list[list[float]]]]:
    """Start ``world`` local ranks (``python -m calibrate.collectives`` with torchrun's
    environment variables), sweep, return rank 0's raw samples (seconds)."""
    import subprocess

    # run this very module (calibrate.collectives in a checkout, simcluster.calibrate.collectives
    # installed) with the folder that holds its top-level package on the path
    from .gloo import free_port

    root = str(Path(__file__).resolve().parents[__name__.count(".")])
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        raw_out = Path(tmp) / "sweep.json"
        cmd = [
            sys.executable, "-m", __name__, "--raw-out", str(raw_out),
            "--backend", backend, "--sizes", ",".join(map(str, sizes)),
            "--ops", ",".join(ops), "--rounds", str(rounds), "--reps", str(reps),
            "--threads", str(threads),
        ]  # fmt: skip
        procs = []
        for rank in range(world):
            env = dict(os.environ)
            env.update(
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                PYTHONPATH=os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")])),
            )  # fmt: skip
            procs.append(
                subprocess.Popen(
                    cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
                )
            )
        errors = []
        for rank, proc in enumerate(procs):
            try:
                _, err = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                raise RuntimeError(f"collective sweep timed out after {timeout_s} s") from None
            if proc.returncode != 0:
                errors.append(f"rank {rank} exit {proc.returncode}: {err.strip()[-800:]}")
        if errors:
            raise RuntimeError("collective sweep failed: " + " | ".join(errors))
        data = json.loads(raw_out.read_text())
    return {op: {int(n): v for n, v in d.items()} for op, d in data.items()}


# ----------------------------------------------------------------------------- torchrun


def _parse_nominal(items: list[str]) -> dict[str, tuple[str, float]]:
    out = {}
    for item in items:
        try:
            kind, rest = item.split("=", 1)
            scope, rate = rest.split(":", 1)
            out[kind] = (scope, float(rate))
        except ValueError:
            raise SystemExit(f"--link-nominal wants KIND=SCOPE:BYTES_PER_S, got {item!r}") from None
    return out


def _sizes(text: str) -> list[int]:
    """``--sizes``: comma-separated byte counts (1e6 allowed), each >= 1; ValueError else."""
    sizes = [int(float(x)) for x in text.split(",")]  # "nan" / "inf" raise here too
    if not sizes or min(sizes) < 1:
        raise ValueError(text)
    return sizes


def check_args(args: argparse.Namespace) -> str | None:
    """The first bad flag or launch as one line, else None (before any process group)."""
    import math

    for flag, value in (("--threads", args.threads), ("--rounds", args.rounds),
                        ("--reps", args.reps)):  # fmt: skip
        if value < 1:
            return f"{flag}: out of range (got {value}); allowed: an integer >= 1"
    if not (math.isfinite(args.max_bytes) and args.max_bytes >= 8):
        return f"--max-bytes: out of range (got {args.max_bytes}); allowed: bytes >= 8"
    if args.sizes:
        try:
            _sizes(args.sizes)
        except (ValueError, OverflowError):
            return (f"--sizes: not a comma list of byte counts (got {args.sizes!r}); "
                    "allowed: integers >= 1, e.g. 8,1024,1e6")  # fmt: skip
    bad = [op for op in args.ops.split(",") if op not in OPS]
    if bad:
        return f"--ops: unknown collective (got {bad[0]!r}); allowed: {', '.join(OPS)}"
    if args.backend == "nccl" and not torch.cuda.is_available():
        return "--backend nccl: torch sees no GPU here; allowed: gloo (CPU)"
    if "RANK" not in os.environ or "MASTER_ADDR" not in os.environ:
        return "launch with torchrun (RANK, MASTER_ADDR unset), e.g. torchrun --nproc-per-node 8"
    bad_env = torchrun_env_problem()
    if bad_env:
        return bad_env
    from simcluster.atomic import output_file_problem

    return output_file_problem((("--out", args.out), ("--raw-out", args.raw_out)), force=True)


def torchrun_env_problem() -> str | None:
    """What is wrong with the rank variables torchrun sets, if any is set but not a
    whole number (``int()`` of it would stop with a traceback); else None."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_RANK"):
        value = os.environ.get(name)
        if value is not None and not value.strip().isdigit():
            return (f"environment {name}={value[:40]!r}: not a rank count; allowed: an "
                    "integer >= 0, as torchrun sets it")  # fmt: skip
    return None


def main(argv: list[str] | None = None) -> int:
    """torchrun entry: sweep world / intra-node / inter-node groups, rank 0 writes --out."""
    p = argparse.ArgumentParser(prog="python -m calibrate.collectives")
    p.add_argument("--out", help="network profile JSON to write")
    p.add_argument("--raw-out", help="write rank 0's raw world sweep here instead (run_local)")
    p.add_argument("--sizes", help="comma-separated sizes in bytes (default 8 B .. --max-bytes)")
    p.add_argument("--ops", default=",".join(OPS), help="collectives to sweep")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--name", help="profile name (default: the file's stem)")
    p.add_argument("--backend", default="nccl", choices=["nccl", "gloo"])
    p.add_argument("--max-bytes", type=float, default=float(1 << 30))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument(
        "--link-nominal",
        action="append",
        default=[],
        metavar="KIND=SCOPE:BYTES_PER_S",
        help="nominal rate of a link kind and the scope that measures it, e.g. "
        "nvlink=intra:50e9 infiniband=inter:25e9 (repeatable)",
    )
    p.add_argument("--force", action="store_true", help="overwrite --out")
    args = p.parse_args(argv)
    if not args.out and not args.raw_out:
        p.error("one of --out and --raw-out is required")
    problem = check_args(args)
    if problem:
        print(f"calibrate.collectives: {problem}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    out = Path(args.out or args.raw_out)
    rank = int(os.environ.get("RANK", 0))
    if rank == 0 and args.out and out.exists() and not args.force:
        print(f"calibrate.collectives: {out} exists; pass --force to overwrite", file=sys.stderr)
        return 2
    world = int(os.environ.get("WORLD_SIZE", 1))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if args.backend == "nccl":
        device = torch.device(f"cuda:{local_rank}")
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(args.backend)
    if args.sizes:
        sizes = _sizes(args.sizes)
    else:
        sizes = default_sizes(int(args.max_bytes))
    ops = tuple(args.ops.split(","))
    nodes = world // local_world
    scopes: dict[str, dict] = {}
    t0 = time.perf_counter()
    raw = sweep(device, sizes, ops, None, args.rounds, args.reps)
    if args.raw_out:
        if rank == 0:
            text = {op: {str(n): v for n, v in d.items()} for op, d in raw.items()}
            Path(args.raw_out).write_text(json.dumps(text))
        dist.destroy_process_group()
        return 0
    scopes["world"] = {"world": world, "backend": args.backend, "fits": fit_sweep(raw, world)}
    if local_world > 1:
        intra, _ = dist.new_subgroups(local_world)
        raw = sweep(device, sizes, ops, intra, args.rounds, args.reps)
        scopes["intra"] = {
            "world": local_world,
            "backend": args.backend,
            "fits": fit_sweep(raw, local_world),
        }
    if nodes > 1:
        leaders = [n * local_world for n in range(nodes)]
        inter = dist.new_group(leaders)
        if rank in leaders:
            raw = sweep(device, sizes, ops, inter, args.rounds, args.reps)
            scopes["inter"] = {
                "world": nodes,
                "backend": args.backend,
                "fits": fit_sweep(raw, nodes),
            }
        dist.barrier()
    if rank == 0:
        prov = {
            "description": f"{args.backend} collectives, {nodes} node(s) x {local_world} rank(s)",
            "backend": args.backend,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, torch.cuda.nccl.version()))
            if args.backend == "nccl"
            else None,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "hosts": os.environ.get("SLURM_JOB_NODELIST", socket.gethostname()),
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(["python -m calibrate.collectives", *(argv or sys.argv[1:])]),
            "sizes_bytes": sizes,
            "duration_s": round(time.perf_counter() - t0, 1),
        }
        prof = network_profile(
            args.name or out.stem, scopes, prov, _parse_nominal(args.link_nominal)
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(prof, indent=1) + "\n")
        print(f"wrote {out}", file=sys.stderr)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

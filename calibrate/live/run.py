"""The live-run program: launch, groups, calibration, patterns, JSON (see the package doc)."""

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn as nn

from .model import MODELS

__all__ = ["main", "PATTERNS", "Recorder"]

PATTERNS = ("ddp", "topk", "hsadmm", "nodebased", "fusion")
MB = 1024 * 1024


class Recorder:
    """Per-iteration phase seconds and the ops (collectives with bytes) of one iteration."""

    def __init__(self) -> None:
        self.iterations: list[dict[str, float]] = []
        self.ops: list[dict[str, Any]] = []
        self._phases: dict[str, float] = {}
        self._ops: list[dict[str, Any]] = []

    def start(self) -> None:
        self._phases, self._ops = {}, []

    def timed(
        self, phase: str, fn: Callable[[], Any], op: dict[str, Any] | None = None, role: str = "all"
    ) -> Any:
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        self._phases[phase] = self._phases.get(phase, 0.0) + dt
        entry = {"phase": phase, "role": role, "seconds": dt}
        if op is not None:
            entry.update(op)
        else:
            entry["kind"] = "compute"
        self._ops.append(entry)
        return out

    def finish(self, measured: bool) -> None:
        if measured:
            self.iterations.append(self._phases)
            # ops of every measured iteration, in order (sizes and groups are data)
            self.ops.append(self._ops)


def _coll(kind: str, groups: list[list[int]], nbytes: float, **extra) -> dict[str, Any]:
    return {"kind": kind, "groups": groups, "nbytes": float(nbytes), **extra}


class World:
    """Ranks, virtual nodes and their process groups (every rank creates every group)."""

    def __init__(self, rank: int, size: int, per_node: int, backend: str) -> None:
        if size % per_node:
            raise SystemExit(f"world size {size} is not a multiple of ranks per node {per_node}")
        self.rank, self.size, self.per_node = rank, size, per_node
        self.nodes = size // per_node
        self.node_ranks = [list(range(n * per_node, (n + 1) * per_node)) for n in range(self.nodes)]
        self.leaders = [g[0] for g in self.node_ranks]
        self.node = rank // per_node
        self.is_leader = rank in self.leaders
        self.intra_groups = [dist.new_group(g, backend=backend) for g in self.node_ranks]
        self.intra = self.intra_groups[self.node]
        self.leader_group = dist.new_group(self.leaders, backend=backend)


def _buckets(
    params: list[nn.Parameter], first_mb: float, cap_mb: float
) -> list[list[nn.Parameter]]:
    """Parameters in backward order (last layer first) grouped by byte caps, like DDP."""
    out: list[list[nn.Parameter]] = []
    cur: list[nn.Parameter] = []
    size = 0
    cap = first_mb * MB
    for p in reversed(params):
        cur.append(p)
        size += p.numel() * 4
        if size >= cap:
            out.append(cur)
            cur, size, cap = [], 0, cap_mb * MB
    if cur:
        out.append(cur)
    return out


def _flat(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def _unflat(flat: torch.Tensor, tensors: list[torch.Tensor]) -> None:
    off = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[off : off + n].view_as(t))
        off += n


class Trainer:
    """Model, data and the pieces every pattern shares."""

    def __init__(self, cfg: dict[str, Any], world: World, device: torch.device) -> None:
        torch.manual_seed(cfg["seed"])  # same initial model everywhere
        if cfg.get("module") is None and cfg["model"] in MODELS:
            build, side = MODELS[cfg["model"]]
            self.model = build(10).to(device)
            shape: tuple[int, ...] = (3, side, side)
        else:  # as calibrate.trace builds it, so a traced model runs live
            from ..trace import build_module

            module, _ = build_module(cfg.get("model"), cfg.get("module"), 10)
            self.model = module.to(device)
            shape = tuple(cfg["input_shape"])
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.opt = torch.optim.SGD(self.params, lr=0.01, momentum=0.9)
        gen = torch.Generator().manual_seed(cfg["seed"] * 1000 + world.rank)
        b = cfg["batch"]
        tokens = cfg.get("tokens", 0)
        if tokens:
            self.x = torch.randint(0, tokens, (b, *shape), generator=gen).to(device)
        else:
            self.x = torch.randn(b, *shape, generator=gen).to(device)
        with torch.no_grad():
            out_shape = self.model(self.x).shape
        self.y = torch.randint(0, out_shape[-1], out_shape[:-1], generator=gen).to(device)
        self.loss = nn.CrossEntropyLoss()
        self.world = world
        self.cfg = cfg
        self.device = device

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def fwd_bwd(self, rec: Recorder) -> None:
        self.opt.zero_grad(set_to_none=False)

        def fwd():
            y = self.model(self.x)
            out = self.loss(y.reshape(-1, y.shape[-1]), self.y.reshape(-1))
            self.sync()
            return out

        loss = rec.timed("forward", fwd)

        def bwd():
            loss.backward()
            self.sync()

        rec.timed("backward", bwd)

    def step(self, rec: Recorder) -> None:
        def opt():
            self.opt.step()
            self.sync()

        rec.timed("optimizer", opt)

    def allreduce_grads(
        self,
        rec: Recorder,
        group,
        ranks: list[list[int]],
        phase: str,
        first_mb: float,
        cap_mb: float,
        average_over: int,
    ) -> None:
        grads = [p.grad for p in self.params]
        for bucket in _buckets(self.params, first_mb, cap_mb):
            gs = [p.grad for p in bucket]
            flat = rec.timed("pack", lambda gs=gs: _flat(gs))
            rec.timed(
                phase,
                lambda f=flat: dist.all_reduce(f, group=group),
                _coll("allreduce", ranks, flat.numel() * 4),
            )
            rec.timed("pack", lambda f=flat, gs=gs: _unflat(f.div_(average_over), gs))
        del grads


# ----------------------------------------------------------------------------- patterns


def pattern_ddp(t: Trainer, rec: Recorder, it: int) -> None:
    w = t.world
    t.fwd_bwd(rec)
    t.allreduce_grads(rec, None, [list(range(w.size))], "allreduce", 1, t.cfg["bucket_mb"], w.size)
    t.step(rec)


def _all_gather(out: torch.Tensor, buf: torch.Tensor) -> None:
    """Allgather into one flat tensor (named all_gather_single in newer torch)."""
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fn(out, buf)


def _topk_pack(g: torch.Tensor, k: int) -> torch.Tensor:
    flat = g.reshape(-1)
    _, idx = torch.topk(flat.abs(), k, sorted=False)
    vals = flat[idx]
    return torch.cat([vals, idx.to(torch.int32).view(torch.float32)])


def _scatter_add(g: torch.Tensor, gathered: torch.Tensor, k: int, world: int) -> None:
    flat = torch.zeros(g.numel(), dtype=g.dtype, device=g.device)
    parts = gathered.view(world, 2 * k)
    vals = parts[:, :k].reshape(-1)
    idx = parts[:, k:].contiguous().view(torch.int32).reshape(-1).long()
    flat.index_add_(0, idx, vals)
    g.copy_((flat / world).view_as(g))


def pattern_topk(t: Trainer, rec: Recorder, it: int) -> None:
    w = t.world
    t.fwd_bwd(rec)
    density = t.cfg["density"]
    for p in reversed(t.params):
        k = max(1, round(p.numel() * density))
        buf = rec.timed("sparsify", lambda p=p, k=k: _topk_pack(p.grad, k))
        out = torch.empty(w.size * buf.numel(), dtype=buf.dtype, device=buf.device)
        rec.timed(
            "allgather",
            lambda out=out, buf=buf: _all_gather(out, buf),
            _coll("allgather", [list(range(w.size))], buf.numel() * 4),
        )
        rec.timed("decompress", lambda p=p, out=out, k=k: _scatter_add(p.grad, out, k, w.size))
    t.step(rec)


def _pruned(model: nn.Module) -> list[nn.Parameter]:
    """Conv weights with more than 3 input channels (as simcluster's hsadmm)."""
    return [m.weight for m in model.modules() if isinstance(m, nn.Conv2d) and m.in_channels > 3]


def pattern_hsadmm(t: Trainer, rec: Recorder, it: int) -> None:
    """One local step, then one consensus round (PRUNEX Algorithm 1)."""
    w = t.world
    keep = t.cfg["keep"]
    for _ in range(t.cfg["local_steps"]):
        t.fwd_bwd(rec)
        t.step(rec)
    params = t.params
    if not hasattr(t, "_u"):
        t._u = torch.zeros(sum(p.numel() for p in params), device=t.device)
    theta = rec.timed("dual", lambda: _flat([p.data for p in params]) + t._u)
    if w.per_node > 1:
        rec.timed(
            "intra_allreduce",
            lambda: dist.all_reduce(theta, group=w.intra),
            _coll("allreduce", w.node_ranks, theta.numel() * 4),
        )
    pruned = _pruned(t.model)
    pruned_ids = {id(p): i for i, p in enumerate(pruned)}
    z = theta
    masks: list[torch.Tensor] = []
    if w.is_leader:
        z = rec.timed("dual", lambda: theta / w.per_node, role="leader")
        views, off = {}, 0
        for p in params:
            views[id(p)] = z[off : off + p.numel()].view_as(p)
            off += p.numel()

        def project():
            ms = []
            for p in pruned:
                v = views[id(p)]
                norms = v.pow(2).sum(dim=(0, 2, 3))
                kk = max(1, round(v.shape[1] * keep))
                m = torch.zeros(v.shape[1], dtype=torch.uint8, device=v.device)
                m[torch.topk(norms, kk).indices] = 1
                ms.append(m)
            return ms

        masks = rec.timed("projection", project, role="leader")
        if w.nodes > 1:
            allm = _flat(masks)
            rec.timed(
                "mask_sync",
                lambda: dist.all_reduce(allm, op=dist.ReduceOp.MAX, group=w.leader_group),
                _coll("allreduce", [w.leaders], allm.numel()),
                role="leader",
            )
            off = 0
            for i, m in enumerate(masks):
                masks[i] = allm[off : off + m.numel()]
                off += m.numel()

        def compress():
            pieces, kept = [], []
            for p in params:
                v = views[id(p)]
                if id(p) in pruned_ids:
                    idx = masks[pruned_ids[id(p)]].nonzero().flatten()
                    kept.append(idx)
                    pieces.append(v.index_select(1, idx).reshape(-1))
                else:
                    pieces.append(v.reshape(-1))
            return torch.cat(pieces), kept

        compact, kept = rec.timed("compress", compress, role="leader")
        if w.nodes > 1:
            cap = int(t.cfg["bucket_mb"] * MB // 4)
            for s in range(0, compact.numel(), cap):
                chunk = compact[s : s + cap]
                rec.timed(
                    "inter_allreduce",
                    lambda c=chunk: dist.all_reduce(c, group=w.leader_group),
                    _coll("allreduce", [w.leaders], chunk.numel() * 4),
                    role="leader",
                )
            compact.div_(w.nodes)

        def decompress():
            off = 0
            for p in params:
                v = views[id(p)]
                if id(p) in pruned_ids:
                    idx = kept[pruned_ids[id(p)]]
                    shape = (v.shape[0], idx.numel(), v.shape[2], v.shape[3])
                    n = shape[0] * shape[1] * shape[2] * shape[3]
                    v.zero_()
                    v.index_copy_(1, idx, compact[off : off + n].view(shape))
                    off += n
                else:
                    v.copy_(compact[off : off + v.numel()].view_as(v))
                    off += v.numel()

        rec.timed("decompress", decompress, role="leader")
    if w.per_node > 1:
        root = w.node_ranks[w.node][0]
        rec.timed(
            "broadcast",
            lambda: dist.broadcast(z, src=root, group=w.intra),
            _coll("broadcast", w.node_ranks, z.numel() * 4),
        )

    def dual_update():
        th = _flat([p.data for p in params])
        t._u += th - z
        _unflat(z, [p.data for p in params])

    rec.timed("dual", dual_update)
    if w.nodes > 1 and w.is_leader:
        res = torch.zeros(4, device=t.device)
        rec.timed(
            "residuals",
            lambda: dist.all_reduce(res, group=w.leader_group),
            _coll("allreduce", [w.leaders], 16),
            role="leader",
        )


def pattern_nodebased(t: Trainer, rec: Recorder, it: int) -> None:
    w = t.world
    t.fwd_bwd(rec)
    if w.per_node > 1:
        t.allreduce_grads(
            rec, w.intra, w.node_ranks, "intra_allreduce", 1, t.cfg["bucket_mb"], w.per_node
        )
    t.step(rec)
    if (it + 1) % t.cfg["k_prime"] == 0:
        flat = rec.timed("pack", lambda: _flat([p.data for p in t.params]))
        rec.timed(
            "param_average",
            lambda: dist.all_reduce(flat),
            _coll("allreduce", [list(range(w.size))], flat.numel() * 4),
        )
        rec.timed("pack", lambda: _unflat(flat.div_(w.size), [p.data for p in t.params]))


def pattern_fusion(t: Trainer, rec: Recorder, it: int) -> None:
    """Fused buffers: small tensors dense by allreduce, large ones sparsified by allgather."""
    w = t.world
    t.fwd_bwd(rec)
    density, small = t.cfg["density"], t.cfg["small_numel"]
    for bucket in _buckets(t.params, t.cfg["fusion_mb"], t.cfg["fusion_mb"]):
        dense = [p for p in bucket if p.numel() < small]
        sparse = [p for p in bucket if p.numel() >= small]
        if dense:
            flat = rec.timed("pack", lambda d=dense: _flat([p.grad for p in d]))
            rec.timed(
                "allreduce",
                lambda f=flat: dist.all_reduce(f),
                _coll("allreduce", [list(range(w.size))], flat.numel() * 4),
            )
            rec.timed("pack", lambda f=flat, d=dense: _unflat(f.div_(w.size), [p.grad for p in d]))
        if sparse:
            ks = [max(1, round(p.numel() * density)) for p in sparse]
            buf = rec.timed(
                "sparsify",
                lambda s=sparse, ks=ks: torch.cat(
                    [_topk_pack(p.grad, k) for p, k in zip(s, ks, strict=True)]
                ),
            )
            out = torch.empty(w.size * buf.numel(), dtype=buf.dtype, device=buf.device)
            rec.timed(
                "allgather",
                lambda o=out, b=buf: _all_gather(o, b),
                _coll("allgather", [list(range(w.size))], buf.numel() * 4),
            )

            n_buf = buf.numel()

            def unpack(o=out, s=sparse, ks=ks, n=n_buf):
                parts = o.view(w.size, n)
                off = 0
                for p, k in zip(s, ks, strict=True):
                    _scatter_add(
                        p.grad, parts[:, off : off + 2 * k].reshape(-1).contiguous(), k, w.size
                    )
                    off += 2 * k

            rec.timed("decompress", unpack)
    t.step(rec)


RUNNERS = {
    "ddp": pattern_ddp,
    "topk": pattern_topk,
    "hsadmm": pattern_hsadmm,
    "nodebased": pattern_nodebased,
    "fusion": pattern_fusion,
}


# ----------------------------------------------------------------------------- calibration


def calibrate_allreduce(sizes: list[int], reps: int, device: torch.device) -> dict[str, Any]:
    """Median seconds of an allreduce over all ranks per size (bytes), and the a + n b fit."""
    samples: dict[int, list[float]] = {}
    warm = torch.ones(1 << 16, device=device)
    for _ in range(10):  # connection set-up and first-call costs stay out of the fit
        dist.all_reduce(warm)
    for n in sizes:
        x = torch.ones(max(1, n // 4), device=device)
        for _ in range(2):
            dist.all_reduce(x)
        ts = []
        for _ in range(reps):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            ts.append(time.perf_counter() - t0)
        samples[n] = ts
    xs = [float(n) for n in sizes]
    ys = [statistics.median(samples[n]) for n in sizes]
    # least squares on relative errors: minimise sum ((a + b n) / y - 1)^2
    import numpy as np

    a_mat = np.array([[1 / y, x / y] for x, y in zip(xs, ys, strict=True)])
    coef, *_ = np.linalg.lstsq(a_mat, np.ones(len(xs)), rcond=None)
    a, b = (max(0.0, float(c)) for c in coef)
    return {
        "op": "allreduce",
        "sizes": sizes,
        "median_s": ys,
        "alpha_s": a,
        "beta_s_per_byte": b,
        "samples": {str(k): v for k, v in samples.items()},
    }


# ----------------------------------------------------------------------------- driver


def _worker(rank: int, size: int, cfg: dict[str, Any], init: str | None) -> None:
    torch.set_num_threads(cfg["threads"])
    use_cuda = cfg["device"] == "cuda" and torch.cuda.is_available()
    backend = "nccl" if use_cuda else "gloo"
    if init:
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=size)
    else:
        dist.init_process_group(backend)
        rank, size = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    # spawned here: every process is a (virtual) node unless told otherwise
    default = 1 if init else int(os.environ.get("LOCAL_WORLD_SIZE", size))
    per_node = cfg["ranks_per_node"] or default
    world = World(rank, size, per_node, backend)
    cal = calibrate_allreduce(cfg["calibration_sizes"], cfg["calibration_reps"], device)
    host: dict[str, Any] | None = None
    if backend == "gloo" and cfg.get("gloo_calibration", True):
        from ..gloo import LIVE_MAX, SIZES, sharing, sweep

        # the gloo model's constants, measured on these processes before the patterns
        host = {
            "ops": sweep(SIZES, cfg["calibration_reps"], LIVE_MAX),
            "compute": sharing(cfg["share_rounds"], cfg["share_reps"]),
        }
    results: dict[str, Any] = {}
    shares: list[Any] = []  # the CPU-sharing test between patterns (host load drifts)

    traced: dict[str, Any] | None = None
    for name in cfg["patterns"]:
        if host is not None:
            shares.append(sharing(cfg["share_rounds"], cfg["share_reps"]))
        if cfg.get("trace") and name == cfg["patterns"][0]:
            # rank 0 alone (the others asleep in a barrier), just before the first pattern
            dist.barrier()
            if rank == 0:
                traced = _trace_alone(cfg, device)
            dist.barrier()
        trainer = Trainer(cfg, world, device)
        rec = Recorder()
        run = RUNNERS[name]
        for it in range(cfg["warmup"] + cfg["iterations"]):
            dist.barrier()
            rec.start()
            t0 = time.perf_counter()
            run(trainer, rec, it)
            rec._phases["iteration"] = time.perf_counter() - t0
            rec.finish(it >= cfg["warmup"])
        results[name] = {"iterations": rec.iterations, "ops": rec.ops}
    if host is not None:
        shares.append(sharing(cfg["share_rounds"], cfg["share_reps"]))
        host["shares"] = shares
    gathered: list[Any] = [None] * size
    mine = {"rank": rank, "calibration": cal, "patterns": results, "gloo": host}
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        from ..runner import cpu_model

        out = {
            "schema": "simcluster-live/1",
            "config": {
                **cfg,
                "world_size": size,
                "ranks_per_node": per_node,
                "nodes": size // per_node,
                "backend": backend,
                "device_kind": device.type,
            },
            "machine": {
                "hostname": socket.gethostname(),
                "platform": platform.platform(),
                "cpu_model": cpu_model(),
                "cpus": os.cpu_count(),
                "torch": torch.__version__,
                "python": sys.version.split()[0],
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "command": " ".join(sys.argv),
            },
            "calibration": gathered[0]["calibration"],
            "loadavg": {"start": cfg.get("_load_start"), "end": list(os.getloadavg())},
            "ranks": [{"rank": g["rank"], "patterns": g["patterns"]} for g in gathered],
        }
        if traced is not None:
            out["trace"] = traced
        if host is not None:
            from ..gloo import fit, reduce_ranks

            world = reduce_ranks([g["gloo"] for g in gathered], cfg["share_reps"])
            # per pattern: the sharing factor measured just before and just after it
            factors = [
                reduce_ranks(
                    [{"ops": {}, "compute": g["gloo"]["shares"][i]} for g in gathered],
                    cfg["share_reps"],
                )["compute"]
                for i in range(len(cfg["patterns"]) + 1)
            ]
            out["gloo_share_by_pattern"] = {
                name: {"before": factors[i], "after": factors[i + 1]}
                for i, name in enumerate(cfg["patterns"])
            }
            out["gloo"] = {
                "method": "calibrate.gloo's sweep and CPU-sharing test on these processes "
                "before the patterns; constants fitted as calibrate.gloo does",
                "worlds": fit([world]),
                "samples": world,
            }
        Path(cfg["out"]).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg["out"]).write_text(json.dumps(out, indent=1) + "\n")
    dist.barrier()
    dist.destroy_process_group()


def _trace_alone(cfg: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Record a trace of the run's model and batch on this process (``--trace FILE``):
    ``calibrate.trace``'s interleaved recording, same threads; returns its facts."""
    from ..trace import Step, build_module, make_header, record

    if cfg.get("module") is None and cfg["model"] in MODELS:
        build, side = MODELS[cfg["model"]]
        module, what, shape = build(10), cfg["model"], (3, side, side)
    else:
        module, what = build_module(cfg.get("model"), cfg.get("module"), 10)
        shape = tuple(cfg["input_shape"])
    step = Step(module, cfg["batch"], shape, device, cfg.get("tokens", 0), cfg["seed"])
    for _ in range(3):
        step()
    command = ("python -m calibrate.live " + " ".join(sys.argv[1:]) + " (rank 0 alone, the "
               "other ranks waiting in a barrier, before the first pattern)")  # fmt: skip
    header = make_header(step, what, shape, 10, cfg.get("tokens", 0), cfg["threads"], 3,
                         cfg["trace_steps"], command)  # fmt: skip
    facts = record(step, Path(cfg["trace"]), None, header, cfg["trace_steps"], 2)
    return {"file": cfg["trace"], "before_pattern": cfg["patterns"][0], **facts}


def _spawn_entry(rank: int, size: int, cfg: dict[str, Any], init: str) -> None:
    _worker(rank, size, cfg, init)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m calibrate.live", description=__doc__)
    p.add_argument("--nproc", type=int, help="spawn this many processes here (else: torchrun env)")
    p.add_argument(
        "--ranks-per-node",
        type=int,
        default=0,
        help="ranks per (virtual) node; default 1 with --nproc, LOCAL_WORLD_SIZE under torchrun",
    )
    p.add_argument(
        "--patterns", default=",".join(PATTERNS), help="comma list of " + ", ".join(PATTERNS)
    )
    p.add_argument(
        "--model",
        default=None,
        help=f"{', '.join(sorted(MODELS))} (default resnet18-cifar), a ResNet of "
        "calibrate.models, or torchvision:NAME (as calibrate.trace)",
    )
    p.add_argument("--module", help="PKG.MODULE:FUNCTION returning an nn.Module")
    p.add_argument("--input-shape", help="per-sample input shape for --model/--module models")
    p.add_argument("--tokens", type=int, default=0, help="integer inputs below this vocab")
    p.add_argument("--batch", type=int, default=8, help="samples per rank per step")
    p.add_argument("--iterations", type=int, default=3, help="measured iterations per pattern")
    p.add_argument("--warmup", type=int, default=1, help="unmeasured iterations first")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where ranks compute")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP gradient bucket, MB")
    p.add_argument("--fusion-mb", type=float, default=4.0, help="fusion buffer, MB")
    p.add_argument("--density", type=float, default=0.01, help="top-k fraction kept")
    p.add_argument(
        "--small-numel",
        type=int,
        default=102_400,
        help="fusion: tensors below this many elements go dense (SSFusion's 200 KB)",
    )
    p.add_argument("--keep", type=float, default=0.5, help="hsadmm: fraction of structures kept")
    p.add_argument("--local-steps", type=int, default=1, help="hsadmm: local steps per consensus")
    p.add_argument("--k-prime", type=int, default=2, help="nodebased: steps between averages")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument(
        "--calibration-reps", type=int, default=7, help="repeats per collective calibration size"
    )
    p.add_argument(
        "--no-gloo-calibration",
        action="store_true",
        help="skip the gloo model's sweep (allreduce, allgather, broadcast, CPU sharing)",
    )
    p.add_argument("--out", default="results/live/live.json", help="live-run JSON to write")
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run everything this many times, each on fresh processes, writing OUT's name "
        "with -r1 ... -rN (simcluster validate --live scores their median); needs --nproc",
    )
    p.add_argument(
        "--trace",
        help="also record a trace of the model here: rank 0 alone, "
        "just before the first pattern (calibrate.trace's interleaved recording)",
    )
    p.add_argument("--trace-steps", type=int, default=15, help="profiled steps of --trace")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out / --trace")
    return p.parse_args(argv)


def check_args(a: argparse.Namespace) -> str | None:
    """The first bad flag as one line (flag, value, what is allowed), else None; checked
    before any process starts."""
    import math

    ints = {"--batch": (a.batch, 1), "--iterations": (a.iterations, 1), "--warmup": (a.warmup, 0),
            "--threads": (a.threads, 1), "--tokens": (a.tokens, 0),
            "--small-numel": (a.small_numel, 0), "--local-steps": (a.local_steps, 1),
            "--k-prime": (a.k_prime, 1), "--calibration-reps": (a.calibration_reps, 1),
            "--ranks-per-node": (a.ranks_per_node, 0), "--repeats": (a.repeats, 1)}  # fmt: skip
    for flag, (value, low) in ints.items():
        if value < low:
            return f"{flag}: out of range (got {value}); allowed: an integer >= {low}"
    for flag, value in (("--bucket-mb", a.bucket_mb), ("--fusion-mb", a.fusion_mb)):
        if not (math.isfinite(value) and value > 0):
            return f"{flag}: out of range (got {value}); allowed: megabytes > 0"
    for flag, value in (("--density", a.density), ("--keep", a.keep)):
        if not 0 < value <= 1:  # NaN fails too
            return f"{flag}: out of range (got {value}); allowed: a fraction in (0, 1]"
    if a.nproc is not None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        limit = max(8, 4 * (cpus or 1))  # as `simcluster calibrate gloo --nproc`
        if not 1 <= a.nproc <= limit:
            return (f"--nproc: out of range (got {a.nproc}); allowed: 1..{limit} "
                    f"(4 processes per CPU of this host's {cpus})")  # fmt: skip
        if a.ranks_per_node and a.nproc % a.ranks_per_node:
            return (f"--ranks-per-node: {a.nproc} processes do not fill nodes of "
                    f"{a.ranks_per_node} (got {a.ranks_per_node}); allowed: a divisor of "
                    f"--nproc")  # fmt: skip
    if a.repeats > 1 and a.nproc is None:
        return (f"--repeats: {a.repeats} runs need --nproc (under torchrun, launch it once "
                "per run); allowed: 1 without --nproc")  # fmt: skip
    if a.repeats > MAX_REPEATS:
        return (f"--repeats: out of range (got {a.repeats}); allowed: 1..{MAX_REPEATS} "
                "(each run is a whole live run on fresh processes)")  # fmt: skip
    if a.repeats > 1 and a.trace:
        return f"--trace: records one run (got --repeats {a.repeats}); allowed: --repeats 1"
    named = out_name_problem(a.out)
    if named:
        return named
    if a.repeats > 1 and Path(a.out).suffix != ".json":
        return (f"--out {a.out}: the repeats of one run are read as NAME-rN.json (simcluster "
                "validate --set live reads *.json); allowed: a name ending in .json")  # fmt: skip
    from simcluster.atomic import output_file_problem

    outs = repeat_outputs(a.out, a.repeats)
    others = stale_repeats(a.out, a.repeats)
    if others:
        shown = ", ".join(str(p) for p in others[:3]) + (" ..." if len(others) > 3 else "")
        return (f"--out {a.out}: {shown} already hold repeats of this name beyond the "
                f"{a.repeats} to be written, and would be scored with them; allowed: another "
                "--out, or move those files away first")  # fmt: skip
    if a.trace and Path(a.trace).resolve() in {p.resolve() for p in outs}:
        return (f"--trace {a.trace}: is also the live-run file --out writes; allowed: "
                "another file name")  # fmt: skip
    return output_file_problem((*[("--out", str(p)) for p in outs], ("--trace", a.trace)), a.force)


#: most runs one ``--repeats`` asks for (each a whole live run, minutes on fresh processes)
MAX_REPEATS = 100


def out_name_problem(out: str) -> str | None:
    """Why ``--out`` names no file the runs can write (an empty name, ``.``, ``..``, a
    path ending in ``/``, an existing folder), else None; asked before the -rN names are
    made from it, so that a folder never becomes ``folder-r1`` beside it."""
    path = Path(out)
    if not out.strip() or path.name in ("", ".", "..") or out.endswith(("/", "\\")):
        return (f"--out {out!r}: names a folder, not a file; allowed: a .json file name "
                "(e.g. results/live/live.json)")  # fmt: skip
    if path.is_dir():
        return f"--out {out}: is a folder; give a file name"
    return None


def stale_repeats(out: str, repeats: int) -> list[Path]:
    """Existing ``NAME-rK`` files beside ``out`` with K above ``repeats``: the runs will
    not overwrite them, and ``simcluster validate`` would score them as repeats of the new
    run (none for a single run, which writes ``out`` itself)."""
    import re

    path = Path(out)
    if repeats <= 1 or not path.parent.is_dir():
        return []
    pat = re.compile(re.escape(path.stem) + r"-r(\d+)" + re.escape(path.suffix) + "$")
    found = []
    for p in sorted(path.parent.iterdir()):
        m = pat.match(p.name)
        if m and int(m.group(1)) > repeats:
            found.append(p)
    return found


def repeat_outputs(out: str, repeats: int) -> list[Path]:
    """The files ``repeats`` runs write: ``out`` itself for one run, else ``out``'s name
    with ``-r1`` ... ``-rN`` before its suffix (the repeats that ``simcluster validate``
    combines by median)."""
    path = Path(out)
    if repeats <= 1:
        return [path]
    return [path.with_name(f"{path.stem}-r{k}{path.suffix}") for k in range(1, repeats + 1)]


def main(argv=None) -> int:
    a = parse_args(argv)
    patterns = [x.strip() for x in a.patterns.split(",") if x.strip()]
    bad = [x for x in patterns if x not in RUNNERS]
    if bad:
        print(
            f"calibrate.live: unknown pattern {bad[0]!r}; allowed: {', '.join(PATTERNS)}",
            file=sys.stderr,
        )
        return 2
    if a.trace_steps < 1:
        print("calibrate.live: --trace-steps must be >= 1", file=sys.stderr)
        return 2
    problem = check_args(a)
    if problem:
        print(f"calibrate.live: {problem}", file=sys.stderr)
        return 2
    if a.model is not None and a.module is not None:
        print("calibrate.live: give --model or --module, not both", file=sys.stderr)
        return 2
    model = a.model or (None if a.module else "resnet18-cifar")
    shape: list[int] = []
    if a.module is not None or model not in MODELS:
        from ..trace import ModelSpecError, _shape, build_module, default_input_shape

        try:
            build_module(model, a.module, 10)  # fail here, not in every worker
            shape = list(_shape(a.input_shape) if a.input_shape else default_input_shape(model))
        except (ModelSpecError, argparse.ArgumentTypeError) as exc:
            print(f"calibrate.live: {exc}", file=sys.stderr)
            return 2
    cfg = {
        "patterns": patterns,
        "model": model,
        "module": a.module,
        "input_shape": shape,
        "tokens": a.tokens,
        "batch": a.batch,
        "iterations": a.iterations,
        "warmup": a.warmup,
        "threads": a.threads,
        "device": a.device,
        "bucket_mb": a.bucket_mb,
        "first_bucket_mb": 1.0,
        "fusion_mb": a.fusion_mb,
        "density": a.density,
        "small_numel": a.small_numel,
        "keep": a.keep,
        "local_steps": a.local_steps,
        "k_prime": a.k_prime,
        "seed": a.seed,
        "ranks_per_node": a.ranks_per_node,
        "calibration_sizes": [1 << s for s in range(10, 25, 2)],
        "calibration_reps": a.calibration_reps,
        "gloo_calibration": not a.no_gloo_calibration,
        "share_rounds": 3,
        "share_reps": 10,
        "intra_op_threads": a.threads,
        "trace": a.trace,
        "trace_steps": a.trace_steps,
        "_load_start": list(os.getloadavg()),
        "out": a.out,
    }
    if a.nproc:
        import torch.multiprocessing as mp

        from ..gloo import free_port

        outs = repeat_outputs(a.out, a.repeats)
        for k, out in enumerate(outs, 1):
            if len(outs) > 1:
                print(f"calibrate.live: run {k}/{len(outs)} -> {out}", file=sys.stderr)
            run_cfg = {**cfg, "out": str(out), "_load_start": list(os.getloadavg())}
            init = f"tcp://127.0.0.1:{free_port()}"
            mp.spawn(_spawn_entry, args=(a.nproc, run_cfg, init), nprocs=a.nproc, join=True)
        print(f"calibrate.live: wrote {', '.join(str(o) for o in outs)}")
        return 0
    else:
        if "RANK" not in os.environ:
            print("calibrate.live: give --nproc N, or launch with torchrun", file=sys.stderr)
            return 2
        from ..collectives import torchrun_env_problem

        bad_env = torchrun_env_problem()
        if bad_env:
            print(f"calibrate.live: {bad_env}", file=sys.stderr)
            return 2
        _worker(0, 0, cfg, None)
    print(f"calibrate.live: wrote {a.out}")
    return 0

"""PyTorch DDP's own cost on one device: training steps with and without DistributedDataParallel.

``python -m calibrate.ddp_overhead --device cuda --out ddp.json`` times the same
training step (forward, loss, backward, optimizer step, zero_grad; the models and
steps of :mod:`calibrate.anchors`) as plain PyTorch and wrapped in
``torch.nn.parallel.DistributedDataParallel`` in a one-process group (NCCL on a
GPU, gloo on a CPU), for each bucket cap of ``--bucket-mb`` with
``gradient_as_bucket_view`` off and on. With one rank there is no network: what
DDP adds is its own work (the Reducer's autograd hooks and the copy of each
gradient into its bucket, one collective call per bucket, the wait for each
bucket and the copy back into the gradients, the buffer broadcast before each
forward). The step time of each variant over the plain one is the overhead a
simulator must reproduce from the framework model of
:mod:`simcluster.schedules.frameworks` before any communication is added.

Cases (``--cases``): ``resnet50`` (224 px, SGD with momentum), ``bert_large-128``
(AdamW, backward from a fixed output gradient), and ``small_cnn`` (32 px; a quick
CPU check). Batch: ``--batch`` or each case's own (:data:`CASES`).

Timing: CUDA events (wall clock on a CPU); every variant is built once, then
``--rounds`` rounds visit the variants in turn (so drift hits all of them alike),
each round timing ``--reps`` steps after ``--warmup``; a variant's estimate is the
median of its quietest round. Rows are written after every case, so a stop keeps
what ran.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import CALIBRATION_PRECISIONS, amp_context, math_mode
from .timing import Timer

__all__ = ["CASES", "build_step", "host_costs", "main", "read_rows", "variants"]

#: largest ``--bucket-mb`` (MiB): 1 TiB, far past any model's gradients (DDP turns the
#: cap into an int64 byte count, which a larger float overflows)
MAX_BUCKET_MB = 1 << 20

#: case -> (model, input size: px or tokens, default batch)
CASES: dict[str, tuple[str, int, int]] = {
    "resnet50": ("resnet50", 224, 64),
    "bert_large-128": ("bert_large", 128, 32),
    "small_cnn": ("small_cnn", 32, 16),
}


def variants(bucket_mb: list[float]) -> list[dict]:
    """The plain step, then DDP at each bucket cap (MiB) without and with gradient views."""
    out: list[dict] = [{"variant": "plain", "ddp": False}]
    for cap in bucket_mb:
        for views in (False, True):
            name = f"ddp-b{cap:g}" + ("-views" if views else "")
            out.append({"variant": name, "ddp": True, "bucket_cap_mb": cap,
                        "gradient_as_bucket_view": views})  # fmt: skip
    return out


def _module(model: str, size: int, batch: int, device: torch.device):
    """(module, loss function of the module) on ``device``, seeded."""
    torch.manual_seed(0)
    if model in ("resnet50", "small_cnn"):
        from .models import small_cnn, torch_model

        classes = 1000 if model == "resnet50" else 10
        module = torch_model("resnet50", 1000) if model == "resnet50" else small_cnn(classes)
        module = module.to(device).train()
        x = torch.randn(batch, 3, size, size, device=device)
        y = torch.randint(0, classes, (batch,), device=device)
        return module, lambda m: F.cross_entropy(m(x).float(), y)
    from .anchors import bert_encoder

    module = bert_encoder("large").to(device).train()
    x = torch.randint(0, 30522, (batch, size), device=device)
    g = torch.ones(batch, module.pooler.out_features, device=device)
    return module, lambda m: (m(x).float() * g).sum()


def build_step(
    model: str, size: int, batch: int, device: torch.device, precision: str, variant: dict
) -> tuple[Callable[[], None], dict, nn.Module]:
    """One training step of ``variant`` (see :func:`variants`), its sizes and its module."""
    module, loss = _module(model, size, batch, device)
    info: dict = {}
    net: nn.Module = module
    if variant["ddp"]:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(
            module,
            device_ids=[device.index or 0] if device.type == "cuda" else None,
            bucket_cap_mb=variant["bucket_cap_mb"],
            gradient_as_bucket_view=variant["gradient_as_bucket_view"],
        )
    if model == "bert_large":
        opt: torch.optim.Optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4)
    else:
        opt = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "amp")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with amp_context(device, precision):
            out = loss(net)
        scaler.scale(out).backward()
        scaler.step(opt)
        scaler.update()

    info["params"] = sum(p.numel() for p in module.parameters())
    info["tensors"] = sum(1 for p in module.parameters() if p.requires_grad)
    return step, info, net


def _bucket_log(net: nn.Module) -> dict:
    """What DDP logged of its buckets (``_get_ddp_logging_data``, private API; best effort)."""
    try:
        data = net._get_ddp_logging_data()  # type: ignore[operator]
    except Exception:  # noqa: BLE001 - private API: a missing key only loses a note
        return {}
    return {k: v for k, v in data.items() if "bucket" in k}


def _trace(step: Callable[[], None], device: torch.device, stem: Path) -> None:
    """One profiled step (CPU and, on a GPU, CUDA activity, with tensor shapes so that
    ``simcluster trace-summary`` can read its gradient sizes) as ``<stem>.json.gz``."""
    import gzip
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    step()
    with profile(activities=acts, record_shapes=True) as prof:
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    stem.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        with open(raw, "rb") as f, gzip.open(f"{stem}.json.gz", "wb") as g:
            g.write(f.read())


def _init_group(device: torch.device) -> str:
    """A one-process group (NCCL on CUDA, gloo on a CPU); returns the backend."""
    import torch.distributed as dist

    from .gloo import free_port

    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        dist.init_process_group(backend, rank=0, world_size=1)
    return backend


def time_case(
    case: str,
    batch: int,
    device: torch.device,
    precision: str,
    bucket_mb: list[float],
    warmup: int,
    reps: int,
    rounds: int,
    trace_dir: Path | None = None,
) -> list[dict]:
    """Rows (one per variant of :func:`variants`) of seconds per step for one case, batch
    and precision; with ``trace_dir``, one more step of each variant is profiled there
    (gzipped Kineto trace ``<case>-b<batch>-<precision>-<variant>.json.gz``)."""
    return _time_variants(
        case, batch, device, precision, variants(bucket_mb), warmup, reps, rounds, trace_dir
    )


def time_plain_without_group(
    case: str,
    batch: int,
    device: torch.device,
    precision: str,
    warmup: int,
    reps: int,
    rounds: int,
) -> dict:
    """The plain step timed before any process group exists (variant ``plain-no-group``):
    a group's background threads (NCCL's watchdog polls its events) can slow a step
    whose host side is its critical path, which the in-group ``plain`` would hide."""
    v = {"variant": "plain-no-group", "ddp": False}
    (row,) = _time_variants(case, batch, device, precision, [v], warmup, reps, rounds)
    return row


def _time_variants(
    case: str,
    batch: int,
    device: torch.device,
    precision: str,
    vs: list[dict],
    warmup: int,
    reps: int,
    rounds: int,
    trace_dir: Path | None = None,
) -> list[dict]:
    """Build every variant of ``vs``, then time them in ``rounds`` interleaved rounds;
    a row per variant, ``over_plain`` against the first."""
    model, size, _ = CASES[case]
    with math_mode(precision):
        built = []
        for v in vs:
            step, info, net = build_step(model, size, batch, device, precision, v)
            built.append((v, step, info, net))
        timer = Timer(device, warmup=warmup, reps=reps, min_sample_s=0.0)
        samples: list[list[list[float]]] = [[] for _ in built]
        for _ in range(rounds):
            for i, (_, step, _, _) in enumerate(built):
                samples[i].append(timer.measure(step).samples)
        if trace_dir is not None:
            for v, step, _, _ in built:
                _trace(step, device, trace_dir / f"{case}-b{batch}-{precision}-{v['variant']}")
    rows = []
    plain = min(statistics.median(r) for r in samples[0])
    for (v, _, info, net), rs in zip(built, samples, strict=True):
        est = min(statistics.median(r) for r in rs)
        log = _bucket_log(net) if v["ddp"] else {}
        rows.append({
            "case": case, "model": model, "input_size": size, "batch": batch,
            "precision": precision, **v, **info, "ddp_log": log,
            "step_s": float(f"{est:.6g}"),
            "over_plain": float(f"{est / plain:.5g}"),
            "rounds_s": [[float(f"{s:.6g}") for s in r] for r in rs],
        })  # fmt: skip
    built.clear()  # the variants' modules go before the next case's are built
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rows


def host_costs(rows: list[dict]) -> list[dict]:
    """Per (case, batch, precision): DDP's added seconds split into a cost per gradient
    tensor and a cost per bucket (one collective call each).

    Model: ``step(DDP, cap) - step(plain) = tensors * per_tensor_s + buckets(cap) *
    per_call_s`` over the variants without gradient views, solved by least squares with
    both costs >= 0 (two caps: exactly). ``buckets`` is what DDP logged
    (``num_buckets_reduced``). Rows of one file with the same case, batch and precision
    form one group, measured against the group's first plain step."""
    import numpy as np

    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["case"], r["batch"], r["precision"])
        groups.setdefault(key, []).append(r)
    out = []
    for (case, batch, prec), rs in groups.items():
        plain = [r for r in rs if r["variant"] == "plain"]
        ddp = [r for r in rs if r["ddp"] and not r["gradient_as_bucket_view"]
               and (r.get("ddp_log") or {}).get("num_buckets_reduced")]  # fmt: skip
        if not plain or len(ddp) < 2:
            continue
        a = np.array([[r["tensors"], r["ddp_log"]["num_buckets_reduced"]] for r in ddp], float)
        y = np.array([r["step_s"] - plain[0]["step_s"] for r in ddp])
        coef = np.linalg.lstsq(a, y, rcond=None)[0]
        if coef.min() < 0:  # clip the negative one to 0 and refit the other alone
            i = int(coef.argmin())
            j = 1 - i
            coef = np.zeros(2)
            coef[j] = max(float(a[:, j] @ y / (a[:, j] @ a[:, j])), 0.0)
        out.append({
            "case": case, "batch": batch, "precision": prec, "plain_s": plain[0]["step_s"],
            "tensors": int(a[0, 0]), "buckets": [int(b) for b in a[:, 1]],
            "added_s": [float(f"{v:.4g}") for v in y],
            "per_tensor_s": float(f"{coef[0]:.4g}"), "per_call_s": float(f"{coef[1]:.4g}"),
        })  # fmt: skip
    return out


#: what :func:`read_rows` asks of each row: key -> (check, what is allowed); ``ddp``
#: rows also need the keys of :data:`DDP_ROW_KEYS`
ROW_KEYS: dict[str, tuple[Callable[[object], bool], str]] = {
    "case": (lambda v: isinstance(v, str) and bool(v), "a case name"),
    "batch": (lambda v: type(v) is int and v >= 1, "an integer >= 1"),
    "precision": (lambda v: isinstance(v, str) and bool(v), "a precision name"),
    "variant": (lambda v: isinstance(v, str) and bool(v), "a variant name"),
    "ddp": (lambda v: isinstance(v, bool), "true or false"),
    "step_s": (lambda v: type(v) in (int, float) and v > 0, "seconds > 0"),  # type: ignore[operator]
}
DDP_ROW_KEYS: dict[str, tuple[Callable[[object], bool], str]] = {
    "gradient_as_bucket_view": (lambda v: isinstance(v, bool), "true or false"),
    "tensors": (lambda v: type(v) is int and v >= 1, "an integer >= 1"),
    "ddp_log": (lambda v: isinstance(v, dict), "a mapping (what DDP logged; {} if nothing)"),
}


def read_rows(path: str) -> list[dict]:
    """The rows of a file ``--out`` wrote, through the project's JSON reader (no NaN, no
    repeated keys); a missing or mistyped field is a ConfigError naming ``rows[i].key``
    (it was a KeyError or TypeError inside :func:`host_costs`, shown without a field)."""
    from simcluster.errors import ConfigError
    from simcluster.inputs import load_json

    data = load_json(path, "ddp_overhead file")
    rows = data.get("rows") if isinstance(data, dict) else data
    if not isinstance(data, dict) or not isinstance(rows, list):
        where = "rows" if isinstance(data, dict) else "<root>"
        raise ConfigError(path, where, rows, "not a ddp_overhead file",
                          "an object with a list of rows, as --out writes it")  # fmt: skip
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise ConfigError(path, f"rows[{i}]", r, "not a ddp_overhead file: not a row",
                              "an object, as --out writes it")  # fmt: skip
        checks = {**ROW_KEYS, **(DDP_ROW_KEYS if r.get("ddp") is True else {})}
        for key, (ok, allowed) in checks.items():
            if key not in r or not ok(r[key]):
                why = "missing field" if key not in r else "bad value"
                raise ConfigError(path, f"rows[{i}].{key}", r.get(key),
                                  f"not a ddp_overhead file: {why}", allowed)  # fmt: skip
        buckets = (r.get("ddp_log") or {}).get("num_buckets_reduced")
        if buckets is not None and not (type(buckets) is int and buckets >= 1):
            raise ConfigError(path, f"rows[{i}].ddp_log.num_buckets_reduced", buckets,
                              "not a ddp_overhead file: bad value", "an integer >= 1")  # fmt: skip
    return rows


def _summarize(paths: list[str]) -> int:
    """Print :func:`host_costs` of each file (``--summarize``)."""
    from simcluster.errors import UserError

    for path in paths:
        try:
            costs = host_costs(read_rows(path))
        except UserError as exc:
            print(f"calibrate.ddp_overhead: error: {exc}", file=sys.stderr)
            return 2
        for h in costs:
            added = ", ".join(f"{v * 1e3:.2f}" for v in h["added_s"])
            print(f"{path}: {h['case']} b{h['batch']} {h['precision']}: plain "
                  f"{h['plain_s'] * 1e3:.2f} ms; DDP adds {added} ms with {h['tensors']} "
                  f"tensors and {h['buckets']} buckets -> {h['per_tensor_s'] * 1e6:.1f} us "
                  f"per tensor, {h['per_call_s'] * 1e3:.3f} ms per bucket call")  # fmt: skip
    return 0


def _parse(a: argparse.Namespace) -> tuple[torch.device, list[str], list[str], list[float]]:
    from simcluster.errors import ConfigError, UserError

    from .cli import _device

    device = _device(a.device)
    cases = list(dict.fromkeys(c.strip() for c in a.cases.split(",") if c.strip()))
    if not cases:  # "" would write a file with no rows
        raise ConfigError(None, "--cases", a.cases, "no case given", ", ".join(CASES))
    for c in cases:
        if c not in CASES:
            raise ConfigError(None, "--cases", c, "unknown case", ", ".join(CASES))
    precs = list(dict.fromkeys(p.strip() for p in a.precisions.split(",") if p.strip()))
    if not precs:
        raise ConfigError(None, "--precisions", a.precisions, "no precision given",
                          ", ".join(CALIBRATION_PRECISIONS))  # fmt: skip
    for p in precs:
        if p not in CALIBRATION_PRECISIONS:
            raise ConfigError(None, "--precisions", p, "unknown precision",
                              ", ".join(CALIBRATION_PRECISIONS))  # fmt: skip
    try:
        caps = [float(b) for b in a.bucket_mb.split(",") if b.strip()]
    except ValueError:
        caps = []
    import math

    # nan, inf or a cap past torch's int64 byte count was a traceback inside DDP
    if not caps or not all(math.isfinite(c) and 0 < c <= MAX_BUCKET_MB for c in caps):
        raise ConfigError(None, "--bucket-mb", a.bucket_mb, "not a comma list of caps",
                          f"MiB > 0 and <= {MAX_BUCKET_MB} (1 TiB), e.g. 1,25")  # fmt: skip
    batch = 1 if a.batch is None else a.batch  # None: each case's own batch
    for flag, value, low in (("--warmup", a.warmup, 0), ("--reps", a.reps, 1),
                             ("--rounds", a.rounds, 1), ("--batch", batch, 1)):  # fmt: skip
        if value < low:
            raise ConfigError(None, flag, value, "out of range", f"an integer >= {low}")
    if not math.isfinite(a.deadline_s) or a.deadline_s < 0:
        raise ConfigError(None, "--deadline-s", a.deadline_s, "out of range",
                          "seconds >= 0 (0: no deadline)")  # fmt: skip
    from simcluster.atomic import check_output_file

    check_output_file([("--out", a.out)], a.force)
    _make_folder("--out", Path(a.out).expanduser().parent, a.out)  # not after the timing
    if a.trace_dir:
        folder = Path(a.trace_dir).expanduser()
        if folder.resolve() == Path(a.out).expanduser().resolve():
            raise UserError(f"--trace-dir {folder}: is the --out file; give each its own path")
        if folder.exists() and not folder.is_dir():
            raise UserError(f"--trace-dir {folder}: is a file, not a folder")
        _make_folder("--trace-dir", folder, folder)
    return device, cases, precs, caps


def _make_folder(flag: str, folder: Path, shown: str | Path) -> None:
    """Create ``folder`` (and its parents) before any timing; one line if it cannot be."""
    from simcluster.errors import UserError

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{flag} {shown}: cannot write there ({exc.strerror or exc})") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m calibrate.ddp_overhead",
        description="Time a training step plain and under one-rank DDP (bucket caps, views).",
    )
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    ap.add_argument("--out", help="JSON file to write")
    ap.add_argument(
        "--summarize",
        nargs="+",
        metavar="FILE",
        help="print the per-tensor and per-call costs of written files; no timing",
    )
    ap.add_argument("--cases", default="resnet50,bert_large-128", help=f"of {', '.join(CASES)}")
    ap.add_argument("--batch", type=int, help="batch (default: each case's own)")
    ap.add_argument("--precisions", default="fp32,amp", help="comma list (default fp32,amp)")
    ap.add_argument("--bucket-mb", default="1,25", help="DDP bucket caps, MiB (default 1,25)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up steps per round (default 3)")
    ap.add_argument("--reps", type=int, default=8, help="steps per round (default 8)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over the variants (default 3)")
    ap.add_argument("--deadline-s", type=float, default=0.0, help="stop starting cases after")
    ap.add_argument(
        "--no-group-baseline",
        action="store_true",
        help="also time each plain step before the process group is created",
    )
    ap.add_argument("--trace-dir", help="also write one profiled step per variant here")
    ap.add_argument("--force", action="store_true", help="overwrite an existing --out")
    a = ap.parse_args(argv)
    if a.summarize:
        return _summarize(a.summarize)
    if not a.out:
        print("calibrate.ddp_overhead: error: --out FILE is required (or --summarize FILE)",
              file=sys.stderr)  # fmt: skip
        return 2
    from simcluster.errors import UserError

    try:
        device, cases, precs, caps = _parse(a)
        return _run(a, argv, device, cases, precs, caps)
    except UserError as exc:  # also a write refused after the timing (a full disk)
        print(f"calibrate.ddp_overhead: error: {exc}", file=sys.stderr)
        return 2


def _run(
    a: argparse.Namespace,
    argv: list[str] | None,
    device: torch.device,
    cases: list[str],
    precs: list[str],
    caps: list[float],
) -> int:
    """Time every case and precision of the parsed flags, writing ``--out`` after each."""
    t0 = time.perf_counter()
    before = []
    if a.no_group_baseline:
        for case in cases:
            for p in precs:
                r = time_plain_without_group(case, a.batch or CASES[case][2], device, p,
                                             a.warmup, a.reps, a.rounds)  # fmt: skip
                before.append(r)
                print(f"{case:15s} b{r['batch']:<4d} {p:9s} {'plain-no-group':16s} "
                      f"{r['step_s'] * 1e3:9.3f} ms", flush=True)  # fmt: skip
    backend = _init_group(device)
    meta = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if device.type == "cuda" else None,
        "backend": backend,
        "threads": torch.get_num_threads(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python -m calibrate.ddp_overhead " + " ".join(argv or sys.argv[1:]),
        "method": __doc__.split("Timing:")[1].strip().replace("\n", " "),
    }
    rows: list[dict] = list(before)
    traces = Path(a.trace_dir).expanduser() if a.trace_dir else None

    def write() -> None:  # atomic: a stop mid-write keeps the last whole file
        from simcluster.atomic import write_text_atomic

        write_text_atomic(a.out, json.dumps({"provenance": meta, "rows": rows}, indent=1))

    for case in cases:
        for p in precs:
            if a.deadline_s and time.perf_counter() - t0 > a.deadline_s:
                print(f"deadline: skipped {case} {p}", flush=True)
                continue
            batch = a.batch or CASES[case][2]
            try:
                got = time_case(case, batch, device, p, caps, a.warmup, a.reps, a.rounds, traces)
            except (RuntimeError, torch.OutOfMemoryError) as exc:
                print(f"{case} b{batch} {p}: failed: {exc}", flush=True)
                continue
            rows.extend(got)
            for r in got:
                ms, x = r["step_s"] * 1e3, r["over_plain"]
                print(f"{case:15s} b{batch:<4d} {p:9s} {r['variant']:16s} {ms:9.3f} ms  x{x:.4f}",
                      flush=True)  # fmt: skip
            write()
    meta["duration_s"] = round(time.perf_counter() - t0, 1)
    write()
    import torch.distributed as dist

    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

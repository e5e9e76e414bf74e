"""The calibration run: plan, interleaved rounds, fits, the profile files.

A run lists benchmark *items* (a zoo layer at a batch size, a kernel call with its
parameters, a roofline probe) and times every item once per *round*; rounds run one
after the other over the whole list, so a phase of interference from neighbours on a
shared machine (seconds long, up to 40x slowdowns seen on the 2-core VM this was written
on) hits one round of an item rather than all of them. An item's estimate is the median
of its quietest round (the smallest round median); all samples stay in the profile.

Plans: ``tiny`` (a few seconds, tests), ``quick`` (under a minute on 2 cores; the zoo's
ResNet-18 CIFAR layers and small shapes for every other op class) and ``full``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from simcluster.compute.extrapolation import add_beyond
from simcluster.compute.measured import (
    CHANNEL_MASK,
    COMPUTE_FEATURES,
    FRESH_OUTPUT,
    FRESH_OUTPUT_FEATURES,
    INDEX_COPY,
    KERNEL_FEATURES,
    MEMCPY_KINDS,
    OP_CLASSES,
    PROJECTION_KINDS,
    kernel_features,
    layer_features,
    layer_variant,
)
from simcluster.compute.profile import SPARSIFY_METHODS
from simcluster.errors import ConfigError

from . import kernels as K
from .allocator import MAPPED_FROM_BYTES, MAPPED_FROM_ORIGIN, glibc, heap_only
from .fit import fit_cost_model
from .layers import layer_key, math_mode, time_layer
from .timing import Measurement, Timer

__all__ = ["Workload", "Plan", "make_plan", "parse_models", "Item", "calibrate", "cpu_model"]

#: at least this many distinct shapes before an ``op:variant`` gets its own fit
MIN_VARIANT_SAMPLES = 3


@dataclass(frozen=True)
class Workload:
    """A zoo model at an input size (pixels / tokens), class count and batch size."""

    model: str
    input_size: int | None
    num_classes: int | None
    batch: int
    #: time only layers of these op classes / ``op:variant`` (``None``: all)
    only: tuple[str, ...] | None = None

    def wants(self, layer) -> bool:
        if self.only is None:
            return True
        return layer.op in self.only or f"{layer.op}:{layer_variant(layer)}" in self.only

    def label(self) -> str:
        s = self.model
        if self.input_size:
            s += f"@{self.input_size}"
        if self.num_classes:
            s += f"/{self.num_classes}"
        return f"{s}:{self.batch}"


@dataclass
class Plan:
    """What a run measures and how often (sizes in elements unless named bytes)."""

    mode: str
    workloads: list[Workload]
    precisions: tuple[str, ...] = ("fp32",)
    rounds: int = 2
    warmup: int = 1
    reps: int = 3
    min_sample_s: float = 2e-3
    #: seconds of samples per measurement before long calls get fewer repetitions
    budget_s: float | None = None
    sparsify_numels: list[int] = field(default_factory=list)
    densities: list[float] = field(default_factory=lambda: [0.01, 0.1])
    max_conv_shapes: int = 8
    mask_numels: list[int] = field(default_factory=list)
    scatter_numels: list[int] = field(default_factory=list)
    spmv_sizes: list[int] = field(default_factory=list)
    spmv_per_rows: list[int] = field(default_factory=lambda: [8, 32])
    spmv_batches: list[int] = field(default_factory=lambda: [1, 8, 64])
    elementwise_numels: list[int] = field(default_factory=list)
    memcpy_bytes: list[int] = field(default_factory=list)
    optimizer_numels: list[int] = field(default_factory=list)
    #: fresh mappings (bytes) whose first touch is timed (CPU with glibc only)
    fresh_bytes: list[int] = field(default_factory=list)
    gemm_n: int = 1024
    copy_bytes: int = 1 << 26
    #: whole models timed in the same rounds and compared with the fitted profile
    checks: list[Workload] = field(default_factory=list)
    collective_max_bytes: int = 4 << 20
    collective_rounds: int = 2
    collective_reps: int = 3
    #: time layer passes with the host issuing ahead of the GPU (CUDA only;
    #: :class:`calibrate.timing.Timer` ``host_ahead``)
    host_ahead: bool = True


def _geom(lo: int, hi: int, factor: float) -> list[int]:
    out, n = [], lo
    while n <= hi:
        out.append(int(n))
        n *= factor
    return out


def synthetic_layers(name: str) -> tuple:
    """Small layers of every op class made with the zoo's own helpers (``tiny`` runs)."""
    from simcluster.workload import model as M

    if name != "synthetic:tiny":
        raise ValueError(f"unknown synthetic workload {name!r}")
    layers = []
    for i, (seq, dim) in enumerate(((8, 32), (16, 64), (32, 32))):
        tag = f"s{i}."
        layers += [
            M.embedding(tag + "emb", 64, dim, seq),
            M.layernorm(tag + "ln", dim, seq),
            M.linear(tag + "fc", dim, 2 * dim, seq),
            M.elementwise(tag + "gelu", seq * 2 * dim, "gelu"),
            M.elementwise(tag + "drop", seq * dim, "dropout"),
            M.elementwise(tag + "tanh", seq * dim, "tanh"),
            M.attention(tag + "attn", 2, seq, dim, causal=bool(i % 2)),
            M.lstm(tag + "lstm", dim, dim // 2, seq // 4),
        ]
    return tuple(layers)


#: op-class coverage beyond the CNNs: zoo models at small sizes (reduced vocabularies)
_COVERAGE = {
    "tiny": [Workload("synthetic:tiny", None, None, 2)],
    "quick": [
        Workload("resnet18-cifar", 32, None, 8, ("conv", "norm", "elementwise")),
        Workload("shufflenet_v2", 32, 10, 8, ("conv:depthwise", "elementwise:copy", "pool")),
        Workload("bert_base", 16, 2000, 2),
        Workload("bert_base", 64, 2000, 2),
        Workload("lstm", 4, 2000, 2),
        Workload("lstm", 12, 2000, 4),
    ],
    "full": [
        Workload("shufflenet_v2", 64, 10, 16),
        Workload("shufflenet_v2", 32, 10, 32),
        Workload("vit_b16", 64, 10, 4),
        Workload("bert_base", 32, 4000, 4),
        Workload("bert_base", 128, 4000, 4),
        Workload("bert_large", 64, 4000, 2),
        Workload("gpt2_large", 32, 4000, 2),
        Workload("lstm", 16, 4000, 8),
        Workload("lstm", 35, 4000, 16),
    ],
}

_DEFAULT_MODELS = {
    "tiny": [Workload("resnet18-cifar", 8, None, 2)],
    "quick": [Workload("resnet18-cifar", 32, None, 32)],
    "full": [
        Workload("resnet18-cifar", 32, None, 32),
        Workload("resnet18-cifar", 32, None, 8),
        Workload("resnet18-cifar", 32, None, 128),
        Workload("resnet50-cifar", 32, None, 16),
        Workload("wide_resnet50_2", 32, None, 8),
        Workload("resnet152", 64, None, 4),
        Workload("vgg16", 32, None, 16),
    ],
}


def parse_models(text: str, default_batch: int) -> list[Workload]:
    """``resnet18-cifar,resnet50@64:16`` -> workloads (``MODEL[@INPUT][:BATCH]``)."""
    from simcluster.workload import build_model

    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, batch = item, default_batch
        if ":" in name:
            name, b = name.rsplit(":", 1)
            if not b.isdigit() or int(b) < 1:
                raise ConfigError(None, "--models", item, "batch must be a positive integer")
            batch = int(b)
        size = None
        if "@" in name:
            name, s = name.split("@", 1)
            if not s.isdigit() or int(s) < 1:
                raise ConfigError(None, "--models", item, "input size must be a positive integer")
            size = int(s)
        build_model(name, size)  # unknown name / bad size -> UserError with suggestions
        out.append(Workload(name.strip().lower(), size, None, batch))
    if not out:
        raise ConfigError(None, "--models", text, "no model named")
    return out


#: full runs on a GPU also time large activations (ImageNet-size inputs, big batches):
#: the activations of a training step spill a GPU's L2 cache, and the fits need
#: samples there to predict the batch sizes the paper scenarios use. BERT-large at 128
#: tokens and batch 16 (2,048 tokens): the coverage workloads stop at 512 tokens, and
#: the H200 profile of 2026-11-28 priced BERT-large at batch 32 (4,096 tokens) 29-64 %
#: too slow in tf32 / amp / amp_bf16 from them (scenarios/references/h200-steps.yaml)
_GPU_LARGE = [
    Workload("resnet18-cifar", 32, None, 256),
    Workload("resnet50", 224, None, 32),
    Workload("resnet152", 224, None, 16),
    Workload("vgg16", 224, None, 16),
    Workload("bert_large", 128, 4000, 16),
]


def make_plan(
    mode: str,
    models: list[Workload] | None = None,
    precisions: tuple[str, ...] = ("fp32",),
    rounds: int | None = None,
    gpu: bool = False,
) -> Plan:
    """The benchmark plan of a mode (``tiny``, ``quick``, ``full``); ``gpu``: a full
    plan without explicit ``models`` adds the large-activation workloads."""
    work = list(models or _DEFAULT_MODELS[mode]) + _COVERAGE[mode]
    if gpu and mode == "full" and not models:
        work += _GPU_LARGE
    if mode == "tiny":
        p = Plan(mode, work, precisions, rounds=1, warmup=1, reps=2, min_sample_s=2e-4)
        p.sparsify_numels = [256, 4096]
        p.max_conv_shapes = 2
        p.mask_numels = p.scatter_numels = [256, 4096]
        p.spmv_sizes, p.spmv_per_rows, p.spmv_batches = [256], [4], [1, 4]
        p.elementwise_numels = p.optimizer_numels = [256, 4096, 65536]
        p.memcpy_bytes = [1024, 65536]
        p.fresh_bytes = [1 << 20]
        p.gemm_n, p.copy_bytes = 128, 1 << 20
        p.collective_max_bytes, p.collective_rounds, p.collective_reps = 4096, 1, 2
    elif mode == "quick":
        p = Plan(mode, work, precisions, rounds=2, warmup=1, reps=3, min_sample_s=2e-3)
        p.sparsify_numels = [2560, 25600, 262144, 1 << 20]  # 10 KB .. 4 MB of fp32
        p.max_conv_shapes = 4
        p.mask_numels = p.scatter_numels = [4096, 65536, 1 << 20]
        p.spmv_sizes, p.spmv_per_rows, p.spmv_batches = [2048, 8192], [8, 32], [1, 8, 32]
        p.elementwise_numels = p.optimizer_numels = _geom(1024, 1 << 22, 16)
        p.memcpy_bytes = _geom(4096, 1 << 24, 16)
        p.fresh_bytes = [8 << 20, 32 << 20]
        p.gemm_n, p.copy_bytes = 1024, 1 << 26
        p.collective_max_bytes, p.collective_rounds, p.collective_reps = 4 << 20, 2, 3
    elif mode == "full":
        p = Plan(mode, work, precisions, rounds=3, warmup=1, reps=5, min_sample_s=5e-3)
        p.budget_s = 1.0
        # 2560 .. 8.1 M elements (10 KB .. 32 MB of fp32), 2 sizes a decade: a CPU
        # top-k's time is interpolated between them (simcluster.compute.measured.grid_time)
        p.sparsify_numels = _geom(2560, 25_600_000, 10**0.5)
        p.densities = [0.001, 0.01, 0.1]
        p.max_conv_shapes = 16
        p.mask_numels = p.scatter_numels = _geom(4096, 1 << 24, 8)
        p.spmv_sizes, p.spmv_per_rows = [1024, 4096, 16384, 65536], [8, 32, 64]
        p.spmv_batches = [1, 4, 16, 64, 256]
        p.elementwise_numels = p.optimizer_numels = _geom(1024, 1 << 26, 8)
        p.memcpy_bytes = _geom(4096, 1 << 28, 8)
        p.fresh_bytes = [8 << 20, 16 << 20, 32 << 20, 64 << 20, 128 << 20]
        p.gemm_n, p.copy_bytes = 2048, 1 << 28
        p.collective_max_bytes, p.collective_rounds, p.collective_reps = 256 << 20, 3, 5
    else:
        raise ValueError(f"unknown plan mode {mode!r}")
    if rounds is not None:
        p.rounds = rounds
    return p


# ----------------------------------------------------------------------------- items


@dataclass
class Item:
    """One benchmark: ``run(timer)`` returns named measurements of one round."""

    key: str
    group: str
    meta: dict[str, Any]
    run: Callable[[Timer], dict[str, Measurement]]
    device: torch.device


def _estimate(rounds: list[Measurement]) -> tuple[float, int]:
    """(median of the quietest round, its index)."""
    medians = [m.median for m in rounds]
    best = min(range(len(medians)), key=medians.__getitem__)
    return medians[best], best


def _layer_items(plan: Plan, device: torch.device) -> tuple[list[Item], list]:
    from simcluster.workload import build_model

    items: list[Item] = []
    seen: set = set()
    layers_seen = []
    for w in plan.workloads:
        if w.model.startswith("synthetic:"):
            model_layers = synthetic_layers(w.model)
        else:
            model_layers = build_model(w.model, w.input_size, w.num_classes).layers
        for layer in model_layers:
            layers_seen.append(layer)
            if not w.wants(layer):
                continue
            for precision in plan.precisions:
                key = (precision, *layer_key(layer, w.batch))
                if key in seen:
                    continue
                seen.add(key)

                def run(timer: Timer, layer=layer, b=w.batch, p=precision):
                    return time_layer(layer, b, device, timer, p)

                meta = {
                    "model": w.model,
                    "workload": w.label(),
                    "layer": layer.name,
                    "op": layer.op,
                    "variant": layer_variant(layer),
                    "precision": precision,
                    "batch": w.batch,
                    "_layer": layer,
                }
                items.append(Item(f"compute/{len(items)}", "compute", meta, run, device))
    return items, layers_seen


def _conv_shapes(layers: Iterable, limit: int) -> list[tuple[int, ...]]:
    """Up to ``limit`` distinct conv weight shapes, spread evenly over their sizes."""
    found = set()
    for layer in layers:
        s = layer.shape
        if layer.op == "conv" and s["cin"] > 4 and s.get("groups", 1) == 1:
            found.add((s["cout"], s["cin"], s["kh"], s["kw"]))
    shapes = sorted(found, key=math.prod)
    if len(shapes) <= limit:
        return shapes
    idx = sorted({round(i * (len(shapes) - 1) / (limit - 1)) for i in range(limit)})
    return [shapes[i] for i in idx]


def _kernel_item(group: str, params: dict, build, device: torch.device, n: int) -> Item:
    def run(timer: Timer) -> dict[str, Measurement]:
        # on the CPU every allocation from the heap: the kernel's own time, no page
        # faults of fresh mappings (calibrate/allocator.py; those are fresh_output's)
        with heap_only(device.type == "cpu" and group != FRESH_OUTPUT):
            fn = build()
            return {"t": timer.measure(fn)}

    return Item(f"{group}/{n}", group, dict(params), run, device)


def _kernel_items(plan: Plan, device: torch.device, layers: list) -> list[Item]:
    items: list[Item] = []

    def add(group: str, cases, dev: torch.device = device, **extra) -> None:
        for params, build in cases:
            items.append(_kernel_item(group, {**params, **extra}, build, dev, len(items)))

    host = torch.device("cpu")
    add(
        "sparsify",
        K.sparsify_cases(SPARSIFY_METHODS, plan.sparsify_numels, plan.densities, device),
        where="device",
    )
    if device.type == "cuda":
        add(
            "sparsify",
            K.sparsify_cases(SPARSIFY_METHODS, plan.sparsify_numels, plan.densities, host),
            dev=host,
            where="host",
        )
    shapes = _conv_shapes(layers, plan.max_conv_shapes)
    add("projection", K.projection_cases(shapes, device))
    add("mask_apply", K.mask_apply_cases(plan.mask_numels, device))
    add("mask_merge", K.mask_merge_cases(plan.mask_numels, device))
    for fam, params, build in K.compress_cases(shapes, device):
        items.append(_kernel_item(fam, params, build, device, len(items)))
    # the live H-SADMM code's own projection and decompress (calibrate/live/run.py)
    add(CHANNEL_MASK, K.channel_mask_cases(shapes, device))
    add(INDEX_COPY, K.index_copy_cases(shapes, device))
    add("scatter_add", K.scatter_add_cases(plan.scatter_numels, device))
    add("spmv", K.spmv_cases(plan.spmv_sizes, plan.spmv_per_rows, plan.spmv_batches, device))
    add(
        "outer_update",
        K.outer_update_cases(plan.spmv_sizes, plan.spmv_per_rows, plan.spmv_batches, device),
    )
    # CPU: copies and element-wise ops on operands that come from memory (twice the
    # last-level cache of buffers cycled), as a training step's gradients do
    evict = int(2 * llc_size(device)[0]) if device.type == "cpu" else 0
    add("elementwise", K.elementwise_cases(plan.elementwise_numels, device, evict))
    add("memcpy", K.memcpy_cases(plan.memcpy_bytes, device, evict))
    add("optimizer", K.optimizer_cases(plan.optimizer_numels, device))
    if device.type == "cpu" and glibc() is not None:
        add(FRESH_OUTPUT, K.fresh_output_cases(plan.fresh_bytes))
    return items


def _roofline_items(plan: Plan, device: torch.device) -> list[Item]:
    def gemm(dtype: torch.dtype, dev: torch.device, tf32: bool = False):
        def build():
            a = torch.randn(plan.gemm_n, plan.gemm_n, device=dev).to(dtype)
            b = torch.randn(plan.gemm_n, plan.gemm_n, device=dev).to(dtype)

            def run():
                with math_mode("tf32" if tf32 else "fp32"):
                    return a @ b

            return run

        return build

    def copy(dev: torch.device):
        def build():
            src = torch.empty(plan.copy_bytes // 4, device=dev).fill_(1.0)
            dst = torch.empty_like(src)
            return lambda: dst.copy_(src)

        return build

    def launch(dev: torch.device):
        def build():
            a, b = torch.ones(1, device=dev), torch.ones(1, device=dev)
            return lambda: torch.add(a, b)

        return build

    probes = [("gemm_fp32", gemm(torch.float32, device), device)]
    if "tf32" in plan.precisions:
        probes.append(("gemm_tf32", gemm(torch.float32, device, tf32=True), device))
    if "amp" in plan.precisions:
        half = torch.float16 if device.type == "cuda" else torch.bfloat16
        probes.append(("gemm_amp", gemm(half, device), device))
    if "amp_bf16" in plan.precisions:
        probes.append(("gemm_bf16", gemm(torch.bfloat16, device), device))
    probes += [("copy", copy(device), device), ("launch", launch(device), device)]
    if device.type == "cuda":
        host = torch.device("cpu")
        probes += [("host_copy", copy(host), host), ("host_launch", launch(host), host)]
    items = []
    for name, build, dev in probes:
        items.append(_kernel_item("roofline", {"probe": name}, build, dev, len(items)))
        items[-1].key = f"roofline/{name}"
    return items


def _loadavg() -> float | None:
    """One-minute load average of the machine (other processes compete for the CPUs)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def busy_warning() -> str | None:
    """A warning when other processes keep this machine's CPUs busy, else ``None``."""
    load = _loadavg()
    cpus = len(os.sched_getaffinity(0))
    if load is not None and load > 0.5 * cpus:
        return (
            f"the machine is busy (1-min load {load} on {cpus} CPUs): other processes slow "
            "kernels down; the profile records the load, rerun when it is quiet"
        )
    return None


def _check_items(plan: Plan, device: torch.device) -> list[Item]:
    """Forward + backward of whole torch models (``calibrate.models``), one item each."""
    from simcluster.workload import build_model

    from .models import torch_model

    items = []
    for w in plan.checks:
        size = w.input_size or build_model(w.model).input_size

        def run(timer: Timer, w=w, size=size) -> dict[str, Measurement]:
            module = torch_model(w.model).to(device).train()
            x = torch.randn(w.batch, 3, size, size, device=device)
            with torch.no_grad():
                g = torch.ones_like(module(x))

            def step() -> None:
                module.zero_grad(set_to_none=True)
                module(x).backward(g)

            out = {"t": timer.measure(step)}
            if timer.cuda:  # the GPU's time and the host's issue time of the same step
                out["t_gpu"] = dataclasses.replace(timer, host_ahead=True).measure(step)
            return out

        meta = {"model": w.model, "input_size": size, "batch": w.batch}
        items.append(Item(f"check/{w.label()}", "check", meta, run, device))
    return items


def _checks(items: list[Item], results, profile_data: dict) -> list[dict]:
    """Simulated (sum of the fitted layer times) vs measured whole-model seconds."""
    from simcluster.compute.measured import MeasuredProfile
    from simcluster.workload import build_model

    from .models import simulated_time

    prof = MeasuredProfile.from_data(profile_data)
    out = []
    for it in items:
        rounds = [r["t"] for r in results[it.key]]
        measured, _ = _estimate(rounds)
        model = build_model(it.meta["model"], it.meta["input_size"])
        sim = simulated_time(prof, model, it.meta["batch"])
        rec = {
            **it.meta,
            "measured_s": _sig(measured),
            "simulated_s": _sig(sim["total_s"]),
            "error": round((sim["total_s"] - measured) / measured, 4),
            "what": "forward + backward (fixed output gradient, no loss) of a torch "
            "nn.Module built like the zoo's table, timed in the same rounds as the "
            "layers; simulated = sum of the profile's fwd + bwd_weight + bwd_input "
            "(not for the first layer)",
            "rounds": _round_json(rounds),
        }
        if "t_gpu" in results[it.key][0]:  # CUDA: the same step with the host ahead
            ahead = [r["t_gpu"] for r in results[it.key]]
            gpu, k = _estimate(ahead)
            rec.update(
                measured_gpu_s=_sig(gpu),
                host_issue_s=_sig(statistics.median(ahead[k].host or [0.0])),
                gpu_error=round((sim["total_s"] - gpu) / gpu, 4),
                gpu_what="the same step timed with the host ahead of the GPU "
                "(calibrate/timing.py): the GPU's time for its work back to back, and "
                "the host's time to issue it",
                gpu_rounds=_round_json(ahead),
            )
        out.append(rec)
    return out


#: where sysfs describes the first CPU's caches
SYSFS_CACHES = "/sys/devices/system/cpu/cpu0/cache"
_NO_SYSFS = (0.0, "unknown (no sysfs cache information)")


def _sysfs_caches(base: str) -> Iterator[tuple[str, int, float, str]]:
    """The data and unified caches sysfs lists under ``base`` (its ``indexN`` folders):
    ``(folder, level, bytes, size as written)`` each, in folder order. Raises OSError or
    ValueError where sysfs does not say (no folder, an unreadable or malformed entry)."""
    for idx in sorted(os.listdir(base)):
        if not idx.startswith("index"):
            continue
        d = os.path.join(base, idx)
        with open(os.path.join(d, "level")) as f:
            level = int(f.read().strip())
        with open(os.path.join(d, "type")) as f:
            kind = f.read().strip()
        if kind not in ("Unified", "Data"):
            continue
        with open(os.path.join(d, "size")) as f:
            size = f.read().strip().upper()
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        yield idx, level, float(size.rstrip("KMG")) * mult, size


def cache_size(device: torch.device, threads: int) -> tuple[float, str]:
    """Bytes of cache a layer pass runs in, and where the number came from.

    CPU: the per-core L2 (sysfs) times the threads (each runs on a core of its own);
    CUDA: the GPU's L2.
    """
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        l2 = float(getattr(props, "L2_cache_size", 0) or 0)
        return l2, "torch.cuda.get_device_properties().L2_cache_size"
    try:
        for idx, level, per_core, size in _sysfs_caches(SYSFS_CACHES):
            if level == 2:
                where = f"{SYSFS_CACHES}/{idx}: L2 {size} per core x {threads} threads"
                return per_core * threads, where
    except (OSError, ValueError):
        pass
    return _NO_SYSFS


def llc_size(device: torch.device, base: str = SYSFS_CACHES) -> tuple[float, str]:
    """Bytes of the last-level cache, and where the number came from.

    CPU: the highest-level data or unified cache of cpu0 in sysfs (``base``), one
    instance (a streaming kernel on an otherwise idle socket has all of it); CUDA: the
    GPU's L2, its last level (as :func:`cache_size`).
    """
    if device.type == "cuda":
        return cache_size(device, 1)
    try:
        caches = list(_sysfs_caches(base))
    except (OSError, ValueError):
        return _NO_SYSFS
    if not caches:
        return _NO_SYSFS
    idx, level, nbytes, size = max(caches, key=lambda c: c[1])  # the first of the top level
    return nbytes, f"{base}/{idx}: L{level} {size}"


def _canary(device: torch.device) -> Callable[[], object]:
    a = torch.randn(256, 256, device=device)
    b = torch.randn(256, 256, device=device)
    return lambda: a @ b


# ----------------------------------------------------------------------------- fits


def _round_json(rounds: list[Measurement]) -> list[dict]:
    return [m.to_json() for m in rounds]


def _fit_compute(
    items: list[Item], results: dict[str, list[dict[str, Measurement]]], cache_bytes: float
) -> tuple:
    """Per precision and op class (and variant): fits of fwd, bwd_input, bwd_weight."""
    rows: dict[tuple[str, str], list[dict]] = {}
    samples = []
    for it in items:
        rounds = results[it.key]
        layer = it.meta["_layer"]
        fwd, _ = _estimate([r["fwd"] for r in rounds])
        bwd_all, _ = _estimate([r["bwd_all"] for r in rounds])
        has_w = "bwd_weight" in rounds[0] and (layer.params > 0 or layer.shape.get("tied"))
        if "bwd_input" in rounds[0]:
            # split the full backward in proportion to the direct measurements
            d_in, _ = _estimate([r["bwd_input"] for r in rounds])
            d_w, _ = _estimate([r["bwd_weight"] for r in rounds])
            share = d_in / (d_in + d_w) if d_in + d_w > 0 else 1.0
            bwd_in, bwd_w = bwd_all * share, bwd_all * (1 - share)
        elif "bwd_weight" in rounds[0]:  # no input gradient (embedding); older samples
            bwd_w = min(_estimate([r["bwd_weight"] for r in rounds])[0], bwd_all)
            bwd_in = bwd_all - bwd_w
        else:  # no parameters
            bwd_in, bwd_w = bwd_all, 0.0
        if layer.op == "embedding":
            bwd_in = 0.0
        rec = {
            "layer": layer,
            "batch": it.meta["batch"],
            "precision": it.meta["precision"],
            "fwd": fwd,
            "bwd_input": bwd_in,
            "bwd_weight": bwd_w if has_w else None,
            "bwd_all": bwd_all,
        }
        keys = [layer.op]
        if it.meta["variant"]:
            keys.append(f"{layer.op}:{it.meta['variant']}")
        for k in keys:
            rows.setdefault((it.meta["precision"], k), []).append(rec)
        samples.append(
            {
                **{k: v for k, v in it.meta.items() if not k.startswith("_")},
                "shape": dict(layer.shape),
                "flops": layer.flops,
                "fwd_s": _sig(fwd),
                "bwd_input_s": _sig(bwd_in),
                "bwd_weight_s": _sig(bwd_w) if has_w else None,
                "rounds": {name: _round_json([r[name] for r in rounds]) for name in rounds[0]},
            }
        )
    compute: dict[str, dict[str, dict[str, dict]]] = {}
    few: list[tuple[str, str, list[dict]]] = []
    for (precision, key), recs in sorted(rows.items()):
        if ":" in key and len(recs) < MIN_VARIANT_SAMPLES:
            few.append((precision, key, recs))
            continue
        fits = {}
        for pass_ in ("fwd", "bwd_input", "bwd_weight"):
            op = key.split(":", 1)[0]
            if op == "embedding" and pass_ == "bwd_input":
                continue
            use = [r for r in recs if pass_ != "bwd_weight" or r["bwd_weight"] is not None]
            if not use:  # op class without parameters: never asked (params == 0)
                fits[pass_] = {"features": ["const"], "coef": [0.0], "n": 0}
                continue
            feats = [
                layer_features(r["layer"], r["batch"], precision, pass_, cache_bytes) for r in use
            ]
            times = [r[pass_] for r in use]
            # a backward part is weighed against its whole backward: a part that is ~0
            # (e.g. clamped noise) must not dominate a fit on relative errors
            scale = [r["fwd"] if pass_ == "fwd" else r["bwd_all"] for r in use]
            floors = [max(0.05 * x, 1e-7) for x in scale]
            fits[pass_] = fit_cost_model(feats, times, COMPUTE_FEATURES, floor=floors, edge=True)
        compute.setdefault(precision, {})[key] = fits
    # a variant seen in fewer shapes: its op class's fit, scaled to its own samples
    for precision, key, recs in few:
        op = key.split(":", 1)[0]
        fits = {}
        for pass_, base in compute[precision][op].items():
            use = [r for r in recs if pass_ != "bwd_weight" or r["bwd_weight"] is not None]
            fits[pass_] = _scaled_fit(base, use, precision, pass_, cache_bytes)
        compute[precision][key] = fits
    return compute, samples


def _scaled_fit(
    base: dict,
    recs: list[dict],
    precision: str,
    pass_: str,
    cache_bytes: float,
    sm_count: int = 0,
) -> dict:
    """``base`` times the median ratio measured / predicted over ``recs`` (samples with a
    measured time; ``sm_count`` for the wave feature, as :func:`layer_features`)."""
    from simcluster.compute.measured import Fit

    fit = Fit(tuple(base["features"]), tuple(base["coef"]))
    pairs = []
    for r in recs:
        if not r[pass_]:
            continue
        feats = layer_features(r["layer"], r["batch"], precision, pass_, cache_bytes, sm_count)
        pred = fit(feats)
        if pred > 0 and r[pass_] > 0:
            pairs.append((r[pass_], pred))
    scale = statistics.median(t / p for t, p in pairs) if pairs else 1.0
    rel = [abs(scale * p - t) / t for t, p in pairs] or [0.0]
    out = {
        "features": list(base["features"]),
        "coef": [float(f"{c * scale:.6g}") for c in base["coef"]],
        "n": len(pairs),
        "scaled_from": "op class fit",
        "scale": float(f"{scale:.4g}"),
        "rel_err_median": float(f"{statistics.median(rel):.4g}"),
        "rel_err_max": float(f"{max(rel):.4g}"),
    }
    if "edge" in base:  # the op class's samples, the variant's among them, span its range
        out["edge"] = dict(base["edge"])
    return out


def _sig(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}") if x else 0.0


def _fit_kernels(
    items: list[Item],
    results: dict[str, list[dict[str, Measurement]]],
    device: torch.device,
    cache_bytes: float = 0.0,
) -> tuple[dict, list]:
    groups: dict[tuple[str, ...], list[tuple[dict, float]]] = {}
    samples = []
    for it in items:
        rounds = [r["t"] for r in results[it.key]]
        est, _ = _estimate(rounds)
        fam = it.group
        params = {k: v for k, v in it.meta.items()}
        if fam == "sparsify":
            path = ("sparsify", params["where"], params["method"])
        elif fam == "projection":
            path = ("projection", params["kind"])
        elif fam == "spmv":
            path = ("spmv", "spmv" if params["batch"] <= 1 else "spmm")
        elif fam == "memcpy":
            path = ("memcpy", params["kind"])
        else:
            path = (fam,)
        groups.setdefault(path, []).append((params, est))
        samples.append(
            {"family": fam, **params, "estimate_s": _sig(est), "rounds": _round_json(rounds)}
        )

    kernels: dict[str, Any] = {}
    for path, rows in sorted(groups.items()):
        fam = path[0]
        times = [t for _, t in rows]
        if fam == FRESH_OUTPUT:
            values = [{"nbytes": float(p["nbytes"])} for p, _ in rows]
            kernels[FRESH_OUTPUT] = {
                **fit_cost_model(values, times, FRESH_OUTPUT_FEATURES, floor=1e-7),
                "mapped_from_bytes": MAPPED_FROM_BYTES,
                "mapped_from": MAPPED_FROM_ORIGIN,
                "what": "first touch of nbytes of a fresh anonymous mapping, one byte a "
                "page, then unmapped (calibrate.kernels.fresh_output_cases): priced per "
                "fresh allocation of at least mapped_from_bytes",
            }
            continue
        feat_key = ".".join(path[:2]) if fam == "spmv" else fam
        feats = KERNEL_FEATURES[feat_key]
        values = [kernel_features(fam, p, cache_bytes) for p, _ in rows]
        fit = fit_cost_model(values, times, feats, floor=1e-7)
        if fam == "sparsify" and device.type == "cpu":
            table = _sparsify_table(rows)
            if table is not None:
                fit["table"] = table
        node = kernels
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = fit
    if device.type != "cuda":
        # one processor: host kernels are the device kernels; no host link to copy over
        kernels["sparsify"]["host"] = dict(kernels["sparsify"]["device"])
        for kind in MEMCPY_KINDS[1:]:
            kernels["memcpy"][kind] = "d2d"
    missing = [k for k in PROJECTION_KINDS if k not in kernels.get("projection", {})]
    if missing:
        raise RuntimeError(f"projection kinds not measured: {missing}")
    return kernels, samples


def _sparsify_table(rows: list[tuple[dict, float]]) -> dict | None:
    """The measured times of one sparsify method on its grid of densities x sizes (the
    profile's ``table``, interpolated by :func:`simcluster.compute.measured.grid_time`);
    None unless every (density, size) pair was measured, at 2 sizes or more."""
    times = {(float(p["density"]), int(p["numel"])): t for p, t in rows}
    dens = sorted({d for d, _ in times})
    sizes = sorted({n for _, n in times})
    if len(sizes) < 2 or len(times) != len(dens) * len(sizes):
        return None
    return {
        "density": dens,
        "numel": sizes,
        "seconds": [[_sig(times[(d, n)]) for n in sizes] for d in dens],
        "what": "measured seconds per density (rows) and numel (columns), used instead "
        "of the fit: piecewise linear in numel, linear in log(density) between rows",
    }


def _roofline(items: list[Item], results: dict[str, list[dict[str, Measurement]]], plan: Plan):
    est = {it.meta["probe"]: _estimate([r["t"] for r in results[it.key]])[0] for it in items}
    flops = 2 * plan.gemm_n**3
    roof: dict[str, Any] = {
        "peak_flops": {"fp32": _sig(flops / est["gemm_fp32"])},
        "memory_bandwidth": _sig(2 * plan.copy_bytes / est["copy"]),
        "launch_overhead_s": _sig(est["launch"]),
    }
    if "gemm_tf32" in est:
        roof["peak_flops"]["tf32_tensor"] = _sig(flops / est["gemm_tf32"])
    if "gemm_amp" in est:
        roof["peak_flops"]["fp16_tensor"] = _sig(flops / est["gemm_amp"])
    if "gemm_bf16" in est:
        roof["peak_flops"]["bf16_tensor"] = _sig(flops / est["gemm_bf16"])
    if "host_copy" in est:
        roof["host"] = {
            "memory_bandwidth": _sig(2 * plan.copy_bytes / est["host_copy"]),
            "launch_overhead_s": _sig(est["host_launch"]),
        }
    roof["method"] = (
        f"fp32 GEMM {plan.gemm_n}^3 with TF32 off (FLOP/s; tf32_tensor: the same with TF32 "
        "on; fp16_tensor: the same GEMM under amp, fp16 on CUDA, bf16 on a CPU; bf16_tensor: "
        f"in bf16); copy_ of {plan.copy_bytes} bytes counted as read + write "
        "(bytes/s); add of one-element tensors (s)"
    )
    samples = [
        {"probe": it.meta["probe"], "rounds": _round_json([r["t"] for r in results[it.key]])}
        for it in items
    ]
    return roof, samples


# ----------------------------------------------------------------------------- provenance


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def device_provenance(device: torch.device, threads: int) -> dict[str, Any]:
    cuda = device.type == "cuda"
    cpu = cpu_model()
    return {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if cuda else f"{cpu} ({threads} threads)",
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "driver": _driver_version() if cuda else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def guess_spec(device: torch.device) -> str | None:
    """The spec profile of a GPU by its name (for the transfer model), if one matches."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device).lower()
    table = [
        ("h200", "h200-sxm"),
        ("h100", "h100-sxm"),
        ("a100", "a100-80gb-sxm"),
        ("v100s", "v100s-pcie-32gb"),
        ("v100", "v100-sxm2-32gb"),
    ]
    for needle, spec in table:
        if needle in name:
            return spec
    return None


# ----------------------------------------------------------------------------- run


def calibrate(
    device: torch.device,
    plan: Plan,
    name: str,
    command: str,
    threads: int,
    progress: Callable[[int, int, str], None] | None = None,
    spec_profile: str | None = None,
    clock: str = "wall",
) -> dict[str, Any]:
    """Run the plan; returns the device profile JSON (kind ``measured``).

    ``clock`` ``cpu`` times with the calling thread's CPU time (one torch thread, CPU
    device): the profile then describes one core of this CPU as if it had it alone.
    """
    t0 = time.perf_counter()
    load_start = _loadavg()
    torch.manual_seed(0)
    timer = Timer(device, plan.warmup, plan.reps, plan.min_sample_s, clock=clock)
    timer.budget_s = plan.budget_s
    # layer passes: the GPU's time with the host ahead, as in a training step (on CUDA)
    layer_timer = dataclasses.replace(timer, host_ahead=plan.host_ahead)
    layer_items, layers = _layer_items(plan, device)
    kernel_items = _kernel_items(plan, device, layers)
    roof_items = _roofline_items(plan, device)
    check_items = _check_items(plan, device)
    items = roof_items + layer_items + check_items + kernel_items
    results: dict[str, list[dict[str, Measurement]]] = {it.key: [] for it in items}
    total = plan.rounds * len(items)
    done = 0
    host_timer = Timer(torch.device("cpu"), plan.warmup, plan.reps, plan.min_sample_s)
    host_timer.budget_s = plan.budget_s
    spent: dict[str, float] = {}
    canary = _canary(device)
    canary_s: list[float] = []
    for r in range(plan.rounds):
        canary_s.append(_sig(timer.measure(canary).median))
        for it in items:
            if progress:
                progress(done, total, f"round {r + 1}/{plan.rounds} {it.group}")
            t_item = time.perf_counter()
            use = host_timer if it.device.type != device.type else timer
            if it.group == "compute" and use is timer:
                use = layer_timer
            results[it.key].append(it.run(use))
            group = it.group if it.group != "compute" else f"compute:{it.meta['model']}"
            spent[group] = spent.get(group, 0.0) + time.perf_counter() - t_item
            done += 1
    if progress:
        progress(total, total, "fitting")
    cache_bytes, cache_origin = cache_size(device, threads)
    compute, compute_samples = _fit_compute(layer_items, results, cache_bytes)
    missing = [
        f"{p}.{op}" for p in plan.precisions for op in OP_CLASSES if op not in compute.get(p, {})
    ]
    if missing:
        raise RuntimeError(f"op classes without samples: {missing}")
    llc_bytes, llc_origin = llc_size(device)
    kernels, kernel_samples = _fit_kernels(kernel_items, results, device, llc_bytes)
    roof, roof_samples = _roofline(roof_items, results, plan)
    roof["cache_bytes"] = cache_bytes
    roof["cache_origin"] = cache_origin
    roof["llc_bytes"] = llc_bytes
    roof["llc_origin"] = llc_origin
    prov = device_provenance(device, threads)
    prov.update(
        {
            "description": f"measured on {prov['device_name']}",
            "command": command,
            "argv": sys.argv,
            "mode": plan.mode,
            "clock": clock if device.type != "cuda" else "cuda events",
            "precisions": list(plan.precisions),
            "workloads": [w.label() for w in plan.workloads],
            "timing": (
                f"{plan.rounds} interleaved round(s) x ({plan.warmup} warm-up + {plan.reps} "
                f"samples); a sample lasts >= {plan.min_sample_s} s (inner repetitions); "
                "estimate = median of the quietest round; "
                + (
                    "torch.cuda.Event timing"
                    + (
                        "; layer passes with the host ahead: a GPU sleep queued before each "
                        "sample, the calls timed between events after it (the GPU's time, as "
                        "in a training step; host_samples_s: the host's issue time per call; "
                        "calibrate/timing.py)"
                        if layer_timer.ahead
                        else "; layer passes timed per call (an isolated call's host cost included)"
                    )
                    if device.type == "cuda"
                    else "thread CPU time (time.thread_time, 1 torch thread)"
                    if clock == "cpu"
                    else "wall time (time.perf_counter)"
                )
            ),
            "method": (
                "per op class and pass (and per variant with >= 3 shapes), t = c0 + c1 * "
                "flops + c2 * bytes fitted by non-negative least squares on relative errors "
                "over the zoo's layer shapes (calibrate/fit.py); a variant with fewer shapes "
                "uses its op class's fit scaled by the median measured/predicted ratio; "
                "the full backward is split into bwd_input and bwd_weight in proportion to "
                "input-only and weight-only backward timings; kernel families fitted on "
                "their parameters (simcluster/compute/measured.py)"
            ),
            "duration_s": round(time.perf_counter() - t0, 1),
            "seconds_by_group": {k: round(v, 2) for k, v in sorted(spent.items())},
            "canary_s": canary_s + [_sig(timer.measure(canary).median)],
            "canary": "fp32 matmul 256x256x256 timed before each round and at the end: "
            "a spread shows interference during the run",
            "loadavg_1min": {"start": load_start, "end": _loadavg()},
            "benchmarks": len(items),
        }
    )
    if layer_timer.ahead:
        prov["layer_timing"] = {
            "mode": "host-ahead",
            "samples_host_behind": layer_timer.host_behind,
            "what": "layer-pass samples kept although the host was still issuing calls "
            "when the GPU's sleep ended (after calibrate.timing.HOST_AHEAD_TRIES tries); "
            "they hold host gaps",
        }
    notes = []
    if device.type != "cuda":
        notes.append(
            "CPU device: host and device are one processor; sparsify.host = sparsify.device "
            "and host <-> device copies are aliases of d2d"
        )
    if "amp" not in plan.precisions:
        notes.append("no amp fits (pass --precisions fp32,amp to measure them)")
    notes.append(
        "fp32 fits are strict fp32 (TF32 off for matmuls and convolutions); tf32 fits have "
        "TF32 on for both; amp = fp16 autocast on CUDA, amp_bf16 = bf16 autocast"
    )
    prov["notes"] = notes
    device_section: dict[str, Any] = {"compute": compute, "kernels": kernels, "roofline": roof}
    if spec_profile:
        device_section["spec_profile"] = spec_profile
    data = {
        "schema_version": 1,
        "name": name,
        "kind": "measured",
        "provenance": prov,
        "device": device_section,
        "samples": {
            "compute": compute_samples,
            "kernels": kernel_samples,
            "roofline": roof_samples,
        },
    }
    add_beyond(data)  # the roofline past each compute fit's largest sample
    data = per_call_floors(data, device.type, layer_timer.ahead)
    if check_items:
        prov = data["provenance"]
        prov["check"] = _checks(check_items, results, data)
    return data


def per_call_floors(data: dict[str, Any], device_type: str, ahead: bool) -> dict[str, Any]:
    """A GPU profile whose layer passes were timed call by call (``--layer-timing
    per-call``) with its compute fits re-fitted with host floors, as ``python -m
    calibrate.refit --host-floor`` does (its samples are the pace of the slower of the
    host and the GPU; :func:`calibrate.fit.fit_host_floor`); other profiles unchanged."""
    if device_type != "cuda" or ahead:
        return data
    from .refit import refit_host_floor

    return refit_host_floor(data, "simcluster calibrate (per-call layer timing on CUDA)")


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


# ----------------------------------------------------------------------------- refit


def _workload_from_label(label: str) -> Workload:
    """Inverse of :meth:`Workload.label` (``model[@input][/classes]:batch``)."""
    head, batch = label.rsplit(":", 1)
    size = classes = None
    if "@" in head:
        head, rest = head.split("@", 1)
        if "/" in rest:
            rest, c = rest.split("/", 1)
            classes = int(c)
        size = int(rest)
    elif "/" in head and not head.startswith("synthetic:"):
        head, c = head.split("/", 1)
        classes = int(c)
    return Workload(head, size, classes, int(batch))


def _measurement(raw: dict) -> Measurement:
    return Measurement([float(x) for x in raw["samples_s"]], int(raw.get("inner", 1)), 0)


def refit_kernels(data: dict[str, Any], llc_bytes: float) -> dict[str, Any]:
    """``device.kernels`` fitted again from the profile's kernel samples, the ``*_spill``
    features counted beyond ``llc_bytes`` (bytes), as calibration fits them."""
    items: list[Item] = []
    results: dict[str, list[dict[str, Measurement]]] = {}
    for i, s in enumerate(data["samples"]["kernels"]):
        key = f"kernel/{i}"
        params = {k: v for k, v in s.items() if k not in ("family", "rounds", "estimate_s")}
        items.append(Item(key, s["family"], params, lambda t: {}, torch.device("cpu")))
        results[key] = [{"t": _measurement(r)} for r in s["rounds"]]
    device = torch.device(str(data["provenance"].get("device", "cpu")))
    kernels, _ = _fit_kernels(items, results, device, llc_bytes)
    return kernels


def refit(data: dict[str, Any]) -> dict[str, Any]:
    """The profile refitted from its own samples (no measurement): new cost models, same
    samples; the whole-model checks are re-evaluated with the new fits."""
    from simcluster.workload import build_model

    out = dict(data)
    dev = dict(data["device"])
    cache = float(dev.get("roofline", {}).get("cache_bytes", 0.0))
    tables: dict[str, dict[str, Any]] = {}
    items: list[Item] = []
    results: dict[str, list[dict[str, Measurement]]] = {}
    for i, s in enumerate(data["samples"]["compute"]):
        label = s["workload"]
        if label not in tables:
            w = _workload_from_label(label)
            layers = (
                synthetic_layers(w.model)
                if w.model.startswith("synthetic:")
                else build_model(w.model, w.input_size, w.num_classes).layers
            )
            tables[label] = {layer.name: layer for layer in layers}
        layer = tables[label][s["layer"]]
        meta = {k: v for k, v in s.items() if k not in ("rounds", "shape", "flops")}
        meta = {k: v for k, v in meta.items() if not k.endswith("_s")}
        meta["_layer"] = layer
        key = f"compute/{i}"
        items.append(Item(key, "compute", meta, lambda t: {}, torch.device("cpu")))
        n_rounds = len(next(iter(s["rounds"].values())))
        results[key] = [
            {name: _measurement(r[j]) for name, r in s["rounds"].items()} for j in range(n_rounds)
        ]
    compute, _ = _fit_compute(items, results, cache)
    llc = float(dev.get("roofline", {}).get("llc_bytes", cache))
    kernels = refit_kernels(data, llc)
    device = torch.device(str(data["provenance"].get("device", "cpu")))
    dev["compute"], dev["kernels"] = compute, kernels
    out["device"] = dev
    add_beyond(out)
    prov = dict(data["provenance"])
    checks = []
    for c in prov.get("check", []):
        item = Item(
            f"check/{c['model']}",
            "check",
            {k: c[k] for k in ("model", "input_size", "batch")},
            lambda t: {},
            device,
        )  # noqa: E501
        results[item.key] = [{"t": _measurement(r)} for r in c["rounds"]]
        checks.append(item)
    if checks:
        prov["check"] = _checks(checks, results, out)
    out["provenance"] = prov
    return out

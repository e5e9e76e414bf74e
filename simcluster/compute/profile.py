"""Device profiles: how long a kernel takes on one device.

:class:`DeviceProfile` is the interface schedules use. :class:`SpecProfile`
derives times from a spec sheet with a roofline per op class::

    t = launch_overhead + max(flops / (peak_flops[precision] * efficiency[op]),
                              bytes / (memory_bandwidth * memory_efficiency))

Its constants (peak FLOP/s, memory bandwidth in bytes/s, launch overhead in
seconds, efficiencies) come from the profile file and say where they came from;
a spec profile is labelled ``kind = "spec"`` wherever a prediction is shown.
Measured and derived profiles (the calibration issue) implement the same
interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from simcluster.compute.precision import (
    COMPUTE_KEYS,
    PEAK_NAMES,
    activation_bytes,
    describe_key,
    is_amp,
    peak_key,
    required_peak,
)

__all__ = [
    "DeviceProfile",
    "SpecProfile",
    "PRECISIONS",
    "PASSES",
    "KERNEL_FAMILIES",
    "OPTIMIZERS",
    "OPTIMIZER_PASSES",
]

#: precision keys a profile times (:data:`simcluster.compute.precision.COMPUTE_KEYS`)
PRECISIONS = COMPUTE_KEYS
PASSES = ("fwd", "bwd_input", "bwd_weight")
#: Kernel families a schedule may time with :meth:`DeviceProfile.kernel_time`, and their
#: parameters. Sizes are element counts (fp32 unless stated), bytes are bytes.
KERNEL_FAMILIES: dict[str, str] = {
    "sparsify": "numel, density, method (exact|dgc|gaussian|random|threshold), where (device|host)",
    "projection": "numel (weight elements), groups (structures scored), kind "
    "(filter|channel|kernel_shape|combined)",
    "mask_apply": "numel (weight elements): multiply by a cached mask",
    "mask_merge": "numel (mask elements, bytes): bitwise OR of two masks",
    "compress": "numel (kept elements): index_select + contiguous",
    "decompress": "numel (full elements), kept (kept elements): index_put_ into zeros",
    "scatter_add": "numel (received elements)",
    "spmv": "nnz, rows, batch (1 = SpMV, >1 = SpMM)",
    "outer_update": "nnz (weights updated by a sparse outer product), batch",
    "elementwise": "nbytes (read + written)",
    "memcpy": "nbytes, kind (d2d|h2d_pinned|h2d_pageable|d2h_pinned|d2h_pageable)",
    "optimizer": "num_params (SGD with momentum)",
}
SPARSIFY_METHODS = ("exact", "dgc", "gaussian", "random", "threshold")

#: Bytes of fp32 memory traffic per parameter of each pass of an optimizer step, as
#: PyTorch's fused / foreach implementations run it (a memory-bandwidth model):
#:
#: * ``sgd`` (momentum): read param, grad, momentum; write param, momentum: 5 x 4 B;
#: * ``adam`` / ``adamw``: read param, grad, m, v; write param, m, v: 7 x 4 B (AdamW's
#:   decoupled weight decay is folded into the same pass);
#: * ``lamb`` (NVIDIA's FusedLAMB): pass 1 reads grad, m, v, param and writes m, v and
#:   the update (7 x 4 B); the per-tensor norms of param and update read 2 x 4 B; pass 2
#:   reads param and update and writes param (3 x 4 B).
OPTIMIZER_PASSES: dict[str, tuple[int, ...]] = {
    "sgd": (20,),
    "adam": (28,),
    "adamw": (28,),
    "lamb": (28, 8, 12),
}
OPTIMIZERS = tuple(OPTIMIZER_PASSES)
#: bytes per parameter of the measured ``optimizer`` kernel (SGD with momentum)
SGD_BYTES_PER_PARAM = 20
#: GradScaler's unscale + inf check per parameter under fp16 autocast: read + write grad
UNSCALE_BYTES_PER_PARAM = 8
#: PyTorch DDP's cost per gradient tensor (seconds) where the host is the step's critical
#: path: the Reducer's autograd hook with its copy into the bucket and the copy back.
#: Median of five host-bound (amp) splits of one-rank DDP against the plain step, ResNet-50
#: and BERT-large on lent H200 machines (13.3-36.7 us; calibrate/measurements/h200-2026-11-28,
#: ``python -m calibrate.ddp_overhead --summarize``). A profile's ``host.ddp_hook_s`` replaces it.
DDP_HOOK_S = 24.0e-6
#: PyTorch DDP's cost per bucket (seconds), same measurements (0.022-0.245 ms): one c10d
#: allreduce call with its work and future bookkeeping and the wait for it after backward.
#: A profile's ``host.ddp_bucket_s`` replaces it.
DDP_BUCKET_S = 0.19e-3
#: the host-section keys a profile may set to replace them
DDP_HOST_KEYS = ("ddp_hook_s", "ddp_bucket_s")


class DeviceProfile(ABC):
    """Kernel times on one device, in seconds."""

    name: str
    kind: str  # "measured" | "derived" | "spec"
    provenance: dict[str, Any]

    @abstractmethod
    def layer_time(self, layer, batch: int, precision: str, pass_: str) -> float:
        """Seconds for one pass (``fwd``, ``bwd_input``, ``bwd_weight``) of a layer."""

    #: device memory (bytes) from the spec sheet; None when the profile does not say
    memory_bytes: float | None = None
    #: PyTorch DDP's host-bound costs (seconds): per gradient tensor, per bucket
    ddp_hook_s: float = DDP_HOOK_S
    ddp_bucket_s: float = DDP_BUCKET_S

    def optimizer_time(self, num_params: int, precision: str, optimizer: str = "sgd") -> float:
        """Seconds for one optimizer step over ``num_params`` fp32 parameters.

        Each pass of :data:`OPTIMIZER_PASSES` costs what the device's SGD-momentum step
        (:meth:`sgd_time`, 20 bytes per parameter) costs for the same bytes; fp16
        autocast adds GradScaler's unscale pass (:data:`UNSCALE_BYTES_PER_PARAM`).
        """
        if optimizer not in OPTIMIZER_PASSES:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        t = 0.0
        for nbytes in OPTIMIZER_PASSES[optimizer]:
            t += self.sgd_time(num_params * nbytes / SGD_BYTES_PER_PARAM)
        if precision == "amp":
            t += self.elementwise_time(UNSCALE_BYTES_PER_PARAM * num_params)
        return t

    @abstractmethod
    def sgd_time(self, num_params: float) -> float:
        """Seconds for an SGD-with-momentum step over ``num_params`` fp32 parameters."""

    @abstractmethod
    def precision_problem(self, precision: str) -> str | None:
        """Why this device cannot run compute key ``precision`` (None when it can)."""

    @abstractmethod
    def memcpy_time(self, nbytes: float, kind: str = "d2d") -> float:
        """Seconds to copy ``nbytes`` (``d2d``, ``h2d``, ``d2h``)."""

    @abstractmethod
    def elementwise_time(self, nbytes: float) -> float:
        """Seconds for a memory-bound kernel touching ``nbytes`` in total."""

    @abstractmethod
    def kernel_time(self, family: str, **params: float | str) -> float:
        """Seconds for one kernel of a family in :data:`KERNEL_FAMILIES`."""

    def source_of(self, family: str) -> str:
        """How this profile times a family: ``measured``, ``derived`` or ``spec``."""
        return self.kind

    def fresh_output_time(self, nbytes: float) -> float:
        """Seconds an op pays on top of its kernel for a freshly allocated output (or
        scratch buffer) of ``nbytes`` bytes: the first touch of fresh pages where the
        host's allocator maps them anew per allocation. 0 unless the profile measured it
        (``device.kernels.fresh_output`` of a CPU profile, see
        :class:`~simcluster.compute.measured.MeasuredProfile`); a GPU's caching allocator
        reuses its blocks."""
        return 0.0

    def optional_kernel_time(self, family: str, **params: float | str) -> float | None:
        """Seconds for one call of a kernel family a profile may lack
        (:data:`~simcluster.compute.measured.OPTIONAL_KERNELS`: the live H-SADMM code's
        ``channel_mask`` and ``index_copy``); None unless the profile measured it."""
        return None

    def dispatch_time(self) -> float:
        """Seconds of one op call that moves next to no data (a view, a slice, an add of
        one-element tensors): the framework's per-call cost. 0 unless the profile
        measured it (:class:`~simcluster.compute.measured.MeasuredProfile`'s
        ``device.roofline.launch_overhead_s``)."""
        return 0.0

    #: sourced per-call sparsification times (``sparsify_measured``):
    #: ``"device.dgc"`` -> (numel, seconds); each replaces its side and method's pricing
    sparsify_measured: dict[str, tuple[tuple[float, ...], tuple[float, ...]]]

    def tabled_sparsify_time(self, where: str, method: str, numel: float) -> float | None:
        """Seconds of one ``method`` sparsification call on ``where`` (``device`` /
        ``host``) from the profile's sourced per-call table, interpolated in ``numel``;
        None when the profile has no table for them."""
        table = self.sparsify_measured.get(f"{where}.{method}")
        return None if table is None else interpolate_per_call(numel, *table)

    def describe(self) -> str:
        return f"{self.name} ({self.kind})"


def interpolate_per_call(
    numel: float, sizes: tuple[float, ...], seconds: tuple[float, ...]
) -> float:
    """Seconds of one call at ``numel`` elements from times measured at ``sizes``.

    Piecewise linear in the size between the measured points; below the smallest
    the smallest's time (a fixed per-call cost dominates there); above the largest
    the last segment's slope carries on. Never negative.
    """
    if numel <= sizes[0]:
        return seconds[0]
    for j in range(1, len(sizes)):
        if numel <= sizes[j] or j == len(sizes) - 1:
            x0, x1, y0, y1 = sizes[j - 1], sizes[j], seconds[j - 1], seconds[j]
            return max(0.0, y0 + (y1 - y0) * (numel - x0) / (x1 - x0))
    raise AssertionError("unreachable")


class SpecProfile(DeviceProfile):
    """Roofline over spec-sheet numbers (see module docstring)."""

    def __init__(self, name: str, data: dict[str, Any], provenance: dict[str, Any]) -> None:
        self.name = name
        self.kind = "spec"
        self.provenance = provenance
        self.peak_flops: dict[str, float] = {k: float(v) for k, v in data["peak_flops"].items()}
        self.memory_bandwidth = float(data["memory_bandwidth"])
        self.memory_efficiency = float(data.get("memory_efficiency", 1.0))
        self.launch_overhead = float(data["launch_overhead_s"])
        self.efficiency: dict[str, float] = {k: float(v) for k, v in data["efficiency"].items()}
        self.host_link_bandwidth = float(data.get("host_link_bandwidth", self.memory_bandwidth))
        mem = data.get("memory_bytes")
        self.memory_bytes = float(mem) if mem is not None else None
        # The host CPU that offloaded kernels run on (bytes/s, seconds, fraction).
        host = data.get("host", {})
        self.host = {
            "memory_bandwidth": float(host.get("memory_bandwidth", 20e9)),
            "efficiency": float(host.get("efficiency", 0.5)),
            "launch_overhead_s": float(host.get("launch_overhead_s", 2e-6)),
        }
        for key in DDP_HOST_KEYS:  # else the class defaults, DDP_HOOK_S / DDP_BUCKET_S
            if host.get(key) is not None:
                setattr(self, key, float(host[key]))
        # Sparsification timed per call at a few sizes ("device.dgc" -> (numel, seconds)).
        self.sparsify_measured: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
            key: (tuple(map(float, t["numel"])), tuple(map(float, t["seconds"])))
            for key, t in data.get("sparsify_measured", {}).items()
        }
        # per (op class, variant, precision): what layer_time reads of the above
        self._layer_terms: dict[
            tuple[str, str | None, str], tuple[int, int, bool, float | None]
        ] = {}

    def precision_problem(self, precision: str) -> str | None:
        if precision not in PRECISIONS:
            return f"unknown precision key {precision!r}; known: {', '.join(PRECISIONS)}"
        need = required_peak(precision)
        if need in self.peak_flops:
            return None
        return (
            f"device profile {self.name!r} has no {PEAK_NAMES[need]} (its spec sheet lists "
            f"{', '.join(PEAK_NAMES[k] for k in self.peak_flops if k in PEAK_NAMES)}), so it "
            f"cannot run {describe_key(precision)}"
        )

    def _roofline(self, flops: float, nbytes: float, op: str, precision: str) -> float:
        return self._roofline_at(flops, nbytes, self._terms(op, None, precision)[3], op, precision)

    def _roofline_at(
        self, flops: float, nbytes: float, math_rate: float | None, op: str, precision: str
    ) -> float:
        """Launch overhead plus the longer of the math time at ``math_rate`` (FLOP/s, peak x
        efficiency; None: the profile has no peak for ``op`` under ``precision``, an error
        when there is math) and the memory time, seconds."""
        if flops > 0:
            if math_rate is None:
                raise ValueError(self.precision_problem(precision) or peak_key(precision, op))
            t_math = flops / math_rate
        else:
            t_math = 0.0
        t_mem = nbytes / (self.memory_bandwidth * self.memory_efficiency)
        return self.launch_overhead + (t_mem if t_mem > t_math else t_math)  # max(t_math, t_mem)

    def _terms(
        self, op: str, variant: str | None, precision: str
    ) -> tuple[int, int, bool, float | None]:
        """(activation bytes, weight bytes, autocast?, math FLOP/s = peak x efficiency, None
        without the peak) of an op class under ``precision``; worked out once per profile."""
        key = (op, variant, precision)
        hit = self._layer_terms.get(key)
        if hit is None:
            a = activation_bytes(precision, op, variant)
            amp = is_amp(precision)
            w = a if peak_key(precision, op) != "fp32" and amp else 4
            eff = self.efficiency.get(op, self.efficiency.get("default", 0.5))
            peak = self.peak_flops.get(peak_key(precision, op))
            hit = self._layer_terms[key] = (a, w, amp, None if peak is None else peak * eff)
        return hit

    def layer_time(self, layer, batch: int, precision: str, pass_: str) -> float:
        """Roofline time of one pass; under autocast plus the casts autocast adds.

        Casts (autocast, stated): a half-precision layer with weights casts them
        fp32 -> half in every forward (read 4 B, write 2 B per weight); an op autocast
        runs in fp32 (layer norm) casts its half input up (read 2 B, write 4 B per input
        element) in forward and its input gradient back down in backward.

        The per-op-class terms come from :meth:`_terms` (worked out once per profile).
        """
        if pass_ not in PASSES:
            raise ValueError(f"pass must be one of {PASSES}, got {pass_!r}")
        op = layer.op
        a, w, amp, math_rate = self._terms(
            op, layer.shape.get("kind") if op == "norm" else None, precision
        )
        params = layer.params
        if pass_ == "bwd_weight":
            if params == 0:
                return 0.0
            # reads input and output gradient, writes the weight gradient (fp32)
            nbytes = (layer.in_elems + layer.out_elems) * batch * a + params * 4
        else:
            nbytes = (layer.in_elems + layer.out_elems) * batch * a + params * w
        t = self._roofline_at(layer.flops * batch, nbytes, math_rate, op, precision)
        if amp:
            if pass_ == "fwd" and w == 2 and params:
                t += self.elementwise_time(6 * params)
            if a == 4 and pass_ in ("fwd", "bwd_input"):
                t += self.elementwise_time(6 * layer.in_elems * batch)
        return t

    def sgd_time(self, num_params: float) -> float:
        """Fused SGD + momentum: 20 bytes per parameter (see :data:`OPTIMIZER_PASSES`)."""
        return self.elementwise_time(SGD_BYTES_PER_PARAM * num_params)

    def memcpy_time(self, nbytes: float, kind: str = "d2d") -> float:
        if kind == "d2d":
            return self.launch_overhead + 2 * nbytes / (
                self.memory_bandwidth * self.memory_efficiency
            )
        return self.launch_overhead + nbytes / self.host_link_bandwidth

    def elementwise_time(self, nbytes: float) -> float:
        return self.launch_overhead + nbytes / (self.memory_bandwidth * self.memory_efficiency)

    # -- kernel families: bytes moved per the stated number of passes (assumptions) ----------
    def _host_time(self, nbytes: float) -> float:
        host = self.host
        return host["launch_overhead_s"] + nbytes / (host["memory_bandwidth"] * host["efficiency"])

    def kernel_time(self, family: str, **params: float | str) -> float:
        """Spec estimate: memory-bound passes over the data, see :data:`KERNEL_FAMILIES`.

        Passes (assumptions, stated here and in the profile's provenance):
        exact top-k 3 reads + k writes (radix select); DGC 2 passes (sampled
        threshold, then select); Gaussian-k 3 passes (mean/std, then select);
        random-k gathers k; threshold 2 passes; projection 1 read for group
        norms + a mask write; compress/decompress one read and one write of
        the kept elements (decompress also zero-fills).
        """
        p = params
        f4 = 4.0
        if family == "sparsify":
            n, density = float(p["numel"]), float(p["density"])
            method = str(p.get("method", "exact"))
            k = max(1.0, n * density)
            passes = {"exact": 3, "dgc": 2, "gaussian": 3, "random": 0, "threshold": 2}
            if method not in passes:
                raise ValueError(f"sparsify method must be one of {SPARSIFY_METHODS}")
            nbytes = passes[method] * n * f4 + 3 * k * f4  # + values and int32 indices out
            where = str(p.get("where", "device"))
            tabled = self.tabled_sparsify_time(where, method, n)
            if tabled is not None:
                return tabled
            launches = {"exact": 2, "dgc": 4, "gaussian": 3, "random": 2, "threshold": 2}[method]
            if where == "host":
                return launches * self.host["launch_overhead_s"] + self._host_time(nbytes)
            return (launches - 1) * self.launch_overhead + self.elementwise_time(nbytes)
        if family == "projection":
            n, groups = float(p["numel"]), float(p.get("groups", 1))
            return 3 * self.launch_overhead + self.elementwise_time(n * f4 + n + groups * 8)
        if family == "mask_apply":
            return self.elementwise_time(float(p["numel"]) * (2 * f4 + 1))
        if family == "mask_merge":
            return self.elementwise_time(3 * float(p["numel"]))
        if family == "compress":
            return self.launch_overhead + self.elementwise_time(float(p["numel"]) * (2 * f4 + 4))
        if family == "decompress":
            n, kept = float(p["numel"]), float(p["kept"])
            return self.launch_overhead + self.elementwise_time(n * f4 + kept * (2 * f4 + 4))
        if family == "scatter_add":
            return self.elementwise_time(3 * float(p["numel"]) * f4)
        if family in ("spmv", "outer_update"):
            nnz, batch = float(p["nnz"]), float(p.get("batch", 1))
            rows = float(p.get("rows", 0))
            flops = 2 * nnz * batch
            nbytes = nnz * 8 + nnz * f4 * batch + 2 * rows * f4 * batch
            return self._roofline(flops, nbytes, "linear", "fp32")
        if family == "elementwise":
            return self.elementwise_time(float(p["nbytes"]))
        if family == "memcpy":
            kind = str(p.get("kind", "d2d"))
            nbytes = float(p["nbytes"])
            if kind == "d2d":
                return self.memcpy_time(nbytes, "d2d")
            # pageable copies stage through a pinned buffer: half the pinned rate (assumption)
            factor = 2.0 if kind.endswith("pageable") else 1.0
            return self.launch_overhead + factor * nbytes / self.host_link_bandwidth
        if family == "optimizer":
            return self.sgd_time(float(p["num_params"]))
        raise ValueError(f"unknown kernel family {family!r}; known: {sorted(KERNEL_FAMILIES)}")

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

__all__ = ["DeviceProfile", "SpecProfile", "PRECISIONS", "PASSES", "KERNEL_FAMILIES"]

PRECISIONS = ("fp32", "tf32", "amp", "amp_bf16")
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

#: op classes whose math runs on tensor cores under amp
_MATMUL_OPS = {"conv", "linear", "attention", "lstm"}


class DeviceProfile(ABC):
    """Kernel times on one device, in seconds."""

    name: str
    kind: str  # "measured" | "derived" | "spec"
    provenance: dict[str, Any]

    @abstractmethod
    def layer_time(self, layer, batch: int, precision: str, pass_: str) -> float:
        """Seconds for one pass (``fwd``, ``bwd_input``, ``bwd_weight``) of a layer."""

    @abstractmethod
    def optimizer_time(self, num_params: int, precision: str) -> float:
        """Seconds for an SGD-with-momentum step over ``num_params`` parameters."""

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

    def describe(self) -> str:
        return f"{self.name} ({self.kind})"


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
        # The host CPU that offloaded kernels run on (bytes/s, seconds, fraction).
        host = data.get("host", {})
        self.host = {
            "memory_bandwidth": float(host.get("memory_bandwidth", 20e9)),
            "efficiency": float(host.get("efficiency", 0.5)),
            "launch_overhead_s": float(host.get("launch_overhead_s", 2e-6)),
        }

    def _peak(self, op: str, precision: str) -> float:
        if precision == "amp" and op in _MATMUL_OPS and "fp16_tensor" in self.peak_flops:
            return self.peak_flops["fp16_tensor"]
        return self.peak_flops["fp32"]

    def _act_bytes(self, precision: str) -> int:
        return 2 if precision == "amp" else 4

    def _roofline(self, flops: float, nbytes: float, op: str, precision: str) -> float:
        eff = self.efficiency.get(op, self.efficiency.get("default", 0.5))
        t_math = flops / (self._peak(op, precision) * eff) if flops > 0 else 0.0
        t_mem = nbytes / (self.memory_bandwidth * self.memory_efficiency)
        return self.launch_overhead + max(t_math, t_mem)

    def layer_time(self, layer, batch: int, precision: str, pass_: str) -> float:
        if pass_ not in PASSES:
            raise ValueError(f"pass must be one of {PASSES}, got {pass_!r}")
        a = self._act_bytes(precision)
        if pass_ == "bwd_weight":
            if layer.params == 0:
                return 0.0
            # reads input and output gradient, writes the weight gradient (fp32)
            nbytes = (layer.in_elems + layer.out_elems) * batch * a + layer.params * 4
        else:
            nbytes = (layer.in_elems + layer.out_elems) * batch * a + layer.params * a
        return self._roofline(layer.flops * batch, nbytes, layer.op, precision)

    def optimizer_time(self, num_params: int, precision: str) -> float:
        # fused SGD + momentum: read param, grad, momentum; write param, momentum (fp32)
        return self.elementwise_time(5 * 4 * num_params)

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
            launches = {"exact": 2, "dgc": 4, "gaussian": 3, "random": 2, "threshold": 2}[method]
            if str(p.get("where", "device")) == "host":
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
            return self.optimizer_time(int(p["num_params"]), "fp32")
        raise ValueError(f"unknown kernel family {family!r}; known: {sorted(KERNEL_FAMILIES)}")

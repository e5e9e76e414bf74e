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

__all__ = ["DeviceProfile", "SpecProfile", "PRECISIONS", "PASSES"]

PRECISIONS = ("fp32", "amp")
PASSES = ("fwd", "bwd_input", "bwd_weight")
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

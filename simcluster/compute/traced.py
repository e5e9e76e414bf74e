"""Layer times read from a PyTorch trace, as a device profile.

:class:`TracedProfile` answers :meth:`layer_time` for the layers of a
:class:`~simcluster.workload.trace.TraceModel` with the seconds measured in the trace
(forward, backward), and :meth:`optimizer_time` with the measured optimizer step; every
other kernel (sparsification, copies, element-wise work of a schedule) comes from the
scenario's device profile, which it wraps.

Batch: the trace's times are for its batch ``B``. A step with ``b`` samples (an epoch's
partial last step) takes ``t * b / B`` (assumption: time proportional to samples).

Another device: when the trace was recorded on device ``S`` (``workload.trace_profile``)
and the scenario runs on ``T`` (``profile``), each time is scaled by the transfer model's
roofline ratio (:mod:`simcluster.compute.transfer`): a layer of a matmul op class (conv,
linear, attention, lstm) by ``peak_flops_S / peak_flops_T`` (fp32), any other layer and
the optimizer by ``memory_bandwidth_S / memory_bandwidth_T``. From a CPU to a GPU, the
target's launch overhead is added once per layer pass (a CPU operator's time holds no
launch). Assumption, as in the transfer model: each layer reaches the same fraction of
the target's peak as it reached on the source.
"""

from __future__ import annotations

from typing import Any

from simcluster.compute.profile import PASSES, DeviceProfile
from simcluster.compute.transfer import (
    MATMUL_OPS,
    DeviceSpec,
    spec_from_profile_data,
    spec_from_roofline,
)
from simcluster.errors import ConfigError

__all__ = ["TracedProfile", "device_spec"]


def device_spec(name_or_path: str) -> DeviceSpec:
    """Rates of a profile for the transfer model: a spec sheet, or a measured roofline."""
    from simcluster.compute.loader import read_profile_data

    data = read_profile_data(name_or_path)
    if data["kind"] == "spec":
        return spec_from_profile_data(data, name_or_path)
    if isinstance(data.get("device"), dict) and "roofline" in data["device"]:
        return spec_from_roofline(data, name_or_path)
    raise ConfigError(
        None, "workload.trace_profile", name_or_path,
        "this profile states no device rates (no spec sheet, no measured roofline), so "
        "the transfer model cannot scale a trace to or from it",
        "a spec profile or a measured profile with device.roofline",
    )  # fmt: skip


class TracedProfile(DeviceProfile):
    """Measured layer times of a trace; ``base`` for everything else (seconds)."""

    def __init__(
        self,
        base: DeviceProfile,
        model: Any,
        source: DeviceSpec | None = None,
        target: DeviceSpec | None = None,
    ) -> None:
        self.base = base
        self.memory_bytes = base.memory_bytes
        self.model = model
        self.name = f"trace:{model.file}"
        self.kind = "derived" if source is not None else "measured"
        self.provenance = {"trace": model.file, "device": model.device, "base": base.name}
        self.batch = model.batch
        self._ratio = {"compute": 1.0, "memory": 1.0}
        self._launch = 0.0
        self.scaled = ""
        if source is not None and target is not None:
            self._ratio = {
                "compute": source.peak_flops["fp32"] / target.peak_flops["fp32"],
                "memory": source.memory_bandwidth / target.memory_bandwidth,
            }
            if source.processor == "cpu" and target.processor == "gpu":
                self._launch = target.launch_overhead_s
            self.scaled = (
                f"scaled from {source.name} to {target.name} by the transfer model "
                f"(compute x{self._ratio['compute']:.3g}, memory x{self._ratio['memory']:.3g})"
            )

    def _scale(self, seconds: float, op: str) -> float:
        if seconds <= 0:
            return 0.0
        term = "compute" if op in MATMUL_OPS else "memory"
        return seconds * self._ratio[term] + self._launch

    def layer_time(self, layer, batch: int, precision: str, pass_: str) -> float:
        if pass_ not in PASSES:
            raise ValueError(f"pass must be one of {PASSES}, got {pass_!r}")
        if "fwd_s" not in layer.shape:
            return self.base.layer_time(layer, batch, precision, pass_)
        # backward is measured whole (input and weight gradients together): bwd_weight
        # carries it, bwd_input is zero, so the sum is the measured backward
        t = {"fwd": layer.shape["fwd_s"], "bwd_weight": layer.shape["bwd_s"]}.get(pass_, 0.0)
        if self.batch:
            t *= batch / self.batch
        return self._scale(t, layer.op)

    def optimizer_time(self, num_params: int, precision: str, optimizer: str = "sgd") -> float:
        """The trace's measured optimizer step, per parameter; the base profile's model
        when the trace holds none (the traced step's optimizer is what ran: ``optimizer``
        selects the base model only)."""
        measured = self.model.optimizer_s
        if measured is None or not self.model.params:
            return self.base.optimizer_time(num_params, precision, optimizer)
        return self._scale(measured * num_params / self.model.params, "elementwise")

    def sgd_time(self, num_params: float) -> float:
        return self.base.sgd_time(num_params)

    def precision_problem(self, precision: str) -> str | None:
        return self.base.precision_problem(precision)

    def memcpy_time(self, nbytes: float, kind: str = "d2d") -> float:
        return self.base.memcpy_time(nbytes, kind)

    def elementwise_time(self, nbytes: float) -> float:
        return self.base.elementwise_time(nbytes)

    def kernel_time(self, family: str, **params: float | str) -> float:
        return self.base.kernel_time(family, **params)

    def source_of(self, family: str) -> str:
        return self.base.source_of(family)

    def describe(self) -> str:
        how = self.scaled or "as recorded"
        return (
            f"layer times from trace {self.model.file} ({self.model.device}, {how}); "
            f"other kernels {self.base.describe()}"
        )

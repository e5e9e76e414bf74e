"""Transfer model: derive a profile for a device nobody measured from one that was measured.

Every cost model in a measured profile is a sum of terms ``coef * feature``
(:mod:`simcluster.compute.measured`). The transfer model scales each term by the ratio
of the two devices' rates for the resource that term stands for (a roofline ratio per
term, so per op class and pass, since every op class and pass has its own fit)::

    const term   (launch / dispatch, s)      x  launch_overhead_tgt / launch_overhead_src
    flops term   (compute-bound, s/FLOP)     x  peak_flops_src[p]   / peak_flops_tgt[p]
    other terms  (memory-bound, s/byte, s/element)
                                             x  memory_bw_src       / memory_bw_tgt

Kernels that run on the host CPU (``sparsify.host.*``) use the host's rates instead, and
host <-> device copies the host link's. Assumption: an op class reaches the same fraction
of the target's peak FLOP/s and memory bandwidth as it reached on the source, with two
exceptions, where the peak is not the rate the kernels can reach:

* memory-bound op classes (norm, element-wise, pool, embedding) do a few FLOPs per byte
  moved; their ``flops`` term stands for elements streamed through memory, so it moves
  with the memory bandwidth ratio like their byte terms (only the GEMM op classes of
  :data:`MATMUL_OPS` scale their ``flops`` term by a peak);
* cuDNN's strict-fp32 (CUDA-core) convolutions and LSTMs are issue-limited on a GPU
  with more than 64 FP32 lanes per SM (:data:`CUDNN_FP32_LANES`,
  :func:`cudnn_fp32_rate`; spec field ``fp32_lanes_per_sm``), so their ``flops`` term
  moves with the ratio of FP32 peaks counting at most 64 lanes per SM.

CPU source, GPU target: the constant of a CPU fit is per-call software cost (oneDNN
set-up, thread wake-ups, 50-100 us for a convolution) that says nothing about a GPU's
fixed cost, so it is not scaled: it becomes the target's launch overhead times the
kernels the call launches (:data:`LAUNCHES`, the counts :class:`SpecProfile` assumes;
one for a layer pass). Host kernels stay on a CPU and keep the ratio rule.

Rates (:class:`DeviceSpec`) come from a spec profile (``calibrate/profiles/*.json``,
kind ``spec``): ``peak_flops`` (FLOP/s per precision key), ``memory_bandwidth`` x
``memory_efficiency`` (bytes/s), ``launch_overhead_s`` (s), ``host.memory_bandwidth`` x
``host.efficiency`` (bytes/s), ``host_link_bandwidth`` (bytes/s). A measured profile
whose device has no spec sheet (a CPU of unknown SKU) serves as its own: its
``roofline`` section holds the attainable rates measured during calibration (large fp32
GEMM, large copy, smallest-op dispatch time).

Precisions (:mod:`simcluster.compute.precision`): the target gets a ``device.compute``
key for every precision its spec sheet has the math units for (no ``tf32`` or
``amp_bf16`` on a V100). Each fit's ``flops`` term is scaled from the peak the source
*ran* the op class at to the peak the target runs it at under that key
(:func:`source_math`, :func:`~simcluster.compute.precision.peak_key`). Where the source
has no fits for a key they are made from the nearest it has: ``tf32`` from ``fp32``
(same fraction of the TF32 peak), ``amp_bf16`` from ``amp`` (fp16 and bf16 tensor cores
run at the same rate on A100 / H100 / H200, and the bytes are the same), ``amp`` from
``fp32`` (matmul op classes at the ``fp16_tensor`` peak, byte terms halved). Stated in
the derived profile's provenance.

What the source's ``fp32`` fits ran at: PyTorch's defaults are
``torch.backends.cuda.matmul.allow_tf32 = False`` and
``torch.backends.cudnn.allow_tf32 = True``, so on an Ampere-or-newer GPU a profile
measured with the defaults has convolutions and cuDNN LSTMs on TF32 tensor cores and
linear / attention matmuls in strict fp32 (attention's fused kernel runs the same fp32 math
under either flag, :data:`~simcluster.compute.precision.NO_TF32_OPS`, so its ``tf32`` fits
scale from and to the fp32 peak). A profile that also has ``tf32`` fits was
measured by the harness that runs ``fp32`` strictly (both flags off); a profile may state
the flags itself in ``provenance.allow_tf32`` (``{key: {matmul: bool, cudnn: bool}}``).

Past each compute fit's sampled range (:mod:`simcluster.compute.extrapolation`) the
derived fit keeps the source's edge (a property of the layers sampled; byte features
halved where fp32 fits become autocast ones) and scales the roofline rates past it
(``beyond``) by the same ratio as its term: the target reaches the same fraction of its
peak past the edge as the source did.

Host <-> device copies of a CPU source (which has no host link: its memcpy kinds are
aliases of ``d2d``) come from the target's spec sheet: launch overhead + bytes /
``host_link_bandwidth`` (pageable at half the pinned rate, as :class:`SpecProfile`
assumes); those fits are marked ``"source": "spec"``.

Sourced per-call sparsification times in the target's spec sheet
(``device.sparsify_measured``, e.g. the SSFusion paper's Table III in
``a100-80gb-pcie``) are copied into the derived profile, where they replace the
transferred ``sparsify`` fits of their side and method: they time the implementation
the target ran, where a transfer can only move the source's own implementation.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simcluster.compute.measured import (
    FRESH_OUTPUT,
    MEMCPY_KINDS,
    OPTIONAL_KERNELS,
    MeasuredProfile,
)
from simcluster.compute.precision import (
    COMPUTE_KEYS,
    HALF_OPS,
    NO_TF32_OPS,
    describe_key,
    is_amp,
    peak_key,
    required_peak,
)
from simcluster.errors import ConfigError

__all__ = [
    "DeviceSpec",
    "spec_from_profile_data",
    "spec_from_roofline",
    "load_spec",
    "term_of",
    "derive_profile_data",
    "derive_profile",
    "source_math",
    "cudnn_fp32_rate",
    "CUDNN_FP32_LANES",
    "BIG_JUMP",
]

#: op classes whose math runs on tensor cores under amp
MATMUL_OPS = tuple(sorted(HALF_OPS))
#: op classes cuDNN runs (``torch.backends.cudnn.allow_tf32``); the other matmul classes
#: go through cuBLAS (``torch.backends.cuda.matmul.allow_tf32``)
CUDNN_OPS = ("conv", "lstm")

#: kernel launches per call assumed when a CPU constant becomes GPU launches
#: (as :meth:`SpecProfile.kernel_time` assumes them); anything else launches one
LAUNCHES: dict[str, int | dict[str, int]] = {
    "sparsify": {"exact": 2, "dgc": 4, "gaussian": 3, "random": 2, "threshold": 2},
    "projection": 4,
    "compress": 2,
    "decompress": 2,
}

#: FP32 lanes per SM a cuDNN CUDA-core (strict fp32, no TF32) convolution or LSTM keeps
#: busy. Each SM issues 4 warp instructions (128 threads) per clock. Volta and GA100
#: have 64 FP32 lanes per SM, so an FFMA stream needs half the issue slots and the rest
#: feed the loads and address arithmetic; Hopper doubled the lanes to 128 with the same
#: issue width, so only a kernel that issues nothing but FFMA fills them. cuDNN's FP32
#: convolution kernels do not (on the measured H100, ResNet-50 in strict fp32 ran 857
#: img/s, 3.3 img/s per SM-GHz against a V100's 3.0 in NVIDIA's figures; cuBLAS SGEMM
#: reached 75 % of the 128-lane peak), so their FLOP terms transfer between devices at
#: the ratio of FP32 peaks with at most 64 lanes per SM counted. An assumption about
#: the kernels, stated in the derived profile; cuBLAS (linear, attention) keeps the full
#: peak ratio.
CUDNN_FP32_LANES = 64

BIG_JUMP = 20.0
"""A peak-FLOP or bandwidth ratio beyond this (either way) is flagged in the provenance."""


@dataclass(frozen=True)
class DeviceSpec:
    """Rates the transfer model compares (FLOP/s, bytes/s, seconds)."""

    name: str
    peak_flops: dict[str, float]
    memory_bandwidth: float
    launch_overhead_s: float
    host_bandwidth: float
    host_launch_overhead_s: float
    host_link_bandwidth: float | None = None
    #: device memory (bytes) from the spec sheet, None when it does not say
    memory_bytes: float | None = None
    #: streaming multiprocessors (spec sheet); 0 when unknown
    sm_count: int = 0
    #: FP32 CUDA-core lanes per SM (spec sheet); 0 when unknown
    fp32_lanes_per_sm: int = 0
    origin: str = "spec sheet"
    notes: list[str] = field(default_factory=list)
    #: ``gpu`` or ``cpu``: a CPU's per-call constants do not carry over to a GPU
    processor: str = "gpu"

    def peak(self, precision: str, op: str) -> tuple[str, float]:
        """(key, FLOP/s) used for ``op`` at compute key ``precision`` (the fp32 peak
        where the device lists no tensor-core peak for it)."""
        key = peak_key(precision, op)
        if key in self.peak_flops:
            return key, self.peak_flops[key]
        return "fp32", self.peak_flops["fp32"]

    def has(self, precision: str) -> bool:
        """Whether the device has the math units compute key ``precision`` needs."""
        return required_peak(precision) in self.peak_flops


def spec_from_profile_data(data: dict[str, Any], file: str = "<memory>") -> DeviceSpec:
    """Rates of a spec profile (``kind: spec``): datasheet peaks x stated efficiencies."""
    dev = data.get("device")
    if not isinstance(dev, dict):
        raise ConfigError(file, "device", None, "missing field")
    for key in ("peak_flops", "memory_bandwidth", "launch_overhead_s"):
        if key not in dev:
            raise ConfigError(file, f"device.{key}", None, "missing field")
    host = dev.get("host", {})
    mem_eff = float(dev.get("memory_efficiency", 1.0))
    gpu = "fp16_tensor" in dev["peak_flops"] or "host" in dev
    return DeviceSpec(
        name=str(data.get("name", Path(file).stem)),
        peak_flops={k: float(v) for k, v in dev["peak_flops"].items()},
        memory_bandwidth=float(dev["memory_bandwidth"]) * mem_eff,
        launch_overhead_s=float(dev["launch_overhead_s"]),
        host_bandwidth=float(host.get("memory_bandwidth", 20e9))
        * float(host.get("efficiency", 0.5)),
        host_launch_overhead_s=float(host.get("launch_overhead_s", 2e-6)),
        host_link_bandwidth=float(dev["host_link_bandwidth"])
        if "host_link_bandwidth" in dev
        else None,
        memory_bytes=float(dev["memory_bytes"]) if "memory_bytes" in dev else None,
        sm_count=int(dev.get("sm_count", 0)),
        fp32_lanes_per_sm=int(dev.get("fp32_lanes_per_sm", 0)),
        origin=f"spec profile {file}",
        notes=[
            "memory_bandwidth = datasheet x memory_efficiency "
            f"({mem_eff}); host bandwidth = host.memory_bandwidth x host.efficiency"
        ],
        processor=str(dev.get("processor", "gpu" if gpu else "cpu")),
    )


def spec_from_roofline(data: dict[str, Any], file: str = "<memory>") -> DeviceSpec:
    """Rates of a measured profile's ``device.roofline`` (attainable, measured)."""
    roof = data.get("device", {}).get("roofline")
    if not isinstance(roof, dict):
        raise ConfigError(file, "device.roofline", None, "missing field")
    for key in ("peak_flops", "memory_bandwidth", "launch_overhead_s"):
        if key not in roof:
            raise ConfigError(file, f"device.roofline.{key}", None, "missing field")
    host = roof.get("host", {})
    return DeviceSpec(
        name=str(data.get("name", Path(file).stem)),
        peak_flops={k: float(v) for k, v in roof["peak_flops"].items()},
        memory_bandwidth=float(roof["memory_bandwidth"]),
        launch_overhead_s=float(roof["launch_overhead_s"]),
        host_bandwidth=float(host.get("memory_bandwidth", roof["memory_bandwidth"])),
        host_launch_overhead_s=float(host.get("launch_overhead_s", roof["launch_overhead_s"])),
        host_link_bandwidth=float(roof["host_link_bandwidth"])
        if "host_link_bandwidth" in roof
        else None,
        origin=f"measured roofline of {file}",
        notes=["attainable rates measured by calibration (GEMM, copy, smallest op)"],
        processor="gpu"
        if str(data.get("provenance", {}).get("device", "")).startswith("cuda")
        else "cpu",
    )


def load_spec(name_or_path: str) -> tuple[DeviceSpec, str]:
    """A spec profile by name or path -> (rates, file)."""
    spec, path, _ = _load_spec_file(name_or_path)
    return spec, path


def _load_spec_file(name_or_path: str) -> tuple[DeviceSpec, str, dict[str, Any]]:
    """A spec profile by name or path -> (rates, file, the file's data)."""
    from simcluster.compute.loader import _read, _resolve, list_profiles
    from simcluster.paths import profiles_dir

    path = _resolve(name_or_path, profiles_dir(), "profile", list_profiles)
    data = _read(path)
    if data["kind"] != "spec":
        raise ConfigError(
            str(path), "kind", data["kind"], "the transfer model needs a spec sheet", ["spec"]
        )
    return spec_from_profile_data(data, _shown(path)), str(path), data


def term_of(feature: str) -> str:
    """Which rate a feature's term scales with: ``launch``, ``compute`` or ``memory``."""
    if feature == "const":
        return "launch"
    if feature in ("flops", "flops_wave"):
        return "compute"
    return "memory"


def _scale_fit(
    fit: dict,
    ratios: dict[str, float],
    byte_factor: float = 1.0,
    launch_s: float | None = None,
    edge_bytes: float = 1.0,
) -> dict:
    """Each term times its ratio; ``launch_s`` replaces the constant (CPU -> GPU).

    A host-bound floor (``host_s``, seconds per call) scales like the constant: it is
    the software's issue time, which the launch overheads' ratio stands for.

    A fit's sampled range and the roofline past it (``edge``, ``beyond``;
    :mod:`simcluster.compute.extrapolation`) carry over: the edge is a property of the
    layers sampled (FLOPs, bytes), the same on the target, except that byte features
    move with the activation width (``edge_bytes``: 0.5 where fp32 fits become autocast
    ones); each ``beyond`` rate is scaled by its term's ratio like a coefficient, so the
    target reaches the same fraction of its peak past the edge as the source did.
    """
    out = {k: v for k, v in fit.items() if k in ("features", "coef", "source")}
    coef = []
    for f, c in zip(fit["features"], fit["coef"], strict=True):
        if f == "const" and launch_s is not None:
            coef.append(float(f"{launch_s:.6g}"))
            continue
        r = ratios[term_of(f)]
        if term_of(f) == "memory":
            r *= byte_factor
        coef.append(float(f"{c * r:.6g}"))
    out["coef"] = coef
    if fit.get("host_s") and launch_s is None:  # the host's issue time per call
        out["host_s"] = float(f"{fit['host_s'] * ratios['launch']:.6g}")
    if fit.get("edge"):
        out["edge"] = {
            f: float(f"{v * (edge_bytes if f.startswith('bytes') else 1.0):.6g}")
            for f, v in fit["edge"].items()
        }
    if fit.get("beyond"):
        out["beyond"] = {
            f: float(f"{v * ratios[term_of(f)]:.6g}") for f, v in fit["beyond"].items()
        }
    return out


def cudnn_fp32_rate(spec: DeviceSpec) -> float:
    """FP32 FLOP/s a cuDNN CUDA-core convolution can issue on ``spec`` (see
    :data:`CUDNN_FP32_LANES`): the FP32 peak times ``min(1, 64 / lanes per SM)``; the
    plain FP32 peak where the spec sheet gives no lane count."""
    lanes = spec.fp32_lanes_per_sm
    scale = min(1.0, CUDNN_FP32_LANES / lanes) if lanes > 0 else 1.0
    return spec.peak_flops["fp32"] * scale


def _launches(family: str, key: str | None = None) -> int:
    n = LAUNCHES.get(family, 1)
    return int(n.get(key or "", 1)) if isinstance(n, dict) else int(n)


def _ratios(src: DeviceSpec, tgt: DeviceSpec, precision: str, op: str) -> dict[str, float]:
    _, p_src = src.peak(precision, op)
    _, p_tgt = tgt.peak(precision, op)
    return {
        "launch": tgt.launch_overhead_s / src.launch_overhead_s,
        "compute": p_src / p_tgt,
        "memory": src.memory_bandwidth / tgt.memory_bandwidth,
    }


def _allow_tf32(measured: dict[str, Any], key: str, source: DeviceSpec) -> dict[str, bool]:
    """The TF32 flags the source's ``key`` fits were measured with (see module doc)."""
    stated = measured.get("provenance", {}).get("allow_tf32", {})
    if isinstance(stated, dict) and isinstance(stated.get(key), dict):
        flags = stated[key]
        return {"matmul": bool(flags.get("matmul")), "cudnn": bool(flags.get("cudnn"))}
    if key == "tf32":
        return {"matmul": True, "cudnn": True}
    if key != "fp32" or source.processor != "gpu" or "tf32_tensor" not in source.peak_flops:
        return {"matmul": False, "cudnn": False}
    if "tf32" in measured["device"]["compute"]:
        return {"matmul": False, "cudnn": False}  # the strict-fp32 harness
    return {"matmul": False, "cudnn": True}  # PyTorch's defaults


def source_math(measured: dict[str, Any], key: str, op: str, source: DeviceSpec) -> str:
    """The peak key an op class's ``key`` fits ran at on the source device (attention's
    fused kernel ignores the TF32 flags: :data:`~simcluster.compute.precision.NO_TF32_OPS`)."""
    base = op.split(":", 1)[0]
    if key in ("fp32", "tf32") and base in NO_TF32_OPS:
        return "fp32"
    if key in ("fp32", "tf32") and base in HALF_OPS:
        flags = _allow_tf32(measured, key, source)
        on = flags["cudnn"] if base in CUDNN_OPS else flags["matmul"]
        return "tf32_tensor" if on and "tf32_tensor" in source.peak_flops else "fp32"
    return source.peak(key, base)[0]


#: where a target key's fits come from when the source lacks them
_FALLBACK = {"tf32": "fp32", "amp_bf16": "amp", "amp": "fp32"}


def _source_key(key: str, have: dict[str, Any]) -> str:
    while key not in have:
        key = _FALLBACK[key]
    return key


def _derive_compute(
    measured: dict[str, Any],
    source: DeviceSpec,
    target: DeviceSpec,
    launch: float | None,
    notes: list[str],
) -> dict[str, Any]:
    """``device.compute`` of the target: every key its math units allow (module doc)."""
    have = measured["device"]["compute"]
    out: dict[str, Any] = {}
    made: list[str] = []
    skipped = [describe_key(k) for k in COMPUTE_KEYS if not target.has(k)]
    for key in COMPUTE_KEYS:
        if not target.has(key):
            continue
        src_key = _source_key(key, have)
        halve = 0.5 if (is_amp(key) and not is_amp(src_key)) else 1.0
        if src_key != key:
            made.append(f"{key} from {src_key}")
        out[key] = {}
        for name, passes in have[src_key].items():
            op = name.split(":", 1)[0]
            s_key = source_math(measured, src_key, op, source)
            p_src = source.peak_flops.get(s_key, source.peak_flops["fp32"])
            t_key, p_tgt = target.peak(key, op)
            if op in CUDNN_OPS and s_key == "fp32" and t_key == "fp32":
                p_src, p_tgt = cudnn_fp32_rate(source), cudnn_fp32_rate(target)
            r = {
                "launch": target.launch_overhead_s / source.launch_overhead_s,
                "compute": p_src / p_tgt,
                "memory": source.memory_bandwidth / target.memory_bandwidth,
            }
            if op not in MATMUL_OPS:
                r["compute"] = r["memory"]  # memory-bound: FLOPs stand for elements
            out[key][name] = {
                p: _scale_fit(f, r, halve, launch, edge_bytes=halve) for p, f in passes.items()
            }
    ran = sorted(
        {
            f"{k}: {op} at {source_math(measured, k, op, source)}"
            for k in have
            for op in MATMUL_OPS
            if k in ("fp32", "tf32")
        }
    )
    notes.append(
        "flops terms scaled from the peak each op class ran at on the source to the peak "
        f"it runs at on the target under each key; source ran {'; '.join(ran)}"
    )
    notes.append(
        "memory-bound op classes (norm, elementwise, pool, embedding): flops terms scaled by "
        "the memory bandwidth ratio (they stand for elements streamed, not math)"
    )
    if cudnn_fp32_rate(source) != source.peak_flops["fp32"] or (
        cudnn_fp32_rate(target) != target.peak_flops["fp32"]
    ):
        notes.append(
            "cuDNN strict-fp32 conv / lstm flops terms scaled by the ratio of FP32 peaks "
            f"counting at most {CUDNN_FP32_LANES} lanes per SM (issue-limited kernels): "
            f"{cudnn_fp32_rate(source):.4g} -> {cudnn_fp32_rate(target):.4g} FLOP/s"
        )
    if _allow_tf32(measured, "fp32", source)["cudnn"]:
        notes.append(
            "the source's fp32 fits were measured with PyTorch defaults: cuDNN convolutions "
            "and LSTMs on TF32 tensor cores (torch.backends.cudnn.allow_tf32 = True), matmuls "
            "strict fp32; their conv / lstm flops terms are scaled from the source's TF32 peak"
        )
    if made:
        notes.append(
            "fits synthesised from another precision's (same fraction of the target's peak; byte "
            "terms halved where fp32 becomes autocast): " + ", ".join(made)
        )
    if skipped:
        notes.append("no fits for " + ", ".join(skipped) + ": the target lacks the math units")
    return out


def derive_profile_data(
    measured: dict[str, Any],
    source: DeviceSpec,
    target: DeviceSpec,
    name: str,
    source_file: str = "<memory>",
    command: str | None = None,
    target_tables: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The derived profile JSON (kind ``derived``) for ``target`` from ``measured``.

    ``target_tables``: the target spec's ``device.sparsify_measured`` (sourced per-call
    sparsification times on the target); copied as they are, they replace the
    transferred ``sparsify`` fits of their side and method (a direct measurement of the
    implementation on the target beats a transfer of another implementation)."""
    if measured.get("kind") not in ("measured", "derived"):
        raise ConfigError(
            source_file, "kind", measured.get("kind"), "derive from a measured profile",
            ["measured", "derived"],
        )  # fmt: skip
    MeasuredProfile.from_data(measured, source_file)  # validates every field first
    dev = measured["device"]
    cross = source.processor == "cpu" and target.processor == "gpu"
    launch = target.launch_overhead_s if cross else None
    notes: list[str] = []
    if cross:
        notes.append(
            "CPU source, GPU target: fit constants (CPU per-call software cost) replaced by "
            "the target's launch overhead x kernels launched (1 per layer pass; sparsify, "
            "projection, compress, decompress as SpecProfile assumes); host kernels keep "
            "the launch-overhead ratio"
        )
    compute = _derive_compute(measured, source, target, launch, notes)

    dev_r = {
        "launch": target.launch_overhead_s / source.launch_overhead_s,
        "compute": source.peak_flops["fp32"] / target.peak_flops["fp32"],
        "memory": source.memory_bandwidth / target.memory_bandwidth,
    }
    host_r = {
        "launch": target.host_launch_overhead_s / source.host_launch_overhead_s,
        "compute": 1.0,
        "memory": source.host_bandwidth / target.host_bandwidth,
    }

    def lau(family: str, key: str | None = None) -> float | None:
        return target.launch_overhead_s * _launches(family, key) if cross else None

    kernels: dict[str, Any] = {}
    for family, section in dev["kernels"].items():
        if family == FRESH_OUTPUT:
            # the source host's allocator and paging, not a device rate: left behind (a
            # GPU's caching allocator reuses its blocks)
            notes.append(
                f"{FRESH_OUTPUT}: the source host's first touch of fresh pages, not derived"
            )
            continue
        if family in OPTIONAL_KERNELS:
            # the live H-SADMM code's ops on the source's processor: left behind, a
            # derived profile prices them by the families it derives, as before
            notes.append(f"{family}: the source's own timing of the live code's op, not derived")
            continue
        if family == "sparsify":
            kernels[family] = {
                "device": {
                    m: _scale_fit(f, dev_r, 1.0, lau(family, m))
                    for m, f in section["device"].items()
                },
                "host": {m: _scale_fit(f, host_r) for m, f in section["host"].items()},
            }
        elif family == "memcpy":
            kernels[family] = _derive_memcpy(section, source, target, dev_r, notes, lau(family))
        elif isinstance(section, dict) and "features" in section:
            kernels[family] = _scale_fit(section, dev_r, 1.0, lau(family))
        else:
            kernels[family] = {
                k: _scale_fit(f, dev_r, 1.0, lau(family, k)) for k, f in section.items()
            }

    if target_tables:
        notes.append(
            f"sparsify {', '.join(sorted(target_tables))}: the target spec's sourced per-call "
            "times (device.sparsify_measured, copied with their sources), which replace the "
            "transferred fits of that side and method"
        )
    ratios_fp32 = {
        "launch": dev_r["launch"],
        "compute_fp32": dev_r["compute"],
        "memory": dev_r["memory"],
        "host_memory": host_r["memory"],
    }
    flagged = [
        k for k, v in ratios_fp32.items() if k != "launch" and (v > BIG_JUMP or v < 1 / BIG_JUMP)
    ]
    src_prov = measured.get("provenance", {})
    src_device = src_prov.get("device_name") or src_prov.get("description") or measured["name"]
    warning = (
        f"{src_device} -> {target.name} is a big jump (rate ratios {', '.join(flagged)} beyond "
        f"{BIG_JUMP:g}x): the target's kernels differ in kind (cuDNN/cuBLAS vs CPU "
        "libraries), so per-op-class efficiencies carried over from the source are a coarse "
        "guess; replace with a profile measured on the target (calibrate/jobs/)"
        if flagged
        else None
    )
    prov = {
        "description": f"{target.name} derived from measured profile {measured['name']}",
        "derived_from": {
            "name": measured["name"],
            "file": source_file,
            "kind": measured["kind"],
            "device_name": src_device,
            "date": src_prov.get("date"),
            "command": src_prov.get("command"),
            **_layer_timing(src_prov),
        },
        "transfer_model": "roofline ratio per term (simcluster/compute/transfer.py): const x "
        "launch ratio (CPU -> GPU: target launch overhead x kernels launched), flops x peak "
        "FLOP/s ratio (GEMM op classes; memory-bound op classes: memory bandwidth ratio; "
        f"cuDNN fp32 conv / lstm: FP32 peaks counting at most {CUDNN_FP32_LANES} lanes per "
        "SM), bytes/elements x memory bandwidth ratio; host kernels by host rates",
        "assumption": "each op class reaches the same fraction of peak FLOP/s and memory "
        "bandwidth on the target as on the source (past each compute fit's sampled range "
        "too: its edge kept, its roofline rates scaled like its terms)",
        "source_rates": _spec_json(source),
        "target_rates": _spec_json(target),
        "ratios": {k: float(f"{v:.6g}") for k, v in ratios_fp32.items()},
        "notes": notes,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
    }
    if warning:
        prov["warning"] = warning
    return {
        "schema_version": 1,
        "name": name,
        "kind": "derived",
        "provenance": prov,
        "device": {
            "compute": compute,
            "kernels": kernels,
            "roofline": {
                "peak_flops": dict(target.peak_flops),
                "memory_bandwidth": target.memory_bandwidth,
                "launch_overhead_s": target.launch_overhead_s,
                # the spill threshold stays the source's: spec sheets carry no cache size
                "cache_bytes": float(dev.get("roofline", {}).get("cache_bytes", 0.0)),
                **(
                    {"llc_bytes": float(dev["roofline"]["llc_bytes"])}
                    if "llc_bytes" in dev.get("roofline", {})
                    else {}
                ),
                **({"memory_bytes": target.memory_bytes} if target.memory_bytes else {}),
                # waves are counted on the target's SMs (flops_wave, measured.py)
                **({"sm_count": target.sm_count} if target.sm_count else {}),
                "host": {
                    "memory_bandwidth": target.host_bandwidth,
                    "launch_overhead_s": target.host_launch_overhead_s,
                },
                **(
                    {"host_link_bandwidth": target.host_link_bandwidth}
                    if target.host_link_bandwidth
                    else {}
                ),
                "origin": target.origin,
            },
            **({"sparsify_measured": copy.deepcopy(target_tables)} if target_tables else {}),
        },
    }


def _layer_timing(prov: dict[str, Any]) -> dict[str, str]:
    """``{"layer_timing": "host-ahead"}`` where the source's layer passes were timed with
    the host ahead (its fits are the GPU's work alone; :class:`MeasuredProfile`), else
    nothing."""
    mode = (prov.get("layer_timing") or {}).get("mode")
    return {"layer_timing": mode} if mode == "host-ahead" else {}


def _spec_json(s: DeviceSpec) -> dict[str, Any]:
    d = asdict(s)
    return {k: v for k, v in d.items() if v is not None}


def _derive_memcpy(
    section: dict[str, Any],
    source: DeviceSpec,
    target: DeviceSpec,
    dev_r: dict[str, float],
    notes: list[str],
    launch_s: float | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"d2d": _scale_fit(section["d2d"], dev_r, 1.0, launch_s)}
    link_r = None
    if source.host_link_bandwidth and target.host_link_bandwidth:
        link_r = {
            "launch": dev_r["launch"],
            "compute": 1.0,
            "memory": source.host_link_bandwidth / target.host_link_bandwidth,
        }
    for kind in MEMCPY_KINDS[1:]:
        raw = section.get(kind)
        if isinstance(raw, dict) and link_r is not None:
            out[kind] = _scale_fit(raw, link_r)
        elif target.host_link_bandwidth:
            factor = 2.0 if kind.endswith("pageable") else 1.0
            out[kind] = {
                "features": ["const", "nbytes"],
                "coef": [target.launch_overhead_s, factor / target.host_link_bandwidth],
                "source": "spec",
            }
        else:
            out[kind] = "d2d"
    if any(isinstance(v, dict) and v.get("source") == "spec" for v in out.values()):
        notes.append(
            "host <-> device copies from the target's spec sheet: launch overhead + bytes / "
            "host_link_bandwidth (pageable at half the pinned rate); the source had no host link"
        )
    return out


def derive_profile(
    measured_path: str,
    target: str,
    out_name: str,
    source_spec: str | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Derive from a measured profile file for target spec ``target`` (name or path).

    ``source_spec``: the source device's spec profile; default its ``spec_profile`` field
    if it names one, else its measured roofline.
    """
    from simcluster.compute.loader import _read, _resolve, list_profiles
    from simcluster.paths import profiles_dir

    path = _resolve(measured_path, profiles_dir(), "profile", list_profiles)
    data = _read(path)
    src_spec_name = source_spec or data.get("device", {}).get("spec_profile")
    if src_spec_name:
        src, _ = load_spec(src_spec_name)
    else:
        src = spec_from_roofline(data, _shown(path))
    tgt, _, tgt_data = _load_spec_file(target)
    tables = tgt_data["device"].get("sparsify_measured")
    return derive_profile_data(
        copy.deepcopy(data), src, tgt, out_name, _shown(path), command, tables
    )


def _shown(path: Path) -> str:
    """A file's path relative to the project when inside it (provenance stays portable)."""
    from simcluster.paths import project_root

    try:
        return str(Path(path).resolve().relative_to(project_root().resolve()))
    except ValueError:
        return str(path)


def dumps(data: dict[str, Any]) -> str:
    """Profile JSON text (one space indent keeps the sample arrays readable)."""
    return json.dumps(data, indent=1) + "\n"

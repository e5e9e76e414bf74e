"""Past the largest sample: where a fit's samples never left the launch-bound regime,
its marginal cost follows the device's roofline.

A compute cost model is linear in its features (:mod:`simcluster.compute.measured`),
``t = c0 + sum_f c_f x_f``, fitted on the layers calibration timed. Hockney's
half-performance size says where such a model's slopes are measured: the size at which
the variable part equals the fixed cost (``sum_f c_f x_f = c0``), where half the
asymptotic rate is reached. Samples reaching past it measure the rate; samples that all
stay below it are dominated by the fixed cost, and their slope is whatever noise on top
of the constant left (on the H200 profile the largest amp linear sample, 3.3 GFLOP, took
~70 us of which ~50 us is fixed cost, and the input-gradient slope prices a FLOP at 4.8x
the H100 profile's). A layer ten times larger than any sample (BERT-large's MLP at batch
32: 34 GFLOP) multiplies that noise by ten. So, per fit and per kind of work (FLOPs,
bytes moved; a group of features, :func:`groups_of`)::

    edge[f]     largest value of feature f over the fit's samples (units of f)
    resolved    c0 <= sum_{f in group} c_f * edge[f]   (seconds; the samples reached
                the half-performance size of that work: its slopes stand, inside and
                past the edge)
    beyond[f]   for the groups not resolved, seconds per unit past the edge:
                  flops  PASS_GEMMS(op, pass) / peak FLOP/s of the math the op class runs
                  bytes  1 / memory bandwidth (bytes/s)
                  0 for the group's other features (flops_wave, bytes_spill: the same
                  work counted otherwise)
    t(x) = fit(x with beyond's features clamped to their edge)
           + max_f beyond[f] * (x[f] - edge[f])+                                seconds

i.e. the fit up to where it was sampled, and past it the extra work its samples never
measured a rate for at the rate a roofline gives it (the larger of the FLOP and byte
terms). Inside the sampled range nothing changes, and a kind of work whose samples
measured its rate is extrapolated along its slope as before: a roofline is only a lower
bound on the cost of work (batch norm reads its input more than once, a 3-channel stem
convolution runs far below the GEMM peak, and their fits say so). Groups: the GEMM op
classes (conv, linear, attention, lstm) have a FLOP group (``flops``, ``flops_wave``)
and a byte group (``bytes``, ``bytes_spill``); ``flops`` is the forward's FLOPs for
every pass, so the FLOP rate of a pass carries its GEMM count relative to the forward's
(``PASS_GEMMS``: attention's input gradient runs two and a half: the fused kernel
recomputes the scores). Memory-bound op classes (norm,
element-wise, pool, embedding) only stream: their ``flops`` feature stands for elements
(as in the transfer model), so all their features are one group priced by the bytes.

Rates of a measured profile (:func:`beyond_rates`): its own ``device.roofline``, the
attainable rates calibration measured on the same device (a 2048^3 GEMM per precision,
a 256 MiB copy). The peak is the one the op class ran at
(:func:`simcluster.compute.transfer.source_math`: e.g. PyTorch's default fp32 runs cuDNN
convolutions on TF32). A strict-fp32 cuDNN convolution or LSTM is also under the issue
limit the transfer model states (:func:`simcluster.compute.transfer.cudnn_fp32_rate`:
the spec sheet's FP32 peak counting at most 64 lanes per SM, from the profile's
``device.spec_profile``); the lower of the two ceilings counts. Where the fits ran on
TF32 but calibration measured no TF32 GEMM (profiles measured before it did), the fp32
GEMM rate stands for it. Whether a kind of work is resolved is a fact about the samples,
decided on the measured profile. A derived profile keeps its source's edges and decisions, and
its ``beyond`` rates are the source's scaled by the transfer model's ratio for each term
like the fit's own slopes (:func:`simcluster.compute.transfer._scale_fit`): the target
reaches the same fraction of its peak past the edge as the source did. The edges are
features of the layers (FLOPs, bytes), the same on every device.

The fit records carry both (``edge`` on every fit made on samples, ``beyond`` where a
kind of work is not resolved; written by calibration, and by
``python -m calibrate.refit PROFILE --edges`` for a profile measured before them), so a
profile states its own extrapolation. Kernel
families' fits (:data:`simcluster.compute.measured.KERNEL_FEATURES`) have none: their
features are element counts whose bytes per element differ by family, and their sweeps
run to the sizes training uses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simcluster.compute.measured import PASS_GEMMS
from simcluster.compute.precision import HALF_OPS

__all__ = [
    "EDGE_FEATURES",
    "GEMM_GROUPS",
    "STREAM_GROUPS",
    "fit_edge",
    "groups_of",
    "resolved",
    "beyond_of",
    "beyond_rates",
    "add_beyond",
]

#: features every compute fit records an edge for (those the roofline prices past it)
EDGE_FEATURES = ("flops", "bytes")


def fit_edge(rows: Iterable[Mapping[str, float]], features: Sequence[str]) -> dict[str, float]:
    """Largest value of each non-constant feature of ``features`` and of
    :data:`EDGE_FEATURES` over the samples ``rows`` (feature -> value, its own unit)."""
    names = [f for f in dict.fromkeys([*features, *EDGE_FEATURES]) if f != "const"]
    edge: dict[str, float] = {}
    for row in rows:
        for f in names:
            v = float(row[f])
            if v > edge.get(f, float("-inf")):
                edge[f] = v
    return {f: float(f"{v:.6g}") for f, v in edge.items()}


def beyond_rates(
    data: Mapping[str, Any], precision: str, key: str, pass_: str, file: str = "<memory>"
) -> dict[str, float]:
    """Seconds per FLOP and per byte past the edge of a measured profile's fit of
    ``key`` (op class or ``op:variant``) and ``pass_`` under compute key ``precision``
    (see the module doc; ``data`` is the profile's parsed JSON)."""
    from simcluster.compute.transfer import (
        CUDNN_FP32_LANES,
        CUDNN_OPS,
        _allow_tf32,
        source_math,
        spec_from_roofline,
    )

    source = spec_from_roofline(dict(data), file)
    rates = {"bytes": 1.0 / source.memory_bandwidth}
    op = key.split(":", 1)[0]
    if op not in HALF_OPS:
        return rates
    math = source_math(data, precision, op, source)
    peak = source.peak_flops.get(math, source.peak_flops["fp32"])
    spec = _spec_device(data)
    # which math units the fits ran on: the spec sheet knows TF32 where an older
    # calibration measured no TF32 GEMM (then the fp32 GEMM rate stands for it)
    units = dataclasses.replace(
        source, peak_flops={**spec.get("peak_flops", {}), **source.peak_flops}
    )
    strict = not _allow_tf32(data, precision, units)["cudnn"]
    if op in CUDNN_OPS and math == "fp32" and strict and source.processor == "gpu":
        lanes = int(spec.get("fp32_lanes_per_sm", 0))  # as transfer.cudnn_fp32_rate counts
        if lanes and "fp32" in spec.get("peak_flops", {}):
            issue = float(spec["peak_flops"]["fp32"]) * min(1.0, CUDNN_FP32_LANES / lanes)
            peak = min(peak, issue)
    rates["flops"] = PASS_GEMMS.get((op, pass_), 1.0) / peak
    return rates


def _spec_device(data: Mapping[str, Any]) -> dict[str, Any]:
    """``device`` section of the spec sheet the profile names (empty when none)."""
    name = data.get("device", {}).get("spec_profile")
    if not name:
        return {}
    from simcluster.compute.loader import read_profile_data

    return dict(read_profile_data(str(name)).get("device", {}))


#: the kinds of work past an edge, as feature groups whose first feature the roofline
#: prices (the others' excess is the same work counted otherwise: 0 s per unit): GEMM op
#: classes do FLOPs and move bytes; the others only stream (their ``flops`` are elements)
GEMM_GROUPS = (("flops", "flops_wave"), ("bytes", "bytes_spill"))
STREAM_GROUPS = (("bytes", "bytes_spill", "flops", "flops_wave"),)


def groups_of(key: str) -> tuple[tuple[str, ...], ...]:
    """Feature groups (:data:`GEMM_GROUPS` / :data:`STREAM_GROUPS`) of op class ``key``."""
    return GEMM_GROUPS if key.split(":", 1)[0] in HALF_OPS else STREAM_GROUPS


def resolved(fit: Mapping[str, Any], group: Sequence[str]) -> bool:
    """Whether a fit record's samples reached the half-performance size of a kind of
    work: the group's terms at the edge, ``sum_f c_f * edge[f]`` (seconds), at least the
    constant ``c0`` (or the host-bound floor ``host_s`` where that is larger: samples
    below it measured the host, not the GPU's rate)."""
    coef = dict(zip(fit["features"], fit["coef"], strict=True))
    edge = fit.get("edge") or {}
    var = sum(coef.get(f, 0.0) * float(edge.get(f, 0.0)) for f in group)
    return var >= max(coef.get("const", 0.0), float(fit.get("host_s", 0.0)))


def beyond_of(fit: Mapping[str, Any], key: str, rates: Mapping[str, float]) -> dict[str, float]:
    """The ``beyond`` map of a fit record of op class ``key`` (module doc): for each
    kind of work its samples did not resolve, the roofline rate of the group's first
    feature (``rates``: :func:`beyond_rates`) and 0 for the rest; empty when resolved."""
    edge = fit.get("edge") or {}
    out: dict[str, float] = {}
    for group in groups_of(key):
        if resolved(fit, group):
            continue
        for f in group:
            if f in edge:
                out[f] = float(f"{rates[group[0]]:.6g}") if f == group[0] else 0.0
    return out


def add_beyond(data: dict[str, Any], file: str = "<memory>") -> dict[str, Any]:
    """Set ``beyond`` (:func:`beyond_of`) on every compute fit of measured profile
    ``data`` that has an ``edge`` and a kind of work its samples did not resolve (and
    drop it from the others); in place, ``data`` returned."""
    for precision, classes in data["device"]["compute"].items():
        for key, passes in classes.items():
            for pass_, fit in passes.items():
                fit.pop("beyond", None)
                if not fit.get("edge"):
                    continue
                beyond = beyond_of(fit, key, beyond_rates(data, precision, key, pass_, file))
                if beyond:
                    fit["beyond"] = beyond
    return data

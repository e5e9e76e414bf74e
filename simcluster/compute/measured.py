"""Measured and derived device profiles: the fitted cost models ``simcluster calibrate`` writes.

Every cost model in such a profile is linear in named features with non-negative
coefficients::

    t (seconds) = sum_i coef[i] * feature[i]

Feature names and units (:data:`FEATURES`): ``const`` is 1 (its coefficient is a fixed
cost in seconds: dispatch, launch, framework overhead), ``flops`` is FLOPs of the pass,
``bytes``/``nbytes`` are bytes moved, the rest are element counts; each coefficient is
seconds per unit of its feature. The fits are made by :mod:`calibrate.fit` from samples
that stay in the profile file beside them. A compute fit also records the range of its
samples (``edge``) and, for the kinds of work its samples never measured a rate for,
the device's roofline past that range (``beyond``): :mod:`simcluster.compute.extrapolation`.

Layout of the ``device`` section (``kind`` ``measured`` or ``derived``)::

    compute:  {precision: {op_class | "op_class:variant": {pass: fit}}}
    kernels:  {family: fit | {sub_key: fit}}    # sub-keys below
    roofline: {peak_flops: {fp32, fp16_tensor?}, memory_bandwidth, launch_overhead_s, host}
    sparsify_measured: {"device.dgc": table, ...}   # optional, as in a spec profile

``sparsify_measured`` (optional) holds sourced per-call sparsification times in the
spec profile's format (:class:`~simcluster.compute.profile_schema.SparsifyTable`); a
table replaces the ``sparsify`` fit of its side and method. ``calibrate derive`` copies
the target spec's tables into the derived profile (a sourced measurement of the
implementation on the target beats a transfer of another implementation).

``compute`` has a fit for every op class in :data:`simcluster.workload.model.OP_CLASSES`
and pass (``fwd``, ``bwd_input``, ``bwd_weight``); an ``op:variant`` fit (e.g.
``conv:depthwise``, ``elementwise:dropout``) is used for layers of that variant when
present, the op class fit otherwise. Kernel families (:data:`KERNEL_FAMILIES`) and their
sub-keys: ``sparsify.{device,host}.{exact,dgc,gaussian,random,threshold}``,
``projection.{filter,channel,kernel_shape,combined}``, ``spmv.{spmv,spmm}``,
``memcpy.{d2d,h2d_pinned,h2d_pageable,d2h_pinned,d2h_pageable}`` (a memcpy kind may be
an alias naming another kind, e.g. on a CPU device where host and device are one), and a
single fit for the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simcluster.compute.precision import (
    HALF_OPS,
    PEAK_NAMES,
    describe_key,
    is_amp,
    peak_key,
    required_peak,
)
from simcluster.compute.profile import (
    DDP_HOST_KEYS,
    KERNEL_FAMILIES,
    PASSES,
    PRECISIONS,
    SPARSIFY_METHODS,
    DeviceProfile,
)
from simcluster.errors import ConfigError, did_you_mean

__all__ = [
    "FEATURES",
    "OP_CLASSES",
    "PROJECTION_KINDS",
    "MEMCPY_KINDS",
    "Fit",
    "MeasuredProfile",
    "layer_variant",
    "layer_features",
    "LAYER_FEATURES",
    "kernel_features",
    "kernel_fit_path",
    "FRESH_OUTPUT",
    "CHANNEL_MASK",
    "INDEX_COPY",
    "OPTIONAL_KERNELS",
    "FRESH_OUTPUT_FEATURES",
    "grid_time",
    "sparsify_grid",
]

#: op classes of the workload zoo (kept here so this module needs no workload import)
OP_CLASSES = ("conv", "linear", "norm", "elementwise", "pool", "attention", "embedding", "lstm")
PROJECTION_KINDS = ("filter", "channel", "kernel_shape", "combined")
MEMCPY_KINDS = ("d2d", "h2d_pinned", "h2d_pageable", "d2h_pinned", "d2h_pageable")
WHERE = ("device", "host")

#: feature name -> unit (a coefficient is seconds per unit)
FEATURES: dict[str, str] = {
    "const": "1 (coefficient in seconds)",
    "flops": "FLOP",
    "flops_wave": "FLOP as the SMs spend them: flops / wave utilisation (gemm_waves)",
    "bytes": "bytes",
    "bytes_spill": "bytes beyond the cache: max(0, bytes - roofline.cache_bytes)",
    "nbytes": "bytes",
    "numel": "elements",
    "k": "elements selected",
    "groups": "structures scored",
    "kept": "elements kept",
    "nnz": "non-zeros",
    "rows": "rows",
    "nnz_batch": "non-zeros x batch columns",
    "rows_batch": "rows x batch columns",
    "num_params": "parameters",
    "numel_spill": "elements beyond the last-level cache: max(0, numel - llc_bytes / 4)",
    "numel_window": "elements of a weight whose kh x kw window exceeds 1 (channel_mask)",
    "nnz_spill": "non-zeros beyond the last-level cache: max(0, nnz - llc_bytes / 8)",
    "nnz_batch_spill": "max(0, nnz x batch - llc_bytes / 4)",
    "nbytes_spill": "bytes beyond the last-level cache: max(0, nbytes - llc_bytes)",
    "num_params_spill": "max(0, num_params - llc_bytes / 20) (SGD momentum: 20 bytes/param)",
}

#: features of each compute / kernel cost model, as written by calibration
COMPUTE_FEATURES = ("const", "flops", "bytes", "bytes_spill")
#: the features a layer pass has (:func:`layer_features`): all a compute fit may name
LAYER_FEATURES = ("const", "flops", "flops_wave", "bytes", "bytes_spill")
KERNEL_FEATURES: dict[str, tuple[str, ...]] = {
    "sparsify": ("const", "numel", "k", "numel_spill"),
    "projection": ("const", "numel", "groups", "numel_spill"),
    "mask_apply": ("const", "numel", "numel_spill"),
    "mask_merge": ("const", "numel", "numel_spill"),
    "compress": ("const", "numel", "numel_spill"),
    "decompress": ("const", "numel", "kept", "numel_spill"),
    "channel_mask": ("const", "numel", "numel_window", "groups", "numel_spill"),
    "index_copy": ("const", "numel", "kept", "numel_spill"),
    "scatter_add": ("const", "numel", "numel_spill"),
    "spmv.spmv": ("const", "nnz", "rows", "nnz_spill"),
    "spmv.spmm": ("const", "nnz_batch", "rows_batch", "nnz", "nnz_batch_spill"),
    "outer_update": ("const", "nnz_batch", "nnz", "nnz_batch_spill"),
    "elementwise": ("const", "nbytes", "nbytes_spill"),
    "memcpy": ("const", "nbytes", "nbytes_spill"),
    "optimizer": ("const", "num_params", "num_params_spill"),
}


#: one call's parameters per kernel family (:data:`KERNEL_FAMILIES`), enough for
#: :func:`kernel_features` to name every feature the family's calls compute
_FAMILY_PARAMS: dict[str, dict[str, float]] = {
    "sparsify": {"numel": 1, "density": 0.5},
    "projection": {"numel": 1, "groups": 1},
    "mask_apply": {"numel": 1},
    "mask_merge": {"numel": 1},
    "compress": {"numel": 1},
    "decompress": {"numel": 1, "kept": 1},
    "channel_mask": {"numel": 1, "groups": 1, "window": 1},
    "index_copy": {"numel": 1, "kept": 1},
    "scatter_add": {"numel": 1},
    "spmv": {"nnz": 1, "rows": 1, "batch": 1},
    "outer_update": {"nnz": 1, "rows": 1, "batch": 1},
    "elementwise": {"nbytes": 1},
    "memcpy": {"nbytes": 1},
    "optimizer": {"num_params": 1},
}


def kernel_family_features(family: str) -> tuple[str, ...]:
    """The features a call of kernel ``family`` computes (:func:`kernel_features`): the
    only ones its fit may name."""
    return tuple(kernel_features(family, _FAMILY_PARAMS[family]))


class Fit:
    """One cost model: ``t = sum coef[i] * values[features[i]]`` seconds, never negative.

    A fit made on samples carries their range, and for the kinds of work its samples
    never measured a rate for, a roofline past it (:mod:`simcluster.compute.extrapolation`):
    ``edge`` maps features to the largest value the fit's samples had (units of the
    feature); ``beyond`` maps features to the marginal cost past their edge (seconds per
    unit: the device's roofline, ``1 / peak FLOP/s`` for ``flops``, ``1 / memory
    bandwidth`` for ``bytes``; 0 for a feature whose excess another one prices, e.g.
    ``bytes_spill`` beside ``bytes``). Every feature in ``beyond`` is clamped to its
    edge, and its part past the edge costs its rate; the rates overlap as a roofline's
    do, so the largest counts::

        t = fit(x, beyond's features clamped to edge) + max_f beyond[f] * (x[f] - edge[f])+

    Inside the sampled range that is the fit; features not in ``beyond`` follow the fit's
    slope everywhere (an ``edge`` without ``beyond`` is for the record).

    ``host_s`` (seconds, optional; ``calibrate.refit --host-floor``): the pace at which
    the calibration's timing loop issued calls of this pass. Its samples were
    ``max(host_s, t)``: the fit ``t`` is then the GPU's work alone, fitted to the samples
    above the floor (a fit whose samples resolved no rate has every coefficient 0 and an
    edge of 0, so the roofline prices it). The floor is the loop's (Python, one autograd
    call per pass), not a training step's: :meth:`MeasuredProfile.layer_time` prices
    such a pass at ``max(dispatch, t)``. Without it (0) the fit's constant carries the
    fixed cost, in series with the rest.
    """

    __slots__ = ("features", "coef", "edge", "beyond", "host_s", "_terms", "_past")

    def __init__(
        self,
        features: tuple[str, ...],
        coef: tuple[float, ...],
        edge: Mapping[str, float] | None = None,
        beyond: Mapping[str, float] | None = None,
        host_s: float = 0.0,
    ) -> None:
        self.features = features
        self.coef = coef
        self.edge = dict(edge or {})
        self.beyond = dict(beyond or {})
        self.host_s = float(host_s)
        if not set(self.beyond) <= set(self.edge):
            raise ValueError("a feature priced past the edge (beyond) needs an edge")
        inf = float("inf")
        clamp = {f: self.edge[f] for f in self.beyond}
        #: (feature, coefficient, clamp) for the non-zero terms
        self._terms = tuple(
            (f, c, clamp.get(f, inf)) for f, c in zip(features, coef, strict=True) if c
        )
        #: (feature, seconds per unit past the edge, edge)
        self._past = tuple((f, r, self.edge[f]) for f, r in self.beyond.items() if r)

    def __call__(self, values: Mapping[str, float]) -> float:
        t = 0.0
        for f, c, top in self._terms:
            x = 1.0 if f == "const" else values[f]
            t += c * (x if x < top else top)
        past = 0.0
        for f, rate, top in self._past:
            extra = rate * (values[f] - top)
            if extra > past:
                past = extra
        return max(t + past, 0.0)

    @classmethod
    def from_json(
        cls,
        data: Any,
        file: str,
        where: str,
        known: tuple[str, ...] | None = None,
        own_edges: bool = False,
    ) -> Fit:
        """A fit record of a profile, checked (``known``: the features its kind of work
        has, default every one of :data:`FEATURES`). Its ``edge`` and ``beyond`` may name
        the features of ``known`` (a compute fit's edge records ``flops`` and ``bytes``
        beside ``flops_wave``), with ``own_edges`` only the fit's own (a kernel family's
        features differ by family): a feature the call does not compute would be a
        KeyError at the first call past the edge."""
        if not isinstance(data, dict):
            raise ConfigError(file, where, data, "a fit is an object with features and coef")
        for key in ("features", "coef"):
            if key not in data:
                raise ConfigError(file, f"{where}.{key}", None, "missing field")
        feats, coef = data["features"], data["coef"]
        names = list(known or FEATURES)
        if not isinstance(feats, list) or not all(isinstance(f, str) and f in names for f in feats):
            bad = (
                next((f for f in feats if f not in names), None)
                if isinstance(feats, list)
                else None
            )
            near = did_you_mean(bad, names) if isinstance(bad, str) else []
            raise ConfigError(file, f"{where}.features", feats, "unknown feature", names, near)
        if not isinstance(coef, list) or len(coef) != len(feats):
            raise ConfigError(
                file, f"{where}.coef", coef, "needs one number per feature", f"{len(feats)} numbers"
            )
        from simcluster.compute.profile_schema import MAX_FIXED_S, MAX_S_PER_UNIT, check_number

        values = tuple(
            check_number(
                c, file, f"{where}.coef[{i}]", 0.0, MAX_FIXED_S if f == "const" else MAX_S_PER_UNIT
            )
            for i, (f, c) in enumerate(zip(feats, coef, strict=True))
        )
        past = [f for f in (feats if own_edges else names) if f != "const"]
        edge = _feature_map(data.get("edge"), file, f"{where}.edge", None, past)
        beyond = _feature_map(data.get("beyond"), file, f"{where}.beyond", MAX_S_PER_UNIT, past)
        for f in beyond:
            if f not in edge:
                raise ConfigError(
                    file, f"{where}.beyond.{f}", f, "a feature past the edge needs an edge",
                    sorted(edge) or f"an edge.{f} beside it (this fit records no edge)",
                )  # fmt: skip
        host = data.get("host_s", 0.0)
        host = check_number(host, file, f"{where}.host_s", 0.0, MAX_FIXED_S)
        return cls(tuple(feats), values, edge, beyond, host)


def _feature_map(
    raw: Any, file: str, where: str, top: float | None, names: list[str]
) -> dict[str, float]:
    """``{feature: number >= 0}`` of a fit's ``edge`` / ``beyond`` (empty when absent),
    each feature one of ``names``."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(file, where, raw, "must map features to numbers")
    from simcluster.compute.profile_schema import check_number

    out = {}
    for f, v in raw.items():
        if f not in names:
            why = "not a feature of this fit" if f in FEATURES else "unknown feature"
            raise ConfigError(
                file, f"{where}.{f}", f, why, names, suggestions=did_you_mean(f, names)
            )  # fmt: skip
        out[f] = check_number(v, file, f"{where}.{f}", 0.0, top)
    return out


# ----------------------------------------------------------------------------- features

#: GEMMs of a pass relative to the forward's, where not 1: attention's input gradient
#: runs five batched matmuls against the forward's two (``Q K^T`` and ``P V``, each
#: ``B*H*S*S*d`` multiply-adds). The fused kernels PyTorch's scaled_dot_product_attention
#: runs (flash, memory-efficient, cuDNN) keep no ``S x S`` probabilities for the backward:
#: it recomputes the scores ``Q K^T`` from the saved log-sum-exp, then ``dV = P^T dO``,
#: ``dP = dO V^T``, ``dQ = dS K`` and ``dK = dS^T Q``
PASS_GEMMS: dict[tuple[str, str], float] = {("attention", "bwd_input"): 2.5}

#: output tile of one thread block of a tensor-core GEMM / implicit-GEMM convolution
#: (an assumption: cuBLAS and cuDNN pick 64..256-wide tiles; 128 x 128 is the common one)
TILE = 128
#: split-K: a GEMM with fewer tiles than SMs splits its reduction into chunks of at least
#: this many elements to fill the SMs (an assumption about cuBLAS / cuDNN heuristics)
SPLIT_K_MIN = 256


def _cdiv(a: float, b: float) -> int:
    return int(-(-a // b))


def gemm_shape(layer, batch: int, pass_: str) -> tuple[int, int, int, int] | None:
    """(count, M, N, K) of the GEMM a pass runs (``count`` independent ones), or None
    for op classes that run no GEMM. Convolutions as implicit GEMMs; an LSTM's per-step
    GEMM (its steps run one after another); attention's fused kernel as ``batch x
    heads`` blocks of ``seq`` rows."""
    s = layer.shape
    b = batch
    if layer.op == "linear":
        m, n, k = b * s.get("tokens", 1), s["out_features"], s["in_features"]
        return {"fwd": (1, m, n, k), "bwd_input": (1, m, k, n), "bwd_weight": (1, n, k, m)}[pass_]
    if layer.op == "conv":
        g = s.get("groups", 1)
        cin, cout = s["cin"] // g, s["cout"] // g
        kk = s["kh"] * s["kw"]
        p_out = b * s["hout"] * s["wout"]
        p_in = b * s["hin"] * s["win"]
        return {
            "fwd": (g, p_out, cout, cin * kk),
            "bwd_input": (g, p_in, cin, cout * kk),
            "bwd_weight": (g, cout, cin * kk, p_out),
        }[pass_]
    if layer.op == "attention":
        return (b * s["heads"], s["seq"], s["head_dim"], s["seq"])
    if layer.op == "lstm":
        h = s["hidden"]
        m, n, k = b, 4 * h, s["input_size"] + h
        return {"fwd": (1, m, n, k), "bwd_input": (1, m, k, n), "bwd_weight": (1, n, k, m)}[pass_]
    return None


def wave_utilisation(layer, batch: int, pass_: str, sm_count: int) -> float:
    """Fraction of the SMs' slots a pass's GEMM fills, averaged over its waves.

    ``tiles = count * ceil(M / TILE) * ceil(N / TILE)`` thread blocks (split-K
    multiplies them when they are fewer than the SMs); they run in ``ceil(tiles / SMs)``
    waves, the last one partly empty: utilisation ``tiles / (waves * SMs)`` (1 for op
    classes without a GEMM, or when ``sm_count`` is unknown).
    """
    shape = gemm_shape(layer, batch, pass_) if sm_count > 0 else None
    if shape is None:
        return 1.0
    count, m, n, k = shape
    tiles = count * _cdiv(m, TILE) * _cdiv(n, TILE)
    if tiles < sm_count:
        tiles *= max(1, min(sm_count // tiles, k // SPLIT_K_MIN))
    waves = _cdiv(tiles, sm_count)
    return tiles / (waves * sm_count)


def layer_variant(layer) -> str | None:
    """Sub-class of an op class that has its own fit when measured (or ``None``)."""
    s = layer.shape
    if layer.op == "conv":
        if s.get("groups", 1) > 1:
            return "depthwise" if s.get("groups") == s.get("cin") else "grouped"
        if s.get("cin", 0) <= 4:
            return "stem"  # 3-channel image input: poor vectorisation over channels
        kind = "1x1" if s.get("kh") == 1 and s.get("kw") == 1 else "spatial"
        # strided convolutions' input gradient runs a different, slower algorithm
        return f"{kind}-strided" if s.get("stride", 1) > 1 else kind
    if layer.op == "norm":
        return s.get("kind")
    if layer.op in ("elementwise", "pool"):
        return s.get("kind")
    return None


def _weight_elems(layer) -> int:
    """Weight elements a pass reads (a tied linear reads its owner's weight)."""
    if layer.params == 0 and layer.op == "linear":
        return layer.shape.get("in_features", 0) * layer.shape.get("out_features", 0)
    return layer.params


def layer_features(
    layer,
    batch: int,
    precision: str,
    pass_: str,
    cache_bytes: float = 0.0,
    sm_count: int = 0,
) -> dict[str, float]:
    """Feature values of one pass of a layer: ``const``, ``flops`` (FLOPs), ``bytes``,
    ``bytes_spill``.

    ``flops`` is the layer's forward FLOPs times the batch for every pass (each pass's
    coefficient absorbs its own ratio); ``bytes`` counts activations in and out at the
    precision's width (4 bytes fp32 / tf32, 2 under autocast: ``amp``, ``amp_bf16``) plus
    the weights (the fp32 weight gradient in ``bwd_weight``); ``bytes_spill`` is the part
    of ``bytes`` beyond ``cache_bytes`` (the cache a pass runs in; data that does not fit
    comes from slower memory). ``flops_wave`` is ``flops`` over the pass's wave
    utilisation on ``sm_count`` SMs (:func:`wave_utilisation`): small GEMMs and
    convolutions that leave SMs idle cost as much as the full waves they occupy.
    """
    a = 2 if is_amp(precision) else 4
    act = (layer.in_elems + layer.out_elems) * batch * a
    if layer.op == "embedding":  # the input is indices, not activations
        act = (layer.in_elems * 8 + layer.out_elems * a) * batch
    w = _weight_elems(layer) * (4 if pass_ == "bwd_weight" else a)
    nbytes = float(act + w)
    flops = float(layer.flops) * batch
    return {
        "const": 1.0,
        "flops": flops,
        "flops_wave": flops / wave_utilisation(layer, batch, pass_, sm_count),
        "bytes": nbytes,
        "bytes_spill": max(0.0, nbytes - cache_bytes),
    }


def kernel_fit_path(family: str, params: Mapping[str, Any]) -> tuple[str, ...]:
    """Where a kernel family's fit lives under ``device.kernels`` for these parameters."""
    if family == "sparsify":
        method = str(params.get("method", "exact"))
        where = str(params.get("where", "device"))
        if method not in SPARSIFY_METHODS:
            raise ValueError(f"sparsify method must be one of {SPARSIFY_METHODS}, got {method!r}")
        if where not in WHERE:
            raise ValueError(f"sparsify where must be one of {WHERE}, got {where!r}")
        return ("sparsify", where, method)
    if family == "projection":
        kind = str(params.get("kind", "combined"))
        if kind not in PROJECTION_KINDS:
            raise ValueError(f"projection kind must be one of {PROJECTION_KINDS}, got {kind!r}")
        return ("projection", kind)
    if family == "spmv":
        return ("spmv", "spmv" if float(params.get("batch", 1)) <= 1 else "spmm")
    if family == "memcpy":
        kind = str(params.get("kind", "d2d"))
        kind = {"h2d": "h2d_pinned", "d2h": "d2h_pinned"}.get(kind, kind)
        if kind not in MEMCPY_KINDS:
            raise ValueError(f"memcpy kind must be one of {MEMCPY_KINDS}, got {kind!r}")
        return ("memcpy", kind)
    if family not in KERNEL_FAMILIES and family not in OPTIONAL_KERNELS:
        raise ValueError(f"unknown kernel family {family!r}; known: {sorted(KERNEL_FAMILIES)}")
    return (family,)


def kernel_features(
    family: str, params: Mapping[str, Any], cache_bytes: float = 0.0
) -> dict[str, float]:
    """Feature values of one kernel call (see :data:`KERNEL_FAMILIES` for the parameters).

    The ``*_spill`` features count what does not fit in ``cache_bytes`` (bytes): for
    kernel families the profile passes its last-level cache (``roofline.llc_bytes``),
    since these kernels stream their operands once and only a miss in the last level
    goes to memory; layer passes (:func:`layer_features`) spill from ``cache_bytes``.
    """
    p = params
    v: dict[str, float] = {"const": 1.0}
    if "numel" in p:
        v["numel"] = float(p["numel"])
        v["numel_spill"] = max(0.0, v["numel"] - cache_bytes / 4)
    if family == "sparsify":
        n, density = float(p["numel"]), float(p["density"])
        v["k"] = max(1.0, n * density)
    elif family in ("projection", CHANNEL_MASK):
        v["groups"] = float(p.get("groups", 1))
        if family == CHANNEL_MASK:  # a reduction over windows of kh x kw > 1 elements
            v["numel_window"] = v["numel"] if float(p.get("window", 1)) > 1 else 0.0
    elif family in ("decompress", INDEX_COPY):
        v["kept"] = float(p["kept"])
    elif family in ("spmv", "outer_update"):
        nnz, batch = float(p["nnz"]), float(p.get("batch", 1))
        rows = float(p.get("rows", 0))
        v.update(nnz=nnz, rows=rows, nnz_batch=nnz * batch, rows_batch=rows * batch)
        v["nnz_spill"] = max(0.0, nnz - cache_bytes / 8)
        v["nnz_batch_spill"] = max(0.0, nnz * batch - cache_bytes / 4)
    elif family in ("elementwise", "memcpy"):
        v["nbytes"] = float(p["nbytes"])
        v["nbytes_spill"] = max(0.0, v["nbytes"] - cache_bytes)
    elif family == "optimizer":
        v["num_params"] = float(p["num_params"])
        v["num_params_spill"] = max(0.0, v["num_params"] - cache_bytes / 20)
    return v


# ----------------------------------------------------------------------------- profile


def _memory_bytes(dev: Any, file: str) -> float | None:
    """Device memory: ``device.roofline.memory_bytes``, else the spec sheet's."""
    roof = dev.get("roofline", {}) if isinstance(dev, dict) else {}
    mem = roof.get("memory_bytes") if isinstance(roof, dict) else None
    if mem is None and isinstance(dev, dict) and dev.get("spec_profile"):
        from simcluster.compute.loader import read_profile_data

        try:
            spec = read_profile_data(str(dev["spec_profile"]))
        except ConfigError:
            return None
        mem = spec.get("device", {}).get("memory_bytes")
    if mem is None:
        return None
    try:
        return float(mem)
    except (TypeError, ValueError):
        raise ConfigError(file, "device.roofline.memory_bytes", mem, "must be a number") from None


def _get(data: Any, path: tuple[str, ...], file: str, prefix: str) -> Any:
    cur = data
    walked = prefix
    for key in path:
        walked = f"{walked}.{key}" if walked else key
        if not isinstance(cur, dict) or key not in cur:
            raise ConfigError(file, walked, None, "missing field")
        cur = cur[key]
    return cur


#: keys of ``device.roofline.host``: the host's measured copy rate (bytes/s) and launch
#: cost (s) (``simcluster calibrate``), DDP's host costs per gradient tensor and per
#: bucket (s; :data:`simcluster.compute.profile.DDP_HOOK_S`, ``DDP_BUCKET_S``)
ROOFLINE_HOST_KEYS = ("memory_bandwidth", "launch_overhead_s", *DDP_HOST_KEYS)


def _check_roofline_host(host: Any, file: str) -> None:
    """``device.roofline.host`` is a mapping of :data:`ROOFLINE_HOST_KEYS` (a list, a null
    or a misspelt ``ddp_hooks_s`` was ignored: the defaults were used without a word)."""
    where = "device.roofline.host"
    if not isinstance(host, dict):
        raise ConfigError(file, where, host, "not a mapping", ", ".join(ROOFLINE_HOST_KEYS))
    for key in host:
        if key not in ROOFLINE_HOST_KEYS:
            raise ConfigError(
                file, f"{where}.{key}", key, "unknown key", ROOFLINE_HOST_KEYS,
                suggestions=did_you_mean(key, ROOFLINE_HOST_KEYS),
            )  # fmt: skip


#: optional entry of ``device.kernels``: first touch of freshly mapped output pages
FRESH_OUTPUT = "fresh_output"
#: optional entries of ``device.kernels`` timing the live H-SADMM code's own ops
#: (``calibrate/live/run.py``): ``channel_mask`` is its ``project()`` on one OIHW weight
#: (``pow(2).sum`` over dims 0, 2, 3, ``topk`` of the input channels, a uint8 mask set at
#: their indices; parameters ``numel``, ``groups`` = input channels, ``window`` = kh x kw:
#: feature ``numel_window`` = numel of a weight whose window exceeds 1, whose reduction
#: runs an inner loop per window, 2-4x slower per element than a 1 x 1 conv's reduction
#: over contiguous channels), ``index_copy`` its
#: in-place decompress (``zero_`` of the weight, ``index_copy_`` of the kept channels
#: along dim 1; ``numel`` of the weight, ``kept`` of the compact slice). Profiles
#: without them price those ops by the families they did measure
#: (:meth:`MeasuredProfile.optional_kernel_time` returns None)
CHANNEL_MASK = "channel_mask"
INDEX_COPY = "index_copy"
OPTIONAL_KERNELS = (CHANNEL_MASK, INDEX_COPY)
#: features of the ``fresh_output`` fit
FRESH_OUTPUT_FEATURES = ("const", "nbytes")

#: (densities, sizes in elements, seconds[density][size]) of a sparsify table
SparsifyGrid = tuple[tuple[float, ...], tuple[float, ...], tuple[tuple[float, ...], ...]]


def _numbers(raw: Any, file: str, where: str, minimum: float, increasing: bool) -> list[float]:
    from simcluster.compute.profile_schema import check_number

    if not isinstance(raw, list) or not raw:
        raise ConfigError(file, where, raw, "must be a non-empty list of numbers")
    vals = [check_number(v, file, f"{where}[{i}]", minimum) for i, v in enumerate(raw)]
    if increasing and any(b <= a for a, b in zip(vals, vals[1:], strict=False)):
        raise ConfigError(file, where, raw, "must increase strictly")
    return vals


def sparsify_grid(raw: Any, file: str, where: str) -> SparsifyGrid:
    """A sparsify fit's ``table``, checked: ``{"density": [...], "numel": [...],
    "seconds": [[one per numel] per density]}`` (densities and sizes increasing,
    seconds >= 0); raises ConfigError."""
    if not isinstance(raw, dict):
        raise ConfigError(file, where, raw, "must map density, numel and seconds to lists")
    for key in ("density", "numel", "seconds"):
        if key not in raw:
            raise ConfigError(file, f"{where}.{key}", None, "missing field")
    dens = _numbers(raw["density"], file, f"{where}.density", 1e-12, True)
    numel = _numbers(raw["numel"], file, f"{where}.numel", 1.0, True)
    rows = raw["seconds"]
    if not isinstance(rows, list) or len(rows) != len(dens):
        raise ConfigError(
            file, f"{where}.seconds", rows, "needs one row per density", f"{len(dens)} rows"
        )  # fmt: skip
    seconds = []
    for i, row in enumerate(rows):
        vals = _numbers(row, file, f"{where}.seconds[{i}]", 0.0, False)
        if len(vals) != len(numel):
            raise ConfigError(
                file, f"{where}.seconds[{i}]", row, "needs one number per numel",
                f"{len(numel)} numbers",
            )  # fmt: skip
        seconds.append(tuple(vals))
    return tuple(dens), tuple(numel), tuple(seconds)


def grid_time(grid: SparsifyGrid, numel: float, density: float) -> float:
    """Seconds of one sparsification of ``numel`` elements at ``density`` from measured
    times: piecewise linear in the size along each measured density
    (:func:`~simcluster.compute.profile.interpolate_per_call`), then linear in
    log(density) between the two nearest measured densities (the nearest one outside
    their range). The times are what was measured, also where they do not grow with
    the density (PyTorch's CPU top-k switches from a partial sort to a selection at
    k > n / 64)."""
    import math

    from simcluster.compute.profile import interpolate_per_call

    dens, sizes, rows = grid
    at = [interpolate_per_call(numel, sizes, row) for row in rows]
    if density <= dens[0]:
        return at[0]
    if density >= dens[-1]:
        return at[-1]
    j = next(i for i in range(1, len(dens)) if density <= dens[i])
    w = math.log(density / dens[j - 1]) / math.log(dens[j] / dens[j - 1])
    return at[j - 1] + w * (at[j] - at[j - 1])


def _fresh_output(raw: Any, file: str) -> tuple[Fit, float]:
    """``device.kernels.fresh_output``: a fit over ``nbytes`` and ``mapped_from_bytes``."""
    from simcluster.compute.profile_schema import check_number

    where = f"device.kernels.{FRESH_OUTPUT}"
    fit = Fit.from_json(raw, file, where, FRESH_OUTPUT_FEATURES, own_edges=True)
    if "mapped_from_bytes" not in raw:
        raise ConfigError(file, f"{where}.mapped_from_bytes", None, "missing field")
    mapped = check_number(raw["mapped_from_bytes"], file, f"{where}.mapped_from_bytes", 0.0)
    return fit, mapped


class MeasuredProfile(DeviceProfile):
    """Kernel times from fitted cost models (``kind`` ``measured`` or ``derived``).

    Built from a profile file's parsed JSON by :meth:`from_data`, which checks every
    field the simulator may need and raises :class:`~simcluster.errors.ConfigError`
    naming the file and the field.
    """

    def __init__(
        self,
        name: str,
        kind: str,
        provenance: dict[str, Any],
        compute: dict[str, dict[str, dict[str, Fit]]],
        kernels: dict[tuple[str, ...], Fit],
        memcpy_alias: dict[str, str],
        file: str = "<memory>",
        kernel_sources: dict[str, str] | None = None,
        cache_bytes: float = 0.0,
        peak_flops: dict[str, float] | None = None,
        memory_bytes: float | None = None,
        sm_count: int = 0,
        llc_bytes: float | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.provenance = provenance
        self.compute = compute
        self.kernels = kernels
        self.memcpy_alias = memcpy_alias
        self.file = file
        self.kernel_sources = kernel_sources or {}
        #: bytes of cache a layer pass runs in (``bytes_spill`` starts beyond it)
        self.cache_bytes = cache_bytes
        #: bytes of the last-level cache, where the kernel families' ``*_spill`` features
        #: start (``device.roofline.llc_bytes``; ``cache_bytes`` for profiles without it)
        self.llc_bytes = cache_bytes if llc_bytes is None else llc_bytes
        #: the device's peak FLOP/s keys (``device.roofline.peak_flops``): which tensor
        #: cores it has (a derived profile carries its target's spec sheet)
        self.peak_flops = dict(peak_flops or {})
        #: device memory in bytes (``device.roofline.memory_bytes``, else the spec sheet
        #: ``device.spec_profile`` names); None when neither says
        self.memory_bytes = memory_bytes
        #: SMs of the device (``device.roofline.sm_count``; 0 = unknown: no wave model)
        self.sm_count = sm_count
        #: sourced per-call sparsification tables (``device.sparsify_measured``, e.g. a
        #: derived profile's target spec's; :meth:`tabled_sparsify_time`)
        self.sparsify_measured: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {}
        #: measured sparsification times per (where, method) on a grid of densities x
        #: sizes (``device.kernels.sparsify.<where>.<method>.table``; :func:`grid_time`)
        self.sparsify_grid: dict[tuple[str, str], SparsifyGrid] = {}
        #: first touch of freshly mapped output pages (``device.kernels.fresh_output``):
        #: the fit over ``nbytes`` and the allocation size from which the host's
        #: allocator maps pages anew (bytes); None when the profile did not measure it
        self.fresh_output: tuple[Fit, float] | None = None
        #: seconds of one op call on one-element tensors (``device.roofline.
        #: launch_overhead_s``, :meth:`dispatch_time`); 0 when the profile has none
        self.dispatch_s = 0.0
        #: layer passes timed with the host ahead of the GPU (``provenance.layer_timing``,
        #: or its source's for a derived profile): every compute fit is the GPU's work
        #: alone, as a fit with a host floor is (:meth:`layer_time`)
        layer_timing = (provenance.get("layer_timing") or {}).get("mode")
        source = (provenance.get("derived_from") or {}).get("layer_timing")
        self.host_ahead = "host-ahead" in (layer_timing, source)

    # -- loading ----------------------------------------------------------------------
    @classmethod
    def from_data(cls, data: dict[str, Any], file: str | Path = "<memory>") -> MeasuredProfile:
        file = str(file)
        dev = _get(data, ("device",), file, "")
        compute_raw = _get(dev, ("compute",), file, "device")
        compute: dict[str, dict[str, dict[str, Fit]]] = {}
        if not isinstance(compute_raw, dict) or "fp32" not in compute_raw:
            raise ConfigError(file, "device.compute.fp32", None, "missing field")
        for precision, classes in compute_raw.items():
            where = f"device.compute.{precision}"
            if precision not in PRECISIONS:
                raise ConfigError(file, where, precision, "unknown precision", PRECISIONS)
            if not isinstance(classes, dict):
                raise ConfigError(file, where, classes, "must map op classes to fits")
            table: dict[str, dict[str, Fit]] = {}
            for op in OP_CLASSES:
                if op not in classes:
                    raise ConfigError(file, f"{where}.{op}", None, "missing field")
            for key, passes in classes.items():
                op = key.split(":", 1)[0]
                if op not in OP_CLASSES:
                    raise ConfigError(file, f"{where}.{key}", key, "unknown op class", OP_CLASSES)
                table[key] = {}
                for pass_ in PASSES:
                    if op == "embedding" and pass_ == "bwd_input":
                        continue  # the input is indices: no gradient
                    raw = _get(passes, (pass_,), file, f"{where}.{key}")
                    table[key][pass_] = Fit.from_json(
                        raw, file, f"{where}.{key}.{pass_}", LAYER_FEATURES
                    )
            compute[precision] = table

        kraw = _get(dev, ("kernels",), file, "device")
        kernels: dict[tuple[str, ...], Fit] = {}
        alias: dict[str, str] = {}
        sources: dict[str, str] = {}

        grids: dict[tuple[str, str], SparsifyGrid] = {}

        def fit_at(path: tuple[str, ...]) -> None:
            raw = _get(kraw, path, file, "device.kernels")
            where = "device.kernels." + ".".join(path)
            known = kernel_family_features(path[0])
            kernels[path] = Fit.from_json(raw, file, where, known, own_edges=True)
            if path[0] == "sparsify" and isinstance(raw, dict) and "table" in raw:
                grids[(path[1], path[2])] = sparsify_grid(raw["table"], file, f"{where}.table")
            if isinstance(raw, dict) and raw.get("source") in ("spec", "measured", "derived"):
                sources.setdefault(path[0], raw["source"])

        for family in KERNEL_FAMILIES:
            if family == "sparsify":
                for where in WHERE:
                    for method in SPARSIFY_METHODS:
                        fit_at(("sparsify", where, method))
            elif family == "projection":
                for kind in PROJECTION_KINDS:
                    fit_at(("projection", kind))
            elif family == "spmv":
                fit_at(("spmv", "spmv"))
                fit_at(("spmv", "spmm"))
            elif family == "memcpy":
                section = _get(kraw, ("memcpy",), file, "device.kernels")
                for kind in MEMCPY_KINDS:
                    raw = _get(section, (kind,), file, "device.kernels.memcpy")
                    if isinstance(raw, str):
                        if raw not in MEMCPY_KINDS or isinstance(section.get(raw), str):
                            raise ConfigError(
                                file, f"device.kernels.memcpy.{kind}", raw,
                                "an alias must name a measured memcpy kind", MEMCPY_KINDS,
                            )  # fmt: skip
                        alias[kind] = raw
                    else:
                        fit_at(("memcpy", kind))
            else:
                fit_at((family,))
        from simcluster.compute.profile_schema import check_number

        roof = dev.get("roofline", {}) if isinstance(dev, dict) else {}
        cache = roof.get("cache_bytes", 0.0) if isinstance(roof, dict) else 0.0
        cache = check_number(cache, file, "device.roofline.cache_bytes", minimum=0.0)
        llc = None  # absent: the kernels spill beyond cache_bytes (a null is refused)
        if isinstance(roof, dict) and "llc_bytes" in roof:
            llc = check_number(roof["llc_bytes"], file, "device.roofline.llc_bytes", minimum=0.0)
        peaks = roof.get("peak_flops", {}) if isinstance(roof, dict) else {}
        prof = cls(
            data["name"], data["kind"], data["provenance"], compute, kernels, alias, file, sources,
            cache, peaks if isinstance(peaks, dict) else {}, _memory_bytes(dev, file),
            int(roof.get("sm_count", 0) or 0) if isinstance(roof, dict) else 0, llc,
        )  # fmt: skip
        prof.sparsify_grid = grids
        if isinstance(roof, dict) and "launch_overhead_s" in roof:
            prof.dispatch_s = check_number(
                roof["launch_overhead_s"], file, "device.roofline.launch_overhead_s", minimum=0.0
            )
        if isinstance(kraw, dict) and FRESH_OUTPUT in kraw:
            prof.fresh_output = _fresh_output(kraw[FRESH_OUTPUT], file)
        for family in OPTIONAL_KERNELS:
            if isinstance(kraw, dict) and family in kraw:
                fit_at((family,))
        if isinstance(dev, dict) and "sparsify_measured" in dev:
            from simcluster.compute.profile_schema import validate_sparsify_tables

            prof.sparsify_measured = validate_sparsify_tables(dev["sparsify_measured"], file)
        host = roof.get("host", {}) if isinstance(roof, dict) else {}
        _check_roofline_host(host, file)
        for key in DDP_HOST_KEYS:  # DDP's host-bound costs, when measured
            if key in host:
                where = f"device.roofline.host.{key}"
                setattr(prof, key, check_number(host[key], file, where, 0.0, 1.0))
        return prof

    # -- DeviceProfile -----------------------------------------------------------------
    def precision_problem(self, precision: str) -> str | None:
        """Why compute key ``precision`` cannot be timed here (None when it can)."""
        if precision in self.compute:
            return None
        need = required_peak(precision)
        if self.kind == "derived" and need not in self.peak_flops:
            return (
                f"device of profile {self.name!r} has no {PEAK_NAMES.get(need, need)} "
                f"(device.roofline.peak_flops lists {', '.join(sorted(self.peak_flops))}), "
                f"so it cannot run {describe_key(precision)}"
            )
        return (
            f"profile {self.name!r} has no {describe_key(precision)} fits "
            f"(device.compute.{precision} is missing; it has {', '.join(self.compute)}): "
            f"calibrate with --precisions fp32,{precision} on the device, derive them from a "
            f"profile that has them (simcluster calibrate derive), or simulate at fp32"
        )

    def _compute_fit(self, layer, precision: str, pass_: str) -> Fit:
        if precision not in self.compute:
            raise ConfigError(
                self.file, f"device.compute.{precision}", None,
                self.precision_problem(precision) or "missing field",
            )  # fmt: skip
        table = self.compute[precision]
        variant = layer_variant(layer)
        if variant is not None:
            fits = table.get(f"{layer.op}:{variant}")
            if fits is not None:
                return fits[pass_]
        return table[layer.op][pass_]

    def layer_time(self, layer, batch: int, precision: str, pass_: str) -> float:
        """Seconds for one pass of ``layer`` at ``batch`` samples.

        A fit with a host floor (:class:`Fit` ``host_s``), or any fit of a profile timed
        with the host ahead (:attr:`host_ahead`), gives the GPU's work; in a training step
        the host issues the pass at the profile's measured per-op cost
        (``roofline.launch_overhead_s``, :meth:`dispatch_time`) ahead of the GPU, so the
        pass costs the larger of the two (assumption: one op's host cost per pass)."""
        if pass_ not in PASSES:
            raise ValueError(f"pass must be one of {PASSES}, got {pass_!r}")
        if pass_ == "bwd_weight" and layer.params == 0 and not layer.shape.get("tied"):
            return 0.0
        if pass_ == "bwd_input" and layer.op == "embedding":
            return 0.0
        fit = self._compute_fit(layer, precision, pass_)
        t = fit(layer_features(layer, batch, precision, pass_, self.cache_bytes, self.sm_count))
        if (fit.host_s or self.host_ahead) and t < self.dispatch_s:
            t = self.dispatch_s
        peak = self.math_peak(layer.op, precision)
        if peak:
            t = max(t, PASS_GEMMS.get((layer.op, pass_), 1.0) * layer.flops * batch / peak)
        return t

    def math_peak(self, op: str, precision: str) -> float | None:
        """Peak FLOP/s the op class's math runs at under ``precision`` (None: no bound).

        A fitted cost model is linear in FLOPs, and its slope, fitted on small layers
        whose time is mostly fixed cost, can stand for a rate above what the device's
        math units can do; :meth:`layer_time` never returns less than the pass's FLOPs
        at this peak (``device.roofline.peak_flops``: the spec sheet's for a derived
        profile, the measured GEMM rate for a measured one). Only for the GEMM op
        classes. A measured GPU profile's ``fp32`` fits of cuDNN op classes ran on
        TF32 tensor cores (PyTorch's default, unless the profile has ``tf32`` fits,
        i.e. was measured strictly), so they are bounded by ``tf32_tensor`` if listed.
        """
        if op not in HALF_OPS:
            return None
        key = peak_key(precision, op)
        if (
            self.kind == "measured"
            and precision == "fp32"
            and op in ("conv", "lstm")
            and "tf32" not in self.compute
            and str(self.provenance.get("device", "")).startswith("cuda")
        ):
            key = "tf32_tensor"
        peak = self.peak_flops.get(key)
        return float(peak) if peak else None

    def kernel_time(self, family: str, **params: float | str) -> float:
        """Seconds for one kernel of ``family`` (parameters: :data:`KERNEL_FAMILIES`)."""
        path = kernel_fit_path(family, params)
        if path[0] == "sparsify":
            tabled = self.tabled_sparsify_time(path[1], path[2], float(params["numel"]))
            if tabled is not None:
                return tabled
            grid = self.sparsify_grid.get((path[1], path[2]))
            if grid is not None:
                return grid_time(grid, float(params["numel"]), float(params["density"]))
        if path[0] == "memcpy" and path[1] in self.memcpy_alias:
            path = ("memcpy", self.memcpy_alias[path[1]])
        return self.kernels[path](kernel_features(family, params, self.llc_bytes))

    def optional_kernel_time(self, family: str, **params: float | str) -> float | None:
        """Seconds for one call of an optional family (:data:`OPTIONAL_KERNELS`), None
        when this profile did not measure it."""
        if (family,) not in self.kernels:
            return None
        return self.kernels[(family,)](kernel_features(family, params, self.llc_bytes))

    def fresh_output_time(self, nbytes: float) -> float:
        """Seconds of the first touch of a fresh ``nbytes`` allocation: the profile's
        ``fresh_output`` fit when the allocation is at least its ``mapped_from_bytes``
        (the host's allocator maps such blocks anew each time), else 0."""
        if self.fresh_output is None:
            return 0.0
        fit, mapped_from = self.fresh_output
        return fit({"const": 1.0, "nbytes": float(nbytes)}) if nbytes >= mapped_from else 0.0

    def dispatch_time(self) -> float:
        """Seconds of one op call on one-element tensors (``dispatch_s``)."""
        return self.dispatch_s

    def sgd_time(self, num_params: float) -> float:
        """Seconds for an SGD-with-momentum step over ``num_params`` fp32 parameters."""
        return self.kernel_time("optimizer", num_params=num_params)

    def memcpy_time(self, nbytes: float, kind: str = "d2d") -> float:
        """Seconds to copy ``nbytes`` bytes (``d2d``, ``h2d``, ``d2h`` or a full kind)."""
        return self.kernel_time("memcpy", nbytes=nbytes, kind=kind)

    def elementwise_time(self, nbytes: float) -> float:
        """Seconds for a memory-bound kernel reading + writing ``nbytes`` bytes in total."""
        return self.kernel_time("elementwise", nbytes=nbytes)

    def source_of(self, family: str) -> str:
        """``measured`` or ``derived`` (``spec`` where a derived profile took a family from
        the target's spec sheet, e.g. host-device copies derived from a CPU profile)."""
        return self.kernel_sources.get(family, self.kind)

    def describe(self) -> str:
        if self.kind == "derived":
            src = self.provenance.get("derived_from", {})
            src_name = src.get("name", "?") if isinstance(src, dict) else str(src)
            return f"{self.name} (derived from {src_name})"
        return f"{self.name} ({self.kind})"

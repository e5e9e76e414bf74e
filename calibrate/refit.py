"""Re-fit a measured profile's compute cost models from the samples it holds.

The fits ``simcluster calibrate`` writes are ``t = c0 + c1 * flops + c2 * bytes +
c3 * bytes_spill`` per precision, op class (and variant) and pass. For the op classes
that run GEMMs on the GPU (convolution, linear, attention, LSTM) this tool fits
``flops_wave`` instead of ``flops``: the FLOPs the SMs spend when small GEMMs leave
part of the last wave idle (:func:`simcluster.compute.measured.wave_utilisation`), so
that a kernel's efficiency grows with its size the way it does on the GPU, and
batch-size or width changes move time accordingly. Same samples, same weighting and
non-negative least squares as the calibration (:mod:`calibrate.fit`); variants seen in
fewer than three shapes take their op class's fit scaled to their own samples, as the
calibration does. Nothing else in the profile changes; the provenance records the
refit (command, date, features) and keeps the previous fits' errors for comparison.

    python -m calibrate.refit PROFILE --spec SPEC --out OUT.json

``--spec`` names the device's spec profile (its ``sm_count``; default the profile's
``device.spec_profile``). Refuses to overwrite ``--out`` without ``--force``.

``--amp-from-bf16`` instead re-fits only the ``amp`` (fp16 autocast) fits, on the same
features as the calibration, from samples whose time per pass is the smaller of the fp16
and the bf16 measurement of the same layer and batch (:func:`amp_min_bf16`). Where a
device's fp16 and bf16 tensor cores run at the same rate (A100, H100, H200; the spec
sheet's ``fp16_tensor`` equals ``bf16_tensor``) and both move 2-byte activations, the
two are measurements of the same work, and a fp16 sample several times slower than its
bf16 twin is a disturbed measurement (noise only adds time; the H100's single fp16
round had BERT-large linear passes at 3.6x their bf16 time). Where fp16 really is the
faster one (cuDNN convolutions and batch-norm on the H100), the minimum keeps it.
``amp_bf16`` fits are not touched. Refused for a device whose spec sheet gives the two
different rates.

    python -m calibrate.refit PROFILE --amp-from-bf16 --out OUT.json

``--kernels-llc`` instead re-fits only the kernel families (optimizer, element-wise,
copies, sparsification, ...) with their ``*_spill`` features counted beyond the
last-level cache (``roofline.llc_bytes``) rather than ``cache_bytes``, the per-core L2 a
CPU profile's layer passes use: these kernels stream their operands once, so only what
misses the last level goes to memory (on the development VM's AMD EPYC an element-wise
pass runs at 56-67 GB/s up to 6 MB and 19-23 GB/s from 50 MB; its L3 is 32 MiB). The
cache size comes from ``--llc-bytes``, else from this host's sysfs when the profile was
measured on a CPU of this host's model.

    python -m calibrate.refit PROFILE --kernels-llc [--llc-bytes N] --out OUT.json

``--host-floor`` re-fits every compute fit, on the features and samples it already has,
as ``max(host_s, g)`` where the samples show a floor (:func:`calibrate.fit.fit_host_floor`):
a layer pass's calls, timed back to back, run at the pace of the slower of the host
issuing them and the GPU running them, so samples at the host's pace (under autocast
every linear pass of the H200 profile below 3 GFLOP took 35-150 us whatever its size)
say nothing of the GPU's rate, and a slope fitted through them prices large passes at a
fraction of the GPU's speed. ``g`` is the linear model fitted to the samples above the
floor, or the device's roofline where one parameter (the floor) explains the samples
better by the Bayesian information criterion; fits without a floor stay as they were.
A training step then prices such a pass at ``max(dispatch, g)``
(:meth:`simcluster.compute.measured.MeasuredProfile.layer_time`): the floor is the
timing loop's (Python, one autograd call per pass), not the step's. Profiles measured
with ``--layer-timing host-ahead`` time the GPU's work directly and need no floor; a CUDA
calibration timed ``--layer-timing per-call`` applies this refit itself
(:func:`calibrate.runner.per_call_floors`).

    python -m calibrate.refit PROFILE --host-floor --out OUT.json

``--edges`` only adds to every compute fit the range of its samples and the device's
roofline past it (``edge``, ``beyond``: :mod:`simcluster.compute.extrapolation`), for a
profile measured before calibration wrote them; coefficients unchanged. Every refit
writes them too.

    python -m calibrate.refit PROFILE --edges --out OUT.json
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import functools
import json
import math
import sys
from pathlib import Path
from typing import Any

from simcluster.compute.extrapolation import add_beyond, beyond_rates, fit_edge
from simcluster.compute.loader import read_profile_data
from simcluster.compute.measured import COMPUTE_FEATURES, layer_features
from simcluster.compute.precision import HALF_OPS
from simcluster.errors import ConfigError, UserError

from .fit import fit_cost_model, fit_host_floor
from .runner import _scaled_fit

__all__ = [
    "WAVE_FEATURES",
    "features_for",
    "refit_compute",
    "refit_profile",
    "amp_min_bf16",
    "refit_amp_from_bf16",
    "refit_kernels_llc",
    "add_edges",
    "main",
]

PASSES = ("fwd", "bwd_input", "bwd_weight")
#: features of the GEMM op classes after the refit
WAVE_FEATURES = ("const", "flops_wave", "bytes", "bytes_spill")
MIN_VARIANT_SAMPLES = 3


def features_for(key: str) -> tuple[str, ...]:
    """Features of the cost model of op class (or ``op:variant``) ``key``."""
    return WAVE_FEATURES if key.split(":", 1)[0] in HALF_OPS else COMPUTE_FEATURES


def _rows(data: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Samples grouped by (precision, key) for the op class and for its variant."""
    from .transfer_error import _layers

    tables: dict[str, dict] = {}
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in data["samples"]["compute"]:
        if s["workload"] not in tables:
            tables[s["workload"]] = _layers(s["workload"])
        rec = {
            "layer": tables[s["workload"]][s["layer"]],
            "batch": s["batch"],
            **{p: s.get(f"{p}_s") for p in PASSES},
        }
        rec["bwd_all"] = (rec["bwd_input"] or 0.0) + (rec["bwd_weight"] or 0.0)
        keys = [s["op"]] + ([f"{s['op']}:{s['variant']}"] if s.get("variant") else [])
        for k in keys:
            rows.setdefault((s["precision"], k), []).append(rec)
    return rows


def _fit(
    recs: list[dict],
    key: str,
    precision: str,
    pass_: str,
    cache: float,
    sms: int,
    features: tuple[str, ...] | None = None,
    fitter=fit_cost_model,
):
    use = [r for r in recs if r[pass_] is not None and (pass_ != "bwd_weight" or r[pass_])]
    if not use:
        return {"features": ["const"], "coef": [0.0], "n": 0}
    feats = [layer_features(r["layer"], r["batch"], precision, pass_, cache, sms) for r in use]
    scale = [r["fwd"] if pass_ == "fwd" else r["bwd_all"] for r in use]
    floors = [max(0.05 * x, 1e-7) for x in scale]
    use_feats = features or features_for(key)
    return fitter(feats, [r[pass_] for r in use], use_feats, floor=floors, edge=True)


def _scaled(base: dict, recs: list[dict], precision: str, pass_: str, cache: float, sms: int):
    return _scaled_fit(base, recs, precision, pass_, cache, sms)


def _stamp(command: str) -> dict[str, str]:
    """When (UTC, ISO 8601) and by which command a profile was re-fitted: the fields every
    ``provenance`` record of this tool ends with."""
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
    }


def refit_compute(data: dict[str, Any], sm_count: int) -> dict[str, Any]:
    """New ``device.compute`` from ``data['samples']['compute']`` (see module doc)."""
    cache = float(data["device"].get("roofline", {}).get("cache_bytes", 0.0))
    rows = _rows(data)
    compute: dict[str, dict[str, Any]] = {}
    few = []
    for (precision, key), recs in sorted(rows.items()):
        if ":" in key and len(recs) < MIN_VARIANT_SAMPLES:
            few.append((precision, key, recs))
            continue
        fits = {}
        for pass_ in PASSES:
            if key.startswith("embedding") and pass_ == "bwd_input":
                continue
            fits[pass_] = _fit(recs, key, precision, pass_, cache, sm_count)
        compute.setdefault(precision, {})[key] = fits
    for precision, key, recs in few:
        op = key.split(":", 1)[0]
        compute[precision][key] = {
            p: _scaled(base, recs, precision, p, cache, sm_count)
            for p, base in compute[precision][op].items()
        }
    return compute


def refit_profile(
    data: dict[str, Any], sm_count: int, spec_name: str, command: str
) -> dict[str, Any]:
    """A copy of ``data`` with refitted compute fits and the SM count in its roofline."""
    if "samples" not in data or "compute" not in data.get("samples", {}):
        raise ConfigError(None, "samples.compute", None, "the profile holds no compute samples")
    out = copy.deepcopy(data)
    before = {
        f"{p}/{k}/{ps}": f.get("rel_err_median")
        for p, classes in data["device"]["compute"].items()
        for k, passes in classes.items()
        for ps, f in passes.items()
    }
    out["device"]["compute"] = refit_compute(data, sm_count)
    out["device"].setdefault("roofline", {})["sm_count"] = sm_count
    add_beyond(out)
    out["provenance"]["refit"] = {
        "what": "compute fits of conv, linear, attention and lstm re-fitted on flops_wave "
        "(FLOPs over wave utilisation) instead of flops; other op classes re-fitted on the "
        "same features as before (calibrate/refit.py)",
        "sm_count": sm_count,
        "sm_count_from": spec_name,
        "tile": "128 x 128 output tile per thread block, split-K chunks >= 256 (assumptions, "
        "simcluster/compute/measured.py)",
        **_stamp(command),
        "previous_rel_err_median": before,
    }
    return out


def amp_min_bf16(samples: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The ``amp`` compute samples with each pass time replaced by ``min(fp16, bf16)``
    of the same workload, layer and batch (see the module doc); the other samples
    unchanged. Also returns counts: samples paired, pass times taken from bf16."""
    bf16 = {
        (s["workload"], s["layer"], s["batch"]): s for s in samples if s["precision"] == "amp_bf16"
    }
    out = []
    paired = lowered = 0
    for s in samples:
        twin = bf16.get((s["workload"], s["layer"], s["batch"]))
        if s["precision"] != "amp" or twin is None:
            out.append(s)
            continue
        paired += 1
        new = dict(s)
        for p in PASSES:
            a, b = s.get(f"{p}_s"), twin.get(f"{p}_s")
            if a is not None and b is not None and b < a:
                new[f"{p}_s"] = b
                lowered += 1
        out.append(new)
    return out, {"samples_paired": paired, "pass_times_from_bf16": lowered}


def refit_amp_from_bf16(data: dict[str, Any], spec: dict[str, Any], command: str) -> dict[str, Any]:
    """A copy of ``data`` whose ``amp`` fits are re-fitted on :func:`amp_min_bf16` samples
    (calibration's features; variants with fewer than three samples scaled from their op
    class, as the calibration does)."""
    peaks = spec.get("device", {}).get("peak_flops", {})
    if not peaks.get("fp16_tensor") or peaks.get("fp16_tensor") != peaks.get("bf16_tensor"):
        raise ConfigError(
            None, "device.peak_flops", peaks,
            "--amp-from-bf16 needs equal fp16_tensor and bf16_tensor peaks on the spec sheet",
        )  # fmt: skip
    comp = data.get("device", {}).get("compute", {})
    if "amp" not in comp or "amp_bf16" not in comp:
        raise ConfigError(None, "device.compute", sorted(comp), "needs amp and amp_bf16 fits")
    samples, counts = amp_min_bf16(data["samples"]["compute"])
    cache = float(data["device"].get("roofline", {}).get("cache_bytes", 0.0))
    rows = _rows({"samples": {"compute": samples}})
    old_rows = _rows(data)
    amp: dict[str, dict[str, Any]] = {}
    few = []
    kept = []
    for (precision, key), recs in sorted(rows.items()):
        if precision != "amp":
            continue
        if all(
            a[p] == b[p]
            for a, b in zip(recs, old_rows[(precision, key)], strict=True)
            for p in PASSES
        ):
            amp[key] = copy.deepcopy(comp["amp"][key])  # no sample lowered: fit unchanged
            kept.append(key)
            continue
        if ":" in key and len(recs) < MIN_VARIANT_SAMPLES:
            few.append((key, recs))
            continue
        amp[key] = {
            p: _fit(recs, key, "amp", p, cache, 0, COMPUTE_FEATURES)
            for p in PASSES
            if not (key.startswith("embedding") and p == "bwd_input")
        }
    for key, recs in few:
        op = key.split(":", 1)[0]
        amp[key] = {p: _scaled(base, recs, "amp", p, cache, 0) for p, base in amp[op].items()}
    for key in comp["amp"]:
        amp.setdefault(key, copy.deepcopy(comp["amp"][key]))
    out = copy.deepcopy(data)
    before = {
        f"amp/{k}/{p}": f.get("rel_err_median")
        for k, v in comp["amp"].items()
        for p, f in v.items()
    }
    out["device"]["compute"]["amp"] = amp
    add_beyond(out)
    out["provenance"]["refit_amp_from_bf16"] = {
        "what": "amp (fp16) fits re-fitted on the calibration's features from samples whose "
        "pass time is min(fp16, bf16) of the same layer and batch (calibrate/refit.py "
        "--amp-from-bf16): equal fp16 and bf16 tensor-core rates and 2-byte activations "
        "make the two measurements of the same work; noise only adds time",
        **counts,
        "unchanged": kept,
        **_stamp(command),
        "previous_rel_err_median": before,
    }
    return out


def refit_host_floor(data: dict[str, Any], command: str, file: str | None = None) -> dict[str, Any]:
    """A copy of ``data`` whose compute fits are re-fitted as ``max(host_s, model)``
    (:func:`calibrate.fit.fit_host_floor`) on the features each fit already has and the
    samples it was fitted on (``amp`` from :func:`amp_min_bf16` where the profile's amp
    fits were re-fitted so); variants whose fit was scaled from their op class's are
    scaled again from the new one (host floor included)."""
    if "samples" not in data or "compute" not in data.get("samples", {}):
        raise ConfigError(None, "samples.compute", None, "the profile holds no compute samples")
    device = str(data.get("provenance", {}).get("device", ""))
    if not device.startswith("cuda"):
        raise ConfigError(
            file, "provenance.device", device or None,
            "--host-floor refits a GPU profile: on a CPU the host runs the passes itself, "
            "one after another, so a sample is their sum, not the slower of the two",
            "a profile measured on a CUDA device",
        )  # fmt: skip
    samples = data["samples"]["compute"]
    if "refit_amp_from_bf16" in data.get("provenance", {}):
        samples, _ = amp_min_bf16(samples)
    rows = _rows({"samples": {"compute": samples}})
    roof = data["device"].get("roofline", {})
    cache = float(roof.get("cache_bytes", 0.0))
    sms = int(roof.get("sm_count", 0))
    comp = data["device"]["compute"]
    out = copy.deepcopy(data)
    new = out["device"]["compute"]  # refitted in place; a fit without a floor stays
    floors = 0
    for precision, classes in sorted(comp.items()):
        for key, passes in sorted(classes.items()):
            recs = rows.get((precision, key))
            if not recs or any(f.get("scaled_from") for f in passes.values()):
                continue
            for pass_, old in passes.items():
                feats = tuple(old["features"])
                rates = beyond_rates(data, precision, key, pass_)
                fitter = functools.partial(fit_host_floor, roofline=rates)
                rec = _fit(recs, key, precision, pass_, cache, sms, feats, fitter)
                if "host_s" in rec or rec.get("gpu") == "roofline":
                    new[precision][key][pass_] = rec
                    floors += 1
    for precision, classes in sorted(comp.items()):
        for key, passes in sorted(classes.items()):
            recs = rows.get((precision, key))
            base = new[precision].get(key.split(":", 1)[0])
            if not (recs and base and any(f.get("scaled_from") for f in passes.values())):
                continue
            scaled = {}
            for pass_, fit in base.items():
                rec = _scaled(fit, recs, precision, pass_, cache, sms)
                if fit.get("host_s"):
                    rec["host_s"] = float(f"{fit['host_s'] * rec['scale']:.6g}")
                    floors += 1
                if fit.get("edge"):
                    rec["edge"] = dict(fit["edge"])
                if fit.get("gpu"):
                    rec["gpu"] = fit["gpu"]
                scaled[pass_] = rec
            new[precision][key] = scaled
    before = {
        f"{p}/{k}/{ps}": f.get("rel_err_median")
        for p, classes in comp.items()
        for k, passes in classes.items()
        for ps, f in passes.items()
    }
    add_beyond(out)
    out["provenance"]["refit_host_floor"] = {
        "what": "compute fits re-fitted as max(host_s, fit) on their own features and samples "
        "(calibrate/refit.py --host-floor, calibrate/fit.py fit_host_floor): a layer pass's "
        "calls, timed back to back, run at the pace of the slower of the host issuing them "
        "and the GPU executing them; samples at the host's pace say nothing of the GPU's "
        "rate, so the GPU model is fitted to the slower samples only, or is the device's "
        "roofline where that explains the samples better (Bayesian information criterion); "
        "fits without a floor unchanged. A training step prices a floored pass at "
        "max(roofline.launch_overhead_s, fit): host_s is the timing loop's pace",
        "fits_with_floor": floors,
        **_stamp(command),
        "previous_rel_err_median": before,
    }
    return out


def refit_kernels_llc(
    data: dict[str, Any], llc_bytes: float, origin: str, command: str
) -> dict[str, Any]:
    """A copy of ``data`` whose kernel fits spill beyond ``llc_bytes`` (see module doc)."""
    from .runner import refit_kernels

    if not data.get("samples", {}).get("kernels"):
        raise ConfigError(None, "samples.kernels", None, "the profile holds no kernel samples")
    out = copy.deepcopy(data)
    before = {
        fam: fit.get("rel_err_median") if isinstance(fit, dict) and "coef" in fit else None
        for fam, fit in data["device"].get("kernels", {}).items()
    }
    out["device"]["kernels"] = refit_kernels(data, llc_bytes)
    roof = out["device"].setdefault("roofline", {})
    roof["llc_bytes"] = llc_bytes
    roof["llc_origin"] = origin
    out["provenance"]["refit_kernels"] = {
        "what": "kernel fits re-fitted with their spill features beyond the last-level cache "
        "(roofline.llc_bytes) instead of roofline.cache_bytes (calibrate/refit.py)",
        **_stamp(command),
        "previous_rel_err_median": before,
    }
    return out


def add_edges(data: dict[str, Any], command: str) -> dict[str, Any]:
    """A copy of ``data`` whose compute fits carry their sampled range and the roofline
    past it (``edge``, ``beyond``; :mod:`simcluster.compute.extrapolation`), the
    coefficients untouched. A fit's edge is over the samples it was fitted on (its
    precision, op class or variant, and pass, as :func:`refit_compute` groups them); a
    variant's fit scaled from its op class's takes the op class's edge."""
    if "samples" not in data or "compute" not in data.get("samples", {}):
        raise ConfigError(None, "samples.compute", None, "the profile holds no compute samples")
    out = copy.deepcopy(data)
    cache = float(data["device"].get("roofline", {}).get("cache_bytes", 0.0))
    rows = _rows(data)
    compute = out["device"]["compute"]
    for precision, classes in compute.items():
        for key, passes in classes.items():
            for pass_, fit in passes.items():
                src = key.split(":", 1)[0] if fit.get("scaled_from") else key
                use = [
                    r
                    for r in rows.get((precision, src), [])
                    if r[pass_] is not None and (pass_ != "bwd_weight" or r[pass_])
                ]
                fit.pop("beyond", None)
                fit.pop("edge", None)
                if use:
                    feats = [
                        layer_features(r["layer"], r["batch"], precision, pass_, cache) for r in use
                    ]
                    fit["edge"] = fit_edge(feats, fit["features"])
    add_beyond(out)
    out["provenance"]["edges"] = {
        "what": "each compute fit's sampled range (edge: largest feature values over its "
        "samples) and the roofline past it (beyond: s/FLOP, s/byte), coefficients unchanged "
        "(simcluster/compute/extrapolation.py)",
        **_stamp(command),
    }
    return out


def _host_llc(data: dict[str, Any]) -> tuple[float, str]:
    """This host's last-level cache, when the profile was measured on a CPU of its model."""
    import torch

    from .runner import cpu_model, llc_size

    prov = data.get("provenance", {})
    if str(prov.get("device", "")) != "cpu" or prov.get("cpu_model") != cpu_model():
        raise ConfigError(
            None, "provenance.cpu_model", prov.get("cpu_model"),
            f"this host is {cpu_model()!r}; give the profile's cache with --llc-bytes",
        )  # fmt: skip
    nbytes, origin = llc_size(torch.device("cpu"))
    if nbytes <= 0:
        raise ConfigError(None, "--llc-bytes", None, f"missing: {origin}")
    return nbytes, f"{origin} (read by calibrate.refit on a host of the profile's CPU model)"


#: the modes of the tool, each refitting one part of the profile (none: the full refit)
MODES = ("--amp-from-bf16", "--edges", "--kernels-llc", "--host-floor")


def check_flags(args: argparse.Namespace) -> None:
    """Refuse flags that do not go together (each would be ignored without a word): two
    modes at once, ``--llc-bytes`` without ``--kernels-llc``, ``--spec`` with a mode that
    reads no spec sheet, an ``--llc-bytes`` that is no whole positive number of bytes."""
    given = [m for m in MODES if getattr(args, m[2:].replace("-", "_"))]
    if len(given) > 1:
        raise ConfigError(
            None, given[1], " ".join(given), f"not with {given[0]}: each refits another part",
            f"one of {', '.join(MODES)} (or none: the full refit); run them one after another",
        )  # fmt: skip
    if args.llc_bytes is not None and not args.kernels_llc:
        raise ConfigError(
            None, "--llc-bytes", args.llc_bytes, "only sets the cache of --kernels-llc",
            "--llc-bytes with --kernels-llc",
        )  # fmt: skip
    if args.spec is not None and (args.kernels_llc or args.edges or args.host_floor):
        mode = next(m for m in MODES[1:] if getattr(args, m[2:].replace("-", "_")))
        raise ConfigError(
            None, "--spec", args.spec, f"{mode} reads no spec sheet",
            "--spec with the full refit or --amp-from-bf16",
        )  # fmt: skip
    n = args.llc_bytes
    if n is not None and not (math.isfinite(n) and n >= 1 and n == int(n)):
        raise ConfigError(None, "--llc-bytes", n, "out of range", "a whole number of bytes >= 1")


def _measured_input(name: str, needs: str) -> dict[str, Any]:
    """The profile to refit, checked as the loader checks it (a refit that copies the
    rest of it must not write a broken field on), of kind ``measured`` (only calibration's
    own profiles hold the samples the fits come from) and holding ``samples.<needs>``."""
    from simcluster.compute.loader import profile_path
    from simcluster.compute.measured import MeasuredProfile

    path = profile_path(name, "PROFILE")
    data = read_profile_data(str(path), "PROFILE")
    if data["kind"] != "measured":
        why = {"spec": "a spec sheet", "derived": "derived from a measured profile"}
        raise ConfigError(
            str(path), "kind", data["kind"],
            f"{why.get(data['kind'], 'not measured')}: it holds no samples to refit from",
            "a measured profile (simcluster calibrate writes one, with its samples)",
        )  # fmt: skip
    MeasuredProfile.from_data(data, path)
    samples = data.get("samples")
    if not isinstance(samples, dict) or not samples.get(needs):
        raise ConfigError(
            str(path), f"samples.{needs}", None,
            f"missing: the profile holds no {needs.rstrip('s')} samples to refit from",
            "a profile as simcluster calibrate writes it (samples kept)",
        )  # fmt: skip
    return data


def _write(data: dict[str, Any], out: Path) -> None:
    """Write the refitted profile ``data`` to ``out`` (its folder made), once it loads as
    a profile (else nothing is written)."""
    from simcluster.atomic import write_text_atomic
    from simcluster.compute.measured import MeasuredProfile

    MeasuredProfile.from_data(data, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(data, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calibrate.refit", description=__doc__)
    ap.add_argument("profile", help="measured profile (name or path) with samples")
    ap.add_argument("--spec", help="the device's spec profile (for sm_count)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--force", action="store_true")
    ap.add_argument(
        "--amp-from-bf16",
        action="store_true",
        help="re-fit only the amp (fp16) fits from min(fp16, bf16) per sample (module doc)",
    )
    ap.add_argument(
        "--edges",
        action="store_true",
        help="only add each compute fit's sampled range and the roofline past it (module doc)",
    )
    ap.add_argument(
        "--kernels-llc",
        action="store_true",
        help="re-fit only the kernel fits, spilling beyond the last-level cache (module doc)",
    )
    ap.add_argument("--llc-bytes", type=float, help="last-level cache in bytes (--kernels-llc)")
    ap.add_argument(
        "--host-floor",
        action="store_true",
        help="re-fit every compute fit as max(host floor, fit) on its own features (module doc)",
    )
    args = ap.parse_args(argv)
    try:
        check_flags(args)
        data = _measured_input(args.profile, "kernels" if args.kernels_llc else "compute")
        out = Path(args.out)
        from simcluster.atomic import check_output_file

        if args.kernels_llc:
            check_output_file([("--out", out)], args.force)
            if args.llc_bytes is not None:
                llc, origin = args.llc_bytes, "given with --llc-bytes"
                given = f" --llc-bytes {args.llc_bytes:g}"
            else:
                (llc, origin), given = _host_llc(data), ""
            cmd = f"python -m calibrate.refit {args.profile} --kernels-llc{given} --out {args.out}"
            _write(refit_kernels_llc(data, llc, origin, cmd), out)
            print(f"re-fitted the kernel fits of {data['name']} beyond {llc:g} B; wrote {out}",
                  file=sys.stderr)  # fmt: skip
            return 0
        if args.host_floor:
            check_output_file([("--out", out)], args.force)
            cmd = f"python -m calibrate.refit {args.profile} --host-floor --out {args.out}"
            from simcluster.compute.loader import profile_path

            path = str(profile_path(args.profile, "PROFILE"))
            _write(refit_host_floor(data, cmd, path), out)
            print(f"re-fitted {data['name']} with host floors; wrote {out}", file=sys.stderr)
            return 0
        if args.edges:
            check_output_file([("--out", out)], args.force)
            cmd = f"python -m calibrate.refit {args.profile} --edges --out {args.out}"
            _write(add_edges(data, cmd), out)
            print(f"added fit edges to {data['name']}; wrote {args.out}", file=sys.stderr)
            return 0
        spec_name = args.spec or data.get("device", {}).get("spec_profile")
        if not spec_name:
            raise ConfigError(None, "--spec", None, "missing: the profile names no spec_profile")
        spec = read_profile_data(spec_name, "--spec" if args.spec else "device.spec_profile")
        sms = int(spec.get("device", {}).get("sm_count", 0))
        if sms <= 0:
            raise ConfigError(spec_name, "device.sm_count", None, "missing field")
        check_output_file([("--out", out)], args.force)
        if args.amp_from_bf16:
            cmd = f"python -m calibrate.refit {args.profile} --amp-from-bf16 --out {args.out}"
            _write(refit_amp_from_bf16(data, spec, cmd), out)
            print(f"re-fitted the amp fits of {data['name']}; wrote {out}", file=sys.stderr)
            return 0
        cmd = f"python -m calibrate.refit {args.profile} --spec {spec_name} --out {args.out}"
        _write(refit_profile(data, sms, spec_name, cmd), out)
    except UserError as exc:
        print(f"refit: error: {exc}", file=sys.stderr)
        return 2
    print(f"refitted {data['name']} on {sms} SMs; wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

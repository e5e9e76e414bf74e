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
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any

from simcluster.compute.loader import read_profile_data
from simcluster.compute.measured import COMPUTE_FEATURES, layer_features
from simcluster.compute.precision import HALF_OPS
from simcluster.errors import ConfigError, UserError

from .fit import fit_cost_model
from .runner import _scaled_fit

__all__ = ["WAVE_FEATURES", "features_for", "refit_compute", "refit_profile", "main"]

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


def _fit(recs: list[dict], key: str, precision: str, pass_: str, cache: float, sms: int):
    use = [r for r in recs if r[pass_] is not None and (pass_ != "bwd_weight" or r[pass_])]
    if not use:
        return {"features": ["const"], "coef": [0.0], "n": 0}
    feats = [layer_features(r["layer"], r["batch"], precision, pass_, cache, sms) for r in use]
    scale = [r["fwd"] if pass_ == "fwd" else r["bwd_all"] for r in use]
    floors = [max(0.05 * x, 1e-7) for x in scale]
    return fit_cost_model(feats, [r[pass_] for r in use], features_for(key), floor=floors)


def _scaled(base: dict, recs: list[dict], precision: str, pass_: str, cache: float, sms: int):
    return _scaled_fit(base, recs, precision, pass_, cache, sms)


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
    out["provenance"]["refit"] = {
        "what": "compute fits of conv, linear, attention and lstm re-fitted on flops_wave "
        "(FLOPs over wave utilisation) instead of flops; other op classes re-fitted on the "
        "same features as before (calibrate/refit.py)",
        "sm_count": sm_count,
        "sm_count_from": spec_name,
        "tile": "128 x 128 output tile per thread block, split-K chunks >= 256 (assumptions, "
        "simcluster/compute/measured.py)",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "previous_rel_err_median": before,
    }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calibrate.refit", description=__doc__)
    ap.add_argument("profile", help="measured profile (name or path) with samples")
    ap.add_argument("--spec", help="the device's spec profile (for sm_count)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    try:
        data = read_profile_data(args.profile)
        spec_name = args.spec or data.get("device", {}).get("spec_profile")
        if not spec_name:
            raise ConfigError(None, "--spec", None, "missing: the profile names no spec_profile")
        spec = read_profile_data(spec_name)
        sms = int(spec.get("device", {}).get("sm_count", 0))
        if sms <= 0:
            raise ConfigError(spec_name, "device.sm_count", None, "missing field")
        out = Path(args.out)
        if out.exists() and not args.force:
            raise UserError(f"{out} exists; pass --force to overwrite it")
        cmd = f"python -m calibrate.refit {args.profile} --spec {spec_name} --out {args.out}"
        new = refit_profile(data, sms, spec_name, cmd)
        out.write_text(json.dumps(new, indent=1) + "\n")
    except UserError as exc:
        print(f"refit: error: {exc}", file=sys.stderr)
        return 2
    print(f"refitted {data['name']} on {sms} SMs; wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

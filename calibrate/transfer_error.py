"""How well do other profiles predict a measured profile's own samples?

For every sample a measured profile holds (a zoo layer pass at a batch size and
precision, a kernel call with its parameters), each *predictor* profile (e.g. one
derived with the transfer model from another device, a spec sheet profile, the measured
profile's own fits) gives a time; the table lists, per op class (``op`` or
``op:variant``) and pass, and per kernel family, the ratio predicted / measured: median,
min and max over the samples.

    python -m calibrate.transfer_error MEASURED PREDICTOR [PREDICTOR ...] [--json OUT]
    python -m calibrate.transfer_error --both A B [--json OUT]

``--both A B`` takes two measured profiles, derives each one's device from the other with
the transfer model (:mod:`simcluster.compute.transfer`; a device's rates are its spec
sheet, ``device.spec_profile``, else its measured roofline) and prints, per op class and
pass, the median ratio predicted / measured on A's samples (B -> A) and on B's (A -> B).

Profiles by name (``calibrate/profiles``) or path. Ratios > 1: the predictor is slower
than the measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from simcluster.compute import load_profile
from simcluster.compute.loader import read_profile_data

PASSES = ("fwd", "bwd_input", "bwd_weight")


def _layers(label: str) -> dict[str, Any]:
    from simcluster.workload import build_model

    from .runner import _workload_from_label, synthetic_layers

    w = _workload_from_label(label)
    layers = (
        synthetic_layers(w.model)
        if w.model.startswith("synthetic:")
        else build_model(w.model, w.input_size, w.num_classes).layers
    )
    return {layer.name: layer for layer in layers}


def sample_ratios(measured: dict, predictors: dict[str, Any]) -> dict[str, dict[tuple, list]]:
    """``{predictor: {(section, precision, key, pass): [ratio, ...]}}``."""
    out: dict[str, dict[tuple, list]] = {n: defaultdict(list) for n in predictors}
    tables: dict[str, dict] = {}
    for s in measured["samples"]["compute"]:
        if s["workload"] not in tables:
            tables[s["workload"]] = _layers(s["workload"])
        layer = tables[s["workload"]][s["layer"]]
        key = s["op"] + (f":{s['variant']}" if s.get("variant") else "")
        for pass_ in PASSES:
            t = s.get(f"{pass_}_s")
            if not t:  # None (no weights) or 0 (no input gradient)
                continue
            for name, prof in predictors.items():
                try:
                    pred = prof.layer_time(layer, s["batch"], s["precision"], pass_)
                except Exception:  # noqa: BLE001 - a predictor without this precision
                    continue
                for k in {s["op"], key}:
                    out[name][("layer", s["precision"], k, pass_)].append(pred / t)
    for s in measured["samples"]["kernels"]:
        t = s.get("estimate_s")
        if not t:
            continue
        fam = s["family"]
        params = {k: v for k, v in s.items() if k not in ("family", "rounds", "estimate_s")}
        sub = params.get("method") or params.get("kind") or ""
        if fam == "sparsify":
            sub = f"{params.get('where', 'device')}.{sub}"
        if fam == "spmv":
            sub = "spmv" if float(params.get("batch", 1)) <= 1 else "spmm"
        for name, prof in predictors.items():
            try:
                pred = prof.kernel_time(fam, **params)
            except Exception:  # noqa: BLE001
                continue
            out[name][("kernel", "", fam + (f".{sub}" if sub else ""), "")].append(pred / t)
    return out


def summary(ratios: list[float]) -> dict[str, float]:
    return {
        "n": len(ratios),
        "median": statistics.median(ratios),
        "min": min(ratios),
        "max": max(ratios),
    }


def _rates(data: dict[str, Any], file: str):
    """A measured profile's device rates: its spec sheet, else its measured roofline."""
    from simcluster.compute.transfer import load_spec, spec_from_roofline

    spec = data.get("device", {}).get("spec_profile")
    return load_spec(spec)[0] if spec else spec_from_roofline(data, file)


def both_ways(a_name: str, b_name: str) -> dict[str, dict[tuple, list]]:
    """``{"A -> B": ratios on B's samples, "B -> A": ratios on A's samples}``."""
    from simcluster.compute.measured import MeasuredProfile
    from simcluster.compute.transfer import derive_profile_data

    a, b = read_profile_data(a_name), read_profile_data(b_name)
    ra, rb = _rates(a, a_name), _rates(b, b_name)
    out = {}
    for src, dst, r_src, r_dst in ((a, b, ra, rb), (b, a, rb, ra)):
        label = f"{src['name']} -> {dst['name']}"
        src_copy = {k: v for k, v in src.items() if k != "samples"}
        derived = derive_profile_data(src_copy, r_src, r_dst, label.replace(" ", ""))
        prof = MeasuredProfile.from_data(derived, f"<derived {label}>")
        out[label] = sample_ratios(dst, {label: prof})[label]
    return out


def _print_both(ratios: dict[str, dict[tuple, list]], json_out: str | None) -> int:
    names = list(ratios)
    keys = sorted({k for r in ratios.values() for k in r})
    print("transfer error both ways: predicted / measured per sample, median [min, max] (n)")
    print(f"{'what':<40}" + "".join(f"  {n[:34]:>34}" for n in names))
    rows = []
    for k in keys:
        label = " ".join(x for x in k if x)
        row: dict[str, Any] = {"what": label}
        cells = []
        for n in names:
            r = ratios[n].get(k)
            if not r:
                cells.append(f"  {'-':>34}")
                continue
            s = summary(r)
            row[n] = s
            cells.append(
                f"  {s['median']:>8.3g} [{s['min']:>7.3g}, {s['max']:>7.3g}] ({s['n']:>3})"
            )
        rows.append(row)
        print(f"{label:<40}" + "".join(cells))
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)  # checked at the start
        with open(json_out, "w") as f:
            json.dump({"both_ways": names, "rows": rows}, f, indent=1)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("measured", nargs="?", help="measured profile (its samples are the reference)")
    ap.add_argument("predictors", nargs="*", help="profiles to compare with it")
    ap.add_argument("--both", nargs=2, metavar=("A", "B"), help="two measured profiles")
    ap.add_argument("--json", help="write the summary table as JSON here")
    ap.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    args = ap.parse_args(argv)
    from simcluster.atomic import output_file_problem

    problem = output_file_problem([("--json", args.json)], args.force)
    if problem:
        ap.error(problem)
    if args.both:
        return _print_both(both_ways(*args.both), args.json)
    if not args.measured or not args.predictors:
        ap.error("give MEASURED and at least one PREDICTOR, or --both A B")
    measured = read_profile_data(args.measured)
    preds = {p: load_profile(p) for p in args.predictors}
    ratios = sample_ratios(measured, preds)
    keys = sorted({k for r in ratios.values() for k in r})
    names = list(preds)
    rows = []
    head = f"{'what':<40} {'n':>4}" + "".join(f"  {n[:30]:>30}" for n in names)
    print(f"predicted / measured per sample of {measured['name']}: median [min, max]")
    print(head)
    for k in keys:
        label = " ".join(x for x in k if x)
        cells, row = [], {"what": label}
        n = 0
        for name in names:
            r = ratios[name].get(k)
            if not r:
                cells.append(f"  {'-':>30}")
                continue
            s = summary(r)
            n = s["n"]
            row[name] = s
            cells.append(f"  {s['median']:>8.3g} [{s['min']:>7.3g}, {s['max']:>7.3g}]  ")
        rows.append(row)
        print(f"{label:<40} {n:>4}" + "".join(cells))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)  # checked at the start
        with open(args.json, "w") as f:
            json.dump(
                {"measured": measured["name"], "predictors": names, "rows": rows}, f, indent=1
            )
    return 0


if __name__ == "__main__":
    from simcluster.errors import UserError

    try:
        sys.exit(main())
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)

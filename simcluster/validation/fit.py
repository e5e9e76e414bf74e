"""Fit ONE profile constant of a cluster to ONE published measurement.

VALIDATION.md allows a *fitted* constant where a paper's cluster cannot be calibrated:
one parameter, set so that the simulator reproduces one named reference case, recorded
in the profile with that case, which then leaves the validation summary (every other
case predicted with the profile still counts).

    python -m simcluster.validation.fit --case prunex-comm-ddp-64 \\
        --network-profile nccl-spec --param network.link_efficiency.infiniband \\
        --name nccl-puhti-fitted --out calibrate/profiles/network/nccl-puhti-fitted.json

reads the case from ``scenarios/references/``, runs its scenario (with the case's
overrides and the profile under fit) and bisects the parameter, in log space between
``--lo`` and ``--hi``, until the case's metric is within ``--rtol`` of the reference.
The metric must move monotonically with the parameter (the bracket's ends must straddle
the reference). The written profile is the base profile with that one value changed,
``kind: fitted``, and a provenance naming the case, the reference, the value reached,
the base profile and this command.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

from simcluster.atomic import write_text_atomic
from simcluster.compute.loader import _read
from simcluster.errors import ConfigError, UserError
from simcluster.paths import network_profiles_dir

__all__ = ["bisect_log", "fit_network_constant", "main"]


def _find_case(case_id: str):
    from simcluster.errors import did_you_mean
    from simcluster.validation.cases import load_references

    cases = {c.id: (f, c) for f in load_references() for c in f.cases}
    if case_id in cases:
        return cases[case_id]
    raise ConfigError(
        None,
        "--case",
        case_id,
        "no such reference case (scenarios/references/)",
        suggestions=did_you_mean(case_id, list(cases)),
    )


def _set(data: dict, dotted: str, value: float) -> None:
    keys = dotted.split(".")
    cur = data
    for k in keys[:-1]:
        if not isinstance(cur, dict) or k not in cur:
            raise ConfigError(None, "--param", dotted, f"the profile has no field {k!r}")
        cur = cur[k]
    if not isinstance(cur, dict) or keys[-1] not in cur:
        raise ConfigError(None, "--param", dotted, f"the profile has no field {keys[-1]!r}")
    cur[keys[-1]] = value


def _metric(case, profile_path: Path, workdir: Path) -> float:
    """The case's compared value with the network profile under fit, simulated as
    ``simcluster validate`` does (same overrides, metric and transform)."""
    from simcluster.validation.runner import _run_group

    trial = case.model_copy(
        update={"overrides": {**case.overrides, "network_profile": str(profile_path)}}
    )
    status, value, _profiles, _fitted, message, where, _bug = _run_group([trial], str(workdir))[0]
    if status != "ok" or value is None:
        raise UserError(f"{case.id}: {status}: {where + ': ' if where else ''}{message}")
    return value


def bisect_log(
    f, lo: float, hi: float, target: float, rtol: float = 1e-3, max_steps: int = 40
) -> tuple[float, float]:
    """(x, f(x)) with ``|f(x) - target| <= rtol * |target|``, bisecting ``log x`` in
    ``[lo, hi]``; ``f`` must be monotonic there and ``f(lo)``, ``f(hi)`` must straddle
    ``target`` (UserError otherwise). After ``max_steps`` the last midpoint is returned."""
    if not (0 < lo < hi) or not all(map(math.isfinite, (lo, hi))):
        raise ConfigError(None, "--lo/--hi", [lo, hi], "need 0 < lo < hi, finite")
    f_lo, f_hi = f(lo) - target, f(hi) - target
    if f_lo * f_hi > 0:
        raise UserError(
            f"the bracket [{lo}, {hi}] does not straddle the reference {target} "
            f"({f_lo + target:.4g} .. {f_hi + target:.4g}): widen --lo/--hi"
        )
    a, b = math.log(lo), math.log(hi)
    x = value = math.nan
    for _ in range(max_steps):
        m = 0.5 * (a + b)
        x = math.exp(m)
        value = f(x)
        if abs(value - target) <= rtol * abs(target):
            break
        if (value - target) * f_lo > 0:
            a, f_lo = m, value - target
        else:
            b = m
    return x, value


def fit_network_constant(
    case_id: str,
    base: str,
    param: str,
    lo: float,
    hi: float,
    rtol: float = 1e-3,
    max_steps: int = 40,
    log=print,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fitted profile data, fit record). Bisection in log space on ``param``."""
    _, case = _find_case(case_id)
    base_path = Path(base)
    if not base_path.is_file():
        base_path = network_profiles_dir() / f"{base}.json"
    data = _read(base_path)
    ref = case.reference
    with tempfile.TemporaryDirectory(prefix="simcluster-fit-") as tmp:
        work = Path(tmp)

        def at(x: float) -> float:
            trial = copy.deepcopy(data)
            _set(trial, param, x)
            p = work / f"trial-{x:.6e}.json"
            p.write_text(json.dumps(trial))
            v = _metric(case, p, work)
            log(f"  {param} = {x:.6g}: {case.metric.kind} {v:.6g} (reference {ref:.6g})")
            return v

        x, value = bisect_log(at, lo, hi, ref, rtol, max_steps)
    x = float(f"{x:.4g}")
    out = copy.deepcopy(data)
    _set(out, param, x)
    record = {
        "case": case_id,
        "parameter": param,
        "value": x,
        "reference": ref,
        "reference_unit": case.unit,
        "predicted_at_value": value,
        "case_source": case.source,
        "base_profile": str(base),
    }
    return out, record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m simcluster.validation.fit",
        description="Fit one network-profile constant to one reference case (VALIDATION.md).",
    )
    ap.add_argument("--case", required=True, help="reference case id (scenarios/references)")
    ap.add_argument("--network-profile", required=True, help="base network profile (name/path)")
    ap.add_argument(
        "--param", required=True, help="dotted field, e.g. network.link_efficiency.infiniband"
    )
    ap.add_argument("--lo", type=float, default=1e-3, help="bracket low end (default 1e-3)")
    ap.add_argument("--hi", type=float, default=1.0, help="bracket high end (default 1)")
    ap.add_argument("--rtol", type=float, default=2e-3, help="relative tolerance on the metric")
    ap.add_argument("--name", required=True, help="name of the fitted profile")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--description", default="", help="what the constant stands for")
    ap.add_argument("--force", action="store_true", help="overwrite --out")
    a = ap.parse_args(argv)
    try:
        out_path = Path(a.out)
        from simcluster.atomic import check_output_file

        check_output_file([("--out", out_path)], a.force)
        if not 0 < a.rtol < 1:  # NaN fails too; 0 or less never converges
            raise ConfigError(None, "--rtol", a.rtol, "out of range", "a fraction in (0, 1)")
        if not a.name or not all(c.isalnum() or c in "_.-" for c in a.name):
            raise ConfigError(
                None, "--name", a.name, "bad characters", "letters, digits, '_', '.', '-'"
            )
        print(f"fitting {a.param} of {a.network_profile} to {a.case}", flush=True)
        data, rec = fit_network_constant(a.case, a.network_profile, a.param, a.lo, a.hi, a.rtol)
    except (ConfigError, UserError) as exc:
        print(f"simcluster.validation.fit: error: {exc}", file=sys.stderr)
        return 2
    data["name"] = a.name
    data["kind"] = "fitted"
    prov = dict(data.get("provenance", {}))
    prov["description"] = a.description or prov.get("description", "")
    prov["fitted_from"] = [rec["case"]]
    prov["fit"] = rec
    # the base's assumptions and sources describe its own value of the fitted field
    prov["assumptions"] = [
        *prov.get("assumptions", []),
        f"{a.param} = {rec['value']:.4g} is fitted to {rec['case']} (provenance.fit); the "
        "base profile's text above about that field describes the base's value, not this one",
    ]
    prov["command"] = "python -m simcluster.validation.fit " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    data["provenance"] = prov
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out_path, json.dumps(data, indent=2) + "\n")
    print(
        f"{a.param} = {rec['value']:.4g} reproduces {rec['case']} "
        f"({rec['predicted_at_value']:.4g} vs {rec['reference']:.4g} {rec['reference_unit']}); "
        f"wrote {out_path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

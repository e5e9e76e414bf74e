"""DDP's own cost: measured (one-rank DDP against the plain step) vs the framework model.

For every case of the given ``calibrate.ddp_overhead`` files, prints the measured
step time each DDP variant adds over the plain step and what the ``ddp`` schedule adds
for the same model and bucket cap on a device profile: its ``framework`` ops
(:mod:`simcluster.schedules.frameworks`: the copy-in hooks, one ``ddp_bucket_s`` per
bucket, and the copy-out kernels unless gradients are bucket views). The cap is given
explicitly, as the measured runs gave it, so the first bucket takes it too.

    python bench/ddp_overhead_model.py --profile h200-measured-2026-11-28 \\
        calibrate/measurements/h200-2026-11-28/ddp-overhead-run*.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simcluster.compute import load_profile  # noqa: E402
from simcluster.errors import ConfigError, UserError  # noqa: E402
from simcluster.workload import build_model  # noqa: E402

#: calibrate.ddp_overhead case -> (zoo model, input size, classes)
ZOO = {"resnet50": ("resnet50", 224, 1000), "bert_large-128": ("bert_large", 128, None)}


def model_added_s(profile, model, cap_mb: float, views: bool) -> tuple[float, int]:
    """Seconds the framework model adds to one step at ``cap_mb``, and its bucket count:
    the ``framework`` ops (copy-in hooks, per-bucket calls, copy-out) of the ``ddp``
    schedule itself, built at 2 ranks of one NVSwitch node (one rank syncs nothing) with
    an explicit cap, as the measured runs set it, and without the buffer broadcast, which
    the measured split does not separate."""
    from simcluster.schedules import BuildContext, get_schedule
    from simcluster.topology import load_topology

    cls = get_schedule("ddp")
    opts = cls.Options(bucket_cap_mb=cap_mb, gradient_as_bucket_view=views,
                       broadcast_buffers=False)  # fmt: skip
    ctx = BuildContext(load_topology("h100-nvswitch"), 2, model, profile, 1, "fp32", 1, 0)
    ops = cls(opts).build(ctx).classes[0].ops
    added = sum(op.duration for op in ops if op.category == "framework")
    return added, sum(1 for op in ops if op.is_collective and op.call.op == "allreduce")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="calibrate.ddp_overhead JSON files")
    ap.add_argument("--profile", default="h200-measured-2026-11-28", help="device profile")
    a = ap.parse_args(argv)
    try:
        return _compare(a.files, a.profile)
    except UserError as exc:  # a bad file or profile name: one line, exit 2
        print(f"ddp_overhead_model: error: {exc}", file=sys.stderr)
        return 2


def _compare(files: list[str], profile: str) -> int:
    """Print measured vs modelled added time of every DDP row of ``files``."""
    from calibrate.ddp_overhead import read_rows

    prof = load_profile(profile)
    print(f"profile {prof.name}: ddp_hook_s {prof.ddp_hook_s * 1e6:.1f} us, "
          f"ddp_bucket_s {prof.ddp_bucket_s * 1e3:.3f} ms")  # fmt: skip
    print(f"{'file':24s} {'case':15s} {'prec':5s} {'variant':14s} {'plain ms':>9s} "
          f"{'meas +ms':>9s} {'model +ms':>9s} {'buckets':>11s}")  # fmt: skip
    for f in files:
        rows = read_rows(f)  # checked row by row, named by rows[i].key
        models: dict[str, object] = {}
        plain = {(r["case"], r["precision"]): r["step_s"] for r in rows if r["variant"] == "plain"}
        for r in rows:
            if not r["ddp"] or r["case"] not in ZOO:
                continue
            name, size, classes = ZOO[r["case"]]
            cap = r.get("bucket_cap_mb")
            if type(cap) not in (int, float) or not cap > 0:
                raise ConfigError(f, f"rows[{rows.index(r)}].bucket_cap_mb", cap, "bad value",
                                  "MiB > 0, as calibrate.ddp_overhead writes it")  # fmt: skip
            if name not in models:
                models[name] = build_model(name, size, classes)
            model = models[name]
            added, n = model_added_s(prof, model, r["bucket_cap_mb"], r["gradient_as_bucket_view"])
            base = plain[(r["case"], r["precision"])]
            logged = (r.get("ddp_log") or {}).get("num_buckets_reduced", "?")
            print(f"{Path(f).name:24s} {r['case']:15s} {r['precision']:5s} {r['variant']:14s} "
                  f"{base * 1e3:9.2f} {(r['step_s'] - base) * 1e3:9.2f} {added * 1e3:9.2f} "
                  f"{n:>4d} (DDP {logged})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

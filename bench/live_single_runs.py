"""Check (not a test): live validation on single run files, not medians of repeats.

Usage: python bench/live_single_runs.py [--files GLOB ...] [--estimator mean|lower|run]

A held-out live run is one run, not the median of five: this scores every file on its
own with ``simcluster.validation.live.validate_live`` and prints the iteration errors'
median, 90th percentile and worst, how many exceed 25 %, their signed median and the
collective phases' median |error|, then per file its iteration median and worst.

``--estimator`` chooses how a pattern's CPU-sharing and host-speed tests (taken just
before and just after it, ``gloo_share_by_pattern``) are read, by rewriting the loaded
file, never the model:

- ``mean``: as ``simcluster validate --live`` does (the mean of the two);
- ``lower``: the test with the lower sharing factor, for both (a busy spell only slows);
- ``run``: the run's median test (by sharing factor) for every pattern (drift ignored).

Default files: the committed AMD repeats (``scenarios/references/live/epyc*.json``) and
the fresh runs kept beside them (``calibrate/measurements/live-epyc-2026-11-28*/``).
"""

from __future__ import annotations

import argparse
import copy
import glob
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's simcluster, not an installed one

DEFAULT_GLOBS = (
    "scenarios/references/live/epyc*.json",
    "calibrate/measurements/live-epyc-2026-11-28/*.json",
    "calibrate/measurements/live-epyc-2026-11-28e/*.json",
)


def reread(data: dict[str, Any], estimator: str) -> dict[str, Any]:
    """The run with its per-pattern tests read by ``estimator`` (see the module doc)."""
    tests = data.get("gloo_share_by_pattern")
    if not tests or estimator == "mean":
        return data
    out = copy.deepcopy(data)
    by_pattern = out["gloo_share_by_pattern"]
    if estimator == "lower":
        for pair in by_pattern.values():
            pair["before"] = pair["after"] = min(
                (pair["before"], pair["after"]), key=lambda t: t["factor"]
            )
    else:
        every = sorted(
            (t for pair in by_pattern.values() for t in (pair["before"], pair["after"])),
            key=lambda t: t["factor"],
        )
        middle = every[len(every) // 2]
        for pair in by_pattern.values():
            pair["before"] = pair["after"] = middle
    return out


def main(argv: list[str] | None = None) -> int:
    from simcluster.validation.live import validate_live

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", nargs="+", default=list(DEFAULT_GLOBS), help="globs of run files")
    ap.add_argument("--estimator", choices=("mean", "lower", "run"), default="mean")
    args = ap.parse_args(argv)
    files = sorted({f for g in args.files for f in glob.glob(str(ROOT / g) if not
                    Path(g).is_absolute() else g)})  # fmt: skip
    files = [f for f in files if f.endswith(".json")]
    if not files:
        print("no run files matched", file=sys.stderr)
        return 2
    signed: list[float] = []
    collectives: list[float] = []
    per_file = []
    with tempfile.TemporaryDirectory() as workdir:
        for f in files:
            data = json.loads(Path(f).read_text())
            report = validate_live(f, workdir, data=reread(data, args.estimator))
            its = [p.error for p in report.phases if p.source == "iteration"]
            signed += its
            collectives += report.comm_errors()
            worst = max(abs(e) for e in its)
            per_file.append((Path(f).name, statistics.median(abs(e) for e in its), worst))
    a = sorted(abs(e) for e in signed)
    print(
        f"{args.estimator}: {len(files)} files, iterations |err| median "
        f"{100 * statistics.median(a):.1f} %, p90 {100 * a[int(0.9 * len(a))]:.1f} %, worst "
        f"{100 * a[-1]:.1f} %, > 25 %: {sum(e > 0.25 for e in a)} of {len(a)}; signed median "
        f"{100 * statistics.median(signed):+.1f} %; collective phases median "
        f"{100 * statistics.median(collectives):.1f} %"
    )
    for name, med, worst in per_file:
        print(f"  {name:<28} iterations median {100 * med:5.1f} %  worst {100 * worst:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())

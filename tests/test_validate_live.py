"""A live validation on this machine: 2 gloo processes run every pattern, then the
simulator predicts the same ops (gloo model and CPU-sharing factor from the run's own
calibration sweep, compute from the measured CPU profile).

Bounds (issue 15's CI check): median |error| of the 8 collective phases at most 40 %,
median |error| of the 5 patterns' iterations at most 25 %; as guards against a unit or
model error hiding under a median, every pattern's iteration within 50 % and every
collective phase of 2 ms or more within 0.05x-3x of measured (below 2 ms: scheduler
noise, median only). Measured before they were set (2026-11-28, 2-core AMD EPYC VM,
nothing else running, session 13's code): twelve fresh runs made as this test makes
them, six inside the full suite or alone at 11:27-11:38 UTC and six alone at
11:38-11:43 UTC, had collective medians of 8.6 % to 42.9 % (one above 40 %), iteration
medians (the last six) of 3.8 % to 16.8 %, and their worst pattern's iteration 10.3 %
to 37.5 %. With the kernel phases predicted from the profile instead of replayed
(later the same session), seven more, alone at 12:26-12:31 UTC: collective medians
20.3-35.5 %, iteration medians 8.8-20.8 %, worst iteration 13.7-29.0 %, all within the
bounds on their first run. On 2026-11-28 02:50 UTC (session 9's code, before the gloo segment count
and the kernels' cache level) both runs of one full suite broke a 40 % collective bound
(52 % and 54 %), so a bad spell on this shared VM can still fail it. Two rules keep
run-to-run noise from failing the test: a run that breaks a bound is repeated once,
fresh (a model or unit error breaks both), and the test is skipped, saying so, when the
1-minute load average is already above the core count before it starts, or when the
run's own CPU-sharing test finds the two processes slowed more than 3x against one alone
(measured times then say more about the neighbours than about this host).
`LIVE_CI_LOG=FILE` appends each run's medians to FILE.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from simcluster.validation.live import validate_live

ROOT = Path(__file__).resolve().parents[1]
COMM_MEDIAN_BOUND = 0.40  # issue 15: median |error| of the collective phases
ITERATION_MEDIAN_BOUND = 0.25  # issue 15: median |error| of the patterns' iterations
ITERATION_BOUND = 0.50  # and no pattern's iteration beyond this
PHASE_RATIO = (0.05, 3.0)
BUSY_SHARE = 3.0
RATIO_MIN_S = 0.002  # collective phases shorter than this: scheduler noise, median only

pytest.importorskip("torch")


def _live_run(tmp_path, k: int):
    """One fresh 2-process live run, validated: (report, share) or a skip reason."""
    import json

    out = tmp_path / f"live-{k}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "calibrate.live", "--nproc", "2", "--iterations", "3",
           "--batch", "8", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    share = json.loads(out.read_text())["gloo"]["worlds"]["2"]["cpu_share_factor"]
    if share > BUSY_SHARE:
        return None, f"machine busy: 2 processes ran {share:.1f}x slower than one alone"
    return validate_live(out, tmp_path / f"sim-{k}"), ""


def _misses(rep) -> list[str]:
    """The bounds this report breaks (empty: within every bound)."""
    comm = rep.comm_errors()
    out = []
    if len(comm) != 8:  # every pattern's collectives were timed and simulated
        out.append(f"{len(comm)} collective phases, expected 8")
    elif statistics.median(comm) > COMM_MEDIAN_BOUND:
        out.append(f"collective median |error| {statistics.median(comm):.0%}")
    lo, hi = PHASE_RATIO
    for p in rep.phases:
        if p.source == "network" and p.measured >= RATIO_MIN_S:
            if not lo <= p.simulated / p.measured <= hi:
                out.append(f"{p.pattern} {p.phase} x{p.simulated / p.measured:.2f}")
        if p.phase == "iteration" and abs(p.error) > ITERATION_BOUND:
            out.append(f"{p.pattern} iteration {p.error:+.0%}")
    iterations = [abs(p.error) for p in rep.phases if p.phase == "iteration"]
    if iterations and statistics.median(iterations) > ITERATION_MEDIAN_BOUND:
        out.append(f"iteration median |error| {statistics.median(iterations):.0%}")
    return out


@pytest.mark.slow
def test_live_run_on_localhost_within_bounds(tmp_path):
    """A run that breaks a bound is repeated once, fresh: on a shared VM one run in
    several is disturbed (one of about six full-suite runs on 2026-11-27); a model
    or unit error breaks both."""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        pytest.skip(f"machine busy: 1-min load {load:.1f} on {cores} cores; live timings void")
    tables = []
    for k in range(2):
        rep, busy = _live_run(tmp_path, k)
        if rep is None:
            pytest.skip(busy)
        print(rep.table())
        missed = _misses(rep)
        if os.environ.get("LIVE_CI_LOG"):
            its = [abs(p.error) for p in rep.phases if p.phase == "iteration"]
            with open(os.environ["LIVE_CI_LOG"], "a") as fh:
                fh.write(
                    f"run {k} load {os.getloadavg()[0]:.2f} comm median "
                    f"{statistics.median(rep.comm_errors()):.3f} it median "
                    f"{statistics.median(its):.3f} worst {max(its):.3f} {missed}\n"
                )
        if not missed:
            return
        tables.append(f"run {k}: " + "; ".join(missed) + "\n" + rep.table())
    pytest.fail("both fresh runs break the bounds:\n" + "\n".join(tables))

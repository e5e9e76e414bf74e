"""A live validation on this machine: 2 gloo processes run every pattern, then the
simulator predicts the same ops (gloo model and CPU-sharing factor from the run's own
calibration sweep, compute from the measured CPU profile).

The bounds are measured figures, not hopes. Issue 15 asks for 40 % (collectives, median)
and 25 % (iterations) here once the model reaches them with margin; it does not yet. On
2026-11-26, 12:03-12:45 UTC, seven fresh 2-process runs (six committed as
scenarios/references/live/localhost-2x1-r*.json, one by this test at load 1.5, which
passed) gave collective phases median |error| 16 % to 79 % per run (the simulation low:
small allreduces and allgathers that follow compute pay scheduler wake-ups the sweep
sees only in part), and whole iterations -42 % to +52 % (+52 % in the busy run below;
the CPU profile's layer sum is about a quarter below the whole model's step at batch 8:
bench/live_compute_gap.py). Collective phases of at least 2 ms were within 0.05x-3x of
measured in every run but one whose own sharing test found the host busy (4.1x, skipped
by the rule below: fused-buffer allgathers at 0.048x); below 2 ms (the leaders' 16-byte
and mask allreduces) one run measured 0.3-0.7 ms against a predicted 3 ms (wake-up
cost), so those count in the median only. So the test keeps the earlier bounds: median
|error| of the collectives at most 80 %, every collective phase of 2 ms or more within
0.05x-3x, 50 % per iteration. A unit slip or a broken lowering (an order of magnitude)
fails it; run-to-run noise does not. It is skipped, saying so, when the 1-minute load
average is already above the core count before it starts, or when the run's own CPU-
sharing test finds the two processes slowed more than 3x against one alone (measured
times then say more about the neighbours than about this host).

After the host-speed and gradient-accumulation terms (13:10-13:26 UTC, nothing else
running), five fresh runs by this test gave a worst iteration of 9.3 % to 18.6 % and
collective medians of 10.7 % to 43.5 % (three more passed, figures not kept); the
committed 2-process runs scored one by one give iterations within 15.6 % when quiet
(r5-r9) and up to 82 % when made at load 8-15 (r1-r4). The 25 % iteration bound would
hold on a quiet host and fail on a busy one the skip rules let through, and the 40 %
collective bound fails about one quiet run in five, so the bounds stay where they are.
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
COMM_MEDIAN_BOUND = 0.80
ITERATION_BOUND = 0.50
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
        if not missed:
            return
        tables.append(f"run {k}: " + "; ".join(missed) + "\n" + rep.table())
    pytest.fail("both fresh runs break the bounds:\n" + "\n".join(tables))

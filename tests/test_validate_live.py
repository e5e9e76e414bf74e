"""A live validation on this machine: 2 gloo processes run every pattern, then the
simulator predicts the same ops (gloo model and CPU-sharing factor from the run's own
calibration sweep, compute from the measured CPU profile).

The bounds are measured figures, not hopes. Issue 15 asks for 40 % (collectives,
median) and 25 % (iterations) here once the model reaches them with margin; it does
not yet. On 2026-11-26 (12:00-12:30 UTC, 1-minute load 8-13 from other jobs on the 2
cores) fresh 2-process runs gave collective phases median |error| 51-63 % (the
simulation low: small allgathers and allreduces that follow compute pay scheduler
wake-ups the sweep sees only in part), per phase 0.16x-1.2x of measured, and whole
iterations 16-45 % fast (the CPU profile's layer sum is about 30 % below the whole
model's measured step at batch 8). So the test keeps the earlier bounds: median
|error| of the collectives at most 80 %, every collective phase within 0.05x-3x of
measured, 50 % per iteration. A unit slip or a broken lowering (an order of
magnitude) fails it; run-to-run noise does not. It is skipped, saying so, when the
1-minute load average is already above the core count before it starts, or when the
run's own CPU-sharing test finds the two processes slowed more than 3x against one
alone (measured times then say more about the neighbours than about this host).
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

pytest.importorskip("torch")


@pytest.mark.slow
def test_live_run_on_localhost_within_bounds(tmp_path):
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        pytest.skip(f"machine busy: 1-min load {load:.1f} on {cores} cores; live timings void")
    out = tmp_path / "live.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "calibrate.live",
            "--nproc",
            "2",
            "--iterations",
            "3",
            "--batch",
            "8",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    share = json.loads(out.read_text())["gloo"]["worlds"]["2"]["cpu_share_factor"]
    if share > BUSY_SHARE:
        pytest.skip(f"machine busy: 2 processes ran {share:.1f}x slower than one alone")
    rep = validate_live(out, tmp_path / "sim")
    print(rep.table())
    comm = rep.comm_errors()
    assert len(comm) == 8  # every pattern's collectives were timed and simulated
    assert statistics.median(comm) <= COMM_MEDIAN_BOUND, rep.table()
    for p in rep.phases:
        if p.source == "network":
            lo, hi = PHASE_RATIO
            assert lo <= p.simulated / p.measured <= hi, (p.pattern, p.phase, rep.table())
        if p.phase == "iteration":
            assert abs(p.error) <= ITERATION_BOUND, rep.table()

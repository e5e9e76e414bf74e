"""A live validation on this machine: 2 gloo processes run every pattern, three times
fresh, then the simulator predicts the same ops (gloo model and CPU-sharing factor from
each run's own calibration sweep, compute from the measured CPU profile) and the
phases are scored against the median of the three runs, as ``simcluster validate
--live`` scores the committed repeats.

Bounds (issue 15's CI check): median |error| of the 8 collective phases at most 40 %,
median |error| of the 5 patterns' iterations at most 25 %; as guards against a unit or
model error hiding under a median, every pattern's iteration within 50 % and every
collective phase of 2 ms or more within 0.25x-4x of measured (a unit slip, bits for
bytes or ms for s, is 8x or more; below 2 ms: scheduler noise, median only).

Why three runs: until session 13 the test scored one run (repeated once when it broke a
bound). On 2026-11-28 CI (stop 30, session 13's code) failed it with both single runs
out: collective medians 37 % and 41 %, and one run's fused-buffer allgather measured
5.6 ms against 16.3 ms in the other (simulated 20.6 and 20.2 ms). The median of three
damps that run-to-run spread: four sets scored so on this 2-core AMD EPYC VM, alone,
13:02-13:09 UTC, had collective medians of 8.1-31.1 %, iteration medians of 8.2-16.0 %
and their worst pattern's iteration at 19.4-25.0 %, each within the bounds on its first
set (README, *Live validation*). A set that breaks a bound is repeated once, fresh (a
model or unit error breaks both); the test is skipped, saying so, when the 1-minute
load average is already above the core count before it starts, or when the runs' own
CPU-sharing test finds the two processes slowed more than 3x against one alone
(measured times then say more about the neighbours than about this host).
`LIVE_CI_LOG=FILE` appends each set's medians to FILE.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from simcluster.validation.live import validate_series

ROOT = Path(__file__).resolve().parents[1]
COMM_MEDIAN_BOUND = 0.40  # issue 15: median |error| of the collective phases
ITERATION_MEDIAN_BOUND = 0.25  # issue 15: median |error| of the patterns' iterations
ITERATION_BOUND = 0.50  # and no pattern's iteration beyond this
PHASE_RATIO = (0.25, 4.0)
BUSY_SHARE = 3.0
RATIO_MIN_S = 0.002  # collective phases shorter than this: scheduler noise, median only
REPEATS = 3

pytest.importorskip("torch")


def _live_set(tmp_path, k: int):
    """Three fresh 2-process live runs, validated by their median: (report, "") or
    (None, a skip reason)."""
    out = tmp_path / f"set{k}" / "live.json"
    out.parent.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "calibrate.live", "--nproc", "2", "--iterations", "3",
           "--batch", "8", "--repeats", str(REPEATS), "--out", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = sorted(out.parent.glob("live-r*.json"))
    assert len(runs) == REPEATS, [r.name for r in runs]
    shares = [json.loads(r.read_text())["gloo"]["worlds"]["2"]["cpu_share_factor"] for r in runs]
    if statistics.median(shares) > BUSY_SHARE:
        return (
            None,
            f"machine busy: 2 processes ran {statistics.median(shares):.1f}x slower than one alone",
        )
    (rep,) = validate_series(runs, tmp_path / f"sim-{k}")
    return rep, ""


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


def _host() -> str:
    """This host in one line, for a failure's message: CPU, cores, 1-minute load."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines()
                 if ln.startswith("model name")]  # fmt: skip
        model = names[0] if names else model
    return f"{model}, {os.cpu_count()} cores, 1-min load {os.getloadavg()[0]:.2f}"


@pytest.mark.slow
def test_live_run_on_localhost_within_bounds(tmp_path):
    """A set of three runs that breaks a bound is repeated once, fresh; a model or unit
    error breaks both."""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        pytest.skip(f"machine busy: 1-min load {load:.1f} on {cores} cores; live timings void")
    tables = []
    for k in range(2):
        rep, busy = _live_set(tmp_path, k)
        if rep is None:
            pytest.skip(busy)
        print(rep.table())
        missed = _misses(rep)
        if os.environ.get("LIVE_CI_LOG"):
            its = [abs(p.error) for p in rep.phases if p.phase == "iteration"]
            with open(os.environ["LIVE_CI_LOG"], "a") as fh:
                fh.write(
                    f"set {k} load {os.getloadavg()[0]:.2f} comm median "
                    f"{statistics.median(rep.comm_errors()):.3f} it median "
                    f"{statistics.median(its):.3f} worst {max(its):.3f} {missed}\n"
                )
        if not missed:
            return
        tables.append(f"set {k} ({_host()}): " + "; ".join(missed) + "\n" + rep.table())
    pytest.fail("both fresh sets of three runs break the bounds:\n" + "\n".join(tables))

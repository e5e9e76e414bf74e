"""Check (not a test): a recorded trace predicts real runs of the same step on this host.

Usage: python bench/trace_check.py [--module calibrate.models:small_cnn]
       [--input-shape 3,32,32] [--batch 16] [--steps 15] [--live-iterations 7]
       [--rounds 1] [--out results/trace-check]

A shared virtual machine's speed drifts over minutes by as much as the bounds, so
every trace is recorded under the conditions of the run it is checked against:

1. ``python -m calibrate.trace ... --steps N``: the Kineto trace, recorded in one
   profiler session interleaved with unprofiled steps of the same process (each of N
   cycles: 2 unprofiled steps, a profiler warm-up step, a recorded step). The single-rank
   check: ``ddp`` on 1 rank simulated from the trace (the recorded step of median total;
   the profiler's cost per operator, measured by ``calibrate.trace.profiler_cost``,
   taken off) against the median of the 2N unprofiled steps between the recorded ones.
2. ``python -m calibrate.live --nproc 2 --patterns ddp --module ... --trace FILE``: the
   same recording made by rank 0 alone inside the live run (same processes and torch
   threads, the other rank asleep in a barrier), seconds before the 2 gloo processes
   train the model with DDP-style bucket allreduces. Its single-rank check as in 1; the
   ``ddp`` x 2 check: ``ddp`` at 2 ranks on the ``localhost`` topology with the link
   costs of the live run's own allreduce calibration (as ``simcluster validate --live``
   builds it), every rank's compute slowed by the CPU-sharing factor the live run
   measured just before and after the pattern on the same processes (calibrate.gloo's
   job on both at once over rank 0 alone, wall over wall, as the trace was timed),
   against the median iteration over both ranks, with per-step jitter (``+skew``:
   each rank's step drawn apart at the coefficient of variation of the trace's
   unprofiled steps, the median of 200 drawn steps: the allreduce waits for the later
   rank). Also printed: without the factor or the jitter, and with the factor over
   thread CPU time that live validation uses.

Prints the signed errors and the load average before and after each round (the host is
shared: say so when quoting the figures), and the pass counts over the rounds. Writes
``summary.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's simcluster, not an installed one

#: the issue's bounds (issue 13): one rank within 10 %, ddp on 2 processes within 20 %
BOUND_1, BOUND_2 = 0.10, 0.20


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


#: steps a prediction with per-step jitter draws (its p50 is compared)
SKEW_SAMPLES = 200


def _scenario(
    trace: Path,
    batch: int,
    gpus: int,
    topology: str,
    network: str,
    share: float = 1.0,
    step_cv: float = 0.0,
) -> dict:
    het: dict = {}
    if share != 1.0:  # every rank shares the host's cores: all ranks' compute slowed alike
        het["stragglers"] = {"fraction": 1.0, "slowdown": share}
    if step_cv > 0:  # each rank's step varies as this host's single-process steps do
        het["step_jitter"] = step_cv
    study = {"kind": "single", "gpus": [gpus]}
    if step_cv > 0:
        study = {"kind": "distribution", "gpus": [gpus], "samples": SKEW_SAMPLES}
    return {
        **({"heterogeneity": het} if het else {}),
        "name": "trace-check",
        "topology": topology,
        "profile": "cpu-xeon-1core",
        "network_profile": network,
        "workload": {"trace": str(trace), "batch_per_gpu": batch, "dataset_size": 100 * batch},
        "schedules": [{"name": "ddp"}],
        "study": study,
    }


def _predict(data: dict) -> float:
    """The step time: the median over the drawn steps with per-step jitter, else the
    mean iteration."""
    from simcluster.scenario import parse_scenario
    from simcluster.study import run_scenario

    rec = run_scenario(parse_scenario(data, "trace-check")).records[0]
    if data["study"]["kind"] == "distribution":
        return float(rec["step_time_p50_s"])
    return float(rec["iteration_time_s"])


def _step_cv(trace: Path) -> float:
    """Coefficient of variation of the unprofiled steps recorded with ``trace``."""
    steps = json.loads(trace.read_text())["simcluster"]["interleaved"]["unprofiled_step_s"]
    return statistics.pstdev(steps) / statistics.mean(steps)


def _single(trace: Path, batch: int) -> dict:
    """The single-rank check of one interleaved trace: prediction vs its unprofiled steps."""
    inter = json.loads(trace.read_text())["simcluster"]["interleaved"]
    measured = float(inter["unprofiled_median_s"])
    pred = _predict(_scenario(trace, batch, 1, "localhost", "gloo-localhost"))
    return {"measured_s": measured, "predicted_s": pred, "error": (pred - measured) / measured,
            "samples_s": inter["unprofiled_step_s"],
            "profiler_s_per_op": inter["profiler_overhead_s_per_op"],
            "operators_per_step": inter["operators_per_step"]}  # fmt: skip


def _factor(around: dict, key: str) -> float | None:
    vals = [around[k].get(key) for k in ("before", "after")]
    return statistics.mean(float(v) for v in vals) if all(v is not None for v in vals) else None


def one_round(a: argparse.Namespace, out: Path, k: int) -> dict:
    from simcluster.validation.live import _write_localhost, link_costs
    from simcluster.workload.trace import read_trace

    py = sys.executable
    model = ["--module", a.module, "--input-shape", a.input_shape, "--batch", str(a.batch)]
    trace, live, ltrace = (
        out / f"trace-{k}.json",
        out / f"live-{k}.json",
        out / f"live-trace-{k}.json",
    )
    load0 = os.getloadavg()
    # this script's own files in --out, rewritten each run (the tools keep a file without it)
    _run([py, "-m", "calibrate.trace", *model, "--steps", str(a.steps), "--out", str(trace),
          "--force"])  # fmt: skip
    _run([py, "-m", "calibrate.live", "--nproc", "2", "--patterns", "ddp", *model,
          "--iterations", str(a.live_iterations), "--warmup", "2", "--trace", str(ltrace),
          "--trace-steps", str(a.steps), "--out", str(live), "--force"])  # fmt: skip
    load1 = os.getloadavg()
    data = json.loads(live.read_text())
    rows = [it for r in data["ranks"] for it in r["patterns"]["ddp"]["iterations"]]
    measured_2 = statistics.median(it["iteration"] for it in rows)
    compute_2 = statistics.median(it["forward"] + it["backward"] + it["optimizer"] for it in rows)
    traced = sum(read_trace(ltrace).pass_seconds().values())
    threads = json.loads(ltrace.read_text())["simcluster"]["torch_threads"]
    topo, net = _write_localhost(out / f"live-{k}", data["config"],
                                 link_costs(data["calibration"], 2), str(live))  # fmt: skip
    around = (data.get("gloo_share_by_pattern") or {}).get("ddp") or {}
    f_wall = _factor(around, "factor_wall") if around else None
    f_cpu = _factor(around, "factor") if around else None
    cv = _step_cv(ltrace)
    preds = {"none": _predict(_scenario(ltrace, a.batch, 2, str(topo), str(net)))}
    for name, f in (("wall", f_wall), ("cpu", f_cpu)):
        if f is not None:
            preds[name] = _predict(_scenario(ltrace, a.batch, 2, str(topo), str(net), f))
    # the ranks' steps vary apart (per-step jitter at the CV of the trace's unprofiled
    # steps, this host alone); the allreduce waits for the later rank
    preds["none+skew"] = _predict(_scenario(ltrace, a.batch, 2, str(topo), str(net), 1.0, cv))
    if f_wall is not None:
        preds["wall+skew"] = _predict(
            _scenario(ltrace, a.batch, 2, str(topo), str(net), f_wall, cv)
        )
    return {
        "round": k,
        "load_before": load0,
        "load_after": load1,
        "single": _single(trace, a.batch),
        "single_in_live": _single(ltrace, a.batch),
        "ddp2": {"measured_s": measured_2, "samples_s": [it["iteration"] for it in rows],
                 "live_compute_s": compute_2, "traced_compute_s": traced,
                 "threads": {"live": data["config"]["threads"], "trace": threads},
                 "factor_wall": f_wall, "factor_cpu": f_cpu, "step_cv": cv,
                 "predicted_s": preds,
                 "error": {n: (p - measured_2) / measured_2 for n, p in preds.items()}},
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--module", default="calibrate.models:small_cnn")
    p.add_argument("--input-shape", default="3,32,32")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=15, help="recorded steps (2 unprofiled each)")
    p.add_argument("--live-iterations", type=int, default=7)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--out", type=Path, default=ROOT / "results" / "trace-check")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    rounds = []
    for k in range(a.rounds):
        r = one_round(a, a.out, k)
        rounds.append(r)
        load = f"(load {r['load_before'][0]:.2f} -> {r['load_after'][0]:.2f})"
        for key, label in (
            ("single", "1 rank, calibrate.trace"),
            ("single_in_live", "1 rank, live's trace "),
        ):
            x = r[key]
            print(f"round {k} {label}: unprofiled median {x['measured_s'] * 1e3:7.2f} ms, "
                  f"predicted {x['predicted_s'] * 1e3:7.2f} ms, error {x['error'] * 100:+6.1f} % "
                  f"(profiler {x['profiler_s_per_op'] * 1e6:.2f} us/op) {load}")  # fmt: skip
        d = r["ddp2"]
        errs = ", ".join(f"{n} {e * 100:+.1f} %" for n, e in d["error"].items())
        fw = f"{d['factor_wall']:.2f}" if d["factor_wall"] is not None else "-"
        fc = f"{d['factor_cpu']:.2f}" if d["factor_cpu"] is not None else "-"
        best = d["predicted_s"].get("wall+skew", d["predicted_s"]["none+skew"])
        print(f"round {k} ddp x 2: live median {d['measured_s'] * 1e3:7.2f} ms; predicted "
              f"{best * 1e3:7.2f} ms; error by sharing factor (+skew: per-step jitter, CV "
              f"{d['step_cv']:.3f}): {errs} (wall x{fw}, cpu x{fc}); live compute "
              f"{d['live_compute_s'] * 1e3:.2f} ms vs traced {d['traced_compute_s'] * 1e3:.2f} ms; "
              f"threads live {d['threads']['live']}, trace {d['threads']['trace']}")  # fmt: skip
    n = len(rounds)
    ok1 = sum(abs(r["single"]["error"]) <= BOUND_1 for r in rounds)
    ok1l = sum(abs(r["single_in_live"]["error"]) <= BOUND_1 for r in rounds)
    variants = list(dict.fromkeys(v for r in rounds for v in r["ddp2"]["error"]))
    ok2 = ", ".join(
        f"{v} {sum(abs(r['ddp2']['error'].get(v, 1e9)) <= BOUND_2 for r in rounds)}/{n}"
        for v in variants
    )
    print(f"passes over {n} round(s): 1 rank within 10 % {ok1}/{n} (calibrate.trace), {ok1l}/{n} "
          f"(live's trace); ddp x 2 within 20 %: {ok2} (full model: wall+skew)")  # fmt: skip
    (a.out / "summary.json").write_text(json.dumps({"args": vars(a) | {"out": str(a.out)},
                                                    "rounds": rounds}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

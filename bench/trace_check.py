"""Check (not a test): a recorded trace predicts real runs of the same step on this host.

Usage: python bench/trace_check.py [--module calibrate.models:small_cnn]
       [--input-shape 3,32,32] [--batch 16] [--timed 7] [--live-iterations 7]
       [--rounds 1] [--out results/trace-check]

Each round, in separate processes:

1. ``python -m calibrate.trace ... --out trace.json``: the Kineto trace (5 profiled steps
   after 3 warm-up steps, 1 torch thread);
2. ``python -m calibrate.trace ... --timed N``: N unprofiled steps of the same model and
   batch (the reference for the single-rank prediction: their median);
3. ``python -m calibrate.live --nproc 2 --patterns ddp --module ...``: 2 gloo processes
   train the same model with DDP-style bucket allreduces (the reference for ``ddp`` on
   2 ranks: the median iteration over both ranks);
4. simcluster with ``workload: {trace: trace.json}``: ``ddp`` at 1 rank (compared with 2),
   and ``ddp`` at 2 ranks on the ``localhost`` topology whose link rate and per-message
   cost come from the live run's own allreduce calibration, as ``simcluster validate
   --live`` builds it (compared with 3); and again with every rank's compute slowed by
   the live run's own CPU-sharing factor (``calibrate.gloo``'s test on the same two
   processes around the pattern), since the trace was recorded by one process alone.

Prints the signed errors and the load average before and after each round (the host is
shared: say so when quoting the figures). Writes ``summary.json`` to ``--out``.
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


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def _scenario(
    trace: Path, batch: int, gpus: int, topology: str, network: str, share: float = 1.0
) -> dict:
    extra = {}
    if share != 1.0:  # every rank shares the host's cores: all ranks' compute slowed alike
        extra = {"heterogeneity": {"stragglers": {"fraction": 1.0, "slowdown": share}}}
    return {
        **extra,
        "name": "trace-check",
        "topology": topology,
        "profile": "cpu-xeon-1core",
        "network_profile": network,
        "workload": {"trace": str(trace), "batch_per_gpu": batch, "dataset_size": 100 * batch},
        "schedules": [{"name": "ddp"}],
        "study": {"kind": "single", "gpus": [gpus]},
    }


def _predict(data: dict) -> float:
    from simcluster.scenario import parse_scenario
    from simcluster.study import run_scenario

    rec = run_scenario(parse_scenario(data, "trace-check")).records[0]
    return float(rec["iteration_time_s"])


def one_round(a: argparse.Namespace, out: Path, k: int) -> dict:
    from simcluster.validation.live import _write_localhost, link_costs

    py = sys.executable
    model = ["--module", a.module, "--input-shape", a.input_shape, "--batch", str(a.batch)]
    trace, timed, live = out / f"trace-{k}.json", out / f"timed-{k}.json", out / f"live-{k}.json"
    load0 = os.getloadavg()
    _run([py, "-m", "calibrate.trace", *model, "--out", str(trace)])
    _run([py, "-m", "calibrate.trace", *model, "--timed", str(a.timed), "--out", str(timed)])
    _run([py, "-m", "calibrate.live", "--nproc", "2", "--patterns", "ddp", "--module", a.module,
          "--input-shape", a.input_shape, "--batch", str(a.batch), "--iterations",
          str(a.live_iterations), "--warmup", "2", "--out", str(live)])  # fmt: skip
    load1 = os.getloadavg()
    measured_1 = json.loads(timed.read_text())["median_s"]
    pred_1 = _predict(_scenario(trace, a.batch, 1, "localhost", "gloo-localhost"))
    data = json.loads(live.read_text())
    its = [it["iteration"] for r in data["ranks"] for it in r["patterns"]["ddp"]["iterations"]]
    measured_2 = statistics.median(its)
    compute_2 = statistics.median(
        it["forward"] + it["backward"] + it["optimizer"]
        for r in data["ranks"]
        for it in r["patterns"]["ddp"]["iterations"]
    )
    from simcluster.workload.trace import read_trace

    traced = sum(read_trace(trace).pass_seconds().values())
    cfg = data["config"]
    topo, net = _write_localhost(out / f"live-{k}", cfg, link_costs(data["calibration"], 2), "")
    pred_2 = _predict(_scenario(trace, a.batch, 2, str(topo), str(net)))
    # the live run's own CPU-sharing test (calibrate.gloo's job on both processes at
    # once over alone, measured before the pattern): the trace was recorded alone
    around = (data.get("gloo_share_by_pattern") or {}).get("ddp")
    share = (
        statistics.mean(float(around[k]["factor"]) for k in ("before", "after")) if around else 1.0
    )
    pred_2s = _predict(_scenario(trace, a.batch, 2, str(topo), str(net), share)) if around else None
    return {
        "round": k,
        "load_before": load0,
        "load_after": load1,
        "single": {"measured_s": measured_1, "predicted_s": pred_1,
                   "error": (pred_1 - measured_1) / measured_1,
                   "samples_s": json.loads(timed.read_text())["iterations_s"]},
        "ddp2": {"measured_s": measured_2, "predicted_s": pred_2,
                 "error": (pred_2 - measured_2) / measured_2, "samples_s": its,
                 "live_compute_s": compute_2, "traced_compute_s": traced,
                 "cpu_share_factor": share, "predicted_shared_s": pred_2s,
                 "error_shared": None if pred_2s is None
                 else (pred_2s - measured_2) / measured_2},
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--module", default="calibrate.models:small_cnn")
    p.add_argument("--input-shape", default="3,32,32")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--timed", type=int, default=7)
    p.add_argument("--live-iterations", type=int, default=7)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--out", type=Path, default=ROOT / "results" / "trace-check")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    rounds = []
    for k in range(a.rounds):
        r = one_round(a, a.out, k)
        rounds.append(r)
        for key, label in (("single", "1 rank "), ("ddp2", "ddp x 2")):
            x = r[key]
            print(f"round {k} {label}: measured {x['measured_s'] * 1e3:8.2f} ms, predicted "
                  f"{x['predicted_s'] * 1e3:8.2f} ms, error {x['error'] * 100:+6.1f} %  "
                  f"(load {r['load_before'][0]:.2f} -> {r['load_after'][0]:.2f})")  # fmt: skip
        d = r["ddp2"]
        if d["predicted_shared_s"] is not None:
            print(f"round {k} ddp x 2, compute x{d['cpu_share_factor']:.2f} (the live run's "
                  f"CPU-sharing test): predicted {d['predicted_shared_s'] * 1e3:8.2f} ms, "
                  f"error {d['error_shared'] * 100:+6.1f} %")  # fmt: skip
        print(f"round {k} ddp x 2: live ranks' forward + backward + optimizer "
              f"{d['live_compute_s'] * 1e3:.2f} ms vs {d['traced_compute_s'] * 1e3:.2f} ms "
              "in the trace (CPU shared by both ranks and other work)")  # fmt: skip
    (a.out / "summary.json").write_text(json.dumps({"args": vars(a) | {"out": str(a.out)},
                                                    "rounds": rounds}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

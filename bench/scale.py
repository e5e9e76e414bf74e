"""Benchmark (not a test): simulator wall time for one iteration vs GPU count.

Usage: python bench/scale.py [--schedules ddp,hsadmm,ssfusion-oi,nodebased]
       [--gpus 64,256,1024,...] [--topology puhti-2l] [--model resnet152] [--uncollapsed]
       [--spmv 512,4096] [--large 131072,262144,1048576] [--large-topology puhti-mega]
       [--jitter 4096,16384] [--variability 4096,16384]

Prints per case: wall and CPU seconds (topology build + programs + simulation;
imports, including the lazy ones of the first schedule lookup and of ``numpy.ma``, are
done before the clock starts),
peak resident memory of the process so far, simulation events, flows, and the
predicted time of one step (hsadmm: one outer iteration of E local steps
plus the consensus). ``--large`` rows are ddp on the 3-level fat tree of
``--large-topology``; ``--jitter`` rows (``ddp~jitter``) are ddp with
stragglers1024's variability (5 % persistent stragglers at 1.3x, 5 % kernel
jitter); ``--variability`` rows (``ddp~variability``) add variability16k's
transient slowdowns (0.1 % of steps at 2x) and network noise (CV 5 %).
Both simulate :data:`JITTER_STEPS` steps (seed 0, the draws of step 0, 1,
...): times cover all of them, and p50 / p99 are of their step times. Each
case runs in a fresh process so peak memory is per case. The code measured
is that of the checkout holding this file.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's simcluster


def one_case(schedule: str, gpus: int, topology: str, model_name: str, collapse: bool) -> dict:
    """Simulate one step (hsadmm: one outer iteration) and measure the simulator."""
    import numpy.ma  # noqa: F401  (np.unique imports it on first use: an import, not simulation)

    from simcluster.compute import load_profile
    from simcluster.schedules import RunShape, get_schedule
    from simcluster.simulation import Simulation
    from simcluster.study import simulate_iteration

    get_schedule(schedule.split("~")[0])  # imports the schedule modules, as the first lookup does
    t0 = time.perf_counter()
    c0 = time.process_time()
    het = None
    if schedule.endswith(("~jitter", "~variability")):  # draws of step 0, 1, ...
        from simcluster.scenario import Heterogeneity, Stragglers, Transient

        schedule, kind = schedule.split("~")
        het = Heterogeneity(stragglers=Stragglers(fraction=0.05, slowdown=1.3), jitter=0.05)
        if kind == "variability":  # scenarios/variability16k.yaml's
            het = Heterogeneity(
                stragglers=het.stragglers,
                jitter=0.05,
                transient=Transient(fraction=0.001, slowdown=2.0),
                network_noise=0.05,
            )
    spmv = schedule == "spmv"
    sim = Simulation.for_topology(topology, gpus, "mpi-spec" if spmv else "nccl-spec")
    engine = sim.engine
    model = _model(model_name)
    profile = load_profile("haswell-e5-2630v3-core" if spmv else "v100-sxm2-32gb")
    cls = get_schedule(schedule)
    sched = cls(cls.Options(**SPMV_OPTIONS)) if spmv else cls()
    batch = 1 if spmv else 128
    bctx = sim.build_context(gpus, model, profile, batch)
    if schedule == "hsadmm":
        # one outer iteration: E local epochs of one step each here, then the consensus
        local = sched.options.local_epochs
        segments = sched.plan(bctx, RunShape(steps=1, last_batch=128, epochs=local))
    else:
        segments = sched.plan(bctx, RunShape(steps=1, last_batch=batch, epochs=1))
    predicted = steps = 0.0
    events = flows = 0
    samples = []
    for step in range(JITTER_STEPS if het is not None else 1):
        one = one_steps = 0.0
        for seg in segments:
            trace = simulate_iteration(engine, seg.iteration.classes, collapse, het, 0, step)
            one += seg.count * trace.end_time
            one_steps += seg.count * seg.steps
            events += trace.events
            flows += trace.flows
        predicted += one
        steps += one_steps
        # per step (spmv: per input vector); hsadmm: the outer iteration
        samples.append(one if schedule == "hsadmm" else one / one_steps)
    predicted = float(np.mean(samples))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "schedule": schedule,
        "gpus": gpus,
        "wall_s": wall,
        "cpu_s": cpu,
        "steps": len(samples),
        "p50_s": float(np.percentile(samples, 50)),
        "p99_s": float(np.percentile(samples, 99)),
        "peak_mb": peak_mb,
        "events": events,
        "flows": flows,
        "iteration_s": predicted,
    }


#: jitter rows (``ddp~jitter``): steps simulated, one seed each (p50 / p99 over them)
JITTER_STEPS = 5

#: spmv: a RadiX-Net of 16,384 neurons and 12 layers, rows placed at random (the
#: hypergraph partitioner would dominate the wall time at P = 4,096; this measures
#: the simulator), one input vector per step
SPMV_OPTIONS = {"neurons": 16384, "layers": 12, "partitioner": "random", "cache": False}


def _model(name: str):
    from simcluster.workload import build_model

    return build_model(name, 224, 10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--schedules", default="ddp,hsadmm,ssfusion-oi,nodebased", help="comma list of schedules"
    )
    ap.add_argument(
        "--gpus", default="64,256,1024,4096,16384,65536", help="comma list of GPU counts"
    )
    ap.add_argument("--topology", default="puhti-2l", help="topology of the dense rows")
    ap.add_argument("--model", default="resnet152", help="zoo model of the dense rows")
    ap.add_argument("--spmv", default="512,4096", help="P for the spmv rows ('' for none)")
    ap.add_argument("--spmv-topology", default="haswell-ib-xl", help="topology of the spmv rows")
    ap.add_argument(
        "--large",
        default="131072,262144,1048576",
        help="GPU counts of the ddp rows on --large-topology",
    )
    ap.add_argument("--large-topology", default="puhti-mega", help="topology of the largest rows")
    ap.add_argument(
        "--jitter", default="4096,16384", help="GPU counts of ddp with stragglers and jitter"
    )
    ap.add_argument(
        "--variability",
        default="4096,16384",
        help="GPU counts of ddp with variability16k's four kinds of variability",
    )
    ap.add_argument(
        "--uncollapsed", action="store_true", help="simulate every rank, not one per rank class"
    )
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        s, g = args.case.rsplit(":", 1)
        print(json.dumps(one_case(s, int(g), args.topology, args.model, not args.uncollapsed)))
        return
    print(
        f"{'schedule':<19}{'GPUs':>8}{'wall s':>9}{'CPU s':>8}{'peak MB':>9}{'events':>9}"
        f"{'flows':>10}{'iteration s':>13}{'p50 s':>9}{'p99 s':>9}"
    )
    cases = [
        (s, g, args.topology) for s in args.schedules.split(",") for g in args.gpus.split(",") if g
    ]
    cases += [("spmv", p, args.spmv_topology) for p in args.spmv.split(",") if p]
    cases += [("ddp", g, args.large_topology) for g in args.large.split(",") if g]
    cases += [("ddp~jitter", g, args.topology) for g in args.jitter.split(",") if g]
    cases += [("ddp~variability", g, args.topology) for g in args.variability.split(",") if g]
    for s, g, topology in cases:
        cmd = [
            sys.executable,
            __file__,
            "--case",
            f"{s}:{g}",
            "--topology",
            topology,
            "--model",
            args.model,
        ] + (["--uncollapsed"] if args.uncollapsed else [])
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            print(f"{s:<12}{g:>8}  failed: {out.stderr.strip().splitlines()[-1]}")
            continue
        r = json.loads(out.stdout)
        name = s if "~" in s or topology == args.topology else f"{s}@{topology}"
        spread = f"{r['p50_s']:>9.4f}{r['p99_s']:>9.4f}" if r["steps"] > 1 else f"{'':>9}{'':>9}"
        print(
            f"{name:<19}{r['gpus']:>8}{r['wall_s']:>9.2f}{r['cpu_s']:>8.2f}{r['peak_mb']:>9.0f}"
            f"{r['events']:>9}{r['flows']:>10}{r['iteration_s']:>13.4f}{spread}",
            flush=True,
        )


if __name__ == "__main__":
    main()

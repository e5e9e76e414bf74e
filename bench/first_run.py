"""Benchmark (not a test): the fixed cost of one small run after imports.

Usage: python bench/first_run.py [--gpus 64] [--topology puhti-2l] [--processes 9]

Each of ``--processes`` fresh processes imports everything (simcluster's
schedules, ``numpy.ma``, the ResNet-152 model built), then times, in CPU
milliseconds (``time.process_time``), a first and a second ddp step: building
the cluster (reads the topology file and builds its node the first time), the
programs (first use of the device profile and the compute model) and the
simulation. Prints the fastest first run (by total) and the median first and
second totals over the processes (a shared machine: the fastest is the least
disturbed). The code measured is that of the checkout holding this file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's simcluster


def _one(gpus: int, topology: str) -> list[list[float]]:
    import numpy.ma  # noqa: F401  (imported by later code paths: keep it out of the timing)

    from simcluster.compute import load_profile
    from simcluster.schedules import RunShape, get_schedule
    from simcluster.simulation import Simulation
    from simcluster.study import simulate_iteration
    from simcluster.workload import build_model

    get_schedule("ddp")  # loads every schedule module
    model = build_model("resnet152", 224, 10)
    out = []
    for _ in range(2):
        c = [time.process_time()]
        sim = Simulation.for_topology(topology, gpus, "nccl-spec")
        c.append(time.process_time())
        ctx = sim.build_context(gpus, model, load_profile("v100-sxm2-32gb"), 128)
        segments = get_schedule("ddp")().plan(ctx, RunShape(steps=1, last_batch=128, epochs=1))
        c.append(time.process_time())
        for seg in segments:
            simulate_iteration(sim.engine, seg.iteration.classes, True, None, 0, 0)
        c.append(time.process_time())
        out.append([1e3 * (b - a) for a, b in zip(c, c[1:], strict=False)] + [1e3 * (c[-1] - c[0])])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--topology", default="puhti-2l")
    ap.add_argument("--processes", type=int, default=9)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_one(args.gpus, args.topology)))
        return
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--gpus",
        str(args.gpus),
        "--topology",
        args.topology,
    ]
    runs = [json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
            for _ in range(args.processes)]  # fmt: skip
    first = sorted((r[0] for r in runs), key=lambda r: r[3])
    second = sorted(r[1][3] for r in runs)
    best, median = first[0], first[len(first) // 2][3]
    print(
        f"first run, fastest of {len(runs)} (CPU ms): build {best[0]:.1f}, programs {best[1]:.1f}, "
        f"simulation {best[2]:.1f}, total {best[3]:.1f}; median total {median:.1f}; "
        f"second run median total {second[len(second) // 2]:.1f}"
    )


if __name__ == "__main__":
    main()

"""Check (not a test): the live runs' non-model phases timed in one process alone
against the CPU profile's prices for them (``simcluster.validation.live_kernels``).

Usage: python bench/live_phases_alone.py [--world 2] [--iterations 5]
       [--profile cpu-epyc-1core] [--patterns ddp,topk,...] [--ops]

Runs ``calibrate.live``'s patterns (``calibrate/live/run.py``: the same Trainer,
Recorder and pattern functions, so the same ops, tensors and allocation order) in this
process with 1 torch thread and the collectives replaced by local stand-ins (an
allgather copies the buffer ``world`` times, the rest do nothing), as rank 0 of
``world`` ranks on ``world`` nodes. After one warm-up iteration, prints per priced
phase the median over the iterations of the phase's wall seconds (what the live run
records) beside the profile's seconds for the same ops (``op_seconds`` of
``phase_ops``; no sharing or host-speed factor: one process alone). ``--ops`` adds each
op's median. The config is the committed epyc-c runs' (``bucket_mb`` 25, density 1 %,
``keep`` 0.5, ...). Not a live run: no process groups, nothing timed across processes.
Run the patterns in the live run's order (the default): glibc's mmap threshold rises
with the blocks a process freed before, so ``--patterns topk`` alone maps its 9.4 MB
buffers anew each time (3-4x its decompress), which the live run, after its gloo sweep
and ``ddp``, does not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RUN = "scenarios/references/live/epyc-c-2x1-r1.json"


def _fake_dist(world: int) -> types.SimpleNamespace:
    def gather(out, buf):
        out.view(world, -1).copy_(buf)

    def nothing(*a, **k):
        return None

    return types.SimpleNamespace(
        all_reduce=nothing, broadcast=nothing, barrier=nothing, all_gather_into_tensor=gather,
        all_gather_single=gather, ReduceOp=types.SimpleNamespace(MAX=None),
    )  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--profile", default="cpu-epyc-1core")
    ap.add_argument("--patterns", default="ddp,topk,hsadmm,nodebased,fusion")
    ap.add_argument("--ops", action="store_true", help="print each op's median too")
    a = ap.parse_args(argv)

    import torch

    import calibrate.live.run as R
    from simcluster.compute import load_profile
    from simcluster.validation.live import _live_model
    from simcluster.validation.live_kernels import op_seconds, phase_ops

    torch.set_num_threads(1)
    R.dist = _fake_dist(a.world)
    world = types.SimpleNamespace(
        rank=0, size=a.world, per_node=1, nodes=a.world, node=0, is_leader=True,
        node_ranks=[[i] for i in range(a.world)], leaders=list(range(a.world)),
        intra=None, leader_group=None,
    )  # fmt: skip
    cfg = json.loads(Path(RUN).read_text())["config"]
    cfg = {**cfg, "world_size": a.world, "nodes": a.world}
    prof = load_profile(a.profile)
    model = _live_model(cfg["model"])
    print(f"{a.world} ranks' config, one process, profile {prof.name}, load {_load()}")
    for name in a.patterns.split(","):
        trainer = R.Trainer(cfg, world, torch.device("cpu"))
        rec = R.Recorder()
        for it in range(1 + a.iterations):
            rec.start()
            R.RUNNERS[name](trainer, rec, it)
            rec.finish(it >= 1)
        for (phase, role), calls in phase_ops(name, model, cfg).items():
            key = (phase, role)
            runs = [[o["seconds"] for o in ops if (o["phase"], o.get("role", "all")) == key]
                    for ops in rec.ops]  # fmt: skip
            runs = [r for r in runs if r]
            if not runs:
                continue
            n = len(runs[0])
            pred = [op_seconds(prof, c) for c in calls[:n]]
            meas = statistics.median(sum(r) for r in runs)
            print(f"{name:9s} {phase:10s} {role:6s} alone {meas * 1e3:8.2f} ms  "
                  f"profile {sum(pred) * 1e3:8.2f} ms  ratio {meas / sum(pred):5.2f}")  # fmt: skip
            if a.ops:
                for i in range(n):
                    m = statistics.median(r[i] for r in runs if len(r) == n)
                    print(f"    op {i:3d} {m * 1e3:9.3f} {pred[i] * 1e3:9.3f} ms")
    return 0


def _load() -> str:
    import os

    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())

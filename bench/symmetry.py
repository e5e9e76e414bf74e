"""Benchmark (not a test): the max-min solve folded by symmetry vs unfolded.

Usage: python bench/symmetry.py [--gpus 16384,32768,65536] [--repeat 3]

A contended pattern on Puhti-like nodes (4 x V100, dual-rail HDR100) under a
3-level fat tree 4:1 oversubscribed at the leaves and at the cores (20 nodes a
leaf, 20 leaves a pod; ``topologies/puhti-mega.yaml`` with the
oversubscription changed), with ECMP ``hash`` and ``dmodk`` routing: every
rank at once in

* ``dp``: one ring allreduce per local GPU index over all nodes (the data-
  parallel groups of a 4-way tensor-parallel layout: one rank per node),
* ``tp``: one ring allreduce inside every node,
* ``halves``: ring allreduces of the two halves of the machine,

all started together. First table: their first phases as one max-min
problem; per case the flows, the distinct rates (water-filling levels), the
flow and link classes found, and CPU seconds (``time.process_time``, best of
``--repeat``) of the unfolded solve
(:func:`simcluster.network.maxmin.maxmin_rates`), of deriving and checking the
classes (:func:`simcluster.network.symmetry.fold`) and of the folded solve,
and whether the rates are equal bit for bit. Second table: the three
collectives simulated to the end (2, 10 and 4 GB: long enough to overlap; flows end at different
times and the rest are re-solved) on the ``maxmin`` and ``maxmin-folded``
network models: CPU seconds of ``env.run()`` (best of ``--repeat``), solves
folded / unfolded, and whether every collective ends at the same time.
Lowering the collectives is not timed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's simcluster


def _cluster(gpus: int, routing: str):
    from simcluster.topology import build_cluster

    spec = yaml.safe_load((ROOT / "topologies" / "puhti-mega.yaml").read_text())
    spec["fabric"].update(oversubscription=4, core_oversubscription=4, routing=routing)
    return build_cluster(spec, num_nodes=gpus // 4)


#: bytes of each pattern's allreduce in the simulated table
SIZES = {"dp": 2e9, "tp": 1e10, "halves": 4e9}


def _lowered(gpus: int, routing: str):
    """(context, {pattern: phases}) of the contended pattern."""
    from simcluster.collectives import CollectiveCall, CommContext, lower
    from simcluster.compute import load_network_profile

    cluster = _cluster(gpus, routing)
    ctx = CommContext.from_profile(cluster, load_network_profile("nccl-spec"))
    R, N = cluster.ranks_per_node, cluster.num_nodes
    groups = {
        "dp": tuple(tuple(range(r, N * R, R)) for r in range(R)),
        "tp": tuple(tuple(range(n * R, n * R + R)) for n in range(N)),
        "halves": (tuple(range(N // 2 * R)), tuple(range(N // 2 * R, N * R))),
    }
    return ctx, {
        k: lower(ctx, CollectiveCall("allreduce", g, SIZES[k], "ring"))[1]
        for k, g in groups.items()
    }


def _problem(ctx, lowered):
    ef, el, off = [], [], 0
    for phases in lowered.values():
        b = phases[0]
        ef.append(b.entry_flow + off)
        el.append(b.entry_link)
        off += b.num_flows
    return np.concatenate(ef), np.concatenate(el), off, ctx.capacity


def _simulate(ctx, lowered, model: str):
    """(CPU s of the run, end time of each collective, the network's fold stats)."""
    import simpy

    from simcluster.network import make_network

    env = simpy.Environment()
    net = make_network(model, env, ctx.capacity, ctx.inter_node_link)
    ends = []

    def go(phases):
        for p in phases:
            yield net.transfer(p)
        ends.append(env.now)

    for phases in lowered.values():
        env.process(go(phases))
    c0 = time.process_time()
    env.run()
    return time.process_time() - c0, ends, getattr(net, "fold_stats", None)


def _best(fn, repeat: int):
    best, out = np.inf, None
    for _ in range(repeat):
        c0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - c0)
    return best, out


def main() -> None:
    from simcluster.network.maxmin import maxmin_rates
    from simcluster.network.symmetry import fold, folded_rates

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="16384,32768,65536")
    ap.add_argument("--routing", default="hash,dmodk")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(
        f"{'routing':8} {'GPUs':>6} {'flows':>7} {'levels':>6} {'classes':>9}"
        f" {'unfolded s':>10} {'fold s':>7} {'folded s':>8} {'saving':>6}  equal"
    )
    cases = {}
    for routing in args.routing.split(","):
        for gpus in (int(x) for x in args.gpus.split(",")):
            ctx, lowered = cases[routing, gpus] = _lowered(gpus, routing)
            ef, el, nf, cap = _problem(ctx, lowered)
            t_un, want = _best(lambda: maxmin_rates(ef, el, nf, cap), args.repeat)  # noqa: B023
            t_fold, f = _best(lambda: fold(ef, el, nf, cap), args.repeat)  # noqa: B023
            if f is None:
                print(f"{routing:8} {gpus:6d} {nf:7d}  folding refused ({t_fold:.3f} s)")
                continue
            t_sol, got = _best(lambda: folded_rates(f, cap), args.repeat)  # noqa: B023
            levels = np.unique(want).size
            classes = f"{f.num_flow_classes}/{f.num_link_classes}"
            print(
                f"{routing:8} {gpus:6d} {nf:7d} {levels:6d} {classes:>9} {t_un:10.4f}"
                f" {t_fold:7.4f} {t_sol:8.5f} {t_un / (t_fold + t_sol):5.1f}x"
                f"  {np.array_equal(got, want)}"
            )
    print(f"\n{'routing':8} {'GPUs':>6} {'maxmin s':>8} {'maxmin-folded s':>15} {'folded':>6}"
          f" {'unfolded':>8}  same ends")  # fmt: skip
    for (routing, gpus), (ctx, lowered) in cases.items():
        runs = {}
        for model in ("maxmin", "maxmin-folded"):
            best = min((_simulate(ctx, lowered, model) for _ in range(args.repeat)),
                       key=lambda r: r[0])  # fmt: skip
            runs[model] = best
        (t0, e0, _), (t1, e1, st) = runs["maxmin"], runs["maxmin-folded"]
        print(f"{routing:8} {gpus:6d} {t0:8.4f} {t1:15.4f} {st['folded']:6d} {st['unfolded']:8d}"
              f"  {e0 == e1}")  # fmt: skip


if __name__ == "__main__":
    main()

"""Benchmark (not a test): simcluster's max-min network side by side with SimGrid.

Usage: python bench/simgrid_side.py [--ranks 64,256,1024,4096,16384] [--topology puhti-2l]
       [--python /usr/bin/python3] [--repeat 3]

For each size, the same flows on the same links go to both simulators: a ring
allreduce of 100 MB folded as simcluster lowers it (one flow per rank and
channel carrying all steps), and four DDP-like buckets (ring allreduces of 25,
50, 100 and 200 MB, one after another). Latencies are zero on both sides, so
the completion times measure bandwidth sharing alone (SimGrid: the CM02 model,
no TCP window bound, no cross traffic, no bandwidth or latency factors). Each
side is timed from building its platform (cluster, links, routes) to the result,
imports, interpreter start and simcluster's first-use loading (one untimed
8-rank case first; the topology file is read again in every timed case)
excluded; SimGrid runs in a fresh process per run. Each side runs
``--repeat`` times per case and its fastest run is shown (a shared machine).
The ratio is SimGrid's seconds over simcluster's (above 1: simcluster faster);
``(run s)`` is SimGrid's ``Engine.run`` alone, without its platform build (one
Python ``add_route`` per rank pair). SimGrid moves whole bytes, so completion
times differ by up to about 1e-8 relative (message sizes rounded down).
SimGrid's Python bindings are Debian's ``python3-simgrid`` (run with the system
Python given by ``--python``); without them the script prints one line and exits 0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's simcluster

BUCKETS = {"ring": [100e6], "ddp4": [25e6, 50e6, 100e6, 200e6]}

SIMGRID_SIDE = r"""
import json, sys, time
t_import = time.perf_counter()
from simgrid import Comm, Engine, LinkInRoute, NetZone
spec = json.load(open(sys.argv[1]))
e = Engine(["side", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
            "--cfg=network/TCP-gamma:0", "--cfg=network/weight-S:0",
            "--cfg=maxmin/precision:1e-13", "--cfg=surf/precision:1e-13",
            "--log=root.thres:critical"])
t0 = time.perf_counter()
zone = NetZone.create_full_zone("z")
hosts = [zone.create_host(f"h{i}", 1e9).seal() for i in range(spec["hosts"])]
links = []
for i, bw in enumerate(spec["capacity"]):
    link = zone.create_link(f"l{i}", bw)
    link.set_latency(0)
    links.append(link.seal())
done = set()
for s, d, route in spec["routes"]:
    if (s, d) in done:
        continue
    done.add((s, d))
    zone.add_route(hosts[s].netpoint, hosts[d].netpoint, None, None,
                   [LinkInRoute(links[k]) for k in route], False)
zone.seal()
ends = []
def main():
    for size in spec["phases"]:
        comms = [Comm.sendto_async(hosts[s], hosts[d], int(size * b))
                 for (s, d, _), b in zip(spec["routes"], spec["unit_bytes"])]
        Comm.wait_all(comms)
        ends.append(e.clock)
from simgrid import Actor
Actor.create("main", hosts[0], main)
t1 = time.perf_counter()
e.run()
t2 = time.perf_counter()
print(json.dumps({"end": e.clock, "seconds": t2 - t0, "run": t2 - t1}))
"""


def simcluster_side(topology: str, ranks: int, sizes: list[float]) -> tuple[float, float, dict]:
    """(completion s, wall s from platform build to result, the flows for SimGrid)."""
    import numpy as np

    from simcluster.collectives import CollectiveCall, CommContext
    from simcluster.collectives.registry import lower
    from simcluster.network.backend import run_phases
    from simcluster.network.flow import FlowBatch
    from simcluster.simulation import nodes_for
    from simcluster.topology import cluster as topo_cache
    from simcluster.topology import load_topology

    topo_cache._SPECS.clear()  # the topology file is read and its node built in the timing
    topo_cache._TEMPLATES.clear()
    t0 = time.perf_counter()
    cluster = load_topology(topology, num_nodes=nodes_for(topology, ranks))
    ctx = CommContext(cluster)  # nominal link bandwidths, no protocols
    group = (tuple(range(ranks)),)
    phases = []
    for n in sizes:
        _, batches = lower(ctx, CollectiveCall("allreduce", group, n, "ring"))
        for b in batches:
            phases.append(FlowBatch(b.entry_flow, b.entry_link, b.nbytes, np.zeros(b.num_flows)))
    end = run_phases("maxmin", ctx.capacity, ctx.inter_node_link, phases)
    wall = time.perf_counter() - t0
    # the flows for SimGrid: per flow its (src, dst) and route; links renumbered
    unit = phases[0]
    used, idx = np.unique(unit.entry_link, return_inverse=True)
    routes = [[] for _ in range(unit.num_flows)]
    for f, k in zip(unit.entry_flow.tolist(), idx.tolist(), strict=True):
        routes[f].append(k)
    src, dst = _ring_pairs(ctx, group[0])
    spec = {
        "hosts": ranks,
        "capacity": ctx.capacity[used].tolist(),
        "routes": [[s, d, r] for s, d, r in zip(src, dst, routes, strict=True)],
        "unit_bytes": (unit.nbytes / sizes[0]).tolist(),
        "phases": sizes,
    }
    return end, wall, spec


def _ring_pairs(ctx, group) -> tuple[list[int], list[int]]:
    from simcluster.collectives.ring import ring_orders

    src, dst = [], []
    for order in ring_orders(ctx, group):
        src += order
        dst += order[1:] + order[:1]
    return src, dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="64,256,1024,4096,16384")
    ap.add_argument("--topology", default="puhti-2l")
    ap.add_argument("--python", default="/usr/bin/python3", help="a Python with simgrid")
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs per side and case; the fastest is shown"
    )
    args = ap.parse_args()
    probe = subprocess.run(
        [args.python, "-c", "import simgrid"], capture_output=True, text=True, check=False
    )
    if probe.returncode:
        print(f"SimGrid side by side skipped: {args.python} cannot import simgrid "
              "(apt-get install python3-simgrid)")  # fmt: skip
        return
    t0 = time.perf_counter()
    simcluster_side(args.topology, 8, [1e6])  # first-use loading (profiles, schemas), untimed
    print(f"simcluster first-use loading (untimed below): {time.perf_counter() - t0:.3f} s")
    print(f"{'case':<8}{'ranks':>7}{'simcluster s':>14}{'SimGrid s':>11}{'(run s)':>9}"
          f"{'ratio':>8}{'end (simcluster)':>20}{'rel. diff':>11}")  # fmt: skip
    for case, sizes in BUCKETS.items():
        for ranks in [int(x) for x in args.ranks.split(",")]:
            runs = [simcluster_side(args.topology, ranks, sizes) for _ in range(args.repeat)]
            end, wall, spec = min(runs, key=lambda r: r[1])
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
                json.dump(spec, fh)
            sgs = []
            for _ in range(args.repeat):
                out = subprocess.run(
                    [args.python, "-c", SIMGRID_SIDE, fh.name], capture_output=True, text=True
                )
                if out.returncode:
                    break
                sgs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            Path(fh.name).unlink()
            if out.returncode:
                print(f"{case:<8}{ranks:>7}  SimGrid failed: {out.stderr.strip()[-200:]}")
                continue
            sg = min(sgs, key=lambda r: r["seconds"])
            diff = abs(sg["end"] - end) / end
            print(
                f"{case:<8}{ranks:>7}{wall:>14.3f}{sg['seconds']:>11.3f}{sg['run']:>9.3f}"
                f"{sg['seconds'] / wall:>8.2f}{end:>20.9f}{diff:>11.1e}",
                flush=True,
            )


if __name__ == "__main__":
    main()

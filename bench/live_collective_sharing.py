"""Check (not a test): where the live gloo runs' collectives gain or lose time in the
host-sharing simulation, and how their ranks leave a call.

Usage: python bench/live_collective_sharing.py [--set epyc-d] [--procs 8]
       [--folder scenarios/references/live]

For the committed runs ``<set>-<P>x1-r*.json`` it prints, per collective phase, the
median over the runs of the error against the measured phase (per call the least time
over the ranks, summed, as ``simcluster validate --live`` scores it) of:

- ``shared``: the host-sharing simulation (what ``validate --live`` reports);
- ``static``: the gloo model's seconds per call with its wake-up cost, scaled by the
  pattern's sharing factor over the sweep's (as the simulation's input);
- ``unscaled``: the same without that scaling;
- ``no wake``: the scaled seconds without the wake-up cost.

Then, from the ranks' own op times (each rank's ops in order from its iteration's
start; the ranks' clocks differ by when each left the barrier before the iteration,
estimated per rank and iteration as the median over the iteration's calls of its end
less the call's median end), for the calls that span every rank: the exit spread
(latest less earliest end, ms) by size, where the last rank to arrive leaves among
them (0: first, 1: last), where the least time over the ranks ends within the exit
spread (0: at the first exit, 1: at the last), and the sweep's ``2 (mean over ranks -
least)`` per size (what ``exit_spread`` reads as ranks leaving one by one). The
simulation makes the last arrival leave last (1) and scores a call to its last exit.
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _errors(path: str) -> dict[tuple[str, str], list[float]]:
    """(pattern, phase) -> [measured, shared, static, unscaled, no wake] seconds per
    iteration of one run."""
    import simcluster.validation.live as live

    data = live._load(path)
    cfg = data["config"]
    world = int(cfg["world_size"])
    gloo = live._gloo_model(data, None, path)
    dev = live._find_cpu_profile(data.get("machine", {}), None)
    alone = live._predicted_compute(dev, cfg["model"], int(cfg["batch"]))
    model = live._live_model(cfg["model"])
    cores = live._host_cores(data, path)
    out: dict[tuple[str, str], list[float]] = {}
    for pattern in cfg["patterns"]:
        tests = data["gloo_share_by_pattern"][pattern]
        f = statistics.mean(float(tests[k]["factor"]) for k in ("before", "after"))
        pg = gloo.scaled(f / gloo.share(world))
        scale = f * (live._host_speed(dev, [tests[k] for k in ("before", "after")]) or 1.0)
        compute = {k: v * scale for k, v in alone.items()}
        per_rank = {r["rank"]: r["patterns"][pattern] for r in data["ranks"]}
        per_op = live._kernel_ops(dev, model, cfg, pattern, per_rank, scale)
        n_it = len(per_rank[0]["ops"])
        for j in range(n_it):
            rank_ops = {r: pr["ops"][j] for r, pr in per_rank.items()}
            sim, _ = live._shared_host(rank_ops, compute, pg, cores, world, per_op)
            sim_calls: dict[str, list[float]] = defaultdict(list)
            for spans in sim.values():
                for _, key, t in spans:
                    if "#" in key:
                        sim_calls[key].append(t)
            calls: dict[str, dict] = {}
            for ops in rank_ops.values():
                seen: dict[str, int] = {}
                for o in ops:
                    if o["kind"] == "compute":
                        continue
                    k = seen.get(o["phase"], 0)
                    seen[o["phase"]] = k + 1
                    g, n = len(o["groups"][0]), float(o["nbytes"])
                    c = calls.setdefault(f"{o['phase']}#{k}", {
                        "phase": o["phase"], "m": [],
                        "s": pg.seconds(o["kind"], g, n, skewed=True),
                        "u": gloo.seconds(o["kind"], g, n, skewed=True),
                        "w": pg.seconds(o["kind"], g, n, skewed=False)})  # fmt: skip
                    c["m"].append(o["seconds"])
            for key, c in calls.items():
                acc = out.setdefault((pattern, c["phase"]), [0.0] * 5)
                vals = (min(c["m"]), min(sim_calls[key]), c["s"], c["u"], c["w"])
                for i, v in enumerate(vals):
                    acc[i] += v / n_it
    return out


def _size_class(nbytes: float) -> str:
    return "<=4K" if nbytes <= 4096 else "<=300K" if nbytes <= 300_000 else "<10M" \
        if nbytes < 10e6 else ">=10M"  # fmt: skip


def _exits(files: list[str]) -> None:
    spread: dict[tuple[str, str], list[float]] = defaultdict(list)
    pos: dict[str, list[float]] = defaultdict(list)
    least_at: dict[str, list[float]] = defaultdict(list)
    sweep: dict[tuple[str, int], list[float]] = defaultdict(list)
    for path in files:
        d = json.loads(Path(path).read_text())
        ranks = sorted(d["ranks"], key=lambda r: r["rank"])
        p = len(ranks)
        samples = d["gloo"]["samples"]
        for w in samples if isinstance(samples, list) else [samples]:
            for op in ("allreduce", "allgather"):
                for r in w["ops"][op] if int(w["world"]) == p else []:
                    if "rank_mean_median_s" in r:
                        s = 2e3 * (r["rank_mean_median_s"] - r["median_s"])
                        sweep[(op, int(r["nbytes"]))].append(s)
        for pattern in d["config"]["patterns"]:
            for it in range(len(ranks[0]["patterns"][pattern]["ops"])):
                calls: dict[str, dict[int, tuple]] = defaultdict(dict)
                for r in ranks:
                    t, seen = 0.0, {}
                    for o in r["patterns"][pattern]["ops"][it]:
                        if o["kind"] != "compute" and [len(g) for g in o["groups"]] == [p]:
                            k = seen.get(o["phase"], 0)
                            seen[o["phase"]] = k + 1
                            calls[f"{o['phase']}#{k}"][r["rank"]] = (
                                t,
                                o["seconds"],
                                o["kind"],
                                o["nbytes"],
                            )
                        t += o["seconds"]
                full = [v for v in calls.values() if len(v) == p]
                if len(full) < 3:
                    continue
                off = {
                    r: statistics.median(v[r][0] + v[r][1] - statistics.median(
                        x[0] + x[1] for x in v.values()) for v in full)
                    for r in range(p)
                }  # fmt: skip
                for v in full:
                    arr = {r: v[r][0] - off[r] for r in v}
                    end = {r: v[r][0] + v[r][1] - off[r] for r in v}
                    last = max(arr, key=arr.get)
                    order = sorted(end, key=end.get)
                    first, latest = min(end.values()), max(end.values())
                    kind, nbytes = v[0][2], v[0][3]
                    spread[(f"{pattern} {kind}", _size_class(nbytes))].append(
                        1e3 * (latest - first)
                    )
                    pos[pattern].append(order.index(last) / (p - 1))
                    if latest > first:
                        least = min(x[1] for x in v.values())
                        least_at[pattern].append((least - (first - arr[last])) / (latest - first))
    print("exit spread in the runs (ms, median over calls):")
    for (what, cls), v in sorted(spread.items()):
        print(f"  {what:22s} {cls:7s} {statistics.median(v):6.1f}  ({len(v)} calls)")
    for pattern in pos:
        at, least = statistics.median(pos[pattern]), statistics.median(least_at[pattern])
        print(
            f"  {pattern:9s} last arrival leaves at {at:.2f}, "
            f"least ends at {least:.2f} of the spread"
        )
    print("sweep 2 (mean over ranks - least), ms, median over runs:")
    print("  " + ", ".join(f"{op} {n} B {statistics.median(v):.1f}"
                           for (op, n), v in sorted(sweep.items())))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", default="epyc-d", help="run name before -<P>x1-rN (default epyc-d)")
    ap.add_argument("--procs", type=int, default=8, help="process count (default 8)")
    ap.add_argument("--folder", default="scenarios/references/live")
    a = ap.parse_args(argv)
    files = sorted(glob.glob(f"{a.folder}/{a.set}-{a.procs}x1-r*.json"))
    if not files:
        print(f"no runs {a.folder}/{a.set}-{a.procs}x1-r*.json", file=sys.stderr)
        return 2
    runs = [_errors(f) for f in files]
    print(f"{a.set} at {a.procs} processes, {len(files)} runs; error of the median against "
          "the measured median: shared | static | unscaled | no wake")  # fmt: skip
    for key in runs[0]:
        m = statistics.median(r[key][0] for r in runs)
        errs = [(statistics.median(r[key][i] for r in runs) - m) / m * 100 for i in range(1, 5)]
        print(f"  {key[0]:9s} {key[1]:16s} {m * 1e3:8.2f} ms  "
              + "  ".join(f"{e:+6.1f}%" for e in errs))  # fmt: skip
    _exits(files)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

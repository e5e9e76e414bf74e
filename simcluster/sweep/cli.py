"""``simcluster sweep``: the command behind :func:`simcluster.sweep.run_sweep`."""

from __future__ import annotations

import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("scenario", help="scenario YAML file")
    s.add_argument(
        "--set",
        dest="axes",
        action="append",
        default=[],
        metavar="PATH=V1,V2,...",
        help="a swept field and its values (repeat for a grid); PATH may start with "
        "topology., profile. or network_profile. to change the file the scenario names",
    )
    s.add_argument("--out", help="results folder (default results/<scenario name>-sweep)")
    s.add_argument("--executor", default="local", help="local (process pool) or dask")
    s.add_argument("--jobs", type=int, default=1, help="local worker processes (default 1)")
    s.add_argument("--scheduler", help="dask scheduler address, e.g. tcp://host:8786")
    s.add_argument("--resume", action="store_true", help="keep the points already in points.csv")
    s.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    s.add_argument(
        "--max-memory",
        type=float,
        metavar="GB",
        help="refuse points whose size estimate exceeds this (default: 3/4 of this machine)",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from simcluster.report import ProgressBar
    from simcluster.report.outdir import RunOutputs, prepare_output_dir, refuse_empty_path
    from simcluster.sweep.plots import METRICS, plot_sweep, summary_lines
    from simcluster.sweep.runner import load_base, parse_axis, run_sweep

    axes = [parse_axis(a) for a in args.axes]
    from simcluster.paths import find_scenario

    # The folder holds this sweep's outputs only: plots of an earlier grid shape go.
    base = load_base(find_scenario(args.scenario))
    name = str(base.get("name", Path(args.scenario).stem))
    refuse_empty_path("--out", args.out, allowed="a folder")
    out = prepare_output_dir(args.out or Path("results") / f"{name}-sweep")
    heatmaps = [f"heatmap-{m}.png" for m in METRICS]
    plots = [] if args.no_plots else ["sweep.png"] if len(axes) == 1 else heatmaps
    data = ["points.csv", "points.keys", "sweep.json"]
    outputs = RunOutputs(
        out,
        known=[*data, "sweep.png", *heatmaps],
        planned=[*data, *plots],
        reused=["points.csv", "points.keys"] if args.resume else [],
    )
    outputs.check()
    result = run_sweep(
        find_scenario(args.scenario),
        axes,
        out=out,
        executor=args.executor,
        jobs=args.jobs,
        scheduler=args.scheduler,
        resume=args.resume,
        progress=ProgressBar(),
        max_memory_gb=args.max_memory,
    )
    paths = [a.path for a in axes]
    print(
        f"sweep of {args.scenario}: {result.points} points ({result.skipped} from a previous "
        f"run, {result.ran} simulated), {len(result.rows)} rows"
    )
    for line in summary_lines(result.rows, paths):
        print(line)
    pngs = [] if args.no_plots else plot_sweep(result.out, result.rows, paths, str(args.scenario))
    outputs.finish()
    files = ", ".join(["points.csv", "sweep.json", *(p.name for p in pngs)])
    print(f"results: {result.out}/ ({files})")
    return 0

"""The ``simcluster`` command: run, topo, list.

Bad input (a scenario, a topology file, a name, a flag value) prints one
message and exits with code 2; no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from simcluster.errors import UserError

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep one line
        self.print_usage(sys.stderr)
        self.exit(2, f"simcluster: error: {message}\n")


def cmd_run(args: argparse.Namespace) -> int:
    from simcluster.report import (
        ProgressBar,
        plot_breakdown,
        plot_scaling,
        scaling_table,
        segment_table,
        write_chrome_trace,
        write_csv,
        write_json,
    )
    from simcluster.scenario import load_scenario
    from simcluster.study import run_scenario

    sc = load_scenario(args.scenario)
    if args.network_model:
        sc = sc.model_copy(update={"network_model": args.network_model})
    result = run_scenario(sc, progress=ProgressBar())
    payload = result.to_json()
    out = Path(args.out or sc.output or Path("results") / sc.name)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", payload)
    write_csv(out / "results.csv", result.records)
    write_chrome_trace(out / "trace.json", result.traces)
    if not args.no_plots:
        plot_scaling(out / "scaling.png", result.records, f"{sc.name}: strong/weak scaling")
        plot_breakdown(out / "breakdown.png", result.records, f"{sc.name}: time per iteration")
    if args.json:
        print(json.dumps(payload, indent=2))
        return 0
    print(f"scenario {sc.name}: {sc.description}".rstrip(": "))
    print(
        f"model {sc.workload.model}, batch {sc.workload.batch_per_gpu}/GPU, "
        f"{sc.workload.precision}, topology {sc.topology}, {sc.study.kind} scaling\n"
    )
    print(scaling_table(result.records))
    segments = segment_table(result.records)
    if segments:
        print(segments)
    largest = max(r["gpus"] for r in result.records)
    print(
        f"results: {out}/ (results.json, results.csv, scaling.png, breakdown.png, "
        f"trace.json = one iteration at {largest} GPUs, open in https://ui.perfetto.dev)"
    )
    print(f"simulated {len(result.records)} configurations in {result.wall_s:.2f} s")
    return 0


def cmd_topo(args: argparse.Namespace) -> int:
    from simcluster.topology.summary import topology_cli

    png = None if args.no_png else (args.png or f"{Path(args.topology).stem}.png")
    print(topology_cli(args.topology, png, args.nodes))
    if png:
        print(f"drawing: {png}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from simcluster.compute import list_network_profiles, list_profiles
    from simcluster.schedules import SCHEDULES, list_schedules
    from simcluster.topology import list_topologies
    from simcluster.workload import MODELS, list_models

    print("models:")
    for m in list_models():
        print(f"  {m:<18} {MODELS[m].description}")
    print("topologies:\n  " + ", ".join(list_topologies()))
    print("device profiles:\n  " + ", ".join(list_profiles()))
    print("network profiles:\n  " + ", ".join(list_network_profiles()))
    print("schedules:")
    for s in list_schedules():
        print(f"  {s:<18} {SCHEDULES[s].summary}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="simcluster",
        description="Discrete-event cluster simulator for "
        "distributed training schedules, with real-kernel calibration.",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="simulate a scenario's study")
    r.add_argument("scenario", help="scenario YAML file")
    r.add_argument("--json", action="store_true", help="print the records as JSON on stdout")
    r.add_argument("--out", help="results folder (default results/<scenario name>)")
    r.add_argument(
        "--network-model",
        choices=["maxmin", "closed-form"],
        help="override the scenario's network model",
    )
    r.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    r.set_defaults(func=cmd_run)
    t = sub.add_parser("topo", help="summarise a topology and draw it to PNG")
    t.add_argument("topology", help="topology name or YAML file")
    t.add_argument("--nodes", type=int, help="number of nodes to build")
    t.add_argument("--png", help="PNG path (default <name>.png)")
    t.add_argument("--no-png", action="store_true", help="print the summary only")
    t.set_defaults(func=cmd_topo)
    li = sub.add_parser("list", help="models, topologies, profiles and schedules")
    li.set_defaults(func=cmd_list)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"simcluster: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("simcluster: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

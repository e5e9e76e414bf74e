"""The ``simcluster`` command: run, topo, list, calibrate, validate, sweep.

Bad input (a scenario, a topology file, a name, a flag value) prints one
message and exits with code 2; no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from simcluster.errors import ConfigError, UnknownNameError, UserError
from simcluster.paths import TOPOLOGIES_ENV

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep one line
        message += _near_options(self, message)
        self.exit(2, f"simcluster: error: {message} (see `{self.prog} --help`)\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """As argparse's, but an unknown flag is reported by the subcommand's parser (its
        flags for "did you mean", its --help)."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            sub = self
            for action in self._actions:
                if isinstance(action, argparse._SubParsersAction):
                    sub = action.choices.get(getattr(ns, action.dest, None), self)
            sub.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns


def _near_options(parser: argparse.ArgumentParser, message: str) -> str:
    """ "; did you mean '--no-plots'?" for a misspelt flag among the unrecognized arguments."""
    from simcluster.errors import did_you_mean

    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:  # a misspelt value of a flag with fixed choices (--op allreduce)
        hits = did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)), n=2)
        return "; did you mean " + " or ".join(repr(h) for h in hits) + "?" if hits else ""
    if not message.startswith("unrecognized arguments:"):
        return ""
    flags = sorted(
        {o for a in parser._actions for o in a.option_strings if o.startswith("--")} - {"--help"}
    )
    words = [w.split("=", 1)[0] for w in message.split(":", 1)[1].split() if w.startswith("--")]
    hits = dict.fromkeys(h for w in words for h in did_you_mean(w, flags, n=2))
    return "; did you mean " + " or ".join(repr(h) for h in hits) + "?" if hits else ""


def cmd_run(args: argparse.Namespace) -> int:
    from simcluster.compute.precision import describe_key
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
    from simcluster.scenario import load_scenario, resolved_precision
    from simcluster.study import run_scenario

    sc = load_scenario(args.scenario)
    if args.network_model:
        sc = sc.model_copy(update={"network_model": args.network_model})
    from simcluster.report import format_table
    from simcluster.report.files import dumps
    from simcluster.report.outdir import RunOutputs, prepare_output_dir, refuse_empty_path
    from simcluster.report.sanity import check_records
    from simcluster.schedules import scenario_schedules

    # The folder is checked (and stale outputs found) before anything is simulated.
    refuse_empty_path("--out", args.out)
    out = prepare_output_dir(
        args.out or sc.output or Path("results") / sc.name,
        "--out" if args.out else f"{sc.source}: output" if sc.output else "results folder",
    )
    plots = [] if args.no_plots else ["scaling.png", "breakdown.png"]
    outputs = RunOutputs(
        out,
        known=["results.json", "results.csv", "trace.json", "scaling.png", "breakdown.png"],
        planned=["results.json", "results.csv", "trace.json", *plots],
    )
    outputs.check()
    from simcluster.sizing import check_size

    check_size(sc, args.max_memory)
    for cls in scenario_schedules(sc):
        cls.prepare(sc)  # e.g. sparse-DNN partitions, in parallel
    result = run_scenario(sc, progress=ProgressBar())  # a line every 5 s in logs too
    payload = result.to_json()
    check_records(result.records, "results")
    text = dumps(payload)  # strict JSON; a NaN stops here, before any file is written
    write_chrome_trace(out / "trace.json", result.traces)
    write_json(out / "results.json", payload)
    write_csv(out / "results.csv", result.records)
    if not args.no_plots:
        plot_scaling(out / "scaling.png", result.records, f"{sc.name}: {sc.study.kind} scaling")
        plot_breakdown(
            out / "breakdown.png",
            result.records,
            f"{sc.name}: compute and exposed communication per step",
        )
    from simcluster.report.table import memory_warnings

    warnings = memory_warnings(result.records)
    outputs.finish()
    if args.json:
        print(text, end="")
        return _memory_verdict(warnings, args.strict_memory)
    print(f"scenario {sc.name}: {sc.description}".rstrip(": "))
    w = sc.workload
    what = f"trace {w.trace}" if w.trace else w.model
    print(
        f"model {what or '(none: sparse DNN from the schedule options)'}, "
        f"batch {sc.workload.batch_per_gpu}/GPU, "
        f"{describe_key(resolved_precision(sc.workload))}, optimizer {sc.workload.optimizer}, "
        f"topology {sc.topology}, {sc.study.kind} scaling"
    )
    print(_input_line(sc) + "\n" if w.input_pipeline is not None else "")
    print(scaling_table(result.records))
    fitted = _fitted_lines(sc)
    if fitted:
        print("fitted constants (each leaves the validation summary):\n" + "\n".join(fitted) + "\n")
    tables = [t for cls in scenario_schedules(sc) for t in cls.tables(sc, result.records)]
    for title, headers, rows in tables:
        print(f"{title}\n{format_table(headers, rows)}\n")
    if sc.study.kind == "distribution":
        print(_distribution_table(result.records))
    segments = segment_table(result.records)
    if segments:
        print(segments)
    largest = max(r["gpus"] for r in result.records)
    print(
        f"results: {out}/ (results.json, results.csv, {''.join(p + ', ' for p in plots)}"
        f"trace.json = one iteration at {largest} GPUs, open in https://ui.perfetto.dev)"
    )
    print(f"simulated {len(result.records)} configurations in {result.wall_s:.2f} s")
    return _memory_verdict(warnings, args.strict_memory)


def _input_line(sc) -> str:
    """The input pipeline a scenario's steps pay, in one line: its profile (kind and
    where its figure comes from) or the given per-sample seconds, and the workers."""
    from simcluster.scenario import resolved_input_load

    ip = sc.workload.input_pipeline
    load = resolved_input_load(sc.workload, sc.source)
    if ip.profile is not None:
        moved = (
            f", moved to {ip.host_clock_ghz:g} GHz by the clock ratio" if ip.host_clock_ghz else ""
        )
        src = f"profile {ip.profile} (measured{moved})"
    else:
        src = "per_sample_s given in the scenario"
    mode = (f"{ip.workers} loader workers beside each step" if ip.workers
            else "made by the training process before each step")  # fmt: skip
    return f"input pipeline: {load.per_sample_s * 1e6:.1f} us/sample from {src}, {mode}"


def _fitted_lines(sc) -> list[str]:
    """Every fitted constant in the scenario's device and network profiles."""
    from simcluster.compute import load_network_profile, load_profile
    from simcluster.report.table import fitted_constants

    profiles = []
    for load, name in ((load_profile, sc.profile), (load_network_profile, sc.network_profile)):
        try:
            profiles.append(load(name))
        except Exception:  # noqa: BLE001 - the run itself already loaded them; a listing only
            continue
    return fitted_constants(profiles)


def _distribution_table(records: list[dict]) -> str:
    """Per schedule and size: the full-batch step time's spread (ms)."""
    from simcluster.report import format_table

    rows = [
        [r["schedule"], r["gpus"], r.get("step_time_samples")]
        + [f"{r[k] * 1e3:.2f}" if r.get(k) is not None else "-" for k in
           ("step_time_p50_s", "step_time_p99_s", "step_time_sample_mean_s", "step_time_max_s")]
        for r in records
    ]  # fmt: skip
    head = ["schedule", "GPUs", "samples", "p50 ms", "p99 ms", "mean ms", "max ms"]
    return f"step time distribution\n{format_table(head, rows)}\n"


def _memory_verdict(warnings: list[str], strict: bool) -> int:
    """Print the over-memory warnings (stderr); under ``--strict-memory`` they stop with 2."""
    for line in warnings:
        print(line, file=sys.stderr)
    if warnings and strict:
        raise UserError(
            f"{len(warnings)} configuration(s) do not fit in the device's memory "
            "(--strict-memory); see the warnings above"
        )
    return 0


def cmd_spmv_table(args: argparse.Namespace) -> int:
    from simcluster.report import format_table
    from simcluster.scenario import load_scenario
    from simcluster.schedules import scenario_schedules

    sc = load_scenario(args.scenario)
    tables = []
    for cls in scenario_schedules(sc):
        cls.prepare(sc)
        tables += cls.tables(sc)
    if not tables:
        raise UserError(f"{args.scenario}: no spmv schedule in this scenario")
    for title, headers, rows in tables:
        print(f"{title}\n{format_table(headers, rows)}\n")
    return 0


def cmd_topo(args: argparse.Namespace) -> int:
    from simcluster.report.outdir import prepare_output_dir, refuse_empty_path
    from simcluster.topology.summary import topology_cli

    png = None
    refuse_empty_path("--png", args.png)
    if args.no_png and args.png:
        raise UserError(
            f"--png {args.png[:80]} with --no-png: draw to that file or print the summary "
            "only, not both (drop one of them)"
        )
    if not args.no_png:
        png = args.png or str(Path("results") / "topology" / f"{Path(args.topology).stem}.png")
        if Path(png).suffix.lower() != ".png":
            raise UserError(f"--png {png[:80]}: the drawing is a PNG; give a name ending in .png")
        prepare_output_dir(Path(png).parent, "--png")
        _check_png_target(Path(png), args.force)
    from simcluster.sizing import check_topology_size

    check_topology_size(args.topology, args.nodes)
    print(topology_cli(args.topology, png, args.nodes))  # names the picture once
    return 0


def _check_png_target(png: Path, force: bool) -> None:
    """Refuse to replace a file simcluster did not draw (the user's own) without --force."""
    from simcluster.atomic import drawn_by_simcluster

    if png.is_dir():
        raise ConfigError(None, "--png", str(png), "is a folder", "a file name ending in .png")
    if png.exists() and not force and not drawn_by_simcluster(png):
        raise ConfigError(
            None, "--png", str(png),
            "file exists and was not drawn by simcluster; pass --force to overwrite it",
        )  # fmt: skip


def cmd_list(args: argparse.Namespace) -> int:
    from simcluster.compute import list_network_profiles, list_profiles
    from simcluster.paths import list_scenarios
    from simcluster.schedules import SCHEDULES, list_schedules
    from simcluster.topology import list_topologies
    from simcluster.workload import MODELS, list_models

    if getattr(args, "json", False):
        payload = {
            "models": {m: MODELS[m].description for m in list_models()},
            "topologies": list_topologies(),
            "device_profiles": list_profiles(),
            "network_profiles": list_network_profiles(),
            "schedules": {s: SCHEDULES[s].summary for s in list_schedules()},
        }
        print(json.dumps(payload, indent=2, allow_nan=False))
        return 0
    print("models:")
    for m in list_models():
        print(f"  {m:<18} {MODELS[m].description}")
    from simcluster.workload.families import describe_families

    print("model families (workload.model: {family: NAME, ...}):")
    for line in describe_families():
        print(f"  {line}")
    print("topologies:\n  " + ", ".join(list_topologies()))
    print("device profiles:\n  " + ", ".join(list_profiles()))
    print("network profiles:\n  " + ", ".join(list_network_profiles()))
    print("schedules:")
    for s in list_schedules():
        print(f"  {s:<18} {SCHEDULES[s].summary}")
    print("scenarios:\n  " + ", ".join(list_scenarios()))
    from simcluster.collectives import ALGORITHMS
    from simcluster.network import BACKENDS
    from simcluster.topology.builders import FABRICS, NODE_BUILDERS

    print("collective algorithms (schedule options; auto picks):")
    for op, algos in ALGORITHMS.items():
        print(f"  {op:<18} {', '.join(algos)}")
    print("network models:\n  " + ", ".join(BACKENDS))
    print("node templates:\n  " + ", ".join(NODE_BUILDERS))
    print("fabrics:\n  " + ", ".join(FABRICS))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    # Installed, calibration is the subpackage simcluster.calibrate (torch: the
    # [calibrate] extra); in a checkout it is the top-level folder calibrate/.
    try:
        from simcluster.calibrate import cli as cal_cli
        from simcluster.calibrate import nccl_tests as cal_nccl
    except ModuleNotFoundError as exc:
        if exc.name not in (
            "simcluster.calibrate",
            "simcluster.calibrate.cli",
            "simcluster.calibrate.nccl_tests",
        ):
            raise
        from simcluster.paths import project_root

        root = str(project_root())
        if root not in sys.path:
            sys.path.insert(0, root)
        from calibrate import cli as cal_cli
        from calibrate import nccl_tests as cal_nccl
    if args.action == "nccl-tests":
        return cal_nccl.run(args)
    if args.action == "gloo":
        return _calibrate_gloo(args)
    if args.logs:
        raise UserError(f"calibrate {args.action}: unexpected arguments {' '.join(args.logs)}")
    try:
        return cal_cli.run(args)
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            raise UserError("calibrate needs torch: pip install 'simcluster[calibrate]'") from None
        raise


def _calibrate_gloo(args: argparse.Namespace) -> int:
    """``simcluster calibrate gloo``: calibrate.gloo's sweep into a network profile."""
    from simcluster.paths import network_profiles_dir

    out = Path(args.out) if args.out else network_profiles_dir() / "gloo-host.json"
    from simcluster.atomic import check_output_file

    check_output_file([("--out", out)], args.force)
    if out.suffix != ".json":
        raise ConfigError(None, "--out", str(out), "a profile file ends in .json")
    nproc = "2,4,8" if args.nproc is None else args.nproc  # "" is no list, not the default
    try:
        counts = [int(x) for x in nproc.split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or any(n < 2 for n in counts):
        raise ConfigError(None, "--nproc", nproc, "not a comma list of integers >= 2", "2,4,8")
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    limit = max(8, 4 * (cpus or 1))  # each count starts that many processes on this host
    if max(counts) > limit:
        raise ConfigError(
            None, "--nproc", nproc, f"{max(counts)} processes on this host of {cpus} CPUs",
            f"integers 2..{limit} (4 per CPU)",
        )  # fmt: skip
    try:
        from simcluster.calibrate import gloo as cal_gloo
    except ModuleNotFoundError:
        from calibrate import gloo as cal_gloo
    return cal_gloo.main(
        ["--nproc", nproc, "--out", str(out), *(["--force"] if args.force else [])]
    )


def cmd_nccl_tests(args: argparse.Namespace) -> int:
    from simcluster.collectives import CommContext
    from simcluster.compute import load_network_profile
    from simcluster.network.transport import with_transport
    from simcluster.report.nccl_tests import (
        MAX_SIZE,
        NCCL_TEST_OPS,
        check_buffers_fit,
        format_rows,
        parse_size,
        run_nccl_tests,
        sizes_between,
    )
    from simcluster.topology import load_topology

    if args.algo != "auto" and NCCL_TEST_OPS[args.op].op != "allreduce":  # it would be ignored
        raise ConfigError(
            None, "--algo", args.algo, f"only all_reduce picks an algorithm, not --op {args.op}",
            "auto",
        )  # fmt: skip
    cluster = load_topology(args.topology, num_nodes=args.nodes)
    netp = load_network_profile(args.network_profile)
    ctx = CommContext.from_profile(cluster, with_transport(netp, cluster))
    begin, end = parse_size(args.minbytes, "-b"), parse_size(args.maxbytes, "-e")
    sizes = sizes_between(begin, end, args.stepfactor)
    if not 1 <= args.ngpus <= cluster.ranks_per_node:  # one thread drives GPUs of its node
        raise ConfigError(
            None, "-g", args.ngpus, "GPUs per thread out of range",
            f"1..{cluster.ranks_per_node} (the GPUs of one {cluster.name} node)",
        )  # fmt: skip
    if args.ngpus > 1 and not args.profile:  # one thread drives -g GPUs: launches bound small sizes
        raise ConfigError(
            None, "-g", args.ngpus, "needs --profile (a device profile: its launch overhead)"
        )
    launch = 0.0
    if args.profile:
        from simcluster.compute import load_profile

        device = load_profile(args.profile)
        if args.ngpus > 1:
            launch = device.launch_overhead
        check_buffers_fit(args.op, sizes, cluster.num_ranks, device.memory_bytes, args.profile,
                          args.maxbytes)  # fmt: skip
    elif end > MAX_SIZE:  # -b <= -e is checked above
        raise ConfigError(None, "-e", args.maxbytes, "too large", "at most 1024T (2^50 bytes)")
    try:
        rows = run_nccl_tests(ctx, args.op, sizes, args.network_model, args.algo, args.proto,
                              gpus_per_thread=args.ngpus, launch_s=launch)  # fmt: skip
    except UnknownNameError as exc:  # an --algo / --proto name: say which flag
        flag = {"protocol": "--proto"}.get(exc.kind, "--algo" if "algorithm" in exc.kind else "")
        if not flag or exc.file:
            raise
        raise ConfigError(
            None, flag, exc.value, exc.problem, exc.allowed, exc.suggestions
        ) from None
    if args.json:
        print(json.dumps({
            "topology": cluster.name, "nodes": cluster.num_nodes, "gpus": cluster.num_ranks,
            "op": args.op, "network_profile": netp.describe(),
            "network_model": args.network_model, "rows": rows,
        }, indent=2))  # fmt: skip
        return 0
    header = [
        f"simcluster nccl-tests: {args.op} on {cluster.name}, {cluster.num_nodes} node(s), "
        f"{cluster.num_ranks} ranks (simulated)",
        f"network profile {netp.describe()}, network model {args.network_model}",
    ]
    print(format_rows(rows, header))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from simcluster.validation.cli import run

    return run(args)


def cmd_sweep(args: argparse.Namespace) -> int:
    from simcluster.sweep.cli import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="simcluster",
        description="Discrete-event cluster simulator for "
        "distributed training schedules, with real-kernel calibration.",
    )
    from simcluster import __version__

    p.add_argument("--version", action="version", version=f"simcluster {__version__}")
    p.add_argument(
        "--topologies",
        metavar="DIR",
        action="append",
        default=[],
        help=f"also look for topologies by name in DIR (repeatable; or ${TOPOLOGIES_ENV})",
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="simulate a scenario's study")
    r.add_argument("scenario", help="scenario YAML file, or a shipped scenario's name")
    r.add_argument("--json", action="store_true", help="print the records as JSON on stdout")
    r.add_argument("--out", help="results folder (default results/<scenario name>)")
    r.add_argument(
        "--network-model",
        choices=["maxmin", "maxmin-folded", "closed-form"],
        help="override the scenario's network model",
    )
    r.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    r.add_argument(
        "--strict-memory",
        action="store_true",
        help="exit 2 when a configuration needs more memory per GPU than the device has",
    )
    r.add_argument(
        "--max-memory",
        type=float,
        metavar="GB",
        help="refuse studies whose size estimate exceeds this (default: 3/4 of this machine)",
    )
    r.set_defaults(func=cmd_run)
    t = sub.add_parser("topo", help="summarise a topology and draw it to PNG")
    t.add_argument("topology", help="topology name or YAML file")
    t.add_argument("--nodes", type=int, help="number of nodes to build")
    t.add_argument("--png", help="PNG path (default results/topology/<name>.png)")
    t.add_argument("--no-png", action="store_true", help="print the summary only")
    t.add_argument(
        "--force", action="store_true", help="overwrite a --png file simcluster did not draw"
    )
    t.set_defaults(func=cmd_topo)
    li = sub.add_parser("list", help="models, topologies, profiles and schedules")
    li.add_argument("--json", action="store_true", help="print the lists as one JSON object")
    li.set_defaults(func=cmd_list)
    sp = sub.add_parser("spmv-table", help="sparse-DNN partition metrics (SpMV paper Table 1)")
    sp.add_argument("scenario", help="scenario YAML file with spmv schedules")
    sp.set_defaults(func=cmd_spmv_table)
    c = sub.add_parser(
        "calibrate",
        help="measure kernel and collective times, derive or check profiles",
        description="measure (default): time real kernels on --device and write a measured "
        "profile + network profile; derive: transfer a measured profile to a target spec "
        "sheet; check: simulated vs measured forward+backward of a ResNet; nccl-tests LOG "
        "[LOG ...]: fit a measured network profile to nccl-tests stdout; gloo: gloo's "
        "collectives and CPU sharing at --nproc local processes (network profile)",
    )
    c.add_argument(
        "action",
        nargs="?",
        default="measure",
        choices=["measure", "derive", "check", "nccl-tests", "gloo"],
        help="measure (default), derive, check, nccl-tests or gloo; see the description above",
    )
    c.add_argument("--nproc", help="gloo: comma list of process counts (default 2,4,8)")
    c.add_argument("logs", nargs="*", help="nccl-tests: stdout logs of nccl-tests runs")
    c.add_argument("--topology", help="nccl-tests: topology the logs ran on (default dgx-a100)")
    c.add_argument("--base-profile", help="nccl-tests: network profile to start from (nccl-spec)")
    c.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (measure, check)")
    c.add_argument("--out", help="profile JSON to write (measure, derive)")
    c.add_argument("--network-out", help="network profile JSON (measure; default beside --out)")
    c.add_argument("--no-network", action="store_true", help="skip the collective sweep")
    c.add_argument("--quick", action="store_true", help="under a minute on 2 CPU cores")
    c.add_argument("--tiny", action="store_true", help="a few seconds: smoke tests only")
    c.add_argument("--models", help="zoo shapes to time: MODEL[@INPUT][:BATCH],... (measure)")
    c.add_argument("--batch", type=int, default=32, help="batch size (default 32)")
    c.add_argument(
        "--precisions",
        help="fp32[,tf32][,amp][,amp_bf16] (default: fp32,amp on CUDA, fp32 on a CPU)",
    )
    c.add_argument(
        "--check",
        help="measure: whole ResNets timed in the same rounds, MODEL[:BATCH],... or none "
        "(default resnet18-cifar:32; none with --tiny)",
    )
    c.add_argument("--threads", type=int, help="torch threads (default: all CPUs usable)")
    c.add_argument("--rounds", type=int, help="interleaved rounds per benchmark")
    c.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: thread CPU time, with --threads 1 (robust on a shared machine)",
    )
    c.add_argument(
        "--layer-timing",
        choices=["host-ahead", "per-call"],
        help="measure on CUDA: host-ahead (default) times each layer pass's GPU work with "
        "the host issuing the calls ahead of it, as in a training step; per-call times "
        "calls one by one, the host's cost of an isolated call included",
    )
    c.add_argument(
        "--spec", help="spec profile of the measured device (measure; derive takes --source-spec)"
    )
    c.add_argument("--from", dest="source", help="measured profile to derive from (derive)")
    c.add_argument("--target", help="spec profile of the target device (derive)")
    c.add_argument("--source-spec", help="spec profile of the source device (derive)")
    c.add_argument("--profile", help="profile to check (check)")
    c.add_argument("--model", help="ResNet of the zoo to check (default resnet18-cifar)")
    c.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "tf32", "amp", "amp_bf16"],
        help="check: precision of the checked step (default fp32)",
    )
    c.add_argument("--name", help="profile name (default: the --out file's stem)")
    c.add_argument("--json", action="store_true", help="check: print the result as JSON")
    c.add_argument("--force", action="store_true", help="overwrite existing --out files")
    c.set_defaults(func=cmd_calibrate)
    from simcluster.report.nccl_tests import NCCL_TEST_OPS

    n = sub.add_parser(
        "nccl-tests",
        help="the nccl-tests table (size, count, time, algbw, busbw) simulated on a topology",
    )
    n.add_argument("--topology", required=True, help="topology name or YAML file")
    n.add_argument("--nodes", type=int, help="number of nodes (default: the file's)")
    n.add_argument(
        "--op",
        default="all_reduce",
        choices=sorted(NCCL_TEST_OPS),
        help="the nccl-tests binary's operation (default all_reduce)",
    )
    n.add_argument("-b", "--minbytes", default="8", help="smallest size (8, 64K, 8M, 8G)")
    n.add_argument("-e", "--maxbytes", default="128M", help="largest size")
    n.add_argument("-f", "--stepfactor", type=int, default=2, help="size multiplier")
    n.add_argument("--network-profile", default="nccl-spec", help="network profile name or JSON")
    n.add_argument(
        "--network-model",
        default="maxmin",
        choices=["maxmin", "closed-form"],
        help="maxmin (contention, default) or closed-form",
    )
    n.add_argument("--algo", default="auto", help="all_reduce algorithm (NCCL_ALGO), or auto")
    n.add_argument("--proto", default="auto", help="LL, LL128, Simple (NCCL_PROTO), or auto")
    n.add_argument(
        "-g",
        "--ngpus",
        type=int,
        default=1,
        help="GPUs per thread (nccl-tests -g): N launches per iteration bound small sizes",
    )
    n.add_argument("--profile", help="device profile whose launch overhead -g uses")
    n.add_argument("--json", action="store_true", help="print the rows as JSON")
    n.set_defaults(func=cmd_nccl_tests)
    from simcluster.sweep.cli import add_arguments as sweep_arguments
    from simcluster.validation.cli import add_arguments as validate_arguments

    v = sub.add_parser("validate", help="predicted vs measured: paper figures and live runs")
    validate_arguments(v)
    v.set_defaults(func=cmd_validate)
    w = sub.add_parser("sweep", help="what-if grid over scenario, topology or profile fields")
    sweep_arguments(w)
    w.set_defaults(func=cmd_sweep)
    ts = sub.add_parser("trace-summary", help="what a PyTorch trace workload holds")
    ts.add_argument("trace", help="Kineto trace (.json) of one training iteration")
    ts.add_argument("--et", help="its execution trace (ExecutionTraceObserver), if any")
    ts.set_defaults(func=cmd_trace_summary)
    return p


def cmd_trace_summary(args: argparse.Namespace) -> int:
    from simcluster.workload.trace import read_trace, trace_summary

    print(trace_summary(read_trace(args.trace, args.et)))
    return 0


def _search_topologies(dirs: Sequence[str]) -> None:
    """``--topologies``: each checked to be a folder, then put ahead of
    ``$SIMCLUSTER_TOPOLOGIES`` (an environment variable, so worker processes search
    them too)."""
    from simcluster.paths import check_user_dir

    for d in dirs:
        check_user_dir(d, "--topologies")
    extra = [str(Path(d).resolve()) for d in dirs]
    old = os.environ.get(TOPOLOGIES_ENV)
    os.environ[TOPOLOGIES_ENV] = os.pathsep.join([*extra, *([old] if old else [])])


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from simcluster.atomic import forget_created_dirs, remove_created_dirs_if_empty

    code = 1
    forget_created_dirs()  # only this command's folders are removed if it fails
    try:
        code = _main(args)
    finally:  # a failed command leaves no empty results folder it made
        if code == 0:
            forget_created_dirs()
        else:
            remove_created_dirs_if_empty()
    return code


def _main(args: argparse.Namespace) -> int:
    try:
        if args.topologies:
            _search_topologies(args.topologies)
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"simcluster: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `simcluster list | head`: the reader left, as for any filter
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return 141
    except OSError as exc:  # the file system refused a path the user gave (too long, ...)
        name = str(exc.filename or "")
        name = name if len(name) <= 80 else name[:77] + "..."
        print(f"simcluster: error: {name}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("simcluster: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

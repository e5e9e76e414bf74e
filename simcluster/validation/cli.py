"""``simcluster validate``: paper cases, recorded live runs, or one live file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simcluster.errors import ConfigError, did_you_mean
from simcluster.paths import check_user_dir

__all__ = ["add_arguments", "run"]


def add_arguments(v: argparse.ArgumentParser) -> None:
    v.add_argument(
        "--set",
        dest="which",
        default=None,
        help="paper (scenarios/references/*.yaml; the default), live (recorded live runs in "
        "scenarios/references/live/*.json) or all",
    )
    v.add_argument(
        "--live",
        metavar="FILE",
        nargs="+",
        help="validate live-run JSON files (calibrate/live); repeats of one run (names "
        "that differ only in -rN, as calibrate.live --repeats writes them) are scored by "
        "their median",
    )
    v.add_argument("--json", action="store_true", help="print every case and the summary as JSON")
    v.add_argument(
        "--out", help="folder for validation.json and scatter.png (default results/validate)"
    )
    v.add_argument("--jobs", type=int, default=1, help="worker processes for the simulations")
    v.add_argument(
        "--references", help="folder of reference YAML files (default scenarios/references)"
    )
    v.add_argument("--no-plot", action="store_true", help="skip the scatter plot")
    v.add_argument("--paper", help="only the reference files of this paper (e.g. ANCHORS, PRUNEX)")


def run(args: argparse.Namespace) -> int:
    from simcluster.report import ProgressBar
    from simcluster.validation.cases import load_references, references_dir
    from simcluster.validation.live import live_files, validate_series
    from simcluster.validation.report import (
        case_table,
        group_summary,
        group_table,
        plot_scatter,
        summary,
        summary_table,
    )
    from simcluster.validation.runner import run_cases

    if args.live:  # the files it names are the whole set: a case-set flag would be ignored
        for flag, given in (("--set", args.which), ("--paper", args.paper),
                            ("--references", args.references)):  # fmt: skip
            if given is not None:
                raise ConfigError(
                    None, flag, given, "not with --live (it validates the files it names)",
                    f"--live FILE ... alone, or {flag} without --live",
                )  # fmt: skip
    if args.which is None:
        args.which = "paper"
    if args.which not in ("paper", "live", "all"):
        sets = ["paper", "live", "all"]
        raise ConfigError(None, "--set", args.which, "unknown case set", sets,
                          suggestions=did_you_mean(str(args.which), sets))  # fmt: skip
    if args.jobs < 1:
        raise ConfigError(None, "--jobs", args.jobs, "out of range", "a value >= 1")
    from simcluster.report.outdir import refuse_empty_path

    for flag, value in (("--references", args.references), ("--out", args.out)):
        refuse_empty_path(flag, value, "an empty folder name", "a folder")
    if args.references and not args.live:  # --set live reads its live/ folder: check it too
        refs = Path(args.references)
        check_user_dir(refs, "--references", "a folder of reference files")
        if args.which in ("live", "all") and not (refs / "live").is_dir():
            raise ConfigError(
                None, "--references", str(refs), "has no live/ folder of recorded live runs",
                "a folder holding live/*.json (--set live or all)",
            )  # fmt: skip
    files = []  # the reference files are read (and their errors reported) before --out is touched
    if not args.live and args.which in ("paper", "all"):
        files = load_references(args.references)
        if args.paper:
            names = [f.paper for f in files]
            files = [f for f in files if f.paper.lower() == args.paper.lower()]
            if not files:
                raise ConfigError(
                    None, "--paper", args.paper, "no such paper", names,
                    did_you_mean(args.paper, names),
                )  # fmt: skip
    from simcluster.report.outdir import prepare_output_dir

    out = prepare_output_dir(args.out or Path("results") / "validate")  # before any case runs
    from simcluster.report.outdir import RunOutputs

    # a folder of the user's own with a validation.json is refused, not overwritten
    outputs = RunOutputs(
        out,
        known=["validation.json", "scatter.png"],
        planned=["validation.json", *([] if args.no_plot else ["scatter.png"])],
    )
    outputs.check()
    results = []
    live_reports = []
    if args.live:
        live_reports += validate_series([Path(f) for f in args.live], out / "live")
    else:
        if args.which in ("paper", "all"):
            results += run_cases(files, progress=ProgressBar(), jobs=args.jobs)
        if args.which in ("live", "all"):
            folder = (
                Path(args.references) / "live" if args.references else references_dir() / "live"
            )
            live_reports += validate_series(live_files(folder), out / "live")
    for rep in live_reports:
        results += rep.case_results()
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "cases": [r.to_json() for r in results],
        "summary": summary(results),
        "groups": group_summary(results),
        "live": [rep.to_json() for rep in live_reports],
    }
    from simcluster.report.outdir import write_text_atomic

    write_text_atomic(
        out / "validation.json", json.dumps(payload, indent=2, default=str, allow_nan=False) + "\n"
    )
    plotted = False
    if not args.no_plot:
        plotted = plot_scatter(
            out / "scatter.png", results, "simcluster predictions vs measurements"
        )
    outputs.finish()
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
        return _failed_verdict(results)
    for rep in live_reports:
        print(rep.table())
        print()
    if results and not args.live:
        print(case_table(results))
        print()
    if len(live_reports) > 1:
        from simcluster.validation.live import overall_line

        print(overall_line(live_reports))
        print()
    if results:
        print(summary_table(results))
        groups = group_table(results)
        if groups:
            print(groups)
    else:
        print("no cases to validate")
    files = "validation.json" + (", scatter.png" if plotted else "")
    print(f"results: {out}/ ({files})")
    return _failed_verdict(results)


def _failed_verdict(results) -> int:
    """0 when no case failed to run; else one error line (the first failure, which names
    its reference file and field) raised after the report is written: exit 2 when every
    failure comes from a case's input, 3 (a bug report) when one raised unexpectedly."""
    from simcluster.errors import ResultError, UserError

    failed = [r for r in results if r.status == "failed"]
    if not failed:
        return 0
    first = next((r for r in failed if r.bug), failed[0])
    more = f" (and {len(failed) - 1} more: see the table)" if len(failed) > 1 else ""
    line = f"{len(failed)} of {len(results)} case(s) failed to run{more}: {first.message}"
    raise (ResultError if first.bug else UserError)(line)

"""``simcluster calibrate`` actions: measure (default), derive, check.

* ``simcluster calibrate --device cpu|cuda[:N] --out PATH [--quick|--tiny] [--models ...]``
  measures this machine and writes a device profile (kind ``measured``) and a network
  profile (collectives between local processes).
* ``simcluster calibrate derive --from MEASURED --target SPEC --out PATH`` applies the
  transfer model (:mod:`simcluster.compute.transfer`).
* ``simcluster calibrate check --profile P [--model resnet18-cifar] [--batch 32]``
  compares the simulator's forward + backward time of a ResNet with torch's.

Bad input raises :class:`simcluster.errors.UserError` (the CLI prints it, exit 2).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

from simcluster.errors import ConfigError, UserError

__all__ = ["run"]


def _as_flag(flag: str, fn, *args):
    """``fn(*args)``; a ConfigError about a name it was given (a model, a profile) names
    ``flag`` (``--models``) instead of a scenario's field (``workload.model``)."""
    try:
        return fn(*args)
    except ConfigError as exc:
        if exc.file is not None or exc.path == flag:
            raise
        e = exc
        raise ConfigError(None, flag, e.value, e.problem, e.allowed, e.suggestions) from None


def _device(text: str):
    import torch

    text = text.strip().lower()
    if text == "cpu":
        return torch.device("cpu")
    if text == "cuda" or text.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ConfigError(
                None, "--device", text, "CUDA is not available on this machine", ["cpu"]
            )
        idx = 0
        if ":" in text:
            tail = text.split(":", 1)[1]
            if not tail.isdigit() or int(tail) >= torch.cuda.device_count():
                raise ConfigError(
                    None, "--device", text, "no such GPU",
                    [f"cuda:{i}" for i in range(torch.cuda.device_count())],
                )  # fmt: skip
            idx = int(tail)
        return torch.device(f"cuda:{idx}")
    raise ConfigError(None, "--device", text, "unknown device", ["cpu", "cuda", "cuda:N"])


def _check_writable(path: Path, force: bool, flag: str) -> None:
    from simcluster.atomic import check_output_file

    check_output_file([(flag, path)], force)
    if path.suffix != ".json":
        raise ConfigError(None, flag, str(path), "a profile file ends in .json")


def _network_out(out: Path, explicit: str | None) -> Path:
    """Default network profile path: ``calibrate/profiles/network/<stem>.json`` for a profile
    written to ``calibrate/profiles``, else ``<stem>-network.json`` next to ``out``."""
    if explicit:
        return Path(explicit)
    from simcluster.paths import profiles_dir

    if out.resolve().parent == profiles_dir().resolve():
        return out.parent / "network" / f"{out.stem}.json"
    return out.with_name(f"{out.stem}-network.json")


class _LineProgress:
    """Progress as a plain line every 10 % (batch jobs, logs: stderr is not a terminal)."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.last = -1

    def __call__(self, done: int, total: int, label: str) -> None:
        step = int(10 * done / total) if total else 10
        if step > self.last:
            self.last = step
            print(
                f"calibrate: {100 * done // max(total, 1):3d}% "
                f"{time.perf_counter() - self.t0:7.1f} s  {label}",
                file=sys.stderr,
                flush=True,
            )


def _progress():
    from simcluster.report.progress import ProgressBar

    bar = ProgressBar(sys.stderr)
    return bar if bar.enabled else _LineProgress()


def _command(args: argparse.Namespace, fields: list[str]) -> str:
    """The command line that reproduces this run (options spelled out)."""
    parts = ["simcluster", "calibrate"]
    if args.action != "measure":
        parts.append(args.action)
    for f in fields:
        v = getattr(args, f, None)
        flag = "--" + ("from" if f == "source" else f.replace("_", "-"))
        if v is True:
            parts.append(flag)
        elif v not in (None, False):
            parts += [flag, str(v)]
    return shlex.join(parts)


def _only(args: argparse.Namespace, action: str, allowed: set[str]) -> None:
    for f in (
        "source",
        "target",
        "source_spec",
        "profile",
        "model",
        "network_out",
        "models",
        "check",
        "layer_timing",
    ):
        if f not in allowed and getattr(args, f, None) is not None:
            flag = "--" + ("from" if f == "source" else f.replace("_", "-"))
            raise ConfigError(
                None, flag, getattr(args, f), f"not an option of `calibrate {action}`"
            )


def _threads(args: argparse.Namespace, device) -> int:
    import torch

    n = args.threads if args.threads is not None else len(os.sched_getaffinity(0))
    if n < 1:  # 0 is refused, not read as "the default"
        raise ConfigError(None, "--threads", n, "must be >= 1", "an integer >= 1")
    if args.clock == "cpu" and (device.type != "cpu" or n != 1):
        raise ConfigError(
            None, "--clock", "cpu", "thread CPU time needs --device cpu and --threads 1"
        )
    torch.set_num_threads(n)
    return n


def cmd_measure(args: argparse.Namespace) -> int:
    _only(args, "measure", {"network_out", "models", "check", "layer_timing"})
    if not args.out:
        raise ConfigError(None, "--out", None, "missing: where to write the profile")
    if args.quick and args.tiny:
        raise ConfigError(None, "--tiny", True, "--quick and --tiny exclude each other")
    out = Path(args.out)
    _check_writable(out, args.force, "--out")
    net_out = None if args.no_network else _network_out(out, args.network_out)
    if net_out is not None:
        _check_writable(net_out, args.force, "--network-out")
    device = _device(args.device)
    from . import collectives as C
    from .layers import CALIBRATION_PRECISIONS
    from .runner import guess_spec, make_plan, parse_models

    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    precisions = ("fp32", "amp") if device.type == "cuda" else ("fp32",)
    if args.precisions:
        precisions = tuple(p.strip() for p in args.precisions.split(",") if p.strip())
        bad = [p for p in precisions if p not in CALIBRATION_PRECISIONS] or (
            [] if "fp32" in precisions else ["(fp32 missing)"]
        )
        if bad:
            raise ConfigError(
                None,
                "--precisions",
                args.precisions,
                "fp32 and optionally any of " + ", ".join(CALIBRATION_PRECISIONS[1:]),
                ["fp32", "fp32,amp", ",".join(CALIBRATION_PRECISIONS)],
            )
    if args.rounds is not None and args.rounds < 1:
        raise ConfigError(None, "--rounds", args.rounds, "must be >= 1")
    if args.batch < 1:
        raise ConfigError(None, "--batch", args.batch, "must be >= 1")
    models = _as_flag("--models", parse_models, args.models, args.batch) if args.models else None
    if args.spec:  # written into the profile as device.spec_profile: a typo must stop here
        from simcluster.compute.loader import profile_path

        profile_path(args.spec, "--spec")
    plan = make_plan(mode, models, precisions, args.rounds, gpu=device.type == "cuda")
    plan.host_ahead = getattr(args, "layer_timing", None) != "per-call"
    check = args.check or ("none" if mode == "tiny" else "resnet18-cifar:32")
    if check.strip().lower() != "none":
        plan.checks = _as_flag("--check", parse_models, check, 32)
        from .models import torch_model

        for w in plan.checks:
            try:
                torch_model(w.model)
            except ValueError as exc:
                raise ConfigError(None, "--check", w.model, str(exc)) from None
    threads = _threads(args, device)
    command = _command(
        args,
        ["device", "out", "network_out", "no_network", "quick", "tiny", "models", "batch",
         "precisions", "check", "threads", "clock", "layer_timing", "rounds", "spec", "name",
         "force"],
    )  # fmt: skip
    from .runner import busy_warning, calibrate

    warning = busy_warning()
    if warning:
        print(f"simcluster: warning: {warning}", file=sys.stderr)
    t0 = time.perf_counter()
    name = args.name or out.stem
    spec = args.spec or guess_spec(device)
    prof = calibrate(device, plan, name, command, threads, _progress(), spec, args.clock)
    out.parent.mkdir(parents=True, exist_ok=True)
    # validate with the simulator's own loader before writing
    from simcluster.compute.measured import MeasuredProfile

    MeasuredProfile.from_data(prof, out)
    out.write_text(json.dumps(prof, indent=1) + "\n")
    wrote = [str(out)]
    if net_out is not None:
        if device.type == "cuda" and __import__("torch").cuda.device_count() >= 2:
            import torch

            backend, world = "nccl", min(torch.cuda.device_count(), 8)
            nominal: dict = {}
        else:
            backend, world = "gloo", 2
            rate = prof["device"]["roofline"].get("host", prof["device"]["roofline"])
            nominal = {"memory": ("world", rate["memory_bandwidth"] / 2)}
        sizes = C.default_sizes(plan.collective_max_bytes)
        bar = _progress()
        bar(0, 1, f"collectives ({backend}, {world} ranks)")
        t1 = time.perf_counter()
        raw = C.run_local(
            sizes, world, backend, C.OPS, plan.collective_rounds, plan.collective_reps, 1
        )
        bar(1, 1, "collectives")
        prov = {
            "description": f"{backend} collectives between {world} local processes on "
            f"{prof['provenance']['device_name']}",
            "backend": backend,
            "world": world,
            "hosts": prof["provenance"]["hostname"],
            "device_profile": name,
            "torch": prof["provenance"]["torch"],
            "date": prof["provenance"]["date"],
            "command": command,
            "sizes_bytes": sizes,
            "duration_s": round(time.perf_counter() - t1, 1),
            "notes": [
                "one process per rank, 1 thread each, loopback: "
                "per_message_overhead_s includes the loopback path latency",
                "link_efficiency.memory = best bus bandwidth / memcpy rate (half the "
                "roofline's read + write bandwidth) of the same machine",
            ],
        }
        scopes = {"world": {"world": world, "backend": backend, "fits": C.fit_sweep(raw, world)}}
        net = C.network_profile(net_out.stem, scopes, prov, nominal)
        net_out.parent.mkdir(parents=True, exist_ok=True)
        net_out.write_text(json.dumps(net, indent=1) + "\n")
        wrote.append(str(net_out))
    for c in prof["provenance"].get("check", []):
        print(
            f"check {c['model']} batch {c['batch']}: simulated {c['simulated_s'] * 1e3:.1f} ms, "
            f"measured {c['measured_s'] * 1e3:.1f} ms, error {100 * c['error']:+.1f} %",
            file=sys.stderr,
        )
    print(
        f"calibrated {prof['provenance']['device_name']} ({mode}) in "
        f"{time.perf_counter() - t0:.1f} s; wrote {', '.join(wrote)}",
        file=sys.stderr,
    )
    return 0


def cmd_derive(args: argparse.Namespace) -> int:
    _only(args, "derive", {"source", "target", "source_spec"})
    if getattr(args, "spec", None) is not None:  # measure's option: derive would ignore it
        raise ConfigError(
            None, "--spec", args.spec, "not an option of `calibrate derive`",
            "--from, --target, --source-spec, --out, --name, --force", ["--source-spec"],
        )  # fmt: skip
    for f, flag in (("source", "--from"), ("target", "--target"), ("out", "--out")):
        if not getattr(args, f):
            raise ConfigError(
                None, flag, None, "missing: `calibrate derive` needs --from, --target and --out"
            )
    from simcluster.compute.loader import profile_path

    for f, flag in (("source", "--from"), ("target", "--target"), ("source_spec", "--source-spec")):
        if getattr(args, f):
            profile_path(getattr(args, f), flag)  # an unknown name names its flag
    out = Path(args.out)
    _check_writable(out, args.force, "--out")
    from simcluster.compute.measured import MeasuredProfile
    from simcluster.compute.transfer import derive_profile, dumps

    command = _command(args, ["source", "target", "source_spec", "out", "name", "force"])
    data = derive_profile(
        args.source, args.target, args.name or out.stem, args.source_spec, command
    )
    MeasuredProfile.from_data(data, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(data))
    r = data["provenance"]["ratios"]
    cross = any("CPU source, GPU target" in n for n in data["provenance"]["notes"])
    launch = "constants -> GPU launches" if cross else f"launch x{r['launch']:.3g}"
    print(
        f"derived {data['name']} from {data['provenance']['derived_from']['name']}: "
        f"{launch}, fp32 compute x{r['compute_fp32']:.3g}, memory x{r['memory']:.3g}; "
        f"wrote {out}",
        file=sys.stderr,
    )
    if "warning" in data["provenance"]:
        print(f"note: {data['provenance']['warning']}", file=sys.stderr)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    _only(args, "check", {"profile", "model", "precision"})
    if not args.profile:
        raise ConfigError(None, "--profile", None, "missing: the profile to check")
    from simcluster.compute import load_profile
    from simcluster.workload import build_model

    if args.batch < 1:
        raise ConfigError(None, "--batch", args.batch, "must be >= 1", "an integer >= 1")
    if args.rounds is not None and args.rounds < 1:  # 0 is refused, not read as the default
        raise ConfigError(None, "--rounds", args.rounds, "must be >= 1", "an integer >= 1")
    profile = _as_flag("--profile", load_profile, args.profile)
    model_name = "resnet18-cifar" if args.model is None else args.model  # "" names none
    model = _as_flag("--model", build_model, model_name)
    device = _device(args.device)
    threads = _threads(args, device)
    from .models import simulated_time, time_model, torch_model
    from .timing import Timer

    try:
        module = torch_model(model_name)
    except ValueError as exc:
        raise ConfigError(None, "--model", model_name, str(exc)) from None
    from .runner import busy_warning

    warning = busy_warning()
    if warning:
        print(f"simcluster: warning: {warning}", file=sys.stderr)
    precision = args.precision
    sim = simulated_time(profile, model, args.batch, precision)
    timer = Timer(device, warmup=2, reps=5, min_sample_s=0.0, clock=args.clock)
    meas = time_model(
        module, args.batch, model.input_size, device, timer, args.rounds or 3, precision
    )
    err = (sim["total_s"] - meas["estimate_s"]) / meas["estimate_s"]
    result = {
        "profile": profile.describe(),
        "model": model_name,
        "batch": args.batch,
        "precision": precision,
        "threads": threads,
        "clock": args.clock,
        "simulated_s": sim["total_s"],
        "simulated_fwd_s": sim["fwd_s"],
        "simulated_bwd_s": sim["bwd_s"],
        "measured_s": meas["estimate_s"],
        "measured_median_all_s": meas["median_all_s"],
        "error": err,
        "measured_rounds_s": meas["rounds_s"],
        "loadavg_1min": os.getloadavg()[0],
    }
    if "gpu_s" in meas:  # CUDA: the same step with the host ahead (calibrate.models)
        result.update(
            measured_gpu_s=meas["gpu_s"],
            host_issue_s=meas["host_issue_s"],
            gpu_error=(sim["total_s"] - meas["gpu_s"]) / meas["gpu_s"],
            gpu_rounds_s=meas["gpu_rounds_s"],
            host_behind=meas["host_behind"],
        )
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{model_name} batch {args.batch} {precision}, forward + backward, {device} "
            f"({threads} threads, "
            f"{args.clock} clock)\n"
            f"  simulated ({profile.describe()}): {sim['total_s'] * 1e3:.1f} ms "
            f"(fwd {sim['fwd_s'] * 1e3:.1f}, bwd {sim['bwd_s'] * 1e3:.1f})\n"
            f"  measured (torch, quietest-round median): {meas['estimate_s'] * 1e3:.1f} ms "
            f"(median of all samples {meas['median_all_s'] * 1e3:.1f})\n"
            f"  error: {100 * err:+.1f} %"
        )
        if "gpu_s" in meas:
            print(
                f"  with the host ahead: GPU {meas['gpu_s'] * 1e3:.1f} ms (error "
                f"{100 * result['gpu_error']:+.1f} %), host issue "
                f"{meas['host_issue_s'] * 1e3:.1f} ms: the step as run is "
                f"{'host' if meas['host_issue_s'] > meas['gpu_s'] else 'GPU'}-bound"
            )
    return 0


def run(args: argparse.Namespace) -> int:
    """Entry point of ``simcluster calibrate`` (dispatch on ``args.action``)."""
    try:
        import torch  # noqa: F401
    except ImportError:  # pragma: no cover - torch is a dependency
        raise UserError("simcluster calibrate needs torch (pip install torch)") from None
    return {"measure": cmd_measure, "derive": cmd_derive, "check": cmd_check}[args.action](args)

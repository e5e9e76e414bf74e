"""Adversarial inputs: mutate every shipped scenario, topology and profile (device,
network, input), and CLI lines.

Each input is run in this process through ``simcluster.cli.main`` and sorted:

- ``ok``: exit 0 and every number in ``results.json`` finite, times >= 0;
- ``error``: exit 2 with exactly one ``simcluster: error:`` line (argparse's usage
  line may come before it);
- ``bug-report``: exit 3 (a result that failed the sanity check, reported in one line);
- ``TRACEBACK``: an exception escaped ``main``;
- ``HANG``: not finished within ``--bound`` seconds (SIGALRM);
- ``BAD-ACCEPT``: exit 0 with a non-finite or negative number written;
- ``MESSY``: another exit code, or an error of more than one line;
- ``NO-FILE``: a one-line error about a mutated file that names no file.

Mutations (seeded, reproducible): on a random field anywhere in the document,
a number is scaled by 0.1 to 1000 keeping its type (a plausible value) or
becomes 0, negative, NaN, +-inf, 1e-300, 5e-324, 1e300, a bool, null, a
numeric or unit string, a list, or 1e9 times itself; a string becomes empty,
garbage, a number, "..", "/proc/x" or 10,000 characters; a mapping loses a key,
gains an unknown one, gets a misspelt one or becomes one value (7, 1e20, true, a
string); a list is emptied, doubled or nested 100 deep. Some inputs are broken
at the byte level instead: a non-UTF-8 byte, a cut, a repeated key, 1,000-deep
nesting, a billion-laughs bomb.
The other inputs a user hands over are mutated too: recorded live runs
(``validate --live``), reference-case files (``validate --references``, first case
only), PyTorch Kineto traces (a small hand-made one, through ``trace-summary`` and a
scenario's ``workload.trace``) and nccl-tests logs (``calibrate nccl-tests``: a
token of a data row becomes nan, -1, 1e999, N/A, ...; a line dropped, repeated or
swapped; the column header lost; CRLF line ends). A log that fits must write a
network profile that loads again.
Shipped scenarios run at their smallest study size (at most 2 nodes; sparse
DNNs at most 8 layers) so that a valid mutant simulates in about a second.

    python bench/fuzz.py --count 1000 --seed 0        # summary table, exit 1 on any finding
    python bench/fuzz.py --count 50 --kinds topology --verbose
    python bench/fuzz.py --count 100 --kinds trace,nccl_log,live,references

The property tests in ``tests/test_fuzz.py`` run the same mutations under
hypothesis with a small example budget.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import random
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

KINDS = (
    "scenario",
    "topology",
    "device_profile",
    "network_profile",
    "input_profile",
    "trace",
    "nccl_log",
    "live",
    "references",
    "cli",
)

#: a small valid scenario the topology and profile mutants are run under
TINY = {
    "name": "fuzz",
    "topology": "puhti",
    "profile": "v100-sxm2-32gb",
    "network_profile": "nccl-spec",
    "workload": {"model": "resnet18-cifar", "dataset": "cifar10", "batch_per_gpu": 32},
    "schedules": [{"name": "ddp"}],
    "study": {"gpus": [8]},
}


def shipped(kind: str) -> list[Path]:
    """The shipped files of one kind."""
    from simcluster.paths import (
        network_profiles_dir,
        profiles_dir,
        references_dir,
        topologies_dir,
    )

    if kind == "scenario":
        return sorted((ROOT / "scenarios").glob("*.yaml"))
    if kind == "topology":
        return sorted(topologies_dir().glob("*.yaml"))
    if kind == "device_profile":
        return sorted(profiles_dir().glob("*.json"))
    if kind == "network_profile":
        return sorted(network_profiles_dir().glob("*.json"))
    if kind == "input_profile":
        from simcluster.compute.input_pipeline import input_profiles_dir

        return sorted(input_profiles_dir().glob("*.json"))
    if kind == "trace":
        return [Path("<hand-made Kineto trace>")]  # built by synthetic_trace()
    if kind == "nccl_log":
        return sorted((ROOT / "tests" / "data").glob("*.log"))
    if kind == "live":
        return sorted((references_dir() / "live").glob("*.json"))
    if kind == "references":
        return sorted(references_dir().glob("*.yaml"))
    raise ValueError(kind)


def synthetic_trace() -> dict[str, Any]:
    """A small Kineto trace by hand: two layers on a GPU, forward, backward, a gradient."""

    def op(name, ts, dur, tid=1, **args):
        return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "tid": tid,
                "args": args}  # fmt: skip

    def kernel(ext, ts, dur):
        return {"ph": "X", "cat": "kernel", "name": "k", "ts": ts, "dur": dur, "tid": 7,
                "args": {"External id": ext}}  # fmt: skip

    bwd = "autograd::engine::evaluate_function: "
    events = [
        op("aten::linear", 0, 10, **{"Sequence number": 5, "External id": 1,
                                     "Input Dims": [[4, 8], [16, 8], [16]]}),
        op("aten::relu", 20, 5, **{"Sequence number": 6, "External id": 2}),
        op(bwd + "ReluBackward0", 40, 5, tid=2, **{"Sequence number": 6}),
        op("aten::threshold_backward", 41, 3, tid=2, **{"External id": 3}),
        op(bwd + "AddmmBackward0", 50, 8, tid=2, **{"Sequence number": 5}),
        op("aten::mm", 51, 6, tid=2, **{"External id": 4}),
        op(bwd + "torch::autograd::AccumulateGrad", 60, 2, tid=2),
        op("torch::autograd::AccumulateGrad", 60.5, 1, tid=2, **{"Input Dims": [[16, 8]]}),
        kernel(1, 100, 300.0), kernel(2, 400, 20.0), kernel(3, 500, 40.0),
        kernel(4, 600, 500.0),
    ]  # fmt: skip
    return {"schemaVersion": 1, "traceEvents": events,
            "deviceProperties": [{"name": "NVIDIA H100"}]}  # fmt: skip


_LOG_TOKENS = ["nan", "-1", "inf", "1e999", "N/A", "0", "x", "-0", "9" * 400, "1,5", "0x10"]


def mutate_log(rng: random.Random, text: str) -> str:
    """A line-level breakage of an nccl-tests log (a data row's token, a line, the header)."""
    lines = text.splitlines()
    data = [i for i, ln in enumerate(lines) if ln.strip()[:1].isdigit()]
    op = rng.choice(["token", "token", "token", "drop", "dup", "swap", "header", "crlf", "rank"])
    if op == "token" and data:
        i = rng.choice(data)
        tok = lines[i].split()
        tok[rng.randrange(len(tok))] = rng.choice(_LOG_TOKENS)
        lines[i] = "  ".join(tok)
    elif op == "drop" and lines:
        lines.pop(rng.randrange(len(lines)))
    elif op == "dup" and lines:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif op == "swap" and len(lines) > 1:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "header":
        lines = [ln for ln in lines if "size" not in ln or "count" not in ln]
    elif op == "crlf":
        return "\r\n".join(lines) + "\r\n"
    elif op == "rank":
        ranks = [i for i, ln in enumerate(lines) if ln.startswith("#  Rank")]
        if ranks:
            i = rng.choice(ranks)
            lines[i] = rng.choice(["#  Rank", lines[i].replace(" on ", " on  "), lines[i] + " x"])
    return "\n".join(lines) + "\n"


def _small(data: dict[str, Any]) -> dict[str, Any]:
    """A shipped scenario at its smallest study size, at most 2 nodes of 4 ranks."""
    out = copy.deepcopy(data)
    study = out.get("study")
    if isinstance(study, dict) and isinstance(study.get("gpus"), list) and study["gpus"]:
        g = min(study["gpus"])
        study["gpus"] = [g if g <= 32 else 8]
        if study.get("kind") != "single":
            study["kind"] = "single"
    for sched in out.get("schedules") or []:
        opts = sched.get("options") if isinstance(sched, dict) else None
        if isinstance(opts, dict) and isinstance(opts.get("layers"), int):
            opts["layers"] = min(opts["layers"], 8)  # sparse DNNs: 8 layers partition in ~1 s
    het = out.get("heterogeneity")
    if isinstance(het, dict):
        het.pop("jitter", None)  # every rank distinct: slow; stragglers stay
    out.pop("output", None)
    return out


# ------------------------------------------------------------------------- mutations

_NUMBERS = [
    0,
    -1,
    -1.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    1e-300,
    5e-324,
    1e300,
    True,
    False,
    None,
    "900 GB/s",
    "12",
    [1],
    {},
    10**20,
]
_STRINGS = ["", "garbage", 7, None, "..", "/proc/x", "x" * 10_000, "ünïcødé", [], True]


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if len(prefix) > 20:  # inside a list an earlier mutation nested 100 deep
        return out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def mutate_value(rng: random.Random, value: Any) -> Any:
    """One adversarial replacement for ``value``."""
    if isinstance(value, int | float) and not isinstance(value, bool) and rng.random() < 0.4:
        # plausible: same type, another size (valid inputs must give sane numbers too)
        factor = rng.choice([0.1, 0.5, 2, 10, 1000])
        if isinstance(value, int):
            return max(1, int(value * factor)) if value > 0 else value + rng.choice([1, 2])
        return value * factor
    if isinstance(value, bool) or isinstance(value, int | float):
        choice = rng.choice([*_NUMBERS, "scale", "neg"])
        if choice == "scale":
            return value * 1e9 if not isinstance(value, bool) else 1e9
        if choice == "neg":
            return -value if not isinstance(value, bool) else -1
        return choice
    if isinstance(value, str):
        return rng.choice(_STRINGS + [value + "x", value[:-1], value.upper()])
    if isinstance(value, dict):
        op = rng.choice(["drop", "unknown", "typo", "empty", "null", "list", "scalar"])
        out = dict(value)
        keys = list(out)
        if op == "drop" and keys:
            out.pop(rng.choice(keys))
        elif op == "unknown":
            out["zzz_unknown"] = 1
        elif op == "typo" and keys:
            k = rng.choice(keys)
            out[str(k)[:-1] + "_" if len(str(k)) > 1 else "_"] = out.pop(k)
        elif op == "empty":
            return {}
        elif op == "null":
            return None
        elif op == "list":
            return [out]
        elif op == "scalar":  # a mapping written as one value (peak_flops: 1e15)
            return rng.choice([7, 1e20, True, "text"])
        return out
    if isinstance(value, list):
        op = rng.choice(["empty", "double", "deep", "scalar", "reverse"])
        if op == "empty":
            return []
        if op == "double":
            return value + value
        if op == "deep":
            deep: Any = value
            for _ in range(100):
                deep = [deep]
            return deep
        if op == "scalar":
            return value[0] if value else 0
        return list(reversed(value))
    return rng.choice(_NUMBERS + _STRINGS)


def mutate_doc(rng: random.Random, doc: Any, n: int = 1) -> Any:
    """``doc`` with ``n`` random fields mutated (copy)."""
    doc = copy.deepcopy(doc)
    for _ in range(n):
        paths = _paths(doc)
        # leaves far more often than containers: most bugs are in values
        leaves = [p for p in paths if not isinstance(_get(doc, p), dict | list)]
        pool = leaves if leaves and rng.random() < 0.8 else paths
        path = rng.choice(pool)
        doc = _set(doc, path, mutate_value(rng, _get(doc, path)))
    return doc


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


def mutate_bytes(rng: random.Random, text: str, suffix: str) -> bytes:
    """A byte-level breakage of a serialised document."""
    raw = text.encode()
    op = rng.choice(["utf8", "cut", "dupkey", "deep", "laughs", "nul", "empty"])
    if op == "utf8":
        i = rng.randrange(len(raw) + 1)
        return raw[:i] + b"\xff\xfe" + raw[i:]
    if op == "cut":
        return raw[: rng.randrange(len(raw) + 1)]
    if op == "dupkey":
        if suffix == ".json":
            return raw.replace(b"{", b'{"name": "a", ', 1)
        first = text.splitlines()[0] if text else "a: 1"
        return (text + "\n" + first + "\n").encode()
    if op == "deep":
        return (b"[" * 1000 + b"]" * 1000) if suffix == ".json" else (b"x: " + b"[" * 1000)
    if op == "laughs":
        return LAUGHS.encode() if suffix != ".json" else b"[" * 100000
    if op == "nul":
        return raw.replace(b"\n", b"\n\x00", 1)
    return b""


def dump(doc: Any, suffix: str) -> str:
    if suffix == ".json":
        return json.dumps(doc, indent=1)  # NaN/Infinity written as such: the reader refuses
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


# ------------------------------------------------------------------------- one input


class Hang(Exception):
    pass


def _alarm(signum, frame):  # pragma: no cover - only when an input hangs
    raise Hang


def run_cli(argv: list[str], bound_s: float) -> tuple[int | None, str, str, float]:
    """(exit code or None, stderr, traceback text, seconds) of ``simcluster argv``."""
    from simcluster.cli import main

    err, out = io.StringIO(), io.StringIO()
    tb = ""
    code: int | None
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, bound_s)
    t = time.perf_counter()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    except Hang:
        code, tb = None, "HANG"
    except BaseException as exc:  # noqa: BLE001 - that is what we are looking for
        code = None
        tb = "".join(traceback.format_exception(exc))[-3000:]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return code, err.getvalue(), tb, time.perf_counter() - t


def _bad_numbers(path: Path) -> str | None:
    """The first non-finite or negative time in a results.json (None if sane)."""
    from simcluster.report.sanity import check_records

    if path.name == "fitted.json":  # calibrate nccl-tests: the profile must load again
        from simcluster.compute import load_network_profile

        try:
            load_network_profile(str(path))
        except Exception as exc:  # noqa: BLE001
            return str(exc)[:200]
        return None
    try:
        data = json.loads(path.read_text(), parse_constant=lambda c: float(c.lower()))
        check_records(data.get("results", []))
    except Exception as exc:  # noqa: BLE001
        return str(exc)[:200]
    return None


def classify(
    code: int | None, err: str, tb: str, results: Path | None, folder: str | None = None
) -> tuple[str, str]:
    """(outcome, detail) for one run; with ``folder``, a one-line error must name a file
    in it (the mutated input or the scenario that reads it), else it is ``NO-FILE``."""
    if tb == "HANG":
        return "HANG", ""
    if tb:
        last = tb.strip().splitlines()[-1]
        return "TRACEBACK", last[:200]
    lines = [
        ln for ln in err.splitlines() if ln.strip() and not ln.startswith("simcluster: progress")
    ]
    errors = [ln for ln in lines if ln.startswith("simcluster: error:")]
    if code == 0:
        if results is not None and results.exists():
            bad = _bad_numbers(results)
            if bad:
                return "BAD-ACCEPT", bad
        return "ok", ""
    if code in (2, 3) and len(errors) == 1:
        others = [ln for ln in lines if ln not in errors and not ln.startswith("usage:")]
        if not others:
            if code == 2 and folder is not None and folder not in errors[0]:
                return "NO-FILE", errors[0][:200]
            return ("error" if code == 2 else "bug-report"), errors[0][:160]
    return "MESSY", f"exit {code}: {' | '.join(lines)[:200]}"


def make_input(kind: str, rng: random.Random, workdir: Path) -> tuple[list[str], Path | None, str]:
    """(argv, results.json path or None, description) of one mutated input."""
    out = workdir / "out"
    if kind == "cli":
        return _cli_line(rng, workdir)
    if kind in ("trace", "nccl_log", "live", "references"):
        return _user_file(kind, rng, workdir)
    files = shipped(kind)
    src = rng.choice(files)
    suffix = src.suffix
    base = yaml.safe_load(src.read_text()) if suffix != ".json" else json.loads(src.read_text())
    if kind == "scenario":
        base = _small(base)
    n = 1 if rng.random() < 0.7 else rng.randint(2, 4)
    doc = mutate_doc(rng, base, n)
    target = workdir / f"input{suffix}"
    in_bytes = _write_mutant(rng, target, base, suffix, lambda: doc)
    desc = f"{src.name} (bytes)" if in_bytes else f"{src.name} ({n} field(s))"
    if kind == "scenario":
        scenario = target
    else:
        field = {"topology": "topology", "device_profile": "profile"}.get(kind, "network_profile")
        sc = copy.deepcopy(TINY)
        if kind == "input_profile":  # read through the workload, moved to a host clock
            ip = {"profile": str(target), "host_clock_ghz": 2.5}
            sc["workload"] = {**sc["workload"], "input_pipeline": ip}
        else:
            sc[field] = str(target)
        if kind == "topology":
            sc["study"] = {"gpus": [_two_nodes(src)]}
        scenario = workdir / "scenario.yaml"
        scenario.write_text(yaml.safe_dump(sc))
    argv = ["run", str(scenario), "--no-plots", "--out", str(out)]
    return argv, out / "results.json", desc


def _write_mutant(
    rng: random.Random, target: Path, base: Any, suffix: str, mutated: Callable[[], Any]
) -> bool:
    """Write ``target``: a byte-level breakage of ``base`` (12 %), else the document
    ``mutated()`` returns (``base`` where it cannot be serialised). ``mutated`` is a
    callable so each caller keeps its own order of random draws. True for bytes."""
    if rng.random() < 0.12:
        target.write_bytes(mutate_bytes(rng, dump(base, suffix), suffix))
        return True
    try:
        target.write_text(dump(mutated(), suffix))
    except (ValueError, TypeError, RecursionError):  # not serialisable: write the base
        target.write_text(dump(base, suffix))
    return False


def _user_file(kind: str, rng: random.Random, workdir: Path) -> tuple[list[str], Path | None, str]:
    """A mutated trace, nccl-tests log, live-run file or reference file and its command."""
    out = workdir / "out"
    if kind == "nccl_log":
        src = rng.choice(shipped(kind))
        target = workdir / src.name  # the op is read from the header or the file name
        if rng.random() < 0.15:
            target.write_bytes(mutate_bytes(rng, src.read_text(), ".log"))
            desc = f"{src.name} (bytes)"
        else:
            target.write_text(mutate_log(rng, src.read_text()))
            desc = f"{src.name} (lines)"
        argv = ["calibrate", "nccl-tests", str(target), "--out", str(out / "fitted.json")]
        return argv, out / "fitted.json", desc
    if kind == "trace":
        src_name, suffix, base = "trace", ".json", synthetic_trace()
    else:
        src = rng.choice(shipped(kind))
        src_name, suffix = src.name, src.suffix
        if suffix == ".json":
            base = json.loads(src.read_text())
        else:
            base = yaml.safe_load(src.read_text())
            base["cases"] = base.get("cases", [])[:1]  # one case: a second or so
            for case in base["cases"]:
                if isinstance(case.get("scenario"), str) and (ROOT / case["scenario"]).exists():
                    case["scenario"] = str(ROOT / case["scenario"])
    n = 1 if rng.random() < 0.7 else rng.randint(2, 4)
    if kind == "references":
        target = workdir / "refs" / f"input{suffix}"
        target.parent.mkdir()
    else:
        target = workdir / f"input{suffix}"
    in_bytes = _write_mutant(rng, target, base, suffix, lambda: mutate_doc(rng, base, n))
    desc = f"{src_name} (bytes)" if in_bytes else f"{src_name} ({n} field(s))"
    if kind == "live":
        return ["validate", "--live", str(target), "--out", str(out), "--no-plot"], None, desc
    if kind == "references":
        argv = ["validate", "--references", str(target.parent), "--out", str(out), "--no-plot"]
        return argv, None, desc
    if rng.random() < 0.5:
        return ["trace-summary", str(target)], None, desc + " trace-summary"
    sc = {
        "name": "fuzz-trace",
        "topology": "localhost",
        "profile": "cpu-xeon-1core",
        "network_profile": "gloo-localhost",
        "workload": {"trace": str(target), "batch_per_gpu": 4, "dataset_size": 64},
        "schedules": [{"name": "ddp"}],
        "study": {"gpus": [2]},
    }
    scenario = workdir / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(sc))
    return ["run", str(scenario), "--no-plots", "--out", str(out)], out / "results.json", desc


def _two_nodes(topology: Path) -> int:
    from simcluster.topology import load_topology

    t = load_topology(str(topology), num_nodes=1)
    return t.ranks_per_node * (2 if getattr(t, "max_nodes", 2) >= 2 else 1)


def _cli_line(rng: random.Random, workdir: Path) -> tuple[list[str], Path | None, str]:
    tiny = workdir / "tiny.yaml"
    tiny.write_text(yaml.safe_dump(TINY))
    out = str(workdir / "out")
    weird = [
        "",
        "-1",
        "0",
        "nan",
        "inf",
        "1e999",
        "garbage",
        "/proc/x",
        str(workdir / "missing" / "x"),
        str(workdir),
        "x" * 5000,
        "..",
        "'",
        "[",
        "a=1,1",
        "tcp://256.0.0.1:1",
    ]
    w = rng.choice(weird)
    live = ROOT / "scenarios" / "references" / "live" / "epyc-2x1-r1.json"  # a good run beside
    lines = [
        ["run", str(tiny), "--out", w, "--no-plots"],
        ["run", w],
        ["run", str(tiny), "--network-model", w],
        ["run", str(tiny), "--max-memory", w, "--no-plots", "--out", out],
        ["topo", w, "--no-png"],
        ["topo", "puhti", "--nodes", w, "--no-png"],
        ["topo", "puhti", "--png", w],
        ["list", w],
        ["sweep", str(tiny), "--set", w, "--out", out, "--no-plots"],
        ["sweep", str(tiny), "--set", f"seed={w}", "--out", out, "--no-plots"],
        ["sweep", str(tiny), "--set", f"workload.batch_per_gpu={w}", "--out", out, "--no-plots"],
        ["sweep", str(tiny), "--set", f"topology.node.nics.bandwidth={w}", "--out", out,
         "--no-plots"],
        ["sweep", str(tiny), "--set", "seed=1", "--jobs", w, "--out", out, "--no-plots"],
        ["sweep", str(tiny), "--set", "seed=1", "--executor", w, "--out", out],
        ["sweep", str(tiny), "--set", "seed=1,2", "--executor", "dask", "--scheduler", w,
         "--out", out],
        ["validate", "--live", w, "--out", out, "--no-plot"],
        ["validate", "--live", str(live), w, "--out", out, "--no-plot"],
        ["validate", "--live", str(live), "--set", w, "--out", out, "--no-plot"],
        ["validate", "--references", w, "--out", out, "--no-plot"],
        ["validate", "--set", w, "--out", out],
        ["spmv-table", w],
        ["calibrate", "derive", "--from", w, "--target", "v100-sxm2-32gb", "--out", out],
        ["calibrate", "check", "--profile", w],
        ["calibrate", "nccl-tests", w, "--out", out + ".json"],
        ["calibrate", "nccl-tests", str(ROOT / "tests/data/all_reduce_2x_dgx_a100.log"),
         "--base-profile", w, "--out", out + ".json"],
        ["calibrate", "gloo", "--nproc", w, "--out", out + ".json"],
        ["trace-summary", w],
        ["nccl-tests", "--topology", "dgx-a100", "-b", w, "-e", "8M"],
        ["nccl-tests", "--topology", "dgx-a100", "-b", "8", "-e", w],
        ["nccl-tests", "--topology", "dgx-a100", "-f", w],
        ["nccl-tests", "--topology", "dgx-a100", "--nodes", w],
        ["nccl-tests", "--topology", "dgx-a100", "-g", w, "--profile", "a100-80gb-sxm"],
        ["nccl-tests", "--topology", "dgx-a100", "--algo", w],
        ["nccl-tests", "--topology", "dgx-a100", "--proto", w],
        ["nccl-tests", "--topology", w],
        ["nccl-tests", "--topology", "dgx-a100", "--network-profile", w],
        [w],
    ]  # fmt: skip
    if rng.random() < 0.15:  # --resume over a damaged points.csv / points.keys
        folder = workdir / "sweep"
        folder.mkdir()
        header = b"seed,schedule,gpus,nodes,iteration_time_s\n"
        damaged = rng.choice(
            [
                b"\xff\xfe" + header,
                header + b'1,"ddp\x00\n',
                b"a," + b"x" * 200_000 + b"\n",
                header + b"1,ddp,4,1,nan\n" * 3,
                header + b'"unterminated\n',
                bytes(rng.randrange(256) for _ in range(300)),
            ]
        )
        (folder / rng.choice(["points.csv", "points.keys"])).write_bytes(damaged)
        argv = ["sweep", str(tiny), "--set", "seed=1,2", "--out", str(folder), "--resume",
                "--no-plots"]  # fmt: skip
        return argv, None, "cli: sweep --resume over damaged files"
    argv = rng.choice(lines)
    return argv, None, "cli: " + " ".join(a[:40] for a in argv)


# ------------------------------------------------------------------------- driver


@contextlib.contextmanager
def inside(folder: Path):
    """Run with ``folder`` as the working directory: relative outputs land there."""
    import os

    old = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(old)


def run_one(kind: str, seed: int, bound_s: float = 60.0) -> dict[str, Any]:
    """Build and run input ``seed`` of ``kind``; its outcome as a record."""
    rng = random.Random(f"{kind}:{seed}")
    with tempfile.TemporaryDirectory(prefix="simcluster-fuzz-") as d:
        argv, results, desc = make_input(kind, rng, Path(d))
        cwd = Path(d) / "cwd"  # "--out .." lands in the temporary folder too
        cwd.mkdir()
        with inside(cwd):
            code, err, tb, secs = run_cli(argv, bound_s)
        outcome, detail = classify(code, err, tb, results, None if kind == "cli" else d)
    return {
        "kind": kind,
        "seed": seed,
        "input": desc,
        "outcome": outcome,
        "detail": detail,
        "traceback": tb if outcome == "TRACEBACK" else "",
        "seconds": round(secs, 3),
    }


FINDINGS = ("TRACEBACK", "HANG", "BAD-ACCEPT", "MESSY", "NO-FILE")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1000, help="inputs in all (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="first input's seed (default 0)")
    ap.add_argument(
        "--kinds", default=",".join(KINDS), help=f"comma-separated subset of {', '.join(KINDS)}"
    )
    ap.add_argument("--bound", type=float, default=60.0, help="seconds before an input is a hang")
    ap.add_argument("--json", help="write every input's record to this JSON file")
    ap.add_argument("--verbose", action="store_true", help="print each finding as it happens")
    args = ap.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        ap.error(f"unknown kind {bad}; known: {', '.join(KINDS)}")
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, resource.RLIM_INFINITY))
    except (ImportError, ValueError, OSError):  # pragma: no cover
        pass
    import os

    # partitions of mutated sparse DNNs go to a throw-away cache, not the user's
    cache = tempfile.TemporaryDirectory(prefix="simcluster-fuzz-cache-")
    os.environ["SIMCLUSTER_CACHE_DIR"] = cache.name
    records = []
    t0 = time.perf_counter()
    for i in range(args.count):
        kind = kinds[i % len(kinds)]
        rec = run_one(kind, args.seed + i // len(kinds), args.bound)
        records.append(rec)
        if args.verbose and rec["outcome"] in FINDINGS:
            print(f"{rec['outcome']}: {kind} seed {rec['seed']}: {rec['input']}: {rec['detail']}")
        if (i + 1) % 50 == 0:
            print(f"  {i + 1}/{args.count} inputs, {time.perf_counter() - t0:.0f} s", flush=True)
    wall = time.perf_counter() - t0
    table = Counter((r["kind"], r["outcome"]) for r in records)
    outcomes = ["ok", "error", "bug-report", *FINDINGS]
    print(f"\n{'kind':<16}" + "".join(f"{o:>11}" for o in outcomes))
    for k in kinds:
        print(f"{k:<16}" + "".join(f"{table[(k, o)]:>11}" for o in outcomes))
    total = Counter(r["outcome"] for r in records)
    print(f"{'all':<16}" + "".join(f"{total[o]:>11}" for o in outcomes))
    slowest = max(records, key=lambda r: r["seconds"]) if records else None
    print(
        f"{len(records)} inputs in {wall:.0f} s; slowest {slowest['seconds']:.1f} s "
        f"({slowest['kind']} seed {slowest['seed']})"
        if slowest
        else "no inputs"
    )
    tracebacks = {r["detail"] for r in records if r["outcome"] == "TRACEBACK"}
    for t in sorted(tracebacks):
        print(f"  traceback: {t}")
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1, allow_nan=False) + "\n")
    return 1 if any(total[f] for f in FINDINGS) else 0


if __name__ == "__main__":
    sys.exit(main())

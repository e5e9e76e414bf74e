"""Record a PyTorch trace of one training iteration for ``workload: {trace: FILE}``.

::

    python -m calibrate.trace --model resnet18-cifar --batch 16 --device cpu --out t.json
    python -m calibrate.trace --model torchvision:resnet50 --batch 32 --device cuda --out t.json
    python -m calibrate.trace --module my_pkg.models:build_model --input-shape 3,32,32 \\
        --batch 16 --out t.json

The model is one of:

* ``--model NAME``: a ResNet of the zoo built by :mod:`calibrate.models` (``resnet18``,
  ``resnet50-cifar``, ``wide_resnet50_2``, ...) or ``torchvision:NAME`` (needs the
  optional torchvision package, a release that matches the installed torch);
* ``--module PKG.MOD:FUNC``: ``FUNC()`` (or ``FUNC(num_classes)`` when it takes it)
  returns the user's ``nn.Module``.

One step is: ``zero_grad``, forward on a random batch (``--input-shape`` per sample,
float; ``--tokens VOCAB`` for integer token inputs), cross-entropy against random
labels (an output of shape ``(N, ..., C)`` is flattened to ``(N*..., C)``),
``backward``, SGD with momentum 0.9 (as ``calibrate.live`` trains). ``--warmup`` steps
run first, unprofiled; then ``--steps`` cycles of ``--unprofiled`` unprofiled steps, one
profiler warm-up step and one step recorded by ``torch.profiler.profile(record_shapes=
True)`` (one session, :func:`record`), written with ``export_chrome_trace``; each leaf
module's forward is marked ``record_function("module:NAME")`` so layers carry module
names. The unprofiled steps' seconds, taken between the recorded ones (a shared host's
speed drifts), and the profiler's measured cost per operator go into the header.
``--et FILE`` also writes the matching execution trace (``ExecutionTraceObserver``). The
trace gets a ``simcluster`` header (model, batch, device, precision, threads, torch
version, command, date).

``--timed N`` instead runs ``--warmup`` + N unprofiled steps and writes the seconds of
each and their median (the reference a replayed trace is checked against).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import importlib
import inspect
import json
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

__all__ = ["build_module", "Step", "main"]

SCHEMA = "simcluster-trace/1"


class ModelSpecError(ValueError):
    """A ``--model`` / ``--module`` that cannot be built (message says why)."""


def _torchvision(name: str, num_classes: int) -> nn.Module:
    try:
        tv_models = importlib.import_module("torchvision.models")
    except Exception as exc:  # ImportError, or a torchvision built for another torch
        raise ModelSpecError(
            f"--model torchvision:{name} needs torchvision, which is not importable here "
            f"({type(exc).__name__}: {exc}). Install a torchvision release built for torch "
            f"{torch.__version__}, or build the model yourself and pass "
            "--module your_pkg.your_mod:build_model"
        ) from None
    try:
        return tv_models.get_model(name, weights=None, num_classes=num_classes)
    except (ValueError, KeyError) as exc:
        known = ", ".join(sorted(tv_models.list_models())[:20])
        raise ModelSpecError(f"torchvision has no model {name!r} ({exc}); some: {known}") from None


def _from_module(spec: str, num_classes: int) -> nn.Module:
    if ":" not in spec:
        raise ModelSpecError(f"--module {spec!r}: write PACKAGE.MODULE:FUNCTION")
    mod_name, func_name = spec.split(":", 1)
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ModelSpecError(f"--module {spec!r}: cannot import {mod_name!r} ({exc})") from None
    func = getattr(mod, func_name, None)
    if not callable(func):
        raise ModelSpecError(f"--module {spec!r}: {mod_name} has no function {func_name!r}")
    params = inspect.signature(func).parameters
    model = func(num_classes) if params else func()
    if not isinstance(model, nn.Module):
        raise ModelSpecError(f"--module {spec!r}: returned {type(model).__name__}, not nn.Module")
    return model


def build_module(
    model: str | None, module: str | None, num_classes: int = 10
) -> tuple[nn.Module, str]:
    """``(nn.Module, description)`` for ``--model NAME`` or ``--module PKG.MOD:FUNC``."""
    if (model is None) == (module is None):
        raise ModelSpecError("give exactly one of --model and --module")
    if module is not None:
        return _from_module(module, num_classes), f"module {module}"
    assert model is not None
    if model.startswith("torchvision:"):
        return _torchvision(model.split(":", 1)[1], num_classes), model
    from .models import torch_model

    try:
        return torch_model(model, num_classes), model
    except ValueError as exc:
        raise ModelSpecError(
            f"--model {model!r}: {exc}; or torchvision:NAME, or --module PKG.MOD:FUNC"
        ) from None


def default_input_shape(model: str | None) -> tuple[int, ...]:
    """Per-sample input shape when none is given: the zoo's image side for its ResNets."""
    if model and not model.startswith("torchvision:"):
        from simcluster.workload.zoo import MODELS

        spec = MODELS.get(model.strip().lower())
        if spec is not None:
            return (3, spec.default_input_size, spec.default_input_size)
    return (3, 224, 224)


class Step:
    """One training step of ``module`` on a fixed random batch (same as calibrate.live)."""

    def __init__(
        self,
        module: nn.Module,
        batch: int,
        input_shape: tuple[int, ...],
        device: torch.device,
        tokens: int = 0,
        seed: int = 0,
    ) -> None:
        torch.manual_seed(seed)
        self.module = module.to(device).train()
        self.opt = torch.optim.SGD(self.module.parameters(), lr=0.01, momentum=0.9)
        gen = torch.Generator().manual_seed(seed)
        if tokens:
            self.x = torch.randint(0, tokens, (batch, *input_shape), generator=gen).to(device)
        else:
            self.x = torch.randn(batch, *input_shape, generator=gen).to(device)
        with torch.no_grad():
            out = self.module(self.x)
        classes = out.shape[-1]
        self.y = torch.randint(0, classes, out.shape[:-1], generator=gen).to(device)
        self.loss = nn.CrossEntropyLoss()
        self.device = device

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def __call__(self) -> None:
        self.opt.zero_grad(set_to_none=False)
        out = self.module(self.x)
        loss = self.loss(out.reshape(-1, out.shape[-1]), self.y.reshape(-1))
        loss.backward()
        self.opt.step()
        self.sync()


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def annotate_modules(module: nn.Module) -> list[Any]:
    """Mark each leaf module's forward with ``record_function("module:NAME")`` so the
    trace names layers after modules; returns the hook handles (``.remove()`` them)."""
    from torch.autograd.profiler import record_function

    handles: list[Any] = []
    for name, sub in module.named_modules():
        if not name or any(True for _ in sub.children()):
            continue
        open_: list[Any] = []

        def pre(_m, _inp, name=name, open_=open_):
            rf = record_function(f"module:{name}")
            rf.__enter__()
            open_.append(rf)

        def post(_m, _inp, _out, open_=open_):
            if open_:
                open_.pop().__exit__(None, None, None)

        handles += [sub.register_forward_pre_hook(pre), sub.register_forward_hook(post)]
    return handles


def record(
    step: Step,
    out: Path,
    et: Path | None,
    header: dict[str, Any],
    steps: int = 5,
    unprofiled: int = 2,
) -> dict[str, Any]:
    """Profile ``steps`` steps interleaved with unprofiled ones; write the Kineto trace.

    One profiler session with a schedule: each cycle is ``unprofiled`` unprofiled steps,
    one profiler warm-up step (profiled, events dropped) and one recorded step, so the
    trace and the unprofiled reference are taken under the same conditions, seconds
    apart (a shared host's speed drifts over minutes). Each recorded step is marked
    ``ProfilerStep#k`` and the reader uses the one of median total time. Leaf modules are
    marked (:func:`annotate_modules`) during the profiled steps only.

    Returns (and writes into the header as ``interleaved``) every step's wall seconds by
    kind, the operators per recorded step and the profiler's cost per recorded operator
    (:func:`_small_step_cost` over the median operator count of a recorded step, else
    :func:`profiler_cost`); the reader removes it once per operator. The steps' own
    profiled-less-unprofiled difference is kept as a cross-check only: on a shared host
    it is noisier than the cost itself.
    """
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU]
    if step.device.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    observer = ExecutionTraceObserver().register_callback(str(et)) if et else None
    plan = schedule(wait=unprofiled, warmup=1, active=1, repeat=steps)
    cycle = unprofiled + 2
    walls: list[tuple[int, float, float]] = []  # (position in the cycle, wall s, CPU s)
    handles: list[Any] = []
    cycles: list[dict[str, Any]] = []  # each recorded step's trace (one per cycle)
    tmp = Path(tempfile.mkdtemp(prefix="simcluster-trace-"))

    def ready(prof: Any) -> None:
        f = tmp / f"cycle{len(cycles)}.json"
        prof.export_chrome_trace(str(f))
        cycles.append(json.loads(f.read_text()))
        f.unlink()

    with warnings.catch_warnings(), profile(
        activities=acts, record_shapes=True, execution_trace_observer=observer, schedule=plan,
        on_trace_ready=ready,
    ) as prof:  # fmt: skip
        # each cycle's events are exported by ``ready`` before the profiler clears them
        warnings.filterwarnings("ignore", message=".*Profiler clears events")
        for i in range(steps * cycle):
            pos = i % cycle
            if pos == unprofiled:  # the profiler's warm-up step: mark modules from here
                handles = annotate_modules(step.module)
            t0, c0 = time.perf_counter(), time.thread_time()
            step()
            walls.append((pos, time.perf_counter() - t0, time.thread_time() - c0))
            if pos == cycle - 1:
                for h in handles:
                    h.remove()
                handles = []
            prof.step()
    tmp.rmdir()
    # one file: the first cycle's trace with every cycle's events (same time base)
    data = dict(cycles[0])
    data["traceEvents"] = [e for c in cycles for e in c.get("traceEvents", [])]
    out.parent.mkdir(parents=True, exist_ok=True)
    facts = _interleaved(walls, unprofiled, data, _small_step_cost(step))
    data["simcluster"] = {**header, "interleaved": facts}
    out.write_text(json.dumps(data))
    return facts


def _interleaved(
    walls: list[tuple[int, float, float]],
    unprofiled: int,
    data: dict[str, Any],
    step_cost: float | None = None,
) -> dict[str, Any]:
    """The interleaved recording's step times, operator count and profiler cost per op
    (from thread CPU time: another process taking the core adds wall time, not that)."""
    un = [t for pos, t, _ in walls if pos < unprofiled]
    prof = [t for pos, t, _ in walls if pos >= unprofiled]
    un_cpu = [c for pos, _, c in walls if pos < unprofiled]
    prof_cpu = [c for pos, _, c in walls if pos >= unprofiled]
    events = [e for e in data.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    marks = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    counts = [sum(1 for e in ops if m["ts"] <= e["ts"] < m["ts"] + m["dur"]) for m in marks]
    n_ops = statistics.median(counts) if counts else len(ops)
    overhead = statistics.median(prof_cpu) - statistics.median(un_cpu) if un_cpu else 0.0
    # the profiler's cost per operator: from the same step on a tiny batch (all the
    # operators, little compute), else from a loop of small ops
    if step_cost is not None and n_ops:
        per_op, how = step_cost / n_ops, "the same step at batch 2"
    else:
        per_op, how = profiler_cost(), "small aten::add calls"
    return {
        "unprofiled_per_cycle": unprofiled,
        "unprofiled_step_s": un,
        "profiled_step_s": prof,
        "unprofiled_median_s": statistics.median(un) if un else None,
        "profiled_median_s": statistics.median(prof) if prof else None,
        "unprofiled_cpu_s": un_cpu,
        "profiled_cpu_s": prof_cpu,
        # the steps' own difference: a cross-check, too noisy on a shared host to use
        "profiled_less_unprofiled_cpu_median_s": overhead,
        "operators_per_step": n_ops,
        "profiler_overhead_s_per_op": per_op,
        "profiler_overhead_measured_on": how,
        "method": "profiler_overhead_s_per_op: the same step on the first 2 samples of the "
        "batch (the same operators, little compute), profiled as recorded (module marks, "
        "record_shapes, after a profiler warm-up step) less unprofiled, least thread CPU "
        "time of 9 rounds each, over the cpu_op events of a recorded step; where that "
        "step cannot run, calibrate.trace.profiler_cost (a loop of small aten::add calls)",
    }


def _small_step_cost(step: Step, rounds: int = 9) -> float | None:
    """Seconds the profiler adds to one step, measured on ``step``'s first 2 samples
    (the same operators, a fraction of the compute, so host load moves it little):
    least thread CPU time profiled (module marks, ``record_shapes``, after a profiler
    warm-up step, as :func:`record` records) less least unprofiled, over ``rounds``
    alternations; None when the step cannot run on 2 samples."""
    from torch.profiler import ProfilerActivity, profile, schedule

    small = copy.copy(step)
    small.x, small.y = step.x[:2].contiguous(), step.y[:2].contiguous()
    acts = [ProfilerActivity.CPU]
    if step.device.type == "cuda":
        acts.append(ProfilerActivity.CUDA)

    def timed_step() -> float:
        c0 = time.thread_time()
        small()
        return time.thread_time() - c0

    try:
        timed_step()
        un, pr = [], []
        for _ in range(rounds):
            un.append(timed_step())
            handles = annotate_modules(small.module)
            try:
                plan = schedule(wait=0, warmup=1, active=1, repeat=1)
                with profile(activities=acts, record_shapes=True, schedule=plan) as prof:
                    small()
                    prof.step()
                    pr.append(timed_step())
                    prof.step()
            finally:
                for h in handles:
                    h.remove()
    except (RuntimeError, ValueError):  # e.g. a norm layer that needs more samples
        return None
    return max(0.0, min(pr) - min(un))


def profiler_cost(calls: int = 400, rounds: int = 7) -> float:
    """Seconds the CPU profiler (``record_shapes=True``) adds per recorded operator here.

    A loop of ``calls`` small ``torch.add`` calls, alternately unprofiled and profiled,
    ``rounds`` times each: (least thread CPU time profiled - least unprofiled) over the
    operators the profiler recorded in one loop, at least 0. The ops are tiny, so the
    profiler's cost is a large part of each call and host load (which only adds time)
    barely moves the least of each. Heavier operators record more input shapes: a
    lower bound for them.
    """
    from torch.profiler import ProfilerActivity, profile

    a = torch.ones(4)

    def loop() -> float:
        c0 = time.thread_time()
        for _ in range(calls):
            torch.add(a, a)
        return time.thread_time() - c0

    loop()
    un, pr, n = [], [], calls
    for _ in range(rounds):
        un.append(loop())
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            pr.append(loop())
        n = max(1, sum(1 for _ in prof.events()))
    return max(0.0, (min(pr) - min(un)) / n)


def make_header(
    step: Step,
    what: str,
    shape: tuple[int, ...],
    num_classes: int,
    tokens: int,
    threads: int,
    warmup: int,
    steps: int,
    command: str,
) -> dict[str, Any]:
    """The ``simcluster`` header of a trace of ``step`` (model, batch, device, ...)."""
    return {
        "schema": SCHEMA,
        "model": what,
        "batch": int(step.x.shape[0]),
        "input_shape": "x".join(map(str, shape)),
        "input_size": shape[-1],
        "num_classes": num_classes,
        "tokens": tokens,
        "device": _device_name(step.device),
        "precision": "fp32",
        "threads": threads if step.device.type == "cpu" else 0,
        "torch_threads": torch.get_num_threads(),
        "warmup": warmup,
        "steps": steps,
        "parameters": sum(p.numel() for p in step.module.parameters() if p.requires_grad),
        "torch": torch.__version__,
        "host": platform.node(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
    }


def timed(step: Step, n: int) -> list[float]:
    """Seconds of ``n`` unprofiled steps."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        out.append(time.perf_counter() - t0)
    return out


def _shape(text: str) -> tuple[int, ...]:
    try:  # 3,32,32 or 3x32x32; an empty piece ("3,x") is a typo, not a missing dimension
        dims = tuple(int(x) for x in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated integers") from None
    if not dims or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: positive integers")
    return dims


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m calibrate.trace", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="zoo ResNet name (calibrate.models) or torchvision:NAME")
    src.add_argument("--module", help="PKG.MODULE:FUNCTION returning an nn.Module")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--input-shape", type=_shape, help="per sample, e.g. 3,32,32")
    p.add_argument("--tokens", type=int, default=0, help="integer inputs below this vocab")
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3, help="unprofiled steps first")
    p.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    p.add_argument("--et", type=Path, help="also write the execution trace here")
    p.add_argument("--steps", type=int, default=5,
                   help="profiled steps (each layer: median over them)")  # fmt: skip
    p.add_argument("--unprofiled", type=int, default=2,
                   help="unprofiled steps before each profiled one (the reference)")  # fmt: skip
    p.add_argument("--timed", type=int, default=0, help="no trace: time N unprofiled steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--force", action="store_true", help="overwrite an existing --out / --et")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if (
        a.batch < 1
        or a.warmup < 0
        or a.timed < 0
        or a.threads < 1
        or a.steps < 1
        or a.unprofiled < 1
    ):
        print("calibrate.trace: --batch, --threads, --steps, --unprofiled >= 1; --warmup, "
              "--timed >= 0",
              file=sys.stderr)  # fmt: skip
        return 2
    if a.num_classes < 1 or a.tokens < 0:
        print("calibrate.trace: --num-classes >= 1; --tokens >= 0 (0: float inputs)",
              file=sys.stderr)  # fmt: skip
        return 2
    from simcluster.atomic import output_file_problem

    problem = output_file_problem((("--out", a.out), ("--et", a.et)), a.force)
    if problem:
        print(f"calibrate.trace: {problem}", file=sys.stderr)
        return 2
    if a.device == "cuda" and not torch.cuda.is_available():
        print("calibrate.trace: --device cuda but torch sees no GPU", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    try:
        module, what = build_module(a.model, a.module, a.num_classes)
    except ModelSpecError as exc:
        print(f"calibrate.trace: {exc}", file=sys.stderr)
        return 2
    shape = a.input_shape or default_input_shape(a.model)
    device = torch.device("cuda" if a.device == "cuda" else "cpu")
    try:  # the first forward shows whether the model takes this input (the user's module)
        step = Step(module, a.batch, shape, device, a.tokens, a.seed)
        for _ in range(a.warmup):
            step()
    except Exception as exc:  # noqa: BLE001 - any error of the model's own forward/backward
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"calibrate.trace: {what}: one training step on input shape "
              f"{tuple(shape)} x batch {a.batch} failed ({type(exc).__name__}: {first[:200]}); "
              "check --input-shape, --tokens and --num-classes", file=sys.stderr)  # fmt: skip
        return 2
    command = "python -m calibrate.trace " + " ".join(sys.argv[1:] if argv is None else argv)
    header = make_header(step, what, shape, a.num_classes, a.tokens, a.threads, a.warmup,
                         a.steps, command)  # fmt: skip
    if a.timed:
        secs = timed(step, a.timed)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(
            {**header, "schema": "simcluster-timed/1", "iterations_s": secs,
             "median_s": statistics.median(secs)}, indent=1) + "\n")  # fmt: skip
        print(f"calibrate.trace: {a.timed} steps, median {statistics.median(secs) * 1e3:.2f} ms; "
              f"wrote {a.out}")  # fmt: skip
        return 0
    facts = record(step, a.out, a.et, header, a.steps, a.unprofiled)
    print(f"calibrate.trace: {a.steps} profiled steps, each after {a.unprofiled} unprofiled; "
          f"unprofiled median {facts['unprofiled_median_s'] * 1e3:.2f} ms, profiled "
          f"{facts['profiled_median_s'] * 1e3:.2f} ms; profiler "
          f"{facts['profiler_overhead_s_per_op'] * 1e6:.2f} us per operator "
          f"({facts['operators_per_step']:g} per step)")  # fmt: skip
    print(f"calibrate.trace: wrote {a.out}" + (f" and {a.et}" if a.et else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

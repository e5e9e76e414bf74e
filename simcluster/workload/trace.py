"""Workloads read from a PyTorch profiler trace of one training iteration.

``workload: {trace: FILE}`` names what ``torch.profiler.profile(record_shapes=True)``
writes with ``export_chrome_trace`` (a Kineto trace, ``schemaVersion`` 1) for one
iteration on one device: forward, ``loss.backward()``, ``optimizer.step()``.
:func:`read_trace` turns it into a :class:`TraceModel`, a layer table like the zoo's
whose layers carry their measured seconds:

* **layers**: one per top-level forward operator (a ``cpu_op`` inside no other
  ``cpu_op``; user annotations such as ``ProfilerStep#1`` are looked through), in
  execution order. Its op class (conv, linear, norm, ...) comes from the ATen name; its
  name is ``INDEX:MODULE/OP`` where a ``record_function("module:MODULE")`` range (what
  ``calibrate.trace`` adds) encloses it, else ``INDEX:OP``.
* **forward seconds**: the operator's duration (CPU trace) or the summed duration of
  the GPU kernels its operators launched (``kernel`` events linked by ``External id``).
* **backward seconds**: every ``autograd::engine::evaluate_function: XBackward0`` node
  belongs to the forward layer whose operators carry its ``Sequence number``; time of
  backward operators tied to no layer (the loss gradient seed, ...) goes to the next
  layer backward reaches, and is reported.
* **gradients**: each ``AccumulateGrad`` node's tensor shape (``Input Dims``) is one
  parameter tensor of the layer whose backward ran last before it; the order of these
  nodes is the order in which gradients become ready (:attr:`TraceModel.backward_order`).
* **optimizer seconds**: the ``Optimizer.step#...`` and ``Optimizer.zero_grad#...``
  annotations (absent: the device profile times the step; reported).
* **CPU traces**: a layer also takes the host time (Python, dispatch) between the
  previous top-level operator's end and its own start, which the CPU spends in the
  step profiled or not; and each operator's duration loses the profiler's own cost
  per recorded operator it encloses, as ``calibrate.trace`` measured it while
  recording (header ``interleaved.profiler_overhead_s_per_op``: profiled less
  unprofiled steps of the same session, per operator; 0 when absent).
* **several steps** (``ProfilerStep#k`` marks, a profiler schedule): each is read, and
  the step of median total time is used, as a timed run reports its median iteration.

Units: seconds for times, elements for parameter counts, bytes for ``*_bytes``. The
times are for the batch the trace was recorded at (:attr:`TraceModel.batch`, from the
``simcluster`` header that ``python -m calibrate.trace`` adds; ``None`` if unknown).

A bad file (not JSON, truncated, not a Kineto trace, an unknown format version, a trace
of inference only, no backward pass, no tensor shapes) raises
:class:`~simcluster.errors.ConfigError` saying what is missing.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .model import FrozenDict, Layer, Model

__all__ = [
    "KINETO_SCHEMA_VERSIONS",
    "TraceModel",
    "read_trace",
    "op_class_of",
    "trace_summary",
]

#: Kineto ``schemaVersion`` values this reader understands
KINETO_SCHEMA_VERSIONS = (1,)

_BWD_PREFIX = "autograd::engine::evaluate_function: "
_ACCUMULATE = "torch::autograd::AccumulateGrad"
_OPT_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#")
_HOW = (
    "record one iteration with `python -m calibrate.trace`, or with "
    "torch.profiler.profile(record_shapes=True) around forward, loss.backward() and "
    "optimizer.step(), then export_chrome_trace"
)

# ATen name fragments -> op class (first match wins)
_OP_CLASSES: tuple[tuple[str, str], ...] = (
    ("conv", "conv"),
    ("scaled_dot_product", "attention"),
    ("attention", "attention"),
    ("lstm", "lstm"),
    ("gru", "lstm"),
    ("linear", "linear"),
    ("addmm", "linear"),
    ("matmul", "linear"),
    ("bmm", "linear"),
    ("aten::mm", "linear"),
    ("einsum", "linear"),
    ("batch_norm", "norm"),
    ("layer_norm", "norm"),
    ("group_norm", "norm"),
    ("instance_norm", "norm"),
    ("rms_norm", "norm"),
    ("pool", "pool"),
    ("embedding", "embedding"),
)


def op_class_of(name: str) -> str:
    """The :data:`~simcluster.workload.model.OP_CLASSES` entry for an ATen operator name."""
    low = name.lower()
    for frag, op in _OP_CLASSES:
        if frag in low:
            return op
    return "elementwise"


@dataclass(frozen=True)
class TraceModel(Model):
    """A layer table read from a trace; each layer's ``shape`` holds ``fwd_s`` and ``bwd_s``.

    Attributes (beyond :class:`Model`'s)
    ----------
    file: the trace file.
    device: what the trace ran on (``cpu`` or the GPU's name).
    batch: samples per iteration in the trace (``None`` when the file does not say).
    optimizer_s: measured optimizer seconds (``None``: not in the trace).
    backward_order: layer indices in the order backward reached them.
    notes: what was ignored or assumed, and why (one line each).
    header: the ``simcluster`` header written by ``calibrate.trace`` (or empty).
    """

    file: str = ""
    device: str = "unknown"
    batch: int | None = None
    optimizer_s: float | None = None
    backward_order: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    header: FrozenDict = field(default_factory=FrozenDict)

    def pass_seconds(self) -> dict[str, float]:
        """Measured seconds per pass: ``forward``, ``backward``, ``optimizer``."""
        return {
            "forward": sum(layer.shape["fwd_s"] for layer in self.layers),
            "backward": sum(layer.shape["bwd_s"] for layer in self.layers),
            "optimizer": self.optimizer_s or 0.0,
        }


# ----------------------------------------------------------------------------- reading


def _bad(file: str, path: str, value: Any, problem: str, allowed: Any = None) -> ConfigError:
    return ConfigError(file, path, value, problem, allowed)


def _load_json(path: Path, field: str = "workload.trace") -> Any:
    file = str(path)
    if path.is_dir():
        raise _bad(file, field, file, "is a folder, not a trace file", "a trace file (.json)")
    if not path.is_file():
        raise _bad(file, field, file, "no such trace file", "a trace file (.json)")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _bad(file, "<file>", file, f"cannot read the trace: {exc.strerror or exc}") from None
    from simcluster.inputs import decode

    text = decode(raw, file)  # a UTF-8 BOM is dropped; a non-UTF-8 byte is named
    if not text.strip():
        raise _bad(file, "<root>", None, "the file is empty (no JSON value in it)",
                   "a Kineto trace from export_chrome_trace")  # fmt: skip
    try:
        return json.loads(text)
    except RecursionError:
        raise _bad(
            file, "<json>", None, "nested too deeply", "a Kineto trace (a few levels deep)"
        ) from None
    except json.JSONDecodeError as exc:
        end = exc.pos >= len(text.rstrip()) - 1 or exc.msg.startswith("Unterminated string")
        why = "truncated JSON (the file ends early)" if end else f"not valid JSON: {exc.msg}"
        raise _bad(
            file, "<json>", f"line {exc.lineno}, column {exc.colno}", why,
            "a complete Kineto trace from export_chrome_trace",
        ) from None  # fmt: skip


def _check_format(data: Any, file: str) -> list[dict[str, Any]]:
    if isinstance(data, dict) and "nodes" in data and "schema" in data:
        raise _bad(
            file, "<root>", data.get("schema"),
            "this is an execution trace (ExecutionTraceObserver), not a Kineto trace",
            "the Kineto trace (export_chrome_trace) as workload.trace",
        )  # fmt: skip
    from simcluster.inputs import check_kind

    check_kind(data, file, "Kineto trace")  # after the execution trace's own message
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        got = type(data).__name__ if not isinstance(data, dict) else sorted(data)[:6]
        raise _bad(
            file, "traceEvents", got, "unknown trace format: no traceEvents list",
            "a Kineto trace from torch.profiler export_chrome_trace",
        )  # fmt: skip
    version = data.get("schemaVersion")
    if version not in KINETO_SCHEMA_VERSIONS:
        raise _bad(
            file, "schemaVersion", version, "unknown Kineto trace format version",
            [str(v) for v in KINETO_SCHEMA_VERSIONS],
        )  # fmt: skip
    return [e for e in data["traceEvents"] if isinstance(e, dict)]


_INT_ARGS = ("External id", "Sequence number", "Record function id", "Fwd thread id")


def _check_events(events: list[Any], file: str) -> None:
    """Refuse a complete (``ph: X``) event whose fields the reader uses have the wrong type
    or value: ``ts`` not finite, ``dur`` negative or not finite (microseconds; such an
    event would silently fall out of every step window), ``tid`` not a number or a
    string, ``args`` not a mapping, an id not an integer, ``Input Dims`` not lists of
    sizes >= 0. The error names the event by its index in ``traceEvents``."""
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        where = f"traceEvents[{i}]"
        for key in ("ts", "dur"):
            v = e.get(key)
            if not isinstance(v, int | float) or isinstance(v, bool):
                continue
            if not math.isfinite(v) or (key == "dur" and v < 0):
                what = "a start time" if key == "ts" else "a duration"
                allowed = "a finite number (us)" if key == "ts" else "a finite number >= 0 (us)"
                raise _bad(file, f"{where}.{key}", v, f"not {what}", allowed)
        tid = e.get("tid")
        if tid is not None and not isinstance(tid, int | float | str):
            raise _bad(file, f"{where}.tid", tid, "not a thread id", "an integer or a string")
        args = e.get("args")
        if args is None:
            continue
        if not isinstance(args, dict):
            raise _bad(file, f"{where}.args", args, "not a mapping", "a mapping of names to values")
        for key in _INT_ARGS:
            v = args.get(key)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                raise _bad(file, f"{where}.args.{key}", v, "not an integer", "an integer")
        dims = args.get("Input Dims")
        if dims is not None and not (
            isinstance(dims, list)
            and all(
                isinstance(d, list)
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in d)
                for d in dims
            )
        ):
            raise _bad(
                file, f"{where}.args.Input Dims", dims, "not a list of shapes",
                "lists of sizes >= 0, one per input ([] for a scalar)",
            )  # fmt: skip


@dataclass
class _Ev:
    """One complete (``ph: X``) event, in microseconds as Kineto writes them."""

    name: str
    cat: str
    ts: float
    dur: float
    tid: Any
    args: dict[str, Any]
    parent: _Ev | None = None
    children: list[_Ev] = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.ts + self.dur

    def descendants(self) -> Iterable[_Ev]:
        for c in self.children:
            yield c
            yield from c.descendants()

    def op_parent(self) -> _Ev | None:
        """Nearest enclosing ``cpu_op`` (annotations are looked through)."""
        p = self.parent
        while p is not None and p.cat != "cpu_op":
            p = p.parent
        return p

    def annotation(self, prefixes: tuple[str, ...]) -> _Ev | None:
        p = self.parent
        while p is not None:
            if p.cat == "user_annotation" and p.name.startswith(prefixes):
                return p
            p = p.parent
        return None


def _nest(events: list[_Ev]) -> None:
    """Set parent / children by time containment, thread by thread."""
    by_tid: dict[Any, list[_Ev]] = {}
    for e in events:
        by_tid.setdefault(e.tid, []).append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
        stack: list[_Ev] = []
        for e in evs:
            while stack and e.ts >= stack[-1].end - 1e-3:
                stack.pop()
            if stack:
                e.parent = stack[-1]
                stack[-1].children.append(e)
            stack.append(e)


def _numel(dims: Any) -> int | None:
    """Elements of a tensor of shape ``dims``; None when it is not a list of sizes >= 0."""
    if not isinstance(dims, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims
    ):
        return None
    return math.prod(dims) if dims else 1


def _shape_of(op: str, ev: _Ev) -> dict[str, Any]:
    """Per-layer shape facts the schedules read (convolution channels, kernel, groups)."""
    dims = ev.args.get("Input Dims") or []
    if op == "conv" and len(dims) >= 2 and len(dims[0]) == 4 and len(dims[1]) == 4:
        cin, cout, kh, kw = dims[0][1], dims[1][0], dims[1][2], dims[1][3]
        groups = max(1, cin // max(1, dims[1][1]))
        return {"cin": cin, "cout": cout, "kh": kh, "kw": kw, "groups": groups}
    if op == "linear" and len(dims) >= 2 and dims[1]:
        return {"in_features": dims[1][-1]}
    return {}


def _device_of(data: dict[str, Any], has_kernels: bool) -> str:
    if has_kernels:
        props = data.get("deviceProperties") or []
        if props and isinstance(props[0], dict) and props[0].get("name"):
            return str(props[0]["name"])
        return "gpu"
    return "cpu"


def _stamp(p: Path) -> int:
    try:
        return p.stat().st_mtime_ns
    except OSError:
        return 0


def read_trace(path: str | Path, execution_trace: str | Path | None = None) -> TraceModel:
    """The :class:`TraceModel` of a Kineto trace file (cached per file and change time).

    ``execution_trace``: the matching ``ExecutionTraceObserver`` file; gradient shapes the
    Kineto trace lacks (recorded without ``record_shapes``) are taken from its
    ``AccumulateGrad`` nodes, matched by record-function id.
    """
    p = Path(path)
    et = Path(execution_trace) if execution_trace is not None else None
    return _read(str(p), _stamp(p), str(et) if et else None, _stamp(et) if et else 0)


def _et_shapes(file: str) -> dict[int, Any]:
    """Record-function id -> gradient shape of each AccumulateGrad node of an execution trace."""
    data = _load_json(Path(file), "workload.execution_trace")
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise _bad(file, "nodes", type(data).__name__, "not an execution trace (no nodes list)",
                   "a file written by torch.profiler.ExecutionTraceObserver")  # fmt: skip
    out: dict[int, Any] = {}
    how = "a file written by torch.profiler.ExecutionTraceObserver"
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or node.get("name") != _ACCUMULATE:
            continue
        raw_attrs, inputs = node.get("attrs", []), node.get("inputs") or {}
        if not isinstance(raw_attrs, list):
            raise _bad(file, f"nodes[{i}].attrs", raw_attrs, "not a list of attributes", how)
        if not isinstance(inputs, dict) or not isinstance(inputs.get("shapes") or [], list):
            raise _bad(file, f"nodes[{i}].inputs", inputs, "not a mapping with a shapes list", how)
        attrs = {a.get("name"): a.get("value") for a in raw_attrs if isinstance(a, dict)}
        shapes = inputs.get("shapes") or [None]
        if isinstance(attrs.get("rf_id"), int):
            out[attrs["rf_id"]] = shapes[0]
    return out


@dataclass
class _Step:
    """What one iteration of the trace holds (seconds)."""

    fwd: list[_Ev]
    fwd_s: list[float]
    bwd_s: list[float]
    grads: list[list[int]]
    order: list[int]
    optimizer_s: float | None
    unattributed_s: float
    between_s: float


def _one_step(
    cpu: list[_Ev],
    kernels: list[_Ev],
    file: str,
    et: dict[int, Any] | None = None,
    per_op_us: float = 0.0,
) -> _Step:
    """Read one training iteration from its CPU events (and all GPU kernels).

    CPU trace: an operator's seconds are its duration less ``per_op_us`` (the
    profiler's measured cost) per ``cpu_op`` event it encloses, itself included, plus
    the host time since the previous top-level operator or optimizer annotation ended
    (Python and dispatch: the same CPU runs them, unprofiled too).
    """
    ops = [e for e in cpu if e.cat == "cpu_op"]
    if not ops:
        raise _bad(file, "traceEvents", 0, "no CPU operators (cpu_op events)", _HOW)
    tops = sorted((e for e in ops if e.op_parent() is None), key=lambda e: e.ts)
    bwd_nodes = [e for e in tops if e.name.startswith(_BWD_PREFIX)]
    has_seq = any("Sequence number" in e.args for e in ops if not e.name.startswith(_BWD_PREFIX))
    if not bwd_nodes:
        what = "a trace of inference only" if not has_seq else "no backward pass"
        raise _bad(
            file, "traceEvents", f"{len(ops)} operators", f"{what}: no autograd "
            "evaluate_function events, so no gradients to synchronise", _HOW,
        )  # fmt: skip
    if not has_seq:
        raise _bad(
            file, "traceEvents", "no Sequence number", "forward operators carry no "
            "autograd sequence numbers: backward cannot be tied to layers", _HOW,
        )  # fmt: skip
    bwd_start = bwd_nodes[0].ts
    opt_ids = {id(e) for e in tops if e.annotation(_OPT_PREFIXES) is not None}
    fwd = [e for e in tops if e.ts < bwd_start and id(e) not in opt_ids]
    rest = [e for e in tops if e.ts >= bwd_start and id(e) not in opt_ids]
    if not fwd:
        raise _bad(file, "traceEvents", 0, "no forward operators before backward", _HOW)

    # GPU: time per top-level op = its launched kernels' durations (linked by External id)
    kernel_time: dict[int, float] | None = None
    if kernels:
        ext_top: dict[Any, int] = {}
        for top in tops:
            for e in (top, *top.descendants()):
                ext = e.args.get("External id")
                if ext is not None:
                    ext_top[ext] = id(top)
        kernel_time = {}
        for k in kernels:
            owner = ext_top.get(k.args.get("External id"))
            if owner is not None:
                kernel_time[owner] = kernel_time.get(owner, 0.0) + k.dur

    opt_ann = [
        e for e in cpu
        if e.cat == "user_annotation" and e.name.startswith(_OPT_PREFIXES)
        and e.annotation(_OPT_PREFIXES) is None
    ]  # fmt: skip
    # host time before each unit (top-level operator outside the optimizer, or a
    # top-level optimizer annotation), counted with it on a CPU trace
    gap_before: dict[int, float] = {}
    if kernel_time is None:
        units = sorted([e for e in tops if id(e) not in opt_ids] + opt_ann, key=lambda e: e.ts)
        end = units[0].end if units else 0.0
        for u in units[1:]:
            gap_before[id(u)] = max(0.0, u.ts - end)
            end = max(end, u.end)

    def own_us(e: _Ev) -> float:
        """Duration less the profiler's cost for the operators it encloses (CPU)."""
        n = (e.cat == "cpu_op") + sum(1 for x in e.descendants() if x.cat == "cpu_op")
        return max(0.0, e.dur - per_op_us * n) + gap_before.get(id(e), 0.0)

    def secs(e: _Ev) -> float:
        us = kernel_time.get(id(e), 0.0) if kernel_time is not None else own_us(e)
        return us * 1e-6

    # the sequence numbers each forward layer's operators carry
    seq_layer: dict[int, int] = {}
    for i, e in enumerate(fwd):
        for x in (e, *e.descendants()):
            s = x.args.get("Sequence number")
            if isinstance(s, int) and x.args.get("Fwd thread id", 0) == 0:
                # an op that made no autograd node (an in-place update of a buffer)
                # carries the next op's number: the last op with a number made the node
                seq_layer[s] = i
    bwd_s = [0.0] * len(fwd)
    grads: list[list[int]] = [[] for _ in fwd]
    order: list[int] = []
    pending = unattributed = 0.0
    current: int | None = None
    no_shape = 0
    for e in rest:
        node = e.name[len(_BWD_PREFIX) :] if e.name.startswith(_BWD_PREFIX) else None
        if node is not None and _ACCUMULATE in node:
            inner = next((c for c in e.descendants() if c.name == _ACCUMULATE), e)
            dims = (inner.args.get("Input Dims") or [None])[0]
            if dims is None and et is not None:
                dims = et.get(inner.args.get("Record function id"))
            n = _numel(dims)
            owner = current if current is not None else len(fwd) - 1
            bwd_s[owner] += secs(e)
            if n is None:
                no_shape += 1
            else:
                grads[owner].append(n)
            continue
        layer = seq_layer.get(e.args.get("Sequence number")) if node is not None else None
        if layer is None:
            pending += secs(e)
            unattributed += secs(e)
            continue
        bwd_s[layer] += secs(e) + pending
        pending = 0.0
        current = layer
        if layer not in order:
            order.append(layer)
    if pending and current is not None:
        bwd_s[current] += pending
    if no_shape:
        raise _bad(file, "traceEvents", f"{no_shape} AccumulateGrad nodes without shapes",
                   "gradient sizes unknown: the trace has no tensor shapes",
                   "a trace recorded with record_shapes=True, or its execution trace "
                   "(workload.execution_trace)")  # fmt: skip
    if not any(grads):
        raise _bad(file, "traceEvents", "no AccumulateGrad", "no gradient reached a parameter: "
                   "nothing to synchronise (a frozen model?)", _HOW)  # fmt: skip
    order += [i for i in range(len(fwd) - 1, -1, -1) if i not in order]
    optimizer_s: float | None = None
    if opt_ann:
        if kernel_time is not None:
            optimizer_s = sum(secs(e) for e in tops if id(e) in opt_ids)
        else:
            optimizer_s = sum(own_us(e) for e in opt_ann) * 1e-6
    between = sum(gap_before.values()) * 1e-6
    return _Step(fwd, [secs(e) for e in fwd], bwd_s, grads, order, optimizer_s,
                 unattributed, between)  # fmt: skip


def _total(step: _Step) -> float:
    return sum(step.fwd_s) + sum(step.bwd_s) + (step.optimizer_s or 0.0)


@lru_cache(maxsize=32)
def _read(file: str, _stamp: int, et_file: str | None, _et_stamp: int) -> TraceModel:
    data = _load_json(Path(file))
    raw = _check_format(data, file)
    notes: list[str] = []
    et = _et_shapes(et_file) if et_file else None
    if et_file:
        notes.append(f"execution trace {et_file}: {len(et or {})} gradient shapes, used where "
                     "the Kineto trace has none")  # fmt: skip
    header = data.get("simcluster") if isinstance(data.get("simcluster"), dict) else {}
    _check_events(data["traceEvents"], file)
    per_op_us = _profiler_cost_us(header, file)
    evs = [
        _Ev(str(e.get("name", "")), str(e.get("cat", "")), float(e["ts"]), float(e["dur"]),
            e.get("tid"), e.get("args") or {})  # fmt: skip
        for e in raw
        if e.get("ph") == "X" and isinstance(e.get("ts"), int | float)
        and isinstance(e.get("dur"), int | float)
    ]  # fmt: skip
    cpu = [e for e in evs if e.cat in ("cpu_op", "user_annotation")]
    kernels = [e for e in evs if e.cat in ("kernel", "gpu_memcpy", "gpu_memset")]
    _nest(cpu)
    marks = sorted(
        (e for e in cpu if e.cat == "user_annotation" and e.name.startswith("ProfilerStep#")),
        key=lambda e: e.ts,
    )
    if len(marks) > 1:
        windows = [[e for e in cpu if m.ts <= e.ts < m.end] for m in marks]
        steps = [_one_step(w, kernels, file, et, per_op_us) for w in windows]
        shape = [(len(s.fwd), [e.name for e in s.fwd], s.grads) for s in steps]
        if any(x != shape[-1] for x in shape):
            steps = steps[-1:]
            notes.append(f"{len(marks)} profiler steps of different shapes: read the last")
        else:
            totals = ", ".join(f"{_total(x) * 1e3:.2f}" for x in steps)
            notes.append(f"{len(marks)} profiler steps ({totals} ms): read the median one "
                         "(robust to a busy host)")  # fmt: skip
    else:
        steps = [_one_step(cpu, kernels, file, et, per_op_us)]
    last = sorted(steps, key=_total)[(len(steps) - 1) // 2]
    fwd_s, bwd_s, optimizer_s = last.fwd_s, last.bwd_s, last.optimizer_s
    if kernels:
        notes.append("GPU trace: layer times are the kernels' durations; host-side operator "
                     "durations ignored")  # fmt: skip
        known = {e.args.get("External id") for e in cpu if e.cat == "cpu_op"}
        lost = [k for k in kernels if k.args.get("External id") not in known]
        if lost:
            ms = sum(k.dur for k in lost) / 1e3
            notes.append(f"ignored {len(lost)} GPU kernels ({ms:.3f} ms) launched by no "
                         "recorded operator (communication, copies)")  # fmt: skip
    unattributed = last.unattributed_s
    if unattributed:
        notes.append(
            f"{unattributed * 1e3:.3f} ms of backward tied to no forward layer "
            "(gradient seed, engine ops): added to the next layer backward reached"
        )
    if optimizer_s is None:
        notes.append("no Optimizer.step annotation: the optimizer step is timed by the device "
                     "profile")  # fmt: skip
    between = last.between_s
    if between and not kernels:
        notes.append(f"{between * 1e3:.3f} ms of host time between operators (Python, "
                     "dispatch) counted with the operator after it")  # fmt: skip
    if per_op_us and not kernels:
        notes.append(f"profiler cost {per_op_us:.3f} us per recorded operator (measured "
                     "while recording) taken off each operator")  # fmt: skip
    layers = []
    for i, e in enumerate(last.fwd):
        op = op_class_of(e.name)
        tensors = tuple(reversed(last.grads[i]))  # registration order: backward reversed
        shape = {"aten": e.name, "fwd_s": fwd_s[i], "bwd_s": bwd_s[i], **_shape_of(op, e)}
        mod = e.annotation(("module:",))
        name = f"{i}:{mod.name.removeprefix('module:')}/{e.name}" if mod else f"{i}:{e.name}"
        layers.append(Layer(name, op, sum(tensors), tensors, 0.0, 0, 0,
                            FrozenDict(shape)))  # fmt: skip
    batch = header.get("batch")
    batch = batch if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0 else None
    if batch is None:
        notes.append("batch size unknown (no simcluster header): taken as workload.batch_per_gpu")
    return TraceModel(
        name=f"trace:{Path(file).name}",
        input_size=int(header.get("input_size", 0) or 0),
        num_classes=int(header.get("num_classes", 0) or 0),
        layers=tuple(layers),
        file=file,
        device=str(header.get("device") or _device_of(data, bool(kernels))),
        batch=batch,
        optimizer_s=optimizer_s,
        backward_order=tuple(last.order),
        notes=tuple(notes),
        header=FrozenDict({k: v for k, v in header.items() if isinstance(v, str | int | float)}),
    )


def _profiler_cost_us(header: dict[str, Any], file: str) -> float:
    """Microseconds the profiler adds per recorded operator, as ``calibrate.trace``
    measured it while recording (``interleaved.profiler_overhead_s_per_op``); 0 if absent."""
    inter = header.get("interleaved")
    if not isinstance(inter, dict) or "profiler_overhead_s_per_op" not in inter:
        return 0.0
    v = inter["profiler_overhead_s_per_op"]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise _bad(file, "simcluster.interleaved.profiler_overhead_s_per_op", v,
                   "not a non-negative number of seconds", ">= 0")  # fmt: skip
    return float(v) * 1e6


_INDEX = re.compile(r"^\d+:")


def trace_summary(model: TraceModel) -> str:
    """What was read from a trace: layers, seconds per pass, gradients, what was ignored."""
    from collections import Counter

    passes = model.pass_seconds()
    grads = [n for layer in model.layers for n in layer.param_tensors]
    lines = [
        f"trace {model.file}",
        f"  device: {model.device}; batch: {model.batch or 'unknown'}"
        + (f"; model: {model.header['model']}" if "model" in model.header else ""),
        f"  layers: {len(model.layers)} forward operators, "
        f"{len(model.trainable_layers())} with parameters",
        "  kernel time per pass: "
        + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in passes.items())
        + (" (optimizer: not in the trace)" if model.optimizer_s is None else ""),
        f"  gradients: {len(grads)} tensors, {model.params:,} parameters, "
        f"{model.gradient_bytes(4):,} bytes in fp32",
    ]
    by_op = Counter()
    for layer in model.layers:
        by_op[layer.op] += layer.shape["fwd_s"] + layer.shape["bwd_s"]
    lines.append(
        "  forward + backward by op class: "
        + ", ".join(f"{op} {t * 1e3:.3f} ms" for op, t in by_op.most_common())
    )
    ready = [i for i in model.backward_order if model.layers[i].params > 0]
    shown = ", ".join(_INDEX.sub("", model.layers[i].name) + f"#{i}" for i in ready[:8])
    lines.append(f"  gradient-ready order (first {min(8, len(ready))}): {shown}")
    lines.append("  ignored / assumed:")
    lines += [f"    - {n}" for n in model.notes] or ["    - nothing"]
    return "\n".join(lines)

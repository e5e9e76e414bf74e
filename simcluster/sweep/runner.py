"""Running a grid of scenario variants: points, executors, points.csv, resume.

A sweep is a scenario and one or more axes ``PATH=V1,V2,...``; the grid is their
Cartesian product (the first axis varies slowest). Every point is one run of the
scenario with its values set (:mod:`simcluster.sweep.overrides`) and gives one
row per schedule x study size.

``results/<sweep>/points.csv`` gets a point's rows appended (one write, flushed
and fsynced) as soon as the point finishes, in whatever order the executor
finishes them; at the end of a complete sweep the file is rewritten in grid
order, so the final file depends only on the scenario, the grid and the seed.
``resume=True`` keeps the complete points already in the file (a point whose
rows were cut by a kill is run again) and runs the rest.

When ``study.gpus`` is an axis, each point alone holds one size, so its own
speedup is 1.0; ``speedup`` and ``efficiency`` are then computed across points
(:func:`cross_point_scaling`): against the smallest GPU count among the rows
that share every other axis value and the schedule, by time to train (strong,
single) or throughput (weak). Rows appended while the sweep runs leave both
cells empty; the final file has them.

Executors: ``local`` (a process pool of ``jobs`` workers; ``jobs=1`` runs in this
process) and ``dask`` (a ``distributed.Client`` on a scheduler address; points
carry their modified topology/profile files as data, so workers need only an
installed simcluster).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simcluster.errors import ConfigError, UserError
from simcluster.inputs import load_yaml, read_text
from simcluster.sweep.overrides import (
    PointSpec,
    build_point,
    materialize,
    parse_path,
    parse_value,
    split_values,
)

__all__ = [
    "Axis",
    "SweepResult",
    "parse_axis",
    "make_grid",
    "run_point",
    "run_sweep",
    "read_points",
    "cross_point_scaling",
    "METRIC_COLUMNS",
    "GPUS_AXIS",
]

#: the axis that spreads GPU counts over points (speedup is then across points)
GPUS_AXIS = "study.gpus"

Progress = Callable[[int, int, str], None]

#: largest grid a sweep accepts (each point is validated before any runs)
MAX_POINTS = 10_000

#: record fields copied into points.csv, in column order
METRIC_COLUMNS = (
    "schedule",
    "gpus",
    "nodes",
    "iteration_time_s",
    "compute_s",
    "comm_s",
    "exposed_comm_s",
    "step_time_s",
    "step_compute_s",
    "step_comm_s",
    "partial_step_time_s",
    "throughput_samples_per_s",
    "time_to_train_s",
    "speedup",
    "efficiency",
    "inter_node_bytes",
    "profile",
    "network_profile",
)


@dataclass(frozen=True)
class Axis:
    """One swept field and its values (parsed YAML scalars)."""

    path: str
    values: tuple[Any, ...]


def parse_axis(text: str) -> Axis:
    """``"workload.batch_per_gpu=64,128"`` -> Axis; bad syntax is a ConfigError."""
    if "=" not in text:
        raise ConfigError(None, "--set", text, "expected PATH=V1,V2,...", "PATH=V1,V2,...")
    path, _, rhs = text.partition("=")
    path = path.strip()
    parse_path(path)  # syntax check
    values = [parse_value(v) for v in split_values(rhs)]
    if not values:
        raise ConfigError(None, f"--set {path}", rhs, "no values given", "V1,V2,...")
    if len({json.dumps(v, default=str) for v in values}) != len(values):
        raise ConfigError(None, f"--set {path}", rhs, "a value is repeated")
    return Axis(path, tuple(values))


def make_grid(axes: Sequence[Axis]) -> list[dict[str, Any]]:
    """The Cartesian product of the axes as path -> value dicts (first axis slowest)."""
    paths = [a.path for a in axes]
    if len(set(paths)) != len(paths):
        dup = next(p for p in paths if paths.count(p) > 1)
        raise ConfigError(None, "--set", dup, "the same field is swept twice")
    if not axes:
        return [{}]
    count = math.prod(len(a.values) for a in axes)
    if count > MAX_POINTS:
        raise ConfigError(
            None, "--set", f"{count:,} points", "grid too large", f"at most {MAX_POINTS:,} points"
        )
    return [
        dict(zip(paths, combo, strict=True))
        for combo in itertools.product(*(a.values for a in axes))
    ]


def _cell(v: Any) -> str:
    """A CSV cell: floats at full precision, so a rerun writes the same bytes."""
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, list | dict | tuple):
        return json.dumps(v, default=str)
    return "" if v is None else str(v)


def run_point(point: PointSpec, workdir: str) -> list[dict[str, Any]]:
    """Simulate one point; its rows (swept values first, then METRIC_COLUMNS)."""
    from simcluster.report.sanity import check_records
    from simcluster.study import run_scenario

    sc = materialize(point, Path(workdir))
    result = run_scenario(sc)
    check_records(result.records, f"point {_values_key(point.values)}")
    rows = []
    for rec in result.records:
        row = {k: _cell(v) for k, v in point.values.items()}
        row.update({k: _cell(rec.get(k)) for k in METRIC_COLUMNS})
        rows.append(row)
    return rows


def _remote_point(point: PointSpec) -> list[dict[str, Any]]:
    """Dask task: write the point's files in the worker's temp folder, then run it."""
    return run_point(point, str(Path(tempfile.gettempdir()) / "simcluster-sweep-files"))


@dataclass
class SweepResult:
    out: Path
    columns: list[str]
    rows: list[dict[str, str]]
    points: int
    ran: int
    skipped: int
    axes: list[Axis] = field(default_factory=list)


def read_points(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Columns and rows of a points.csv; a line cut by a kill is dropped."""
    text = read_text(path, "points file")
    if not text.strip():
        return [], []
    complete = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
    try:
        lines = list(csv.reader(io.StringIO(complete)))
    except csv.Error as exc:
        raise ConfigError(
            str(path), "<root>", None, f"not a points file ({exc})", "remove it or use --out"
        ) from None
    if not lines:
        return [], []
    header, body = lines[0], lines[1:]
    rows = [dict(zip(header, r, strict=True)) for r in body if len(r) == len(header)]
    return header, rows


def _csv_text(columns: Sequence[str], rows: Sequence[dict[str, Any]], header: bool) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    if header:
        w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def _append(path: Path, text: str) -> None:
    with path.open("a", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def _expected_rows(sc) -> int:
    return len(sc.schedules) * len(sc.study.gpus)


def load_base(scenario_path: str | Path) -> dict[str, Any]:
    """The scenario file as a mapping (checked as a whole by materialize later)."""
    p = Path(scenario_path)
    if not p.exists():
        from simcluster.paths import no_such_scenario

        raise UserError(no_such_scenario(p))
    data = load_yaml(p, "scenario file")
    if not isinstance(data, dict):
        raise ConfigError(str(p), "<root>", type(data).__name__, "a scenario is a mapping")
    # A relative topology/profile path is relative to where the command runs, as in `run`.
    return data


def run_sweep(
    scenario_path: str | Path,
    axes: Sequence[Axis],
    out: str | Path | None = None,
    executor: str = "local",
    jobs: int = 1,
    scheduler: str | None = None,
    resume: bool = False,
    progress: Progress | None = None,
    client: Any = None,
    max_memory_gb: float | None = None,
) -> SweepResult:
    """Run every point of the grid not yet in points.csv; see the module doc."""
    if executor not in ("local", "dask"):
        raise ConfigError(None, "--executor", executor, "unknown executor", ["local", "dask"])
    if jobs < 1:
        raise ConfigError(None, "--jobs", jobs, "out of range", "a value >= 1")
    if executor == "dask" and client is None:
        if not scheduler:
            raise ConfigError(
                None, "--scheduler", None, "missing: --executor dask needs a scheduler address",
                "tcp://HOST:8786 (start one with `dask scheduler`)",
            )  # fmt: skip
        check_scheduler(scheduler)
    if executor == "local" and scheduler:  # it would be ignored: the points run here
        raise ConfigError(
            None, "--scheduler", scheduler, "only used with --executor dask", "--executor dask"
        )
    source = str(scenario_path)
    base = load_base(scenario_path)
    grid = make_grid(axes)
    name = str(base.get("name", Path(source).stem))
    out_dir = Path(out) if out else Path("results") / f"{name}-sweep"
    from simcluster.report.outdir import prepare_output_dir, write_text_atomic

    out_dir = prepare_output_dir(out_dir)
    points = [build_point(base, values, source) for values in grid]
    # Validate every point before running any: a bad value stops the sweep at once.
    from simcluster.sizing import check_size

    scenarios = []
    expected = []
    prints: dict[str, str] = {}  # values key -> fingerprint of everything the point reads
    for i, p in enumerate(points):
        if progress and i and i % 50 == 0:
            progress(i, len(points), "checking points")
        sc = materialize(p, out_dir)
        check_size(sc, max_memory_gb)
        scenarios.append(sc)
        expected.append(_expected_rows(sc))
        prints[_values_key(p.values)] = point_fingerprint(sc)
    keys_path = out_dir / KEYS_FILE
    across = any(a.path == GPUS_AXIS for a in axes)
    columns = [a.path for a in axes] + list(METRIC_COLUMNS)
    csv_path = out_dir / "points.csv"
    done_rows: dict[str, list[dict[str, str]]] = {}
    if csv_path.exists() and resume:
        header, rows = read_points(csv_path)
        if header and header != columns:
            raise UserError(
                f"{csv_path}: written by another sweep (columns {', '.join(header[:4])}, ...); "
                "use another --out or remove the file"
            )
        by_key: dict[str, list[dict[str, str]]] = {}
        for r in rows:
            by_key.setdefault(_row_key(r, axes), []).append(r)
        old_prints = read_keys(keys_path)
        for p, n in zip(points, expected, strict=True):
            k = _values_key(p.values)
            # a point is reused only if its inputs (scenario, files, version) are unchanged
            if len(by_key.get(k, [])) == n and old_prints.get(k) == prints[k]:
                done_rows[k] = by_key[k][:n]
    # Rewrite the file with the complete points only (drops a point cut by a kill).
    kept = [r for p in points for r in done_rows.get(_values_key(p.values), [])]
    write_text_atomic(csv_path, _csv_text(columns, kept, header=True))
    write_text_atomic(keys_path, _keys_text([k for k in prints if k in done_rows], prints))
    todo = [(i, p) for i, p in enumerate(points) if _values_key(p.values) not in done_rows]
    total = len(points)
    finished = total - len(todo)
    if progress:
        progress(finished, total, "resumed" if finished else "starting")

    def record(p: PointSpec, rows: list[dict[str, Any]]) -> None:
        nonlocal finished
        if across:  # known only once every size has run
            rows = [{**r, "speedup": "", "efficiency": ""} for r in rows]
        done_rows[_values_key(p.values)] = rows
        _append(csv_path, _csv_text(columns, rows, header=False))
        _append(keys_path, _keys_text([_values_key(p.values)], prints))
        finished += 1
        if progress:
            label = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in p.values.items()) or "point"
            progress(finished, total, label)

    if todo:
        if executor == "dask":
            _run_dask(todo, scheduler, client, record)
        elif jobs == 1 or len(todo) == 1:
            for _, p in todo:
                record(p, run_point(p, str(out_dir)))
        else:
            _run_pool(todo, jobs, str(out_dir), record)
    ordered = [r for p in points for r in done_rows[_values_key(p.values)]]
    if across:
        kinds = {
            _values_key(p.values): sc.study.kind for p, sc in zip(points, scenarios, strict=True)
        }
        ordered = cross_point_scaling(ordered, axes, kinds)
    write_text_atomic(csv_path, _csv_text(columns, ordered, header=True))
    write_text_atomic(keys_path, _keys_text([_values_key(p.values) for p in points], prints))
    meta = {
        "scenario": source,
        "axes": [{"path": a.path, "values": list(a.values)} for a in axes],
        "points": total,
        "rows": len(ordered),
    }
    write_text_atomic(
        out_dir / "sweep.json", json.dumps(meta, indent=2, default=str, allow_nan=False) + "\n"
    )
    return SweepResult(out_dir, columns, ordered, total, len(todo), total - len(todo), list(axes))


def cross_point_scaling(
    rows: Sequence[dict[str, str]], axes: Sequence[Axis], kinds: dict[str, str]
) -> list[dict[str, str]]:
    """Rows with ``speedup`` and ``efficiency`` against the smallest GPU count.

    Rows are grouped by schedule and every axis value except ``study.gpus``; in a
    group the row with the fewest GPUs is the baseline: speedup = its time to
    train / the row's (throughput ratio for a weak study, ``kinds`` by point key),
    efficiency = speedup x baseline GPUs / the row's GPUs.
    """
    others = [a for a in axes if a.path != GPUS_AXIS]

    def group(r: dict[str, str]) -> str:
        return json.dumps([r.get("schedule", "")] + [r.get(a.path, "") for a in others])

    base: dict[str, dict[str, str]] = {}
    for r in rows:
        g = group(r)
        if g not in base or int(r["gpus"]) < int(base[g]["gpus"]):
            base[g] = r
    out = []
    for r in rows:
        b = base[group(r)]
        kind = kinds.get(_row_key(r, axes), "strong")
        if kind == "weak":
            speedup = float(r["throughput_samples_per_s"]) / float(b["throughput_samples_per_s"])
        else:
            speedup = float(b["time_to_train_s"]) / float(r["time_to_train_s"])
        eff = speedup * int(b["gpus"]) / int(r["gpus"])
        out.append({**r, "speedup": _cell(speedup), "efficiency": _cell(eff)})
    return out


#: beside points.csv: one line per finished point, ``values key <TAB> fingerprint``
KEYS_FILE = "points.keys"


def point_fingerprint(sc: Any) -> str:
    """SHA-256 of everything that determines a point's rows.

    The validated scenario (every field, defaults included), the bytes of the
    topology, device profile and network profile files it names, and the
    simcluster version: change any of them and ``--resume`` runs the point again.
    """
    import hashlib

    from simcluster import __version__
    from simcluster.paths import network_profiles_dir, profiles_dir, topologies_dir

    def content(name: str, folder: Path, suffixes: tuple[str, ...]) -> str:
        p = Path(name)
        path = p if p.suffix in suffixes and p.is_file() else folder / f"{name}{suffixes[0]}"
        try:
            return hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return "?"

    blob = {
        "scenario": sc.model_dump(mode="json", exclude={"source", "output"}),
        "topology": content(sc.topology, topologies_dir(), (".yaml", ".yml")),
        "profile": content(sc.profile, profiles_dir(), (".json",)),
        "network_profile": content(sc.network_profile, network_profiles_dir(), (".json",)),
        "simcluster": __version__,
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()


def read_keys(path: Path) -> dict[str, str]:
    """values key -> fingerprint from a points.keys file (missing file: empty)."""
    if not path.exists():
        return {}
    out = {}
    for line in read_text(path, "points keys file").splitlines():
        key, sep, digest = line.rpartition("\t")
        if sep and len(digest) == 64:
            out[key] = digest
    return out


def _keys_text(keys: Sequence[str], prints: dict[str, str]) -> str:
    return "".join(f"{k}\t{prints[k]}\n" for k in keys)


def _values_key(values: dict[str, Any]) -> str:
    return json.dumps({k: _cell(v) for k, v in values.items()})


def _row_key(row: dict[str, str], axes: Sequence[Axis]) -> str:
    return json.dumps({a.path: row.get(a.path, "") for a in axes})


def _run_pool(todo, jobs: int, workdir: str, record) -> None:
    from concurrent.futures import FIRST_COMPLETED, wait

    from simcluster.workers import process_pool

    with process_pool(min(jobs, len(todo))) as pool:
        futures = {pool.submit(run_point, p, workdir): p for _, p in todo}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in sorted(done, key=lambda f: _values_key(futures[f].values)):
                    record(futures[f], f.result())
        except BaseException:
            for f in pending:
                f.cancel()
            raise


_SCHEDULER = re.compile(r"^(?:(?:tcp|tls|ucx|ws|wss)://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")


#: seconds to wait for a dask scheduler to answer before the sweep gives up with an error
CONNECT_TIMEOUT_S = 10


def check_scheduler(address: str | None) -> None:
    """A dask scheduler address must look like ``[tcp://]HOST:PORT``; else ConfigError."""
    if address is None:
        return
    host = address.split("://", 1)[-1].rsplit(":", 1)[0]
    octets = host.split(".")
    bad_ip = (
        len(octets) == 4 and all(o.isdigit() for o in octets) and any(int(o) > 255 for o in octets)
    )  # a dotted quad past 255 is no host: connecting would wait out the timeout
    if not _SCHEDULER.match(address) or not 0 < int(address.rsplit(":", 1)[1]) < 65536 or bad_ip:
        raise ConfigError(
            None, "--scheduler", address, "not a scheduler address", "tcp://HOST:PORT"
        )


def _run_dask(todo, scheduler: str | None, client: Any, record) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:  # pragma: no cover - dask is a dependency
        raise UserError("--executor dask needs the 'distributed' package") from None
    own = client is None
    if own:
        if not scheduler:
            raise ConfigError(
                None,
                "--scheduler",
                None,
                "missing: --executor dask needs a scheduler address",
                "tcp://HOST:8786 (start one with `dask scheduler`)",
            )
        check_scheduler(scheduler)
        try:
            print(
                f"simcluster: connecting to the dask scheduler {scheduler} "
                f"(up to {CONNECT_TIMEOUT_S} s)",
                file=sys.stderr,
            )
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except (OSError, ValueError, TypeError) as exc:
            raise UserError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
    try:
        points = [p for _, p in todo]
        futures = client.map(_remote_point, points, pure=False)
        index = {f.key: p for f, p in zip(futures, points, strict=True)}
        for f in as_completed(futures):
            record(index[f.key], f.result())
    finally:
        if own:
            client.close()


def is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except (TypeError, ValueError):
        return False

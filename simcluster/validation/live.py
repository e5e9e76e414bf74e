"""Validating against a live run of ``calibrate/live``: same ops, simulated, phase by phase.

The live JSON holds, per pattern and rank, every measured iteration's ops in order:
compute phases (seconds) and collectives (op, groups, bytes). Each iteration is
rebuilt as one program per rank where every op waits for the previous one, as the
live program ran them, and simulated:

- gloo runs: a collective is a rendezvous of its group (it ends when the last rank
  arrives) followed by the seconds of :class:`simcluster.network.gloo.GlooModel`
  (messages and bytes of gloo's algorithm, per-message and per-byte costs and a
  wake-up cost per call, per op and process count; per size where the sweep timed
  calls right after compute, ``wake_by_bytes``) from the run's own sweep
  (``calibrate.live`` measures it on its processes before the patterns; the
  constants are refitted from the samples the run stores by this version's fit,
  :func:`simcluster.network.gloo.fit_worlds`; a sweep
  without ``wake_by_bytes`` takes the ``gloo-host`` profile's, scaled by the sharing
  factors), else from the ``gloo-host`` network profile (``simcluster calibrate
  gloo``); the constants
  are scaled by the host's CPU-sharing factor measured around each pattern over the
  one measured at the sweep;
- other backends, or gloo without a model: a ``localhost`` cluster whose links have
  the bandwidth and per-message overhead of the run's allreduce calibration (ring:
  ``t = a + n b`` gives a link rate ``2 (P-1) / (P b)`` and ``a / (2 (P-1))`` per step);
- compute phases ``forward``, ``backward`` and ``optimizer`` are predicted from a
  device profile measured on this CPU (``simcluster calibrate``) when one is found
  (or named), times the CPU-sharing factor (calibrate.gloo's job on every process at
  once over its thread CPU time alone, measured before and after each pattern) and
  times the host's speed then (that job's thread CPU time alone over the profile's
  seconds for it: on a shared virtual machine a CPU second does less work when the
  host is busy); the packing, top-k, decompression and H-SADMM consensus phases
  (``pack``, ``sparsify``, ``decompress``, ``dual``, ``projection``, ``compress``) are
  predicted the same way from the profile's kernel families, with the tensor sizes
  rebuilt from the run's config and model (:mod:`simcluster.validation.live_kernels`);
  any other compute phase is *replayed*: its measured time is put into the program
  and it is not scored;
- a gloo run whose file gives its host's cores (``machine.cpus``) is simulated on those
  cores shared by the ranks' compute and collectives
  (:mod:`simcluster.validation.host_sharing`: a rank blocked at a rendezvous frees its
  core, ranks that leave a call first and compute slow the ones still in it); the
  durations above are its reference, at every process active.

Scored phases are the collectives, the predicted compute phases and the whole
iteration, as signed relative errors of the mean per iteration. A compute phase is
the mean over the ranks that run it; a collective phase is, per call, the least time
over its ranks (from the last rank's arrival to the end: the wait for a late rank
is not the collective's cost), summed over the calls. Constants come from
microbenchmarks of the same processes, never from the phases compared.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simcluster.errors import ConfigError, UserError, did_you_mean

__all__ = [
    "LiveReport",
    "PhaseResult",
    "validate_live",
    "validate_series",
    "check_repeats",
    "combine",
    "live_files",
    "link_costs",
]

PREDICTED_COMPUTE = ("forward", "backward", "optimizer")


@dataclass
class PhaseResult:
    pattern: str
    phase: str
    measured: float
    simulated: float
    source: str  # "network" | "profile" | "replayed" | "iteration"
    #: over repeated runs: (least, greatest) measured seconds; measured is their median
    spread: tuple[float, float] | None = None

    @property
    def scored(self) -> bool:
        return self.source != "replayed"

    @property
    def error(self) -> float:
        return (self.simulated - self.measured) / self.measured if self.measured else 0.0


@dataclass
class LiveReport:
    file: str
    config: dict[str, Any]
    network: str
    device: str
    link: dict[str, float]
    phases: list[PhaseResult] = field(default_factory=list)
    gloo: Any = None

    def scored(self) -> list[PhaseResult]:
        return [p for p in self.phases if p.scored]

    #: repeated runs this report is the median of (1: one run)
    runs: int = 1

    def comm_errors(self) -> list[float]:
        return [abs(p.error) for p in self.phases if p.source == "network"]

    def iteration_errors(self) -> list[float]:
        return [abs(p.error) for p in self.phases if p.source == "iteration"]

    def summary_line(self) -> str:
        """Median |error| of the collective phases and of the iterations, worst iteration."""
        parts = []
        errs = self.comm_errors()
        if errs:
            parts.append(
                f"collective phases: median |err| {statistics.median(errs) * 100:.1f}%, "
                f"max {max(errs) * 100:.1f}% over {len(errs)}"
            )
        its = self.iteration_errors()
        if its:
            parts.append(
                f"iterations: median |err| {statistics.median(its) * 100:.1f}%, "
                f"worst {max(its) * 100:.1f}% over {len(its)} patterns"
            )
        return "; ".join(parts)

    def table(self) -> str:
        from simcluster.report import format_table, human_seconds

        c = self.config
        runs = f" (median of {self.runs} runs)" if self.runs > 1 else ""
        head = (
            f"live run {self.file}{runs}: {c['world_size']} {c['backend']} ranks, "
            f"{c['nodes']} node(s) x {c['ranks_per_node']}, {c['model']} batch {c['batch']}, "
            f"{c['iterations']} measured iterations\n"
            f"  network: {self.network}; link {self.link['bandwidth'] / 1e9:.3g} GB/s, "
            f"{self.link['overhead_s'] * 1e6:.1f} us per message\n"
            f"  compute: {self.device}\n"
        )
        rows = []
        spread = any(p.spread for p in self.phases)
        for p in self.phases:
            err = f"{p.error * 100:+.1f}%" if p.scored else "(replayed)"
            row = [p.pattern, p.phase, human_seconds(p.measured)]
            if spread:
                lo, hi = p.spread or (p.measured, p.measured)
                row.append(f"{human_seconds(lo)} .. {human_seconds(hi)}")
            rows.append(row + [human_seconds(p.simulated), err, p.source])
        cols = ["pattern", "phase", "measured" + (" (median)" if spread else "")]
        cols += ["measured range"] if spread else []
        body = format_table(cols + ["simulated", "error", "source"], rows)
        line = self.summary_line()
        return head + body + (f"\n{line}" if line else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "network": self.network,
            "device": self.device,
            "link": self.link,
            "runs": self.runs,
            "phases": [
                {
                    "pattern": p.pattern,
                    "phase": p.phase,
                    "measured_s": p.measured,
                    "simulated_s": p.simulated,
                    "error": p.error if p.scored else None,
                    "source": p.source,
                    "measured_range_s": list(p.spread) if p.spread else None,
                }
                for p in self.phases
            ],
        }

    def case_results(self):
        """Scored phases as validation cases (for the summary and the scatter plot)."""
        from simcluster.validation.cases import Case, Metric
        from simcluster.validation.runner import CaseResult

        out = []
        paper = f"live {Path(self.file).stem}"
        for p in self.scored():
            # the names come from the user's file: an id holds only [A-Za-z0-9_.-]
            ident = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{Path(self.file).stem}-{p.pattern}-{p.phase}")
            case = Case(
                id=f"live-{ident}",
                what=f"{p.pattern}: {p.phase} seconds per iteration",
                source=self.file,
                scenario="calibrate/live",
                metric=Metric(kind="field", schedule=str(p.pattern), field=str(p.phase)),
                reference=p.measured if p.measured else 1e-12,
                unit="s",
                confidence="high",
            )
            profiles = self.network if p.source != "profile" else self.device
            out.append(CaseResult(paper, case, "ok", p.simulated, profiles))
        return out


def live_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def series_key(path: Path) -> str:
    """Repeats of one run share a name up to ``-rN``: ``localhost-8x1-r3`` -> ``localhost-8x1``."""
    import re

    return re.sub(r"-r\d+$", "", path.stem)


def combine(reports: list[LiveReport], name: str) -> LiveReport:
    """Repeated runs of one configuration as one report: per pattern and phase the
    median measured and the median simulated seconds (each run simulated with its own
    calibration), with the measured range kept."""
    if len(reports) == 1:
        return reports[0]
    first = reports[0]
    out = LiveReport(name, first.config, first.network, first.device, first.link)
    out.runs = len(reports)
    keys = list(dict.fromkeys((p.pattern, p.phase) for r in reports for p in r.phases))
    for key in keys:
        got = [p for r in reports for p in r.phases if (p.pattern, p.phase) == key]
        m = [p.measured for p in got]
        out.phases.append(
            PhaseResult(
                key[0],
                key[1],
                statistics.median(m),
                statistics.median(p.simulated for p in got),
                got[0].source,
                (min(m), max(m)),
            )
        )
    return out


def overall_line(reports: list[LiveReport]) -> str:
    """The live set's targets in one line: collective phases and iterations over all
    reports (each a median over its repeats)."""
    comm = [e for r in reports for e in r.comm_errors()]
    its = [(e, p.pattern, r.file) for r in reports for p in r.phases
           if p.source == "iteration" for e in [abs(p.error)]]  # fmt: skip
    parts = [f"live set over {len(reports)} configuration(s)"]
    if comm:
        parts.append(
            f"collective phases median |err| {statistics.median(comm) * 100:.1f}% "
            f"(max {max(comm) * 100:.1f}%, {len(comm)} phases)"
        )
    if its:
        worst = max(its)
        parts.append(
            f"iterations median |err| {statistics.median(e for e, *_ in its) * 100:.1f}%, "
            f"worst {worst[0] * 100:.1f}% ({worst[1]}, {worst[2]})"
        )
    return "; ".join(parts)


def validate_series(
    files: list[Path], workdir: str | Path, profile: str | None = None
) -> list[LiveReport]:
    """Every file validated, repeats (same folder, same name up to ``-rN``) combined by
    median. Checked before any file is simulated: every file is there, none is named
    twice (it would count twice in the median), and the repeats of one run share its
    configuration (:func:`check_repeats`)."""
    seen: dict[Path, Path] = {}
    for f in files:
        _check_file(f)
        again = seen.setdefault(f.resolve(), f)
        if again is not f:
            raise ConfigError(
                None, "--live", str(f), f"names the same file as {again} (a run given twice "
                "would count twice in the median)", "each live-run file once",
            )  # fmt: skip
    loaded = {f: _load(f) for f in files}  # a file that is no live run stops all, first
    groups: dict[tuple[Path, str], list[Path]] = {}
    for f in files:
        groups.setdefault((f.resolve().parent, series_key(f)), []).append(f)
    for fs in groups.values():
        check_repeats(fs, loaded)
    out = []
    for (_, key), fs in groups.items():
        reps = [validate_live(f, workdir, profile, data=loaded[f]) for f in fs]
        name = _shown(fs[0].parent / key) + (f"-median-of-{len(fs)}" if len(fs) > 1 else ".json")
        out.append(combine(reps, name) if len(fs) > 1 else reps[0])
    return out


#: ``config`` keys that may differ between repeats of one run: where and when each was
#: written, and the trace of rank 0 (taken before the patterns; older runs lack
#: ``trace_steps``)
PER_RUN_KEYS = frozenset({"out", "_load_start", "trace", "trace_steps"})


def check_repeats(files: list[Path], loaded: dict[Path, dict[str, Any]] | None = None) -> None:
    """Refuse repeats of one run (names that differ only in ``-rN``) whose configurations
    differ (another process count, model, batch, ... beyond :data:`PER_RUN_KEYS`) or that
    ran on another CPU model: their median would mix two experiments. ``loaded``: the
    files' data already read (:func:`_load`), by path."""
    if len(files) < 2:
        return
    loaded = loaded or {}
    first = loaded.get(files[0]) or _load(files[0])
    for f in files[1:]:
        data = loaded.get(f) or _load(f)
        pairs = (("config", first["config"], data["config"]),
                 ("machine", first.get("machine", {}), data.get("machine", {})))  # fmt: skip
        for where, a, b in pairs:
            if not isinstance(a, dict) or not isinstance(b, dict):
                continue  # the file's own check names it
            keys = ["cpu_model"] if where == "machine" else list(dict.fromkeys([*a, *b]))
            for k in keys:
                if k in PER_RUN_KEYS or a.get(k) == b.get(k):
                    continue
                raise ConfigError(
                    str(f), f"{where}.{k}", b.get(k),
                    f"differs from {files[0]}'s {a.get(k)!r}: repeats of one run (names that "
                    f"differ only in -rN, scored by their median) must share its {where}",
                    "the same configuration, or a name of its own (another NAME before -rN)",
                )  # fmt: skip


def _check_file(p: Path) -> None:
    """A live-run path that is no file: missing (with near names in its folder) or a
    folder."""
    from simcluster.paths import near_yaml_files

    if p.is_dir():
        raise ConfigError(str(p), "<root>", str(p), "is a folder, not a live-run file")
    if not p.exists():
        raise ConfigError(
            None, "--live", str(p), "no such live-run file", "a calibrate.live JSON file",
            near_yaml_files(p, (".json",)),
        )  # fmt: skip


def _load(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    from simcluster.inputs import load_json

    _check_file(p)
    data = load_json(p, "live-run file")
    from simcluster.inputs import check_kind

    check_kind(data, str(p), "live-run")
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != "simcluster-live/1":
        other = isinstance(schema, str) and schema.startswith("simcluster-live/")
        raise ConfigError(
            str(p), "schema", schema,
            "a live-run format this simcluster does not read" if other
            else "not a calibrate.live result",
            ["simcluster-live/1"],
        )  # fmt: skip
    for key in ("config", "calibration", "ranks"):
        if key not in data:
            raise ConfigError(str(p), key, None, "missing field")
    machine = data.get("machine", {})
    if not isinstance(machine, dict):  # was an AttributeError, 'malformed live-run file'
        allowed = "a mapping with cpus, cpu_model, ... as calibrate.live records it"
        raise ConfigError(str(p), "machine", machine, "not a mapping", allowed)
    return data


def link_costs(cal: dict[str, Any], world: int) -> dict[str, float]:
    """Link bandwidth (bytes/s) and per-message overhead (s) from the allreduce fit (ring)."""
    p = max(2, world)
    steps = 2 * (p - 1)
    b = cal["beta_s_per_byte"]
    if b <= 0:
        raise UserError(
            "live calibration has no bandwidth term (beta <= 0); rerun with larger sizes"
        )
    return {"bandwidth": steps / p / b, "overhead_s": cal["alpha_s"] / steps}


def _write_localhost(folder: Path, cfg: dict[str, Any], link: dict[str, float], file: str):
    """Topology and network profile files of this run; returns (topology, network) paths."""
    from simcluster.paths import topologies_dir

    base = yaml.safe_load((topologies_dir() / "localhost.yaml").read_text())
    r = int(cfg["ranks_per_node"])
    bw = float(link["bandwidth"])
    base["name"] = "localhost-live"
    base["max_nodes"] = int(cfg["nodes"])
    base.pop("default_nodes", None)
    node = base["node"]
    node["template"] = "single_gpu" if r == 1 else "pcie"
    node["gpus"] = r
    node["host"]["pcie"] = {"bandwidth": bw if r > 1 else bw * 100, "latency": 0.0}
    node["nics"]["bandwidth"] = bw
    node["nics"]["latency"] = 0.0
    base["fabric"]["switch_latency"] = 0.0
    base["assumptions"] = list(base.get("assumptions", [])) + [
        f"Link costs from the allreduce calibration in {file} (same processes, same run): "
        f"{bw / 1e9:.4g} GB/s per link, {link['overhead_s'] * 1e6:.2f} us per message.",
    ]
    folder.mkdir(parents=True, exist_ok=True)
    topo = folder / "localhost-live.yaml"
    topo.write_text(yaml.safe_dump(base, sort_keys=False))
    net = folder / "gloo-live.json"
    net.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "name": "gloo-live",
                "kind": "measured",
                "provenance": {
                    "description": "gloo over loopback TCP, from the live run's allreduce "
                    "calibration",
                    "source": file,
                    "method": "t = a + n b fitted on relative errors; ring: per-message "
                    "a / (2(P-1)), link rate 2(P-1) / (P b); efficiency 1 "
                    "(the rate is already achieved)",
                },
                "network": {
                    "per_message_overhead_s": link["overhead_s"],
                    "link_efficiency": {
                        k: 1.0
                        for k in (
                            "nvlink",
                            "nvswitch",
                            "pcie",
                            "infiniband",
                            "ethernet",
                            "qpi",
                            "memory",
                        )
                    },
                },
            },
            indent=2,
        )
    )
    return topo, net


def _find_cpu_profile(machine: dict[str, Any], name: str | None):
    """A measured device profile of this CPU: named, or found by cpu model."""
    from simcluster.compute import list_profiles, load_profile
    from simcluster.paths import profiles_dir

    if name:
        return load_profile(name)
    for cand in list_profiles():
        try:
            data = json.loads((profiles_dir() / f"{cand}.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue
        prov = data.get("provenance", {}) if isinstance(data, dict) else {}
        if data.get("kind") != "measured" or str(prov.get("device", "")) != "cpu":
            continue
        if prov.get("cpu_model") and prov.get("cpu_model") == machine.get("cpu_model"):
            try:
                return load_profile(cand)
            except UserError:
                continue
    return None


def _predicted_compute(profile, model_name: str, batch: int) -> dict[str, float]:
    """Seconds of the live step's forward (with the loss), backward and optimizer from
    the device profile alone: the layer sum, where the first layer takes no input
    gradient (the batch needs none), and the backward also adds every new weight
    gradient into ``.grad`` (``calibrate.live`` zeroes with ``set_to_none=False``): one
    elementwise pass reading both and writing one, 3 x the gradient bytes."""
    model = _live_model(model_name)
    fwd = sum(profile.layer_time(layer, batch, "fp32", "fwd") for layer in model.layers)
    bwd = sum(
        (profile.layer_time(layer, batch, "fp32", "bwd_input") if i else 0.0)
        + profile.layer_time(layer, batch, "fp32", "bwd_weight")
        for i, layer in enumerate(model.layers)
    )
    bwd += profile.elementwise_time(3.0 * model.gradient_bytes(4))
    return {
        "forward": fwd,
        "backward": bwd,
        "optimizer": profile.optimizer_time(model.params, "fp32"),
    }


#: ``calibrate.gloo``'s CPU-sharing job, as the profile prices it: conv 3x3 64->64 with
#: bias on 8 x 64 x 16 x 16, forward + weight gradient (its input takes none)
_JOB = {"cin": 64, "cout": 64, "k": 3, "side": 16, "batch": 8}


def _job_seconds(profile) -> float:
    """The profile's seconds for one call of the sharing test's CPU job."""
    from simcluster.workload.model import FMap, conv2d

    j = _JOB
    layer, _ = conv2d("sharing-job", FMap(j["cin"], j["side"], j["side"]), j["cout"], j["k"],
                      1, 1, bias=True)  # fmt: skip
    return profile.layer_time(layer, j["batch"], "fp32", "fwd") + profile.layer_time(
        layer, j["batch"], "fp32", "bwd_weight"
    )


def _host_speed(profile, tests: list[dict[str, Any]]) -> float | None:
    """This host's thread-CPU seconds per profile second at the run: the sharing test's
    job run alone (rank 0, thread CPU time, the profile's clock; median of each test's
    rounds, mean over ``tests``) over the profile's seconds for the same job. Thread CPU
    time on this (virtual) machine is not load-free: a core does less work per CPU
    second when the host is busy (the profile's canary, fp32 256^3 matmul: 0.184 ms at
    calibration, 0.21-0.28 ms on 2026-11-26 13:00 UTC, ``bench/live_compute_gap.py
    --breakdown``). None when a test lacks its job's repetitions or samples."""
    ratios = []
    for t in tests:
        m = re.match(r"\s*(\d+)\s*x\s*conv3x3", str(t.get("job", "")))
        alone = t.get("alone_s") or []
        if not m or not alone:
            return None
        ratios.append(statistics.median(float(a) for a in alone) / int(m.group(1)))
    return statistics.mean(ratios) / _job_seconds(profile) if ratios else None


def _programs(
    rank_ops: dict[int, list[dict[str, Any]]],
    compute: dict[str, float] | None,
    gloo=None,
    per_op: dict[tuple[str, str], list[float]] | None = None,
):
    """One rank class per rank; op id -> phase.

    With a gloo model, a collective is a rendezvous of its group (zero bytes, zero
    latency: it ends when the last rank arrives) followed by the model's seconds for
    the op on that group, so a rank's collective time is its wait plus the cost.
    Without one, the collective is lowered on the topology's links.
    """
    from simcluster.program import CollectiveCall, RankClass, collective
    from simcluster.program import compute as compute_op

    classes, phase_of = [], {}
    for r, ops in sorted(rank_ops.items()):
        prog = RankClass(f"r{r}", (r,))
        seen: dict[str, int] = {}
        counts: dict[tuple[str, str], int] = {}
        prev: tuple[str, ...] = ()
        for i, op in enumerate(ops):
            ph = op["phase"]
            k = seen.get(ph, 0)
            seen[ph] = k + 1
            if op["kind"] == "compute":
                t = _predicted(op, compute, per_op, counts)
                t = op["seconds"] if t is None else t
                oid = f"{ph}@{i}"
                prog.add(compute_op(oid, t, ph, prev))
            elif gloo is not None:
                groups = tuple(tuple(g) for g in op["groups"])
                arrive = f"{ph}#{k}~arrive"
                prog.add(collective(arrive, CollectiveCall("allreduce", groups, 0.0), ph, prev))
                phase_of[arrive] = ph
                mine = next(g for g in groups if r in g)
                # every call follows each rank's own compute: ranks arrive apart
                t = gloo.seconds(op["kind"], len(mine), float(op["nbytes"]), skewed=True)
                oid = f"{ph}#{k}"
                prog.add(compute_op(oid, t, ph, (arrive,), stream="comm"))
            else:
                groups = tuple(tuple(g) for g in op["groups"])
                call = CollectiveCall(op["kind"], groups, float(op["nbytes"]))
                oid = f"{ph}#{k}"
                prog.add(collective(oid, call, ph, prev))
            phase_of[oid] = ph
            prev = (oid,)
        classes.append(prog)
    return classes, phase_of


def _predicted(
    op: dict[str, Any],
    compute: dict[str, float] | None,
    per_op: dict[tuple[str, str], list[float]] | None,
    counts: dict[tuple[str, str], int],
) -> float | None:
    """Predicted seconds of a compute op, None when it is replayed: its ``(phase, role)``
    occurrence in ``per_op`` (``counts`` tracks the occurrences of one rank's iteration),
    else its phase's seconds in ``compute``."""
    key = (op["phase"], str(op.get("role", "all")))
    if per_op and key in per_op:
        k = counts.get(key, 0)
        counts[key] = k + 1
        return per_op[key][k]
    if compute is not None and op["phase"] in compute:
        return compute[op["phase"]]
    return None


def _shared_host(rank_ops, compute, gloo, cores: int, world: int, per_op=None):
    """One iteration on a host whose ``cores`` the ranks share
    (:mod:`simcluster.validation.host_sharing`): per rank ``(phase, key, seconds)``
    spans as :func:`_phase_value` reads them, and the end time.

    Predicted compute is CPU work priced at ``world`` active tasks (the sharing test);
    replayed compute keeps its measured seconds (it met the sharing it met). A
    collective costs the gloo model's seconds; its chain of messages is the share
    that is not its bytes (beta), and its members leave over the run's own sweep's
    ``exit_spread`` of it (0 where the sweep lacks the per-rank means)."""
    from simcluster.network.gloo import cost_terms
    from simcluster.validation.host_sharing import Task, simulate

    programs = {}
    for r, ops in rank_ops.items():
        seen: dict[str, int] = {}
        counts: dict[tuple[str, str], int] = {}
        tasks = []
        for i, op in enumerate(ops):
            ph = op["phase"]
            k = seen.get(ph, 0)
            seen[ph] = k + 1
            if op["kind"] == "compute":
                t = _predicted(op, compute, per_op, counts)
                predicted = t is not None
                t = op["seconds"] if t is None else t
                tasks.append(Task("compute", t, ph, f"{ph}@{i}", world if predicted else 0))
                continue
            groups = tuple(tuple(g) for g in op["groups"])
            mine = next(g for g in groups if r in g)
            g, n = len(mine), float(op["nbytes"])
            t = gloo.seconds(op["kind"], g, n, skewed=True)
            chain = 0.0
            if t > 0:
                _, beta, _ = gloo.constants(op["kind"], g)
                chain = min(1.0, max(0.0, 1.0 - beta * cost_terms(op["kind"], g, n)[1] / t))
            tail = gloo.exit_spread(op["kind"], g)
            swept = gloo.priced_as(g)  # the sweep arrangement t stands for
            tasks.append(Task("collective", t, ph, f"{ph}#{k}", swept, mine, tail, chain))
        programs[r] = tasks
    spans, end = simulate(programs, cores)
    return {r: [(ph, key, b - a) for ph, key, a, b in sp] for r, sp in spans.items()}, end


def _shown(p: Path) -> str:
    """A path relative to the working directory or the project when it lies inside."""
    from simcluster.paths import project_root

    for base in (Path.cwd(), project_root()):
        try:
            return str(p.resolve().relative_to(base.resolve()))
        except ValueError:
            continue
    return str(p)


def validate_live(
    path: str | Path,
    workdir: str | Path,
    profile: str | None = None,
    network: str | None = None,
    data: dict[str, Any] | None = None,
) -> LiveReport:
    """Simulate every measured iteration of a live-run file; per-phase comparison.

    A file whose fields have the wrong shape (a null, a string for a number, a
    missing rank) is a ConfigError naming the file, never a traceback. ``data``: the
    file as :func:`_load` already read it (else it is read here).
    """
    p = Path(path)
    _check_file(p)
    from simcluster.engine import SimulationError

    try:
        return _validate_live(path, workdir, profile, network, data)
    except ConfigError:
        raise
    except UserError as exc:  # a model's own line (a collective the sweep did not time)
        raise UserError(f"{p}: {exc}") from None
    except SimulationError as exc:  # the ranks' recorded collective calls do not pair up
        raise ConfigError(
            str(p), "ranks[*].patterns.*.ops", None,
            f"the ranks' collective calls do not match one another ({str(exc)[:160]})",
            "ops as calibrate.live records them: every rank of a group calls each collective",
        ) from None  # fmt: skip
    except (
        KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError,
        StopIteration, OverflowError,  # a rank in no group of a collective; a huge number
    ) as exc:  # fmt: skip
        raise ConfigError(
            str(p), "<root>", None, f"malformed live-run file ({type(exc).__name__}: {exc})"
        ) from None


def _gloo_model(data: dict[str, Any], network: str | None, file: str = "<live run>"):
    """The gloo cost model: the run's own sweep (``calibrate.live`` measures it on its
    processes before the patterns), else a network profile with a ``gloo`` section
    (named, or ``gloo-host``); None when neither has one."""
    from simcluster.network.gloo import GlooModel

    if data.get("gloo") and not network:
        own = GlooModel(_fitted(data["gloo"], file, "gloo.samples"),
                        "the run's own gloo sweep (same processes)")  # fmt: skip
        host = _gloo_model({}, None)
        if host is None or not _has_wake_sizes(host) or _has_wake_sizes(own):
            return own
        # a run whose sweep timed skewed arrivals at one size: the increase with size
        # from the host profile (scaled by the sharing factors), on the run's own wake
        out = own.with_wake_sizes(host)
        out.source += f"; wake-up cost by size from {host.source}"
        return out
    from simcluster.paths import network_profiles_dir

    name = network or "gloo-host"
    f = network_profiles_dir() / f"{name}.json"
    if not f.exists():
        if network:
            raise UserError(f"network profile {network!r} not found in {network_profiles_dir()}")
        return None
    prof = json.loads(f.read_text())
    worlds = prof.get("network", {}).get("gloo", {}).get("worlds")
    if worlds and isinstance(prof.get("samples"), dict):
        # a world that is not a mapping is named by _fitted's check, not dropped
        samples = [{"world": p, **v} if isinstance(v, dict) else v
                   for p, v in prof["samples"].items()]  # fmt: skip
        worlds = _fitted({"worlds": worlds, "samples": samples}, str(f), "samples")
    if not worlds:
        if network:
            raise UserError(f"network profile {network!r} has no gloo section (network.gloo)")
        return None
    return GlooModel(worlds, f"network profile {name}")


def _fitted(gloo: dict[str, Any], file: str = "<live run>", where: str = "gloo.samples"):
    """A sweep's constants fitted from its stored samples by this version's fit
    (:func:`simcluster.network.gloo.fit_worlds`), so a committed run is scored by the
    model as it is now; the constants stored beside them where there are no samples.
    A malformed sample is a :class:`ConfigError` naming its field (``where`` ...)."""
    from simcluster.network.gloo import fit_worlds

    samples = gloo.get("samples")
    if not samples:
        return gloo["worlds"]
    rows = samples if isinstance(samples, list) else [samples]
    for i, w in enumerate(rows):
        at = f"{where}[{i}]" if isinstance(samples, list) else where
        _check_sweep(w, file, at)
    return fit_worlds(rows)


def _positive(value: Any, file: str, path: str, unit: str) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise ConfigError(file, path, value, "not a positive finite number", f"{unit} > 0")


def _check_sweep(w: Any, file: str, at: str) -> None:
    """One process count's sweep as ``calibrate.gloo`` records it: ``world``, per op a
    non-empty list of rows with positive ``nbytes`` and ``mean_s``, and the sharing
    test's ``compute.factor``."""
    if not isinstance(w, dict):
        raise ConfigError(file, at, w, "not a gloo sweep", "a mapping with world, ops, compute")
    world = w.get("world")  # 1.5 was int()-ed to 1: a ZeroDivisionError later
    whole = (isinstance(world, int | float) and not isinstance(world, bool)
             and math.isfinite(world) and world == int(world))  # fmt: skip
    if isinstance(world, str):  # network profiles write the count as text ("2")
        whole = world.strip().isdigit()
    if not whole or int(world) < 1:
        raise ConfigError(file, f"{at}.world", world, "not a process count", "an integer >= 1")
    ops = w.get("ops")
    if not isinstance(ops, dict) or not ops:
        raise ConfigError(file, f"{at}.ops", ops, "no timed collectives", "op name -> rows")
    from simcluster.network.gloo import COMPUTED, OPS, SKEWED

    for op, op_rows in ops.items():
        if str(op).removesuffix(SKEWED).removesuffix(COMPUTED) not in OPS:
            known = [f"{o}{x}" for o in OPS for x in ("", SKEWED, COMPUTED)]
            raise ConfigError(
                file, f"{at}.ops", op, "not a collective the gloo model knows", known,
                suggestions=did_you_mean(str(op), known, n=1),
            )  # fmt: skip
        if not isinstance(op_rows, list) or not op_rows:
            raise ConfigError(
                file, f"{at}.ops.{op}", op_rows, "no timed sizes", "a non-empty list of rows"
            )
        for j, r in enumerate(op_rows):
            row = f"{at}.ops.{op}[{j}]"
            if not isinstance(r, dict):
                raise ConfigError(file, row, r, "not a timed size", "a mapping with nbytes, mean_s")
            _positive(r.get("nbytes"), file, f"{row}.nbytes", "bytes")
            _positive(r.get("mean_s", r.get("median_s")), file, f"{row}.mean_s", "seconds")
            for key in ("median_s", "rank_mean_median_s"):  # optional: the exit spread's
                if key in r:
                    _positive(r[key], file, f"{row}.{key}", "seconds")
    compute = w.get("compute")
    factor = compute.get("factor") if isinstance(compute, dict) else None
    _positive(factor, file, f"{at}.compute.factor", "a CPU-sharing factor")


def _has_wake_sizes(model) -> bool:
    from simcluster.network.gloo import OPS

    return any("wake_by_bytes" in (v.get(op) or {}) for v in model.worlds.values()
               for op in OPS)  # fmt: skip


def _validate_live(
    path: str | Path,
    workdir: str | Path,
    profile: str | None,
    network: str | None = None,
    data: dict[str, Any] | None = None,
) -> LiveReport:
    from simcluster.simulation import Simulation

    if data is None:
        data = _load(path)
    path = _shown(Path(path))
    cfg = data["config"]
    world = int(cfg["world_size"])
    link = link_costs(data["calibration"], world)
    gloo = _gloo_model(data, network, str(path)) if cfg.get("backend") == "gloo" else None
    if gloo is not None:
        link = {"bandwidth": link["bandwidth"], "overhead_s": 0.0}
    topo, net = _write_localhost(Path(workdir), cfg, link, str(path))
    sim = Simulation.for_topology(str(topo), world, str(net), "maxmin", nodes=int(cfg["nodes"]))
    engine, netp = sim.engine, sim.network_profile
    dev = _find_cpu_profile(data.get("machine", {}), profile)
    from simcluster.workload import list_models

    if cfg.get("module") or cfg.get("model") not in list_models():
        dev = None  # a model of the user's own (calibrate.live --module): nothing to predict
    compute = _predicted_compute(dev, cfg["model"], int(cfg["batch"])) if dev else None
    model = _live_model(cfg["model"]) if dev else None  # for the kernel phases' sizes
    share = 1.0
    alone = compute
    if compute is not None and gloo is not None:
        # every process of this host computes at once: the measured sharing factor
        share = gloo.share(world)
        compute = {k: v * share for k, v in compute.items()}
    by_pattern = data.get("gloo_share_by_pattern") or {}
    device_text = (
        f"{dev.describe()}: forward, backward, optimizer predicted; pack, sparsify, "
        "decompress, dual, projection, compress from its kernel families"
        + (
            f", x{share:.2f} for {world} processes sharing the cores (measured)"
            if share != 1.0
            else ""
        )  # fmt: skip
        if dev
        else "no measured device profile of this CPU in calibrate/profiles (run `simcluster "
        "calibrate`): every compute phase replayed from the run, not scored"
    )
    net_text = (
        f"gloo model ({gloo.source}): alpha per message and beta per byte per op and "
        f"process count, messages and bytes per gloo algorithm (simcluster.network.gloo)"
        if gloo is not None
        else f"{netp.describe()} on {topo.name}"
    )
    cores = _host_cores(data, str(path)) if gloo is not None else None
    if cores is not None:
        net_text += (
            f"; the host's {cores} cores shared by compute and collectives "
            "(processor sharing, simcluster.validation.host_sharing)"
        )
    report = LiveReport(str(path), cfg, net_text, device_text, link)
    report.gloo = gloo
    speeds: list[float] = []
    for pattern in cfg["patterns"]:  # every name checked before the first simulation
        _check_names(path, pattern, data["ranks"])
    for pattern in cfg["patterns"]:
        per_rank = {r["rank"]: r["patterns"][pattern] for r in data["ranks"]}
        pattern_compute, pattern_gloo = compute, gloo
        scale = share
        if gloo is not None and pattern in by_pattern:
            # the host's load drifts: the sharing test just before and just after this
            # pattern (same processes) scales compute and every message's cost alike
            f = statistics.mean(
                float(by_pattern[pattern][k]["factor"]) for k in ("before", "after")
            )
            if alone is not None:
                # and the tests' job alone says how fast a CPU second is at this moment
                # against the profile's (compute only: the gloo sweep was timed here)
                speed = _host_speed(dev, [by_pattern[pattern][k] for k in ("before", "after")])
                speeds.append(speed or 1.0)
                scale = f * (speed or 1.0)
                pattern_compute = {k: v * scale for k, v in alone.items()}
            pattern_gloo = gloo.scaled(f / gloo.share(world))
        per_op = _kernel_ops(dev, model, cfg, pattern, per_rank, scale) if alone is not None else {}
        kernel_phases = {ph for ph, _ in per_op}
        n_it = len(per_rank[0]["ops"])
        measured: dict[str, list[float]] = {}
        simulated: dict[str, list[float]] = {}
        for j in range(n_it):
            rank_ops = {r: pr["ops"][j] for r, pr in per_rank.items()}
            sim_ops: dict[int, list[tuple[str, str, float]]] = {}
            if cores is not None and pattern_gloo is not None:
                sim_ops, end_time = _shared_host(rank_ops, pattern_compute, pattern_gloo,
                                                 cores, world, per_op)  # fmt: skip
            else:
                classes, phase_of = _programs(rank_ops, pattern_compute, pattern_gloo, per_op)
                trace = engine.run(classes)
                end_time = trace.end_time
                for cls in classes:
                    spans = [(phase_of.get(s.op, s.category), s.op, s.end - s.start)
                             for s in trace.class_spans(cls.name)]  # fmt: skip
                    for r in cls.ranks:
                        sim_ops[r] = spans
            phases = list(dict.fromkeys(o["phase"] for ops in rank_ops.values() for o in ops))
            for ph in phases:
                ranks = [r for r, ops in rank_ops.items() if any(o["phase"] == ph for o in ops)]
                is_comm = any(o["phase"] == ph and o["kind"] != "compute"
                              for ops in rank_ops.values() for o in ops)  # fmt: skip
                m_val = _phase_value(
                    {r: [(o["phase"], str(i), o["seconds"]) for i, o in enumerate(rank_ops[r])]
                     for r in ranks}, ph, is_comm, measured=True)  # fmt: skip
                s_val = _phase_value({r: sim_ops[r] for r in ranks}, ph, is_comm, measured=False)
                measured.setdefault(ph, []).append(m_val)
                simulated.setdefault(ph, []).append(s_val)
            measured.setdefault("iteration", []).append(
                statistics.mean(pr["iterations"][j]["iteration"] for pr in per_rank.values())
            )
            simulated.setdefault("iteration", []).append(end_time)
        kinds = {
            o["phase"]: o["kind"] for pr in per_rank.values() for ops in pr["ops"] for o in ops
        }
        for ph in measured:
            if ph == "iteration":
                source = "iteration"
            elif kinds.get(ph) != "compute":
                source = "network"
            elif pattern_compute is not None and ph in pattern_compute:
                source = "profile"
            elif ph in kernel_phases:
                source = "profile"
            else:
                source = "replayed"
            # phases that occur in some iterations only (periodic averaging) count 0 elsewhere
            m = sum(measured[ph]) / n_it
            s = sum(simulated[ph]) / n_it
            report.phases.append(PhaseResult(pattern, ph, m, s, source))
    if speeds:
        report.device += (
            f"; x{min(speeds):.2f}-{max(speeds):.2f} for this host's speed at the run (the "
            "sharing tests' job alone over the profile's time for it)"
        )
    return report


def _live_model(name: str):
    """The zoo model ``calibrate.live`` trains: CIFAR-size input (32 px), 10 classes."""
    from simcluster.workload import build_model

    return build_model(name, 32, 10)


def _kernel_ops(
    profile, model, cfg: dict[str, Any], pattern: str, per_rank: dict[int, Any], scale: float
) -> dict[tuple[str, str], list[float]]:
    """``(phase, role) -> seconds of each op`` of ``pattern``'s packing, sparsification
    and consensus phases, predicted from ``profile``'s kernel families
    (:mod:`simcluster.validation.live_kernels`) and scaled like forward and backward
    (``scale``: the host's sharing and speed at the run). A phase is left out (replayed)
    when some rank's iteration runs an op of it that the mapping does not have, or an
    op of it has another role."""
    from simcluster.validation.live_kernels import op_seconds, phase_ops

    ops = phase_ops(pattern, model, cfg)
    per_op = {key: [scale * op_seconds(profile, c) for c in calls] for key, calls in ops.items()}
    priced = {ph for ph, _ in per_op}
    bad: set[str] = set()
    for pr in per_rank.values():
        for it_ops in pr["ops"]:
            counts: dict[tuple[str, str], int] = {}
            for op in it_ops:
                key = (op["phase"], str(op.get("role", "all")))
                counts[key] = counts.get(key, 0) + 1
            for (ph, role), c in counts.items():
                if ph in priced and c > len(per_op.get((ph, role), [])):
                    bad.add(ph)
    return {key: v for key, v in per_op.items() if key[0] not in bad}


def _host_cores(data: dict[str, Any], file: str) -> int | None:
    """The run's host's cores (``machine.cpus``, as ``calibrate.live`` records them),
    which its ranks share; None when the run does not say."""
    machine = data.get("machine")
    cpus = machine.get("cpus") if isinstance(machine, dict) else None
    if cpus is None:
        return None
    if not isinstance(cpus, int) or isinstance(cpus, bool) or cpus < 1:
        raise ConfigError(file, "machine.cpus", cpus, "not a core count", "an integer >= 1")
    return cpus


def _check_names(path: str | Path, pattern: Any, ranks: list[dict[str, Any]]) -> None:
    """A pattern and each op's phase are named (non-empty text): they become the cases'
    names and metric fields (an empty one was a pydantic traceback after the run)."""
    allowed = "a non-empty name, as calibrate.live records it (e.g. 'forward', 'allreduce')"
    if not isinstance(pattern, str) or not pattern.strip():
        raise ConfigError(str(path), "config.patterns", pattern, "a pattern needs a name", allowed)
    for k, rank in enumerate(ranks):
        for j, ops in enumerate(rank["patterns"][pattern]["ops"]):
            for i, op in enumerate(ops):
                ph = op.get("phase") if isinstance(op, dict) else None
                if not isinstance(ph, str) or not ph.strip():
                    raise ConfigError(
                        str(path), f"ranks[{k}].patterns.{pattern}.ops[{j}][{i}].phase", ph,
                        "a phase needs a name", allowed,
                    )  # fmt: skip


def _phase_value(
    spans: dict[int, list[tuple[str, str, float]]],
    phase: str,
    is_comm: bool,
    measured: bool,
) -> float:
    """Seconds of ``phase`` in one iteration.

    Compute: the mean over the ranks that run it. Collective: per call, the least
    time over its ranks (the cost from the last rank's arrival, without the wait
    for it, which a skewed arrival adds on the others), summed over the calls.
    Measured spans are ``(phase, index, seconds)`` per op; simulated spans are the
    trace's ``(phase, op id, seconds)`` (the arrival and the cost of a call add up).
    """
    if not is_comm:
        return statistics.mean(sum(t for p, _, t in sp if p == phase) for sp in spans.values())
    per_call: dict[str, list[float]] = {}
    for sp in spans.values():
        k = 0
        acc: dict[str, float] = {}
        for p, oid, t in sp:
            if p != phase:
                continue
            key = oid.split("~", 1)[0] if not measured else f"{phase}#{k}"
            if measured:
                k += 1
            acc[key] = acc.get(key, 0.0) + t
        for key, t in acc.items():
            per_call.setdefault(key, []).append(t)
    return sum(min(v) for v in per_call.values())

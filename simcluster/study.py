"""Running a scenario's study: every schedule at every size, as flat records.

Strong scaling keeps the dataset fixed: with P ranks, a per-rank batch b and A
accumulation micro-steps, an epoch is ceil(D / P) samples per rank (the sampler
pads, as torch's DistributedSampler does), i.e. ceil(ceil(D/P) / (b*A)) steps,
the last of them partial. Weak scaling grows the dataset with P (D is the size
at the smallest count). A single-size study is strong scaling at one size. A
distribution study is strong scaling that also draws ``samples`` full-batch
steps, each with its own jitter, transient slowdowns and network noise, and
reports their p50, p99, mean, min and max (``step_time_p50_s``, ...).

Speedup and efficiency are against the smallest size: time to train for
strong/single, throughput for weak.

Per-step figures come twice: ``iteration_time_s``, ``compute_s``, ``comm_s``,
``exposed_comm_s`` are means over every step of the run (the partial last step
of each epoch and any consensus rounds included); ``step_time_s``,
``step_compute_s``, ``step_comm_s``, ``step_exposed_comm_s`` are means over the
full-batch steps only (``step_samples`` samples over all ranks, ``full_steps``
of them), and ``partial_step_time_s`` / ``partial_samples`` / ``partial_steps``
describe the partial one apart (None when every step is full). At a fixed
per-GPU batch the run means fall as GPUs grow only because the partial step
weighs more; the full-step figures do not. Time a step waits for loader workers
(``workload.input_pipeline`` with ``workers``) is neither compute nor exposed
communication: a segment whose step they hold up says it as ``input_wait_s``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from simcluster.collectives import estimate_phases
from simcluster.compute import load_network_profile
from simcluster.compute.memory import memory_per_gpu
from simcluster.engine import Engine, Trace
from simcluster.program import RankClass, expand, perturb
from simcluster.scenario import (
    Heterogeneity,
    Scenario,
    resolved_dataset_size,
    resolved_input_load,
    resolved_precision,
    workload_model,
    workload_profile,
)
from simcluster.schedules import BuildContext, RunShape, get_schedule
from simcluster.simulation import Simulation

__all__ = [
    "ScenarioResult",
    "comm_estimator",
    "epoch_plan",
    "run_scenario",
    "simulate_iteration",
    "simulate_plan",
    "step_distribution",
    "noisy_capacity",
    "transient_ranks",
]

Progress = Callable[[int, int, str], None]


@dataclass
class ScenarioResult:
    scenario: Scenario
    records: list[dict[str, Any]]
    traces: dict[str, Trace] = field(default_factory=dict)  # schedule label -> largest size
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario.name, "results": self.records}


def epoch_plan(dataset: int, gpus: int, batch: int, accumulation: int) -> tuple[int, int]:
    """(steps per epoch, per-rank samples in the last step)."""
    per_rank = math.ceil(dataset / gpus)
    per_step = batch * accumulation
    steps = math.ceil(per_rank / per_step)
    last = per_rank - (steps - 1) * per_step
    return steps, last


def simulate_iteration(
    engine: Engine,
    classes: list[RankClass],
    collapse: bool = True,
    heterogeneity: Heterogeneity | None = None,
    seed: int = 0,
    step: int = 0,
) -> Trace:
    """One iteration's trace; ``step`` numbers the draws of what varies per step.

    ``collapse=False`` simulates every rank separately. ``heterogeneity``
    slows persistent stragglers (chosen from the seed alone: the same ranks in
    every step), transiently slowed ranks (drawn per step, see
    :func:`transient_ranks`) and jitters kernels and whole steps per rank;
    slowed ranks only split the classes; jittered classes run once with a clock per rank
    (``collapse=False``: as one class per rank, the reference). Network noise
    scales every link's capacity by its own lognormal factor per step.
    """
    if heterogeneity is None:
        return engine.run(classes if collapse else expand(classes))
    h = heterogeneity
    ranks = sorted(r for c in classes for r in c.ranks)
    slow: frozenset[int] = frozenset()
    slowdown = 1.0
    if h.stragglers is not None:
        count = max(1, round(h.stragglers.fraction * len(ranks)))
        rng = np.random.default_rng([seed, 0x5EED])
        slow = frozenset(int(r) for r in rng.choice(ranks, size=count, replace=False))
        slowdown = h.stragglers.slowdown
    hit: frozenset[int] = frozenset()
    if h.transient is not None:
        hit = transient_ranks(classes, h.transient.fraction, seed, step)
    classes = perturb(
        classes,
        slow,
        slowdown,
        h.jitter,
        seed,
        fold=collapse,
        transient=hit,
        transient_slowdown=h.transient.slowdown if h.transient is not None else 1.0,
        step=step,
        step_cv=h.step_jitter,
    )
    capacity = None
    if h.network_noise > 0:
        capacity = noisy_capacity(engine.ctx.capacity, h.network_noise, seed, step)
    if h.jitter > 0 or h.step_jitter > 0:
        # folded: one class per program, a clock per rank; else one class per rank
        return engine.run(classes, capacity)
    return engine.run(classes if collapse else expand(classes), capacity)


def transient_ranks(
    classes: list[RankClass], fraction: float, seed: int, step: int
) -> frozenset[int]:
    """Ranks slowed in ``step``: each rank independently with probability ``fraction``.

    Drawn per rank class, as statistics: how many of its N ranks are hit is
    one binomial draw, and which ones a draw of that many without replacement
    (the same law as N coin flips, at O(1 + hits) cost). Ranks of a class are
    alike, so the step is slowed exactly when a class has a hit, with
    probability ``1 - (1 - fraction) ** N`` (the slowest of N). Seeded by
    (seed, step, class position).
    """
    out: list[int] = []
    for i, cls in enumerate(classes):
        rng = np.random.default_rng([seed, step, 0x7A5E, i])
        n = len(cls.ranks)
        k = int(rng.binomial(n, fraction))
        if k:
            out.extend(cls.ranks[j] for j in rng.choice(n, size=k, replace=False).tolist())
    return frozenset(out)


#: network noise: a link's speed factor is a lognormal's with its normal deviate
#: rounded to this grid (in standard deviations), clipped at NOISE_SPAN of them
NOISE_GRID = 0.25
NOISE_SPAN = 6.0


def noise_levels(cv: float) -> tuple[np.ndarray, np.ndarray]:
    """(speed factors, their probabilities) of a link under network noise.

    A lognormal factor ``exp(s * z)`` whose normal deviate ``z`` is rounded to
    the nearest multiple of :data:`NOISE_GRID` (tails kept out to
    :data:`NOISE_SPAN`): a slow link in a thousand is as slow as the
    lognormal's, yet the factors take few distinct values, so a phase's flows
    end at a few dozen distinct times, not one per flow. ``s`` is set and the
    factors scaled so that the mean is 1 and the coefficient of variation is
    ``cv`` exactly.
    """
    k = int(round(NOISE_SPAN / NOISE_GRID))
    z = np.arange(-k, k + 1) * NOISE_GRID
    nd = NormalDist()
    edges = [nd.cdf(x) for x in (z[:-1] + NOISE_GRID / 2)]
    p = np.diff(np.concatenate([[0.0], edges, [1.0]]))

    def stats(s: float) -> tuple[float, float]:
        x = np.exp(s * z)
        m = float(p @ x)
        return m, float(np.sqrt(p @ (x - m) ** 2)) / m

    lo, hi = 0.0, 1.0
    while stats(hi)[1] < cv:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if stats(mid)[1] < cv else (lo, mid)
    s = (lo + hi) / 2
    return np.exp(s * z) / stats(s)[0], p


def noisy_capacity(capacity: np.ndarray, cv: float, seed: int, step: int) -> np.ndarray:
    """Link capacities (bytes/s) times a speed factor per link, drawn each step
    from :func:`noise_levels` (mean 1, coefficient of variation ``cv``),
    seeded by (seed, step)."""
    rng = np.random.default_rng([seed, step, 0x4E01])
    levels, _ = noise_levels(cv)
    k = (levels.size - 1) // 2
    idx = np.clip(np.rint(rng.standard_normal(capacity.size) / NOISE_GRID), -k, k)
    return capacity * levels[idx.astype(np.int64) + k]


def _scaled(acc: dict[str, float], add: dict[str, float], factor: float) -> None:
    for k, v in add.items():
        acc[k] = acc.get(k, 0.0) + v * factor


def _representative(trace: Trace) -> str:
    """The rank class that holds the lowest rank (the first class's first rank)."""
    lowest = min(r for ranks in trace.classes.values() for r in ranks)
    return next(name for name, ranks in trace.classes.items() if lowest in ranks)


def _class_breakdowns(trace: Trace) -> dict[str, dict[str, Any]]:
    """Per rank class, by lowest rank (the representative first): ``ranks`` (its
    rank count), ``breakdown_s`` and ``net_breakdown_s`` (seconds per category,
    see :meth:`Trace.by_category`)."""
    out: dict[str, dict[str, Any]] = {}
    for name, ranks in sorted(trace.classes.items(), key=lambda kv: min(kv[1])):
        booked, net = trace.category_seconds(name)
        out[name] = {
            "ranks": len(ranks),
            "breakdown_s": dict(sorted(booked.items())),
            "net_breakdown_s": dict(sorted(net.items())),
        }
    return out


def simulate_plan(
    schedule,
    ctx: BuildContext,
    engine: Engine,
    run: RunShape,
    collapse: bool = True,
    heterogeneity: Heterogeneity | None = None,
) -> tuple[dict[str, Any], dict[str, Trace]]:
    """Simulate every segment of the schedule's plan; per-step averages and traces.

    Returns (metrics, traces by segment label). Metrics are means over all steps
    of the run (seconds per step, bytes per step), the same over full-batch steps
    only (``step_*``), the partial step apart (``partial_*``), plus run totals.
    A training segment (``steps > 0``) is full when its program processes the most
    samples of any training segment, partial when fewer; consensus rounds and other
    programs with ``steps == 0`` are neither.
    """
    segments = schedule.plan(ctx, run)
    total_time = 0.0
    total_steps = 0.0
    total_samples = 0.0
    compute = 0.0
    comm = 0.0
    inter = 0.0
    loader_wait = 0.0  # time steps wait for loader workers (not exposed communication)
    breakdown: dict[str, float] = {}
    seg_records = []
    traces: dict[str, Trace] = {}
    for seg in segments:
        trace = simulate_iteration(engine, seg.iteration.classes, collapse, heterogeneity, ctx.seed)
        rep = _representative(trace)
        t = trace.end_time
        total_time += seg.count * t
        total_steps += seg.count * seg.steps
        total_samples += seg.count * seg.iteration.samples
        compute += seg.count * trace.busy_time(rep, "compute")
        comm += seg.count * trace.busy_time(rep, "comm")
        # only loader workers put ops on the loader stream: no scan of the trace without
        wait = _loader_wait(trace) if ctx.input_load and ctx.input_load.workers else 0.0
        loader_wait += seg.count * wait
        inter += seg.count * trace.inter_node_bytes
        classes = _class_breakdowns(trace)
        _scaled(breakdown, classes[rep]["breakdown_s"], seg.count)
        traces.setdefault(seg.label, trace)
        seg_records.append(
            {
                "label": seg.label,
                "plain": seg.plain,
                "count": seg.count,
                "time_s": t,
                "compute_s": trace.busy_time(rep, "compute"),
                "comm_s": trace.busy_time(rep, "comm"),
                "inter_node_bytes": trace.inter_node_bytes,
                "extra": seg.iteration.extra,
                "breakdown_s": dict(classes[rep]["breakdown_s"]),
                # every rank class: its rank count, its breakdown as booked (a
                # collective from the class's arrival) and net (from the call's
                # last arrival), for metrics that average over all ranks
                "classes": classes,
                # collective time per algorithm/protocol the tuner chose (s)
                "collectives_s": trace.by_algorithm(),
            }
        )
        if wait > 0:  # only where loader workers hold the step up (the key is new)
            seg_records[-1]["input_wait_s"] = wait
    steps = max(total_steps, 1e-300)
    full_step, partial_step = _step_split(seg_records, segments)
    metrics = {
        "iteration_time_s": total_time / steps,
        "compute_s": compute / steps,
        "comm_s": comm / steps,
        "exposed_comm_s": max(total_time - compute - loader_wait, 0.0) / steps,
        "throughput_samples_per_s": total_samples / total_time if total_time > 0 else math.inf,
        "time_to_train_s": total_time,
        "breakdown_s": {k: v / steps for k, v in sorted(breakdown.items())},
        "inter_node_bytes": inter / steps,
        "inter_node_bytes_total": inter,
        **full_step,
        **partial_step,
        "segments": seg_records,
    }
    return metrics, traces


def _loader_wait(trace: Trace) -> float:
    """Seconds the step outlasts everything but its loader workers (``loader`` stream,
    :func:`simcluster.schedules.training.load_batches`): a wait for input, not for a
    collective. 0 without loader ops."""
    rows = [r for r in trace.rows if r[1] == "loader"]
    if not rows:
        return 0.0
    rest = max((r[5] for r in trace.rows if r[1] != "loader"), default=0.0)
    return max(trace.end_time - rest, 0.0)


def _step_split(seg_records: list[dict[str, Any]], segments) -> tuple[dict, dict]:
    """Full-batch step means and the partial step, from the simulated segments.

    Weights are runs x steps; a full program that never runs (a dataset smaller
    than one batch) still gives its time, unweighted.
    """
    train = [(r, s) for r, s in zip(seg_records, segments, strict=True) if s.steps > 0]
    if not train:  # no training step at all: nothing to split
        keys = ("full_steps", "step_samples", "step_time_s", "step_compute_s", "step_comm_s")
        return dict.fromkeys((*keys, "step_exposed_comm_s"), None), dict.fromkeys(
            ("partial_steps", "partial_samples", "partial_step_time_s"), None
        )
    most = max(s.iteration.samples for _, s in train)
    full = [(r, s) for r, s in train if s.iteration.samples == most]
    part = [(r, s) for r, s in train if s.iteration.samples < most]

    def mean(rows, key: str) -> float:
        w = [s.count * s.steps for _, s in rows]
        if sum(w) > 0:
            return sum(wi * r[key] for wi, (r, _) in zip(w, rows, strict=True)) / sum(w)
        return sum(r[key] for r, _ in rows) / len(rows)

    step = mean(full, "time_s")
    compute = mean(full, "compute_s")
    wait = 0.0  # waits for loader workers: neither compute nor exposed communication
    if any("input_wait_s" in r for r, _ in full):
        for r, _ in full:
            r.setdefault("input_wait_s", 0.0)
        wait = mean(full, "input_wait_s")
    full_out = {
        "full_steps": sum(s.count * s.steps for _, s in full),
        "step_samples": most,
        "step_time_s": step,
        "step_compute_s": compute,
        "step_comm_s": mean(full, "comm_s"),
        "step_exposed_comm_s": max(step - compute - wait, 0.0),
    }
    part_out = {
        "partial_steps": sum(s.count * s.steps for _, s in part),
        "partial_samples": part[0][1].iteration.samples if part else None,
        "partial_step_time_s": mean(part, "time_s") if part else None,
    }
    return full_out, part_out


def step_distribution(
    schedule,
    ctx: BuildContext,
    engine: Engine,
    run: RunShape,
    samples: int,
    collapse: bool = True,
    heterogeneity: Heterogeneity | None = None,
) -> dict[str, Any]:
    """The spread of the full-batch step time over ``samples`` steps (s).

    Step k is simulated with the draws of step k (:func:`simulate_iteration`);
    persistent stragglers are the same in every step. Where a plan has
    several full-batch programs (e.g. averaging steps), each sample holds one
    of each, weighted by how often it runs. Without anything that varies per
    step every sample is the same, and one is simulated. Percentiles are of
    the (weighted) sample, by the inverted CDF (a time that was simulated).
    """
    segments = schedule.plan(ctx, run)
    train = [s for s in segments if s.steps > 0]
    if not train:
        return {}
    most = max(s.iteration.samples for s in train)
    full = [s for s in train if s.iteration.samples == most]
    varies = heterogeneity is not None and heterogeneity.varies_per_step
    times: list[float] = []
    weights: list[float] = []
    for k in range(samples if varies else 1):
        for seg in full:
            trace = simulate_iteration(
                engine, seg.iteration.classes, collapse, heterogeneity, ctx.seed, k
            )
            times.append(trace.end_time)
            weights.append(float(max(seg.count * seg.steps, 1)))
    t = np.asarray(times)
    w = np.asarray(weights)
    if not varies:
        t, w = np.repeat(t, samples), np.repeat(w, samples)

    def pct(q: float) -> float:
        return float(np.percentile(t, q, weights=w, method="inverted_cdf"))

    return {
        "step_time_samples": samples,
        "step_time_p50_s": pct(50),
        "step_time_p99_s": pct(99),
        "step_time_sample_mean_s": float(np.average(t, weights=w)),
        "step_time_min_s": float(t.min()),
        "step_time_max_s": float(t.max()),
    }


def run_scenario(
    sc: Scenario, progress: Progress | None = None, collapse: bool = True
) -> ScenarioResult:
    """Simulate every (schedule, size) of the study; records in study order."""
    t0 = time.perf_counter()
    w = sc.workload
    model = workload_model(w)
    profile = workload_profile(sc, model)
    netp = load_network_profile(sc.network_profile)
    base_dataset = resolved_dataset_size(w)
    input_load = resolved_input_load(w, sc.source)
    records: list[dict[str, Any]] = []
    traces: dict[str, Trace] = {}
    clusters: dict[int, Any] = {}
    total = len(sc.schedules) * len(sc.study.gpus)
    done = 0
    largest = max(sc.study.gpus)
    for spec in sc.schedules:
        sched_cls = get_schedule(spec.name)
        options = sched_cls.Options.model_validate(spec.options)
        schedule = sched_cls(options)
        first: dict[str, Any] | None = None
        for gpus in sc.study.gpus:
            if progress:
                progress(done, total, f"{spec.display} @ {gpus} GPUs")
            sim = Simulation.for_scenario(sc, gpus, clusters, netp)
            engine = sim.engine
            nodes = sim.cluster.num_nodes
            dataset = (
                base_dataset * gpus // sc.study.gpus[0] if sc.study.kind == "weak" else base_dataset
            )
            steps, last = epoch_plan(dataset, gpus, w.batch_per_gpu, w.grad_accumulation)
            bctx = sim.build_context(
                gpus,
                model,
                profile,
                w.batch_per_gpu,
                resolved_precision(w),
                w.grad_accumulation,
                sc.seed,
                w.optimizer,
                input_load,
            )
            run = RunShape(steps, math.ceil(last / w.grad_accumulation), w.epochs)
            metrics, seg_traces = simulate_plan(
                schedule, bctx, engine, run, collapse, sc.heterogeneity
            )
            if sc.study.kind == "distribution":
                metrics.update(
                    step_distribution(
                        schedule,
                        bctx,
                        engine,
                        run,
                        sc.study.num_samples,
                        collapse,
                        sc.heterogeneity,
                    )
                )
            rec: dict[str, Any] = {
                "schedule": spec.display,
                "schedule_name": spec.name,
                "gpus": gpus,
                "nodes": nodes,
                **{k: v for k, v in metrics.items() if k != "segments"},
                "steps_per_epoch": steps,
                "epoch_time_s": metrics["time_to_train_s"] / w.epochs,
                "profile": profile.describe(),
                "network_profile": netp.describe(),
                "network_model": sc.network_model,
                "segments": metrics["segments"],
                **_memory_fields(model, w, spec.name, options.model_dump(), gpus, profile),
            }
            first = first or rec
            if sc.study.kind == "weak":
                speedup = rec["throughput_samples_per_s"] / first["throughput_samples_per_s"]
            else:
                speedup = first["time_to_train_s"] / rec["time_to_train_s"]
            rec["speedup"] = speedup
            rec["efficiency"] = speedup * first["gpus"] / gpus
            records.append(rec)
            if gpus == largest:
                # the first plain step carries the schedule's own name; others say what they are
                step = next((s["label"] for s in metrics["segments"] if s["plain"]), None)
                for label, trace in list(seg_traces.items())[:3]:
                    key = spec.display if label == step else f"{spec.display}: {label}"
                    traces[key] = trace
            done += 1
    if progress:
        progress(done, total, "done")
    return ScenarioResult(sc, records, traces, time.perf_counter() - t0)


def _memory_fields(model, w, schedule: str, options: dict, gpus: int, profile) -> dict[str, Any]:
    """``memory_per_gpu_bytes`` (None without a zoo model), its parts, the device's
    memory and ``fits`` (None when the profile does not state the device's memory)."""
    device = getattr(profile, "memory_bytes", None)
    if model is None:
        return {
            "memory_per_gpu_bytes": None,
            "memory_breakdown_bytes": {},
            "device_memory_bytes": device,
            "fits": None,
        }
    est = memory_per_gpu(
        model, w.batch_per_gpu, resolved_precision(w), w.optimizer, schedule, options, gpus
    )
    return {
        "memory_per_gpu_bytes": est.total,
        "memory_breakdown_bytes": dict(est),
        "device_memory_bytes": device,
        "fits": None if device is None else bool(est.total <= device),
    }


def comm_estimator(engine: Engine):
    """Seconds a collective would take alone on the engine's cluster (static max-min);
    :meth:`simcluster.simulation.Simulation.estimate` for a set-up simulation."""

    def estimate(call) -> float:
        return estimate_phases(engine.ctx, engine.lowered(call)[1])

    return estimate

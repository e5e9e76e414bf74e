"""Running a scenario's study: every schedule at every size, as flat records.

Strong scaling keeps the dataset fixed: with P ranks, a per-rank batch b and A
accumulation micro-steps, an epoch is ceil(D / P) samples per rank (the sampler
pads, as torch's DistributedSampler does), i.e. ceil(ceil(D/P) / (b*A)) steps,
the last of them partial. Weak scaling grows the dataset with P (D is the size
at the smallest count). A single-size study is strong scaling at one size.

Speedup and efficiency are against the smallest size: time to train for
strong/single, throughput for weak.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simcluster.collectives import CommContext
from simcluster.compute import load_network_profile, load_profile
from simcluster.engine import Engine, Trace
from simcluster.program import RankClass, expand
from simcluster.scenario import (
    Scenario,
    resolved_dataset_size,
    resolved_input_size,
    resolved_num_classes,
)
from simcluster.schedules import BuildContext, Iteration, get_schedule
from simcluster.topology import load_topology
from simcluster.workload import build_model

__all__ = ["ScenarioResult", "run_scenario", "simulate_iteration", "epoch_plan"]

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


def simulate_iteration(engine: Engine, classes: list[RankClass], collapse: bool = True) -> Trace:
    """One iteration's trace; ``collapse=False`` simulates every rank separately."""
    return engine.run(classes if collapse else expand(classes))


def _breakdown(trace: Trace, cls: str) -> dict[str, float]:
    cats = trace.by_category(cls)
    return {k: round(v, 12) for k, v in sorted(cats.items())}


def _simulate(
    schedule,
    cluster,
    engine: Engine,
    gpus: int,
    model,
    profile,
    sc: Scenario,
    batch: int,
    collapse: bool,
) -> tuple[Iteration, Trace]:
    """Programs and trace of one iteration with ``batch`` samples per rank and micro-step."""
    w = sc.workload
    bctx = BuildContext(
        cluster, gpus, model, profile, batch, w.precision, w.grad_accumulation, sc.seed
    )
    it = schedule.build(bctx)
    return it, simulate_iteration(engine, it.classes, collapse)


def run_scenario(
    sc: Scenario, progress: Progress | None = None, collapse: bool = True
) -> ScenarioResult:
    """Simulate every (schedule, size) of the study; records in study order."""
    t0 = time.perf_counter()
    w = sc.workload
    model = build_model(w.model, resolved_input_size(w), resolved_num_classes(w))
    profile = load_profile(sc.profile)
    netp = load_network_profile(sc.network_profile)
    base_dataset = resolved_dataset_size(w)
    per_node = load_topology(sc.topology, num_nodes=1).ranks_per_node
    records: list[dict[str, Any]] = []
    traces: dict[str, Trace] = {}
    clusters: dict[int, Any] = {}
    total = len(sc.schedules) * len(sc.study.gpus)
    done = 0
    for spec in sc.schedules:
        sched_cls = get_schedule(spec.name)
        schedule = sched_cls(sched_cls.Options.model_validate(spec.options))
        first: dict[str, Any] | None = None
        for gpus in sc.study.gpus:
            if progress:
                progress(done, total, f"{spec.display} @ {gpus} GPUs")
            nodes = math.ceil(gpus / per_node)
            if nodes not in clusters:
                clusters[nodes] = load_topology(sc.topology, num_nodes=nodes)
            cluster = clusters[nodes]
            ctx = CommContext(cluster, netp.per_message_overhead_s, netp.link_efficiency)
            engine = Engine(ctx, sc.network_model)
            args = (schedule, cluster, engine, gpus, model, profile, sc)
            it, trace = _simulate(*args, w.batch_per_gpu, collapse)
            if sc.study.kind == "weak":
                dataset = base_dataset * gpus // sc.study.gpus[0]
            else:
                dataset = base_dataset
            steps, last = epoch_plan(dataset, gpus, w.batch_per_gpu, w.grad_accumulation)
            t_iter = trace.end_time
            t_last = t_iter
            if last != w.batch_per_gpu * w.grad_accumulation:
                _, last_trace = _simulate(*args, math.ceil(last / w.grad_accumulation), collapse)
                t_last = last_trace.end_time
            epoch_s = (steps - 1) * t_iter + t_last
            head = it.classes[0]
            rep = head.name if collapse else f"{head.name}#{head.ranks[0]}"
            compute_s = trace.busy_time(rep, "compute")
            rec: dict[str, Any] = {
                "schedule": spec.display,
                "schedule_name": spec.name,
                "gpus": gpus,
                "nodes": nodes,
                "iteration_time_s": t_iter,
                "compute_s": compute_s,
                "exposed_comm_s": max(t_iter - compute_s, 0.0),
                "throughput_samples_per_s": it.samples / t_iter if t_iter > 0 else math.inf,
                "steps_per_epoch": steps,
                "epoch_time_s": epoch_s,
                "time_to_train_s": epoch_s * w.epochs,
                "breakdown_s": _breakdown(trace, rep),
                "inter_node_bytes": trace.inter_node_bytes,
                "profile": profile.describe(),
                "network_profile": netp.describe(),
                "network_model": sc.network_model,
            }
            first = first or rec
            if sc.study.kind == "weak":
                speedup = rec["throughput_samples_per_s"] / first["throughput_samples_per_s"]
            else:
                speedup = first["time_to_train_s"] / rec["time_to_train_s"]
            rec["speedup"] = speedup
            rec["efficiency"] = speedup * first["gpus"] / gpus
            records.append(rec)
            traces[spec.display] = trace
            done += 1
    if progress:
        progress(done, total, "done")
    return ScenarioResult(sc, records, traces, time.perf_counter() - t0)

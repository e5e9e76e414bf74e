"""Reading a case's metric out of a simulated run.

All aggregates over segments are weighted by how often each segment runs
(``count``), so ``mean`` is the mean over the run's executions of the matching
programs and ``sum`` their total over the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simcluster.errors import SimclusterError, did_you_mean
from simcluster.validation.cases import Metric, Select

__all__ = [
    "MetricError",
    "find_record",
    "read_metric",
    "compared_value",
    "relative_error",
    "collective_time",
    "nccl_tests_value",
]


class MetricError(SimclusterError, ValueError):
    """The run does not hold what the metric asks for (names the missing piece).

    ``path``: the field of the case's ``metric`` that asks for it (``metric.field``,
    ``metric.num.schedule``, ...), so the report can name it in the reference file.
    """

    def __init__(self, message: str, path: str = "metric") -> None:
        super().__init__(message)
        self.path = path


def _near(word: str, names: Sequence[str]) -> str:
    """ "; did you mean 'x'?" for a near miss among ``names``, else ""."""
    hits = did_you_mean(str(word), [str(n) for n in names])
    return "; did you mean " + " or ".join(repr(h) for h in hits) + "?" if hits else ""


def find_record(
    records: Sequence[dict[str, Any]], sel: Select, where: str = "metric"
) -> dict[str, Any]:
    """The record ``sel`` picks; ``where`` is the selection's path in the case."""
    mine = [r for r in records if r["schedule"] == sel.schedule]
    if not mine:
        have = sorted({r["schedule"] for r in records})
        raise MetricError(
            f"no schedule {sel.schedule!r} in the run (have {', '.join(have)})"
            + _near(sel.schedule, have),
            f"{where}.schedule",
        )
    if sel.gpus is None:
        return max(mine, key=lambda r: r["gpus"])
    for r in mine:
        if r["gpus"] == sel.gpus:
            return r
    have = sorted(r["gpus"] for r in mine)
    raise MetricError(f"{sel.schedule}: no run at {sel.gpus} GPUs (have {have})", f"{where}.gpus")


def _get(obj: dict[str, Any], dotted: str, where: str = "metric.field") -> float:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            keys = sorted(cur) if isinstance(cur, dict) else []
            raise MetricError(
                f"no field {dotted!r} (at {part!r}; have {', '.join(keys)})" + _near(part, keys),
                where,
            )
        cur = cur[part]
    try:
        return float(cur)
    except (TypeError, ValueError):
        raise MetricError(f"field {dotted!r} is not a number ({cur!r})", where) from None


def _segments(rec: dict[str, Any], prefix: str | None) -> list[dict[str, Any]]:
    segs = [s for s in rec.get("segments", []) if prefix is None or s["label"].startswith(prefix)]
    if not segs:
        labels = sorted({s["label"] for s in rec.get("segments", [])})
        raise MetricError(
            f"no segment starting {prefix!r} (have {', '.join(labels)})", "metric.segments"
        )
    return segs


def _segment_value(seg: dict[str, Any], value: str, where: str) -> float:
    if value.startswith("breakdown_s."):
        return float(seg.get("breakdown_s", {}).get(value.split(".", 1)[1], 0.0))
    return _get(seg, value, where)


def _aggregate(
    segs: list[dict[str, Any]], value: str, how: str, where: str = "metric.value"
) -> float:
    total = sum(s["count"] * _segment_value(s, value, where) for s in segs)
    if how == "sum":
        return total
    runs = sum(s["count"] for s in segs)
    return total / runs if runs else 0.0


def _class_seconds(segs: list[dict[str, Any]], category: str, ranks: str, timing: str) -> float:
    """Seconds of ``category`` over the run, summed over the segments' runs and,
    with ``ranks == "all"``, over every rank (each class's per-rank time x its
    rank count); ``ranks == "first"``: the lowest rank's class alone. ``timing``
    picks the booked or the net breakdown (see :meth:`simcluster.engine.Trace.by_category`).
    """
    key = "net_breakdown_s" if timing == "net" else "breakdown_s"
    total = 0.0
    for s in segs:
        classes = s.get("classes")
        if not classes:
            raise MetricError(
                f"segment {s['label']!r} has no per-class breakdown (a run from an older "
                "simcluster?)",
                "metric.ranks",
            )
        chosen = classes.values() if ranks == "all" else [next(iter(classes.values()))]
        for c in chosen:
            weight = c["ranks"] if ranks == "all" else 1
            total += s["count"] * weight * float(c[key].get(category, 0.0))
    return total


def read_metric(m: Metric, records: Sequence[dict[str, Any]]) -> float:
    """The metric's value (before ``scale``) from a run's records."""
    if m.kind == "field":
        return _get(find_record(records, Select(schedule=m.schedule, gpus=m.gpus)), m.field)
    if m.kind == "ratio":
        rn = find_record(records, m.num, "metric.num")
        rd = find_record(records, m.den, "metric.den")
        if m.value:  # a segment value of each record, aggregated over the run
            num = _aggregate(_segments(rn, m.segments), m.value, m.aggregate)
            den = _aggregate(_segments(rd, m.segments), m.value, m.aggregate)
        else:
            num = _get(rn, m.field)
            den = _get(
                rd, m.den_field or m.field, "metric.den_field" if m.den_field else "metric.field"
            )
        if den == 0:
            raise MetricError("ratio denominator is zero")
        return num / den
    rec = find_record(records, Select(schedule=m.schedule, gpus=m.gpus))
    segs = _segments(rec, m.segments)
    if m.kind == "segments":
        return _aggregate(segs, m.value, m.aggregate)
    if m.kind == "segment_share":
        if m.ranks == "first" and m.timing == "booked":
            part = _aggregate(segs, f"breakdown_s.{m.share_of}", "sum")
            whole = sum(_aggregate(segs, f"breakdown_s.{c}", "sum") for c in m.categories)
        else:
            part = _class_seconds(segs, m.share_of, m.ranks, m.timing)
            whole = sum(_class_seconds(segs, c, m.ranks, m.timing) for c in m.categories)
        if whole == 0:
            raise MetricError(f"categories {m.categories} take no time")
        return part / whole
    if m.kind == "segment_ratio":
        num = _aggregate(segs, m.num_value, m.aggregate, "metric.num_value")
        den = _aggregate(segs, m.den_value, m.aggregate, "metric.den_value")
        if den == 0:
            raise MetricError("ratio denominator is zero")
        return num / den
    raise MetricError(f"metric kind {m.kind!r} is not read from records")


def compared_value(m: Metric, raw: float) -> float:
    """The quantity compared with the reference: ``transform`` of the raw value, then ``scale``.

    ``percent_gain`` turns a ratio r (old time / new time, new throughput / old)
    into the paper's "X % faster": (r - 1) x 100; ``percent_reduction`` turns a
    ratio r (new time / old time) into "X % less": (1 - r) x 100.
    """
    if m.transform == "percent_gain":
        raw = (raw - 1.0) * 100.0
    elif m.transform == "percent_reduction":
        raw = (1.0 - raw) * 100.0
    return raw * m.scale


def relative_error(
    predicted: float, reference: float, reference_range: tuple[float, float] | None = None
) -> float:
    """Signed relative error of a prediction.

    Without a range: (predicted - reference) / |reference|. With a range
    [lo, hi] (the paper states only a range): 0 inside it (bounds included),
    else relative to the nearest bound, (predicted - bound) / |bound|.
    """
    if reference_range is None:
        return (predicted - reference) / abs(reference)
    lo, hi = reference_range
    if lo <= predicted <= hi:
        return 0.0
    bound = lo if predicted < lo else hi
    return (predicted - bound) / abs(bound)


def collective_time(m: Metric, sc) -> tuple[float, str]:
    """Seconds of one collective alone on the scenario's cluster; profiles described."""

    from simcluster.program import CollectiveCall, RankClass, collective
    from simcluster.scenario import resolved_input_size, resolved_num_classes
    from simcluster.simulation import Simulation
    from simcluster.workload import build_model

    gpus = int(m.gpus)
    sim = Simulation.for_scenario(sc, gpus)
    netp = sim.network_profile
    if isinstance(m.nbytes, str):
        w = sc.workload
        if w.model is None:
            from simcluster.errors import ConfigError

            raise ConfigError(
                None, "metric.nbytes", m.nbytes, "needs workload.model in the case's scenario"
            )
        model = build_model(w.model, resolved_input_size(w), resolved_num_classes(w))
        nbytes = model.params * (4 if m.nbytes == "model_fp32" else 2)
    else:
        nbytes = float(m.nbytes)
    ranks = tuple(range(gpus))
    prog = RankClass("all", ranks)
    call = CollectiveCall(m.op, (ranks,), float(nbytes), m.algorithm)
    prog.add(collective("c", call, m.op))
    trace = sim.run([prog])
    return trace.end_time, f"{netp.describe()} [network only]"


def nccl_tests_value(m: Metric, sc) -> tuple[float, str]:
    """One row of the simulated nccl-tests table on the scenario's cluster.

    ``m.gpus`` must fill whole nodes; ``m.value`` names the column
    (``busbw_GBps``, ``algbw_GBps`` or ``time_us``).
    """
    from simcluster.collectives import CommContext
    from simcluster.compute import load_network_profile
    from simcluster.network.transport import with_transport
    from simcluster.report.nccl_tests import NCCL_TEST_OPS, run_nccl_tests
    from simcluster.topology import load_topology

    if m.nccl_op not in NCCL_TEST_OPS:
        raise MetricError(
            f"nccl_op {m.nccl_op!r} unknown (have {', '.join(NCCL_TEST_OPS)})"
            + _near(str(m.nccl_op), list(NCCL_TEST_OPS)),
            "metric.nccl_op",
        )
    if m.value not in ("busbw_GBps", "algbw_GBps", "time_us"):
        raise MetricError(
            f"value {m.value!r}: use busbw_GBps, algbw_GBps or time_us", "metric.value"
        )
    per_node = load_topology(sc.topology, num_nodes=1).ranks_per_node
    gpus = int(m.gpus)
    if gpus % per_node:
        raise MetricError(f"{gpus} GPUs do not fill nodes of {per_node}", "metric.gpus")
    cluster = load_topology(sc.topology, num_nodes=gpus // per_node)
    netp = load_network_profile(sc.network_profile)
    ctx = CommContext.from_profile(cluster, with_transport(netp, cluster))
    g = int(m.gpus_per_thread or 1)
    launch, note = 0.0, ""
    if g > 1:  # nccl-tests -g: one thread launches on g GPUs in turn (device profile's launch)
        from simcluster.compute import load_profile

        prof = load_profile(sc.profile)
        launch = prof.launch_overhead
        note = f", -g {g} x {prof.name} launch"
    row = run_nccl_tests(
        ctx, m.nccl_op, [int(m.nbytes)], sc.network_model, m.algorithm,
        gpus_per_thread=g, launch_s=launch,
    )[0]  # fmt: skip
    return float(row[m.value]), f"{netp.describe()} [network only, {row['algorithm']}{note}]"

"""The DDP schedule and the shared forward/backward/bucket machinery."""

from __future__ import annotations

import pytest

from simcluster.collectives import CommContext
from simcluster.engine import Engine
from simcluster.program import ProgramError, RankClass, compute, expand
from simcluster.schedules import BuildContext, get_schedule
from simcluster.schedules.training import make_buckets

MB = 1024 * 1024


def build(cluster, gpus, model, profile, accumulation=1, **options):
    cls = get_schedule("ddp")
    sched = cls(cls.Options(**options))
    ctx = BuildContext(cluster, gpus, model, profile, 32, "fp32", accumulation, 0)
    return sched.build(ctx)


def test_buckets_cover_every_parameter_in_backward_order(model):
    buckets = make_buckets(model, 25 * MB, 1 * MB, 4)
    assert sum(b.numel for b in buckets) == model.params
    # torch's rule: a bucket closes once it holds its cap, so all but the last reach it
    # and none would still be under it without its last tensor
    assert buckets[0].numel * 4 >= 1 * MB or len(buckets) == 1
    assert (buckets[0].numel - buckets[0].tensors[-1].numel) * 4 < 1 * MB
    for b in buckets[1:-1]:
        assert b.numel * 4 >= 25 * MB > (b.numel - b.tensors[-1].numel) * 4
    order = [i for b in buckets for i in b.layers]
    assert order == sorted(order, reverse=True) or len(set(order)) < len(order)
    assert order[0] == max(i for i, layer in enumerate(model.layers) if layer.params)


def test_single_gpu_iteration_is_pure_compute(star_cluster, model, profile):
    cluster = star_cluster(4, 10e9, 1e-6)
    it = build(cluster, 1, model, profile)
    trace = Engine(CommContext(cluster)).run(it.classes)
    expected = sum(op.duration for op in it.classes[0].ops)
    assert trace.end_time == pytest.approx(expected, rel=1e-12)
    assert trace.inter_node_bytes == 0


def test_allreduce_overlaps_backward(star_cluster, model, profile):
    cluster = star_cluster(8, 10e9, 1e-6)
    it = build(cluster, 8, model, profile, broadcast_buffers=False)  # gradient bytes only
    trace = Engine(CommContext(cluster)).run(it.classes)
    compute_s = trace.busy_time("all", "compute")
    comm_s = trace.busy_time("all", "comm")
    assert comm_s > 0
    assert compute_s < trace.end_time < compute_s + comm_s  # partly hidden
    # every byte of gradient goes through the ring: 2(P-1)/P * grads per rank, 8 ranks
    grads = model.params * 4
    assert trace.inter_node_bytes == pytest.approx(8 * 2 * 7 / 8 * grads, rel=1e-9)


def test_collapsed_equals_uncollapsed(star_cluster, model, profile):
    cluster = star_cluster(16, 10e9, 1e-6)
    it = build(cluster, 16, model, profile)
    engine = Engine(CommContext(cluster))
    fast = engine.run(it.classes)
    full = engine.run(expand(it.classes))
    assert len(full.classes) == 16
    assert full.end_time == pytest.approx(fast.end_time, rel=1e-12)
    assert full.inter_node_bytes == pytest.approx(fast.inter_node_bytes, rel=1e-12)


def test_accumulation_syncs_once(star_cluster, model, profile):
    cluster = star_cluster(4, 10e9, 1e-6)
    one = build(cluster, 4, model, profile, accumulation=1)
    two = build(cluster, 4, model, profile, accumulation=2)
    n_coll = lambda it: sum(op.is_collective for op in it.classes[0].ops)  # noqa: E731
    assert n_coll(one) == n_coll(two) > 0
    engine = Engine(CommContext(cluster))
    t1, t2 = engine.run(one.classes).end_time, engine.run(two.classes).end_time
    assert two.samples == 2 * one.samples
    assert t1 < t2 < 2 * t1


def test_fp16_wire_halves_the_bytes(star_cluster, model, profile):
    cluster = star_cluster(4, 10e9, 1e-6)
    engine = Engine(CommContext(cluster))
    off = {"broadcast_buffers": False}  # gradient bytes only
    b32 = engine.run(build(cluster, 4, model, profile, **off).classes).inter_node_bytes
    b16 = engine.run(build(cluster, 4, model, profile, gradient_dtype="fp16", **off).classes)
    assert b16.inter_node_bytes == pytest.approx(b32 / 2, rel=1e-6)


def test_program_rejects_forward_dependencies():
    prog = RankClass("x", (0,))
    prog.add(compute("a", 1.0, "c", deps=("b",)))
    prog.add(compute("b", 1.0, "c"))
    with pytest.raises(ProgramError, match="later op"):
        prog.validate()


def test_streams_wait_for_each_other_at_the_right_times(star_cluster):
    """Compute ops run back to back; a cross-stream dependency starts at its op's end."""
    prog = RankClass("x", (0,))
    prog.add(compute("a", 1.0, "k"))
    prog.add(compute("b", 2.0, "k"))
    prog.add(compute("c", 0.5, "k", deps=("a",), stream="cpu"))  # waits for a only
    prog.add(compute("d", 0.25, "k", deps=("c",)))  # after b (stream order) and c
    prog.add(compute("e", 4.0, "k", deps=("b",), stream="copy"))  # the last to end
    trace = Engine(CommContext(star_cluster(1, 1e9, 1e-6))).run([prog])
    got = {s.op: (s.start, s.end) for s in trace.spans}
    assert got == {
        "a": (0.0, 1.0),
        "b": (1.0, 3.0),
        "c": (1.0, 1.5),
        "d": (3.0, 3.25),
        "e": (3.0, 7.0),
    }
    assert trace.end_time == 7.0
    assert trace.busy_time("x", "compute") == 3.25
    assert [s.op for s in trace.class_spans("x")] == ["a", "b", "c", "d", "e"]

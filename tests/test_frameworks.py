"""Framework mechanics (DDP's bucket copies, apex buckets, Horovod's cycle) and NCCL
transports (sockets, GPUDirect RDMA off), checked against their closed forms."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from simcluster.collectives import CommContext
from simcluster.compute import load_network_profile
from simcluster.engine import Engine
from simcluster.errors import ConfigError
from simcluster.network.transport import with_transport
from simcluster.schedules import BuildContext, get_schedule
from simcluster.schedules.frameworks import APEX_MESSAGE_SIZE, apex_buckets, horovod_cycle_wait
from simcluster.schedules.training import grad_tensors, make_buckets
from simcluster.topology import load_topology

MB = 1024 * 1024


def build(name, cluster, gpus, model, profile, **options):
    cls = get_schedule(name)
    ctx = BuildContext(cluster, gpus, model, profile, 32, "fp32", 1, 0)
    return cls(cls.Options(**options)).build(ctx)


def ops(it, prefix):
    return [op for op in it.classes[0].ops if op.id.startswith(prefix)]


def test_ddp_copies_every_gradient_in_and_out(star_cluster, model, profile):
    it = build("ddp", star_cluster(8, 10e9, 1e-6), 8, model, profile)
    kernels = [profile.elementwise_time(8 * t.numel) for t in grad_tensors(model)]
    # copy-in: per tensor the longer of its kernel and the host's hook cost
    hooks = sum(max(k, profile.ddp_hook_s) for k in kernels)
    assert sum(op.duration for op in ops(it, "allreduce.copy_in")) == pytest.approx(hooks)
    assert sum(op.duration for op in ops(it, "allreduce.copy_out")) == pytest.approx(sum(kernels))
    view = build(
        "ddp", star_cluster(8, 10e9, 1e-6), 8, model, profile, gradient_as_bucket_view=True
    )
    assert not ops(view, "allreduce.copy_out")
    assert sum(op.duration for op in ops(view, "allreduce.copy_in")) == pytest.approx(hooks)


def test_ddp_host_costs_come_from_the_profile(star_cluster, model, profile):
    """Measured defaults (calibrate/measurements/h200-2026-11-28), replaced by a profile's
    own ``ddp_hook_s`` / ``ddp_bucket_s``; each bucket pays one call cost."""
    from simcluster.compute.profile import DDP_BUCKET_S, DDP_HOOK_S

    assert (profile.ddp_hook_s, profile.ddp_bucket_s) == (DDP_HOOK_S, DDP_BUCKET_S)
    slow = copy.copy(profile)
    slow.ddp_hook_s, slow.ddp_bucket_s = 1.0, 5e-3  # a hook far above any copy kernel
    it = build("ddp", star_cluster(8, 10e9, 1e-6), 8, model, slow)
    n = len(make_buckets(model, 25 * MB, 1 * MB, 4))
    copy_in = sum(op.duration for op in ops(it, "allreduce.copy_in"))
    assert copy_in == pytest.approx(1.0 * len(grad_tensors(model)))
    prep = sum(op.duration for op in ops(it, "allreduce.prep"))
    assert prep == pytest.approx(n * 5e-3)
    assert len(ops(it, "allreduce.prep")) == n


def test_make_buckets_match_torchs_own_assignment(model):
    """The bucket rule against torch's ``compute_bucket_assignment_by_size`` itself."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    tensors = grad_tensors(model)
    fake = [torch.empty(t.numel) for t in tensors]  # fp32, backward order
    for cap, first in ((25 * MB, 1 * MB), (1 * MB, 1 * MB), (0.05 * MB, 0.01 * MB)):
        want, _ = dist._compute_bucket_assignment_by_size(fake, [int(first), int(cap)])
        got = make_buckets(model, int(cap), int(first), 4)
        assert [[t.index for t in b.tensors] for b in got] == want


def test_ddp_single_gpu_pays_no_framework_cost(star_cluster, model, profile):
    it = build("ddp", star_cluster(4, 10e9, 1e-6), 1, model, profile)
    assert not [op for op in it.classes[0].ops if op.category == "framework"]


def test_every_bucket_is_reduced_even_when_a_layer_closes_two(star_cluster, model, profile):
    buckets = make_buckets(model, 0.05 * MB, 0.05 * MB, 4)
    it = build("ddp", star_cluster(8, 10e9, 1e-6), 8, model, profile, bucket_cap_mb=0.05,
               first_bucket_mb=0.05)  # fmt: skip
    reduced = [op for op in it.classes[0].ops if op.is_collective and op.call.op == "allreduce"]
    assert len(reduced) == len(buckets)
    assert sum(op.call.nbytes for op in reduced) == 4 * model.params


def test_fp16_hook_halves_the_wire_and_pays_two_casts(star_cluster, model, profile):
    it = build("ddp", star_cluster(8, 10e9, 1e-6), 8, model, profile, gradient_dtype="fp16")
    reduced = [op for op in it.classes[0].ops if op.is_collective and op.call.op == "allreduce"]
    assert sum(op.call.nbytes for op in reduced) == 2 * model.params
    prep = sum(op.duration for op in ops(it, "allreduce.prep"))
    buckets = make_buckets(model, 25 * MB, 1 * MB, 2)
    casts = sum(profile.elementwise_time(6 * b.numel) for b in buckets)
    assert prep == pytest.approx(casts + len(buckets) * profile.ddp_bucket_s)


def test_apex_buckets_hold_at_least_message_size(model):
    buckets = apex_buckets(grad_tensors(model), 2_000_000)
    assert sum(b.numel for b in buckets) == model.params
    assert all(b.numel >= 2_000_000 for b in buckets[:-1])
    assert all(b.numel - b.tensors[-1].numel < 2_000_000 for b in buckets)


def test_apex_ddp_flattens_per_bucket(star_cluster, model, profile):
    it = build("ddp", star_cluster(8, 10e9, 1e-6), 8, model, profile, implementation="apex")
    buckets = apex_buckets(grad_tensors(model), APEX_MESSAGE_SIZE)
    assert len([op for op in it.classes[0].ops if op.is_collective]) == len(buckets)
    assert not ops(it, "allreduce.copy_in")
    assert len(ops(it, "allreduce.prep")) == len(buckets)


def test_colossalai_reduces_everything_once_after_backward(star_cluster, model, profile):
    it = build("ddp", star_cluster(8, 10e9, 1e-6), 8, model, profile, implementation="colossalai")
    prog = it.classes[0].ops
    reduced = [op for op in prog if op.is_collective]
    assert len(reduced) == 1 and reduced[0].call.nbytes == 4 * model.params
    # nothing of the sync starts before the last backward op: the flatten waits for it
    flatten = ops(it, "allreduce.flatten")[0]
    last_backward = [op for op in prog if op.category == "backward"][-1]
    assert flatten.deps == (last_backward.id,)
    assert prog.index(flatten) > prog.index(last_backward)
    want_out = sum(profile.elementwise_time(8 * t.numel) for t in grad_tensors(model))
    assert ops(it, "allreduce.unflatten")[0].duration == pytest.approx(want_out)
    assert not ops(it, "allreduce.copy_in")
    single = build(
        "ddp", star_cluster(8, 10e9, 1e-6), 1, model, profile, implementation="colossalai"
    )
    assert not [op for op in single.classes[0].ops if op.category == "framework"]


def test_topk_list_allgather_copies_each_rank_out_on_the_comm_stream(star_cluster, model, profile):
    from simcluster.schedules.training import selected

    it = build("topk", star_cluster(8, 10e9, 1e-6), 8, model, profile)
    copies = ops(it, "gather_copy.")
    layers = [i for i, layer in enumerate(model.layers) if layer.params > 0]
    assert len(copies) == 2 * len(layers)  # values and indices
    assert all(op.stream == "comm" for op in copies)
    # per rank a copy of the fp32 values and of the int64 indices (read + write)
    want = sum(
        8 * profile.elementwise_time(2 * b * selected(model.layers[i].params, 0.01))
        for i in layers
        for b in (4, 8)
    )
    assert sum(op.duration for op in copies) == pytest.approx(want)
    flat = build("topk", star_cluster(8, 10e9, 1e-6), 8, model, profile, gather_output="tensor")
    assert not ops(flat, "gather_copy.")


def test_topk_allgathers_values_and_indices_as_two_calls_of_their_dtypes(
    star_cluster, model, profile
):
    from simcluster.schedules.training import selected

    layers = [i for i, layer in enumerate(model.layers) if layer.params > 0]
    for dtype, index_bytes in (("int64", 8), ("int32", 4)):
        it = build("topk", star_cluster(8, 10e9, 1e-6), 8, model, profile, index_dtype=dtype)
        for part, nbytes in (("values", 4), ("indices", index_bytes)):
            calls = ops(it, f"allgather.{part}.")
            assert len(calls) == len(layers)
            got = sum(op.call.nbytes for op in calls)
            assert got == sum(nbytes * selected(model.layers[i].params, 0.01) for i in layers)


def test_ddp_broadcasts_batchnorm_buffers_before_the_forward(star_cluster, model, profile):
    from simcluster.schedules.frameworks import bn_buffers

    floats, count = bn_buffers(model)
    bns = [layer for layer in model.layers if layer.shape.get("kind") == "batchnorm"]
    assert count == len(bns) and sum(floats) == sum(layer.params for layer in bns)
    it = build("ddp", star_cluster(8, 10e9, 1e-6), 8, model, profile)
    prog = it.classes[0].ops
    casts = [op for op in prog if op.is_collective and op.call.op == "broadcast"]
    assert [op.call.nbytes for op in casts] == [4.0 * sum(floats), 8.0 * count]
    first_forward = next(i for i, op in enumerate(prog) if op.category == "forward")
    assert all(prog.index(op) < first_forward for op in ops(it, "buffers."))
    copy = ops(it, "buffers.copy_fp32")[0]
    assert copy.duration == pytest.approx(sum(profile.elementwise_time(8 * n) for n in floats))
    off = build("ddp", star_cluster(8, 10e9, 1e-6), 8, model, profile, broadcast_buffers=False)
    assert not ops(off, "buffers.")
    assert not ops(build("ddp", star_cluster(8, 10e9, 1e-6), 1, model, profile), "buffers.")


def test_horovod_cycle_and_negotiation_gate_each_buffer(star_cluster, model, profile):
    cluster = star_cluster(8, 10e9, 1e-6)
    it = build("fusion-dense", cluster, 8, model, profile, cycle_time_ms=5.0)
    neg = ops(it, "negotiate.")
    assert neg and all(op.stream == "ctrl" for op in neg)
    # a bare context estimates collectives at 0 s: the wait is half a cycle
    assert all(op.duration == pytest.approx(horovod_cycle_wait(5.0)) for op in neg)
    assert horovod_cycle_wait(5.0) == pytest.approx(2.5e-3)
    for op in it.classes[0].ops:
        if op.is_collective:
            assert op.deps[0].startswith("fuse_in.")
    plain = build("fusion-dense", cluster, 8, model, profile, framework="none")
    slow = Engine(CommContext(cluster)).run(it.classes).end_time
    fast = Engine(CommContext(cluster)).run(plain.classes).end_time
    assert slow > fast


# -- transports --------------------------------------------------------------------------


def _puhti(nodes=2):
    return load_topology("puhti", num_nodes=nodes)


def _with(netp, **transport):
    return dataclasses.replace(netp, transport=transport)


def test_default_transport_changes_nothing():
    netp = load_network_profile("nccl-spec")
    assert with_transport(netp, _puhti()) is netp
    assert with_transport(_with(netp, net="ib", gpudirect_rdma=True), _puhti()).link_efficiency \
        == netp.link_efficiency  # fmt: skip


def test_socket_transport_needs_its_measured_numbers():
    netp = _with(load_network_profile("nccl-spec"), net="socket")
    with pytest.raises(ConfigError, match="connection_bandwidth"):
        with_transport(netp, _puhti())


def test_socket_caps_the_fabric_at_connections_times_rate():
    cluster = _puhti()
    netp = load_network_profile("nccl-spec")
    out = with_transport(
        _with(
            netp, net="socket", connections=2, connection_bandwidth=1e9, socket_per_message_s=2e-5
        ),  # fmt: skip
        cluster,
    )
    kind = cluster.fabric.kind
    port = min(bw for bw, inter in zip(cluster.link_bandwidth, cluster.inter_node_link,
                                       strict=True) if inter)  # fmt: skip
    assert out.link_efficiency[kind] == pytest.approx(min(netp.link_efficiency[kind], 2e9 / port))
    for name, proto in netp.protocols.items():
        if isinstance(proto, dict) and "hop_latency_s" in proto:  # not NVLS
            for fam, hops in proto["hop_latency_s"].items():
                new = out.protocols[name]["hop_latency_s"][fam]
                assert new["net"] == pytest.approx(hops["net"] + 2e-5)
                assert new["nvlink"] == hops["nvlink"]


def test_no_gpudirect_stages_through_the_pcie_link_and_slows_allreduce():
    cluster = _puhti()
    netp = load_network_profile("nccl-spec")
    staged = with_transport(_with(netp, gpudirect_rdma=False, staging_bandwidth=2e9), cluster)
    kind = cluster.fabric.kind
    assert staged.link_efficiency[kind] < netp.link_efficiency[kind]
    from simcluster.program import CollectiveCall
    from simcluster.simulation import Simulation

    call = CollectiveCall("allreduce", (tuple(range(8)),), 256e6)
    t0 = Simulation.for_topology("puhti", 8, network_profile=netp).estimate(call)
    t1 = Simulation.for_topology("puhti", 8, network_profile=staged).estimate(call)
    assert t1 > 2 * t0


def test_transport_applies_once_and_defaults_staging_to_pcie():
    cluster = _puhti()
    netp = load_network_profile("nccl-spec")
    once = with_transport(_with(netp, gpudirect_rdma=False, staging_per_message_s=1e-6), cluster)
    assert with_transport(once, cluster) is once
    pcie = min(a["bandwidth"] for _, _, a in cluster.template.edges if a["kind"] == "pcie")
    port = min(bw for bw, inter in zip(cluster.link_bandwidth, cluster.inter_node_link,
                                       strict=True) if inter)  # fmt: skip
    kind = cluster.fabric.kind
    want = min(netp.link_efficiency[kind], pcie * netp.link_efficiency.get("pcie", 1.0) / port)
    assert once.link_efficiency[kind] == pytest.approx(want)


def test_bad_transport_in_a_profile_is_a_config_error(tmp_path):
    import json

    from simcluster.paths import network_profiles_dir

    data = json.loads((network_profiles_dir() / "nccl-spec.json").read_text())
    data["network"]["transport"] = {"net": "tcp"}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"network\.transport\.net"):
        load_network_profile(str(path))


def test_topk_after_backward_launches_every_layer_once_backward_is_done(
    star_cluster, model, profile
):
    hook = build("topk", star_cluster(8, 10e9, 1e-6), 8, model, profile)
    late = build("topk", star_cluster(8, 10e9, 1e-6), 8, model, profile, launch="after_backward")
    ids = [op.id for op in late.classes[0].ops]
    first_topk = min(ids.index(op.id) for op in ops(late, "topk."))
    backward_end = ids[first_topk - 1]
    assert all(op.deps == (backward_end,) for op in ops(late, "topk."))
    assert not any(i.startswith(("topk.", "allgather.")) for i in ids[:first_topk])
    # the same ops, only their dependencies differ
    assert sorted(op.id for op in hook.classes[0].ops) == sorted(ids)
    assert any(op.deps != (backward_end,) for op in ops(hook, "topk."))


def test_explicit_bucket_cap_drops_the_small_first_bucket(star_cluster, model, profile):
    """torch 2.x (``distributed.py``'s first-bucket optimisation): the 1 MiB first bucket
    only while ``bucket_cap_mb`` is left at its default; an explicit cap applies to the
    first bucket too, unless ``first_bucket_mb`` is given as well."""
    from simcluster.schedules.ddp import DDPOptions, first_bucket_mb

    assert first_bucket_mb(DDPOptions()) == 1.0
    assert first_bucket_mb(DDPOptions(bucket_cap_mb=0.05)) == 0.05
    assert first_bucket_mb(DDPOptions(bucket_cap_mb=0.05, first_bucket_mb=0.01)) == 0.01

    def reduced(it):
        return [op for op in it.classes[0].ops if op.is_collective and op.call.op == "allreduce"]

    cluster = star_cluster(8, 10e9, 1e-6)
    # ResNet-50: at 25 MiB the default's 1 MiB first bucket holds the fc layer alone
    # (5 buckets); an explicit 25 MiB cap fills the first bucket too (4, as DDP logged
    # on the H200, calibrate/measurements/h200-2026-11-28)
    assert len(reduced(build("ddp", cluster, 8, model, profile))) == 5
    assert len(reduced(build("ddp", cluster, 8, model, profile, bucket_cap_mb=25))) == 4
    it = build("ddp", cluster, 8, model, profile, bucket_cap_mb=25, first_bucket_mb=1)
    assert len(reduced(it)) == 5

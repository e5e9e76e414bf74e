"""An idle network gives a collective's flows the static rates the tuner
computed: the same times as solving them afresh."""

from __future__ import annotations

import simpy

from simcluster.collectives import CollectiveCall, CommContext, estimate_phases, lower
from simcluster.compute import load_network_profile
from simcluster.network import make_network
from simcluster.network.flow import FlowBatch
from simcluster.topology import load_topology


def _run(ctx: CommContext, phases: list[FlowBatch]) -> tuple[float, int]:
    env = simpy.Environment()
    net = make_network("maxmin", env, ctx.capacity, ctx.inter_node_link)

    def go():
        for p in phases:
            yield net.transfer(p)

    env.process(go())
    env.run()
    return env.now, net.rate_updates


def test_known_rates_give_the_same_times_as_a_fresh_solve():
    ctx = CommContext.from_profile(
        load_topology("puhti", num_nodes=6), load_network_profile("nccl-spec")
    )
    for size in (1e3, 3e7):
        call = CollectiveCall("allreduce", (tuple(range(24)),), size, "auto")
        _, phases = lower(ctx, call)
        estimate_phases(ctx, phases)  # rates cached on the shape
        assert all(p.known_rates(ctx.capacity) is not None for p in phases)
        fresh = [FlowBatch(p.entry_flow, p.entry_link, p.nbytes, p.latency) for p in phases]
        assert all(p.known_rates(ctx.capacity) is None for p in fresh)
        assert _run(ctx, phases) == _run(ctx, fresh)
        other = ctx.capacity * 1.0  # equal values, another array: not taken as known
        assert phases[0].known_rates(other) is None

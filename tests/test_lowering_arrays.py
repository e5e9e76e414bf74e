"""Array lowerings (ring, tree) build exactly the flows of the per-flow ones."""

from __future__ import annotations

import numpy as np
import pytest

from simcluster.collectives import registry as reg
from simcluster.collectives.base import CollectiveCall
from simcluster.network.flow import FlowBatch
from simcluster.simulation import Simulation

CASES = [
    ("puhti-2l", 64, "nccl-spec"),
    ("puhti-2l", 64, "mpi-spec"),
    ("dgx-a100", 32, "nccl-spec"),
    ("ssfusion-a100-pcie", 16, "nccl-puhti-fitted"),
    ("deep-est-esb", 12, "mpi-spec"),
    ("haswell-ib", 48, "nccl-spec"),
]
OPS = [
    ("allreduce", "ring"),
    ("allgather", "ring"),
    ("reduce_scatter", "ring"),
    ("allreduce", "tree"),
    ("broadcast", "chain"),
    ("reduce", "chain"),
]


def _per_flow(ctx, call, protocol):
    with ctx.lowering(None if protocol is None else call.algorithm):
        fn = reg.ALGORITHMS[call.op][call.algorithm]
        phases = reg._merge([fn(ctx, call, tuple(g)) for g in call.groups])
        if protocol is None:
            return [(FlowBatch.from_flows(p), None) for p in phases if p]
        return [reg._batch(p) for p in phases if p]


def _arrays(ctx, call, protocol):
    with ctx.lowering(None if protocol is None else call.algorithm):
        return [(b, b.latency) for b in reg.BATCH_LOWERINGS[(call.op, call.algorithm)](ctx, call)]


@pytest.mark.parametrize(("topology", "gpus", "profile"), CASES)
def test_array_lowering_is_identical(topology, gpus, profile):
    sim = Simulation.for_topology(topology, gpus, profile)
    ctx = sim.engine.ctx
    P, R = sim.cluster.num_ranks, sim.cluster.ranks_per_node
    groupsets = [
        (tuple(range(P)),),
        tuple(tuple(range(i, P, R)) for i in range(R)),  # one rank per node, per local index
        (tuple(range(0, P, 2)), tuple(range(1, P, 2))),
        (tuple(range(3)),),
        (tuple(range(P - 1, -1, -1)),),
        ((0,), (1, 2)),
        tuple(tuple(range(i, i + R)) for i in range(0, P, R)),  # whole nodes (merged rings)
    ]
    for groups in groupsets:
        for op, name in OPS:
            for proto in list(ctx.protocols) or [None]:
                call = CollectiveCall(op, groups, 1.0, name)
                old, new = _per_flow(ctx, call, proto), _arrays(ctx, call, proto)
                assert len(old) == len(new)
                for (a, lat_a), (b, lat_b) in zip(old, new, strict=True):
                    np.testing.assert_array_equal(a.entry_flow, b.entry_flow)
                    np.testing.assert_array_equal(a.entry_link, b.entry_link)
                    np.testing.assert_array_equal(a.nbytes, b.nbytes)
                    if proto is None:
                        np.testing.assert_array_equal(a.latency, b.latency)
                    else:  # bit for bit, one column per protocol
                        np.testing.assert_array_equal(np.asarray(lat_a, float), lat_b)


def _orders_by_loop(ctx, group):
    """ring_orders' node-by-node construction for groups of whole nodes (reference)."""
    from simcluster.collectives.ring import _node_rings, _rail_cuts

    by_node = ctx.split_by_node(group)
    rings = _node_rings(ctx)
    R = ctx.cluster.ranks_per_node
    channels = max(1, min(ctx.nics_per_node, R))
    m = len(by_node)
    orders = []
    for r, k in _rail_cuts(ctx, rings, channels):
        order = []
        for j, ranks in enumerate(by_node):
            local = rings[r][k:] + rings[r][:k]
            if j % 2 == 1 and m % 2 == 0:
                local = local[::-1]
            order.extend(ranks[0] + i for i in local)
        orders.append(order)
    return orders


@pytest.mark.parametrize(
    ("topology", "gpus"), [("puhti-2l", 64), ("puhti-2l", 20), ("dgx-a100", 40)]
)
def test_whole_node_ring_orders(topology, gpus):
    from simcluster.collectives.ring import ring_orders

    ctx = Simulation.for_topology(topology, gpus, "nccl-spec").engine.ctx
    P = ctx.cluster.num_ranks
    group = tuple(range(P))
    assert ctx.split_by_node(group) == [
        list(range(a, a + ctx.cluster.ranks_per_node))
        for a in range(0, P, ctx.cluster.ranks_per_node)
    ]
    assert ring_orders(ctx, group) == _orders_by_loop(ctx, group)


def test_binary_tree_edge_array_matches_the_loop():
    from simcluster.collectives.tree import binary_tree_edge_array, binary_tree_edges, second_tree

    for n in [*range(0, 70), 127, 128, 129, 200, 255, 256, 257, 1000, 4097]:  # both paths
        edges = binary_tree_edges(n)
        arr = binary_tree_edge_array(n)
        assert [tuple(e) for e in arr.tolist()] == edges
        twin = (n - 1 - arr) if n % 2 == 0 else (arr + 1) % max(n, 1)
        assert [tuple(e) for e in twin.tolist()] == second_tree(edges, n)


@pytest.mark.parametrize(("topology", "gpus", "profile"), CASES)
def test_memoised_p2p_routes_are_identical(topology, gpus, profile):
    """p2p lowering through the route memo: the arrays of a fresh routing, for
    pairs seen before, new ones, repeats and a mix, call after call."""
    sim = Simulation.for_topology(topology, gpus, profile)
    ctx = sim.engine.ctx
    P = sim.cluster.num_ranks
    rng = np.random.default_rng(7)
    for n, in_order in ((1, False), (5, False), (40, False), (40, True), (200, False), (200, True)):
        src, dst = rng.integers(0, P, n), rng.integers(0, P, n)
        if in_order:  # distinct pairs in code order: read from the store by a mask
            code = np.unique(src * P + dst)
            src, dst = code // P, code % P
        memo = ctx.flow_batch(src, dst, 3.0, memo=True)
        fresh = ctx.flow_batch(src, dst, 3.0)
        for a in ("entry_flow", "entry_link", "nbytes", "latency"):
            np.testing.assert_array_equal(getattr(memo, a), getattr(fresh, a), strict=True)
        np.testing.assert_array_equal(memo.by_flow()[1], fresh.by_flow()[1], strict=True)
        # the flows of one latency, as a backend splits a batch (known flow order or not)
        mask = fresh.latency == fresh.latency[0]
        for x, y in zip(memo.select(mask).by_flow(), fresh.select(mask).by_flow(), strict=True):
            np.testing.assert_array_equal(x, y, strict=True)
        np.testing.assert_array_equal(memo.select(mask).entry_flow, fresh.select(mask).entry_flow)


def test_route_memo_rejects_bad_ranks_like_the_cluster():
    sim = Simulation.for_topology("puhti-2l", 64, "nccl-spec")
    ctx = sim.engine.ctx
    ctx.flow_batch(np.array([0]), np.array([5]), 1.0, memo=True)
    with pytest.raises(Exception) as memo_err:
        ctx.flow_batch(np.array([1]), np.array([-1]), 1.0, memo=True)  # code 63 if unchecked
    with pytest.raises(Exception) as fresh_err:
        ctx.flow_batch(np.array([1]), np.array([-1]), 1.0)
    assert type(memo_err.value) is type(fresh_err.value)
    assert str(memo_err.value) == str(fresh_err.value)


@pytest.mark.parametrize("profile", ["mpi-spec", "nccl-spec"])
def test_memoised_p2p_lowerings_are_kept_only_with_protocols(profile):
    """Without protocols a p2p call (routed through the route memo) is lowered again
    at every request, to the same arrays, and kept neither by the engine nor as a
    shape; other calls, and p2p under protocols, are lowered once."""
    sim = Simulation.for_topology("puhti-2l", 64, profile)
    engine, ctx = sim.engine, sim.engine.ctx
    p2p = CollectiveCall("p2p", ((0, 9), (9, 40), (3, 4)), 8.0, "direct")
    ring = CollectiveCall("allreduce", (tuple(range(8)),), 8.0, "ring")
    first, again = engine.lowered(p2p), engine.lowered(p2p)
    assert first[0] == again[0]
    for a, b in zip(first[1], again[1], strict=True):
        for f in ("entry_flow", "entry_link", "nbytes", "latency"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f), strict=True)
    keeps = bool(ctx.protocols)
    assert (first is again) == keeps
    assert any(key[0] == "p2p" for key in ctx.shapes) == keeps
    assert engine.lowered(ring) is engine.lowered(ring)


def test_leader_reduce_and_broadcast_use_every_node_ring():
    # The leaders' intra-node reduce and broadcast run on the node communicator as NCCL
    # runs them: over each of the node's channel rings (Puhti's fully connected 4-GPU
    # board has 6), each cut open at the leader and carrying 1 / 6 of the bytes.
    from simcluster.collectives import chain, leader

    sim = Simulation.for_topology("puhti", 8, "nccl-spec")
    ctx = sim.engine.ctx
    chains = chain.root_chains(ctx, (0, 1, 2, 3), 0)
    assert len(chains) == 6 and all(c[0] == 0 and sorted(c) == [0, 1, 2, 3] for c in chains)
    reduce, inter, bcast = leader.allreduce(
        ctx, CollectiveCall("allreduce", (), 6e6), tuple(range(8))
    )
    for phase in (reduce, bcast):
        assert len(phase) == 2 * 6 * 3  # two nodes, six chains of three hops
        assert {f.nbytes for f in phase} == {1e6}

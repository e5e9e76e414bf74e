"""Closed forms for the collective algorithms on a uniform ring."""

from __future__ import annotations

import pytest

from simcluster.collectives import CollectiveCall, CommContext, estimate_phases, lower
from simcluster.engine import Engine
from simcluster.errors import UserError
from simcluster.program import RankClass, collective

B = 12.5e9
ALPHA = 3e-6


def simulate(cluster, call, backend="maxmin", overhead=0.0):
    ctx = CommContext(cluster, per_message_overhead=overhead)
    prog = RankClass("all", tuple(range(cluster.num_ranks)))
    prog.add(collective("c", call, "comm"))
    return Engine(ctx, backend).run([prog]).end_time


@pytest.mark.parametrize("p", [2, 4, 8, 16])
@pytest.mark.parametrize("backend", ["maxmin", "closed-form"])
def test_ring_allreduce_closed_form(ring_cluster, p, backend):
    n = 64e6
    cluster = ring_cluster(p, B, ALPHA)
    call = CollectiveCall("allreduce", (tuple(range(p)),), n, "ring")
    expected = 2 * (p - 1) * ALPHA + 2 * (p - 1) / p * n / B
    assert simulate(cluster, call, backend) == pytest.approx(expected, rel=1e-9)


def test_software_overhead_adds_per_step(ring_cluster):
    p, n, o = 8, 1e6, 5e-6
    cluster = ring_cluster(p, B, ALPHA)
    call = CollectiveCall("allreduce", (tuple(range(p)),), n, "ring")
    expected = 2 * (p - 1) * (ALPHA + o) + 2 * (p - 1) / p * n / B
    assert simulate(cluster, call, overhead=o) == pytest.approx(expected, rel=1e-9)


def test_ring_allgather_and_reduce_scatter(ring_cluster):
    p, n = 8, 8e6
    cluster = ring_cluster(p, B, ALPHA)
    g = (tuple(range(p)),)
    ag = simulate(cluster, CollectiveCall("allgather", g, n))
    assert ag == pytest.approx((p - 1) * ALPHA + (p - 1) * n / B, rel=1e-9)
    rs = simulate(cluster, CollectiveCall("reduce_scatter", g, n))
    assert rs == pytest.approx((p - 1) * ALPHA + (p - 1) / p * n / B, rel=1e-9)


def test_chain_broadcast_is_pipelined(ring_cluster):
    p, n = 6, 60e6
    cluster = ring_cluster(p, B, ALPHA)
    t = simulate(cluster, CollectiveCall("broadcast", (tuple(range(p)),), n))
    assert t == pytest.approx((p - 1) * ALPHA + n / B, rel=1e-9)


def test_p2p_one_flow(ring_cluster):
    cluster = ring_cluster(4, B, ALPHA)
    t = simulate(cluster, CollectiveCall("p2p", ((0, 2),), 1e6))
    assert t == pytest.approx(2 * ALPHA + 1e6 / B, rel=1e-9)


def test_concurrent_groups_contend(star_cluster):
    # Two senders into one receiver share its down-link: twice as long as one.
    cluster = star_cluster(4, B, 0.0)
    one = simulate(cluster, CollectiveCall("p2p", ((0, 1),), 1e9))
    two = simulate(cluster, CollectiveCall("p2p", ((0, 1), (3, 1)), 1e9))
    apart = simulate(cluster, CollectiveCall("p2p", ((0, 1), (3, 2)), 1e9))
    assert one == pytest.approx(1e9 / B)
    assert two == pytest.approx(2e9 / B)
    assert apart == pytest.approx(1e9 / B)


def test_tree_allreduce_on_a_switch(star_cluster):
    # 8 hosts on one switch: two trees of height 3, each carrying n/2, up then down.
    p, n = 8, 8e6
    cluster = star_cluster(p, B, ALPHA)
    t = simulate(cluster, CollectiveCall("allreduce", (tuple(range(p)),), n, "tree"))
    # An inner vertex of one tree receives two children's halves (n) on its down-link
    # while a leaf of the other tree: the busiest down-link carries n per phase.
    assert t == pytest.approx(2 * (3 * 2 * ALPHA + n / B), rel=1e-9)


def test_auto_prefers_tree_for_tiny_messages_on_many_nodes(star_cluster):
    cluster = star_cluster(64, B, ALPHA)
    ctx = CommContext(cluster)
    small = CollectiveCall("allreduce", (tuple(range(64)),), 1024.0)
    algo, phases = lower(ctx, small)
    assert algo == "tree"
    big = CollectiveCall("allreduce", (tuple(range(64)),), 1e9)
    algo_big, _ = lower(ctx, big)
    ring_t = estimate_phases(
        ctx, lower(ctx, CollectiveCall("allreduce", big.groups, 1e9, "ring"))[1]
    )
    tree_t = estimate_phases(
        ctx, lower(ctx, CollectiveCall("allreduce", big.groups, 1e9, "tree"))[1]
    )
    assert algo_big == ("ring" if ring_t <= tree_t else "tree")


def test_halving_doubling_needs_power_of_two(ring_cluster):
    cluster = ring_cluster(6, B, ALPHA)
    with pytest.raises(UserError, match="power-of-two"):
        lower(
            CommContext(cluster),
            CollectiveCall("allreduce", (tuple(range(6)),), 1e6, "halving-doubling"),
        )


@pytest.mark.parametrize("p", [2, 3, 4, 8, 12, 16, 20])
@pytest.mark.parametrize("backend", ["maxmin", "closed-form"])
def test_rabenseifner_closed_form_on_a_switch(star_cluster, p, backend):
    # Open MPI's redscat_allgather: with p' = 2^floor(log2 p) and r = p - p', two
    # log2(p') rounds moving (1 - 1/p') n each way, plus, when r > 0, a half-vector
    # exchange, a half-vector send and a whole-vector send (3 messages, 2 n).
    n = 48e6
    cluster = star_cluster(p, B, ALPHA)
    call = CollectiveCall("allreduce", (tuple(range(p)),), n, "rabenseifner")
    p2 = 1 << (p.bit_length() - 1)
    extra = p > p2
    hop = 2 * ALPHA  # host -> switch -> host
    expected = hop * (2 * (p2.bit_length() - 1) + 3 * extra) + n / B * (
        2 * (1 - 1 / p2) + 2 * extra
    )
    assert simulate(cluster, call, backend) == pytest.approx(expected, rel=1e-9)


def test_rabenseifner_non_power_of_two_costs_more_than_the_next_power(star_cluster):
    # 12 ranks move 3.75 n on the critical path, 16 ranks 1.875 n: the 12-rank group
    # is slower, the ring is not.
    n = 100e6
    t = {}
    for p in (8, 12, 16):
        cluster = star_cluster(p, B, 0.0)
        for algo in ("rabenseifner", "ring"):
            call = CollectiveCall("allreduce", (tuple(range(p)),), n, algo)
            t[p, algo] = simulate(cluster, call)
    assert t[12, "rabenseifner"] == pytest.approx(3.75 * n / B, rel=1e-9)
    assert t[12, "rabenseifner"] > 1.9 * t[16, "rabenseifner"]
    assert t[8, "ring"] < t[12, "ring"] < t[16, "ring"]


def test_unknown_algorithm_names_the_choices(ring_cluster):
    from simcluster.errors import UnknownNameError

    cluster = ring_cluster(4, B, ALPHA)
    with pytest.raises(UnknownNameError, match="did you mean 'ring'"):
        lower(CommContext(cluster), CollectiveCall("allreduce", (tuple(range(4)),), 1e6, "rnig"))


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13, 64])
def test_double_binary_tree_shape(n):
    from simcluster.collectives.tree import binary_tree_edges, second_tree

    a = binary_tree_edges(n)
    b = second_tree(a, n)
    for edges in (a, b):
        assert len(edges) == n - 1  # a spanning tree
        children = {}
        for c, p in edges:
            children.setdefault(p, []).append(c)
        assert max(len(v) for v in children.values()) <= 2
    inner_a = {p for _, p in a}
    inner_b = {p for _, p in b}
    if n % 2 == 0:
        assert not inner_a & inner_b  # inner in at most one tree


def test_p2p_batch_lowering_equals_flow_by_flow():
    """The array lowering of many sends gives the flows of one ``send`` per pair."""
    import numpy as np

    from simcluster.collectives import p2p
    from simcluster.network.flow import FlowBatch
    from simcluster.topology import load_topology

    cluster = load_topology("haswell-ib", 6)
    ctx = CommContext(cluster, per_message_overhead=2e-6)
    rng = np.random.default_rng(3)
    pairs = tuple(
        (int(a), int(b)) for a, b in rng.integers(0, cluster.num_ranks, (500, 2)).tolist()
    )
    call = CollectiveCall("p2p", pairs, 1.0, "direct")
    [batch] = p2p.send_batch(ctx, call)
    want = FlowBatch.from_flows([f for g in pairs for f in p2p.send(ctx, call, g)[0]])
    for name in ("entry_flow", "entry_link", "nbytes", "latency"):
        assert np.array_equal(getattr(batch, name), getattr(want, name)), name


def test_groups_equal_and_hash_as_the_plain_tuple():
    import pickle

    import numpy as np

    from simcluster.program import Groups

    plain = ((0, 1), (2, 3), (5, 4))
    g = Groups(plain)
    np.testing.assert_array_equal(g.flat, [0, 1, 2, 3, 5, 4])
    assert g == plain and hash(g) == hash(plain) and hash(g) == hash(plain)
    a = CollectiveCall("p2p", g, 8.0, "direct")
    b = CollectiveCall("p2p", plain, 8.0, "direct")
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    back = pickle.loads(pickle.dumps(g))
    assert back == plain and hash(back) == hash(plain)
    np.testing.assert_array_equal(back.flat, g.flat)

"""Double binary tree allreduce (NCCL's ``Tree``).

Inside each node the ranks form a chain to a node head; the node heads form two
complementary binary trees, each carrying half of the buffer (a rank that is a
leaf in one tree is an inner vertex in the other). Chunks pipeline through the
chain and the trees, so a reduce phase (every edge towards the roots, both
trees at once) is followed by a broadcast phase (every edge away from the
roots). Each flow carries its tree's share of the buffer; its start-up latency
is the depth of the pipeline: chain length plus tree height, in messages.
"""

from __future__ import annotations

import functools

import numpy as np

from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.network.flow import FlowBatch

__all__ = ["binary_tree_edges", "second_tree", "allreduce", "allreduce_batch"]


def binary_tree_edges(n: int) -> list[tuple[int, int]]:
    """(child, parent) pairs of the in-order binary tree over positions 0..n-1.

    Position r is vertex i = r + 1 of the infinite in-order tree on the positive
    integers (i = l * (2k + 1) with l its lowest set bit: a left child of i + l
    when k is even, a right child of i - l when k is odd). Vertices above n are
    skipped by climbing on. Leaves are the even positions, so mirroring the
    positions (even n) or shifting them by one (odd n) makes a second tree whose
    inner vertices are the first one's leaves.
    """
    if n <= 1:
        return []
    root = 1 << (n.bit_length() - 1)
    edges = []
    for i in range(1, n + 1):
        if i == root:
            continue
        p, low = i, i & -i
        while True:
            q = p + low if (p // low) % 4 == 1 else p - low
            if 1 <= q <= n:
                break
            p, low = q, 2 * low
        edges.append((i - 1, q - 1))
    return edges


def binary_tree_edge_array(n: int) -> np.ndarray:
    """:func:`binary_tree_edges` as an ``(n - 1, 2)`` int array (same rows, same
    order), climbing every vertex at once."""
    if n <= 1:
        return np.zeros((0, 2), dtype=np.int64)
    root = 1 << (n.bit_length() - 1)
    i = np.arange(1, n + 1, dtype=np.int64)
    i = i[i != root]
    p, low = i.copy(), i & -i
    q = np.zeros_like(i)
    todo = np.ones(i.size, dtype=bool)
    while todo.any():
        pt, lt = p[todo], low[todo]
        qt = np.where((pt // lt) % 4 == 1, pt + lt, pt - lt)
        ok = (qt >= 1) & (qt <= n)
        idx = np.flatnonzero(todo)
        q[idx[ok]] = qt[ok]
        climb = idx[~ok]
        p[climb], low[climb] = qt[~ok], 2 * lt[~ok]
        todo[idx[ok]] = False
    return np.stack([i - 1, q - 1], axis=1)


def second_tree(edges: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """The complementary tree: mirrored for even n, shifted by one for odd n."""
    if n % 2 == 0:
        return [(n - 1 - c, n - 1 - p) for c, p in edges]
    return [((c + 1) % n, (p + 1) % n) for c, p in edges]


def _height(n: int) -> int:
    return max(n - 1, 0).bit_length()


def allreduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    if len(group) < 2:
        return []
    nodes = ctx.split_by_node(group)
    heads = [ranks[0] for ranks in nodes]
    m = len(heads)
    edges_a = binary_tree_edges(m)
    edges_b = second_tree(edges_a, m)
    trees = [edges_a, edges_b] if m > 1 else [[]]
    share = call.nbytes / len(trees)
    chain_len = max(len(r) for r in nodes) - 1
    up: Phase = []
    down: Phase = []
    for edges in trees:
        hops = [(heads[c], heads[p]) for c, p in edges]
        for ranks in nodes:  # chain inside each node, towards the head
            hops += [(ranks[i + 1], ranks[i]) for i in range(len(ranks) - 1)]
        if ctx.active is not None:
            # NCCL's model: chain steps at the intra-node step latency, tree
            # levels at the network one
            tree_hops = [(heads[c], heads[p]) for c, p in edges]
            a_in = functools.reduce(
                np.maximum, (ctx.alpha(a, b) for a, b in hops[len(tree_hops) :]), 0.0
            )
            a_net = functools.reduce(np.maximum, (ctx.alpha(a, b) for a, b in tree_hops), 0.0)
            depth = chain_len * a_in + _height(m) * a_net
        else:
            alpha = max((ctx.alpha(a, b) for a, b in hops), default=0.0)
            depth = (chain_len + _height(m)) * alpha
        up += [ctx.flow_with_latency(a, b, share, depth) for a, b in hops]
        down += [ctx.flow_with_latency(b, a, share, depth) for a, b in hops]
    return [up, down]


def allreduce_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`allreduce` of every group at once, as two flow batches (the same
    flows, in the same order, as lowering each group and merging the phases).
    Under protocols the latency holds one column per protocol."""
    ups: list[tuple[np.ndarray, np.ndarray, float, object]] = []
    for g in call.groups:
        if len(g) < 2:
            continue
        nodes = ctx.split_by_node(g)
        heads = np.array([ranks[0] for ranks in nodes], dtype=np.int64)
        m = heads.size
        edges_a = binary_tree_edge_array(m)
        if m % 2 == 0:  # second_tree, as arrays
            edges_b = m - 1 - edges_a
        else:
            edges_b = (edges_a + 1) % m
        trees = [edges_a, edges_b] if m > 1 else [np.zeros((0, 2), dtype=np.int64)]
        share = call.nbytes / len(trees)
        sizes = {len(r) for r in nodes}
        chain_len = max(sizes) - 1
        if len(sizes) == 1:  # equal nodes: the chains as one array
            grid = np.array(nodes, dtype=np.int64)
            c_src, c_dst = grid[:, 1:].ravel(), grid[:, :-1].ravel()
        else:
            c_src = np.array([r[i + 1] for r in nodes for i in range(len(r) - 1)], dtype=np.int64)
            c_dst = np.array([r[i] for r in nodes for i in range(len(r) - 1)], dtype=np.int64)
        for e in trees:
            t_src, t_dst = heads[e[:, 0]], heads[e[:, 1]]
            src = np.concatenate([t_src, c_src])
            dst = np.concatenate([t_dst, c_dst])
            if ctx.active is not None:
                act = ctx.active
                a_in = _max_class(act, ctx.hop_classes(c_src, c_dst))
                a_net = _max_class(act, ctx.hop_classes(t_src, t_dst))
                depth = chain_len * a_in + _height(m) * a_net
            else:
                f, link = ctx.cluster.routes(src, dst)
                alpha = ctx.path_latencies(f, link, src.size) + ctx.per_message_overhead
                depth = (chain_len + _height(m)) * (float(alpha.max()) if alpha.size else 0.0)
            ups.append((src, dst, share, depth))
    if not ups:
        return []
    return [_batch_of(ctx, ups, False), _batch_of(ctx, ups, True)]


def _max_class(act: dict, cls: np.ndarray):
    """Elementwise max of the step latencies of the hop classes present (0.0 for none)."""
    names = ("nvlink", "pcie", "net")
    present = [names[c] for c in np.unique(cls)]
    return functools.reduce(np.maximum, (act[c] for c in present), 0.0)


def _batch_of(ctx: CommContext, parts: list, reverse: bool) -> FlowBatch:
    src = np.concatenate([d if reverse else s for s, d, _, _ in parts])
    dst = np.concatenate([s if reverse else d for s, d, _, _ in parts])
    nbytes = np.concatenate([np.full(s.size, float(share)) for s, _, share, _ in parts])
    if ctx.active is not None:
        latency = np.concatenate(
            [np.broadcast_to(dep, (s.size, np.size(dep))) for s, _, _, dep in parts]
        )
    else:
        latency = np.concatenate([np.full(s.size, float(dep)) for s, _, _, dep in parts])
    entry_flow, entry_link = ctx.cluster.routes(src, dst)
    return FlowBatch(entry_flow, entry_link, nbytes, latency)

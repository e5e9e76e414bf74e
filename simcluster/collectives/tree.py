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

__all__ = ["binary_tree_edges", "second_tree", "allreduce"]


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

"""Double binary tree allreduce (NCCL's ``Tree``), over several channels.

As NCCL builds it (NVIDIA/nccl commit 5067397c, v2.30.7):

- *Channels.* The tree gets as many channels as the ring
  (``src/init.cc``: ``comm->nChannels = treeGraph->nChannels =
  ringGraph->nChannels``, the smaller of the two searches), here one per NIC
  rail (at most the GPUs per node), as :func:`ring.ring_orders` gives the ring.
  Search channel ``c`` starts at NIC ``c mod NICs`` (``src/graph/search.cc``,
  ``ncclTopoSearchRecNet``: ``nets[(graph->nChannels + i) % netCount]``), at
  a GPU on that NIC, and walks the node's GPUs from there (here: the node's
  first NVLink ring, :func:`channels.node_rings`, rotated to start at that
  GPU). That GPU is the channel's head: it talks to the channel's parent and
  children on other nodes, all on its own NIC (rail-local).
- *Chain.* Inside a node a channel is a chain along that order towards its
  head (``src/graph/connect.cc``, ``ncclTopoPreset``: ``tree.up =
  treeIntra[i - 1]``, ``tree.down[0] = treeIntra[i + 1]``).
- *Two trees per channel.* Each search channel is duplicated, and the copy
  ``c + nChannels`` takes the second tree of ``ncclGetDtree`` over the nodes
  (``connect.cc``, ``connectTrees``; ``src/graph/trees.cc``: mirrored for an
  even node count, shifted by one for an odd one), with the same chain and
  heads. So the buffer is split over 2 x channels tree channels, each
  carrying ``nbytes / (2 * channels)``.

Chunks pipeline through the chains and trees, so a reduce phase (every edge
towards the roots, both trees at once) is followed by a broadcast phase (every
edge away from the roots). A chain step that several channels (and both
trees) take on one link is one flow carrying their bytes (as the ring's
merged NVLink channels). Each flow's start-up latency is the pipeline depth:
chain length plus tree height, in messages (NCCL's tuning.cc:
``2 * ((nRanks / nNodes - 1) * intraLat + log2i(nNodes) * interLat)`` over
both phases).

On 2 nodes each NIC direction carries ``nbytes / channels`` over both phases
(the ring: ``2 (P - 1) / P`` of that), which is why NCCL's tree can beat the
ring's network limit there (NVIDIA, github.com/NVIDIA/nccl/issues/946,
github.com/NVIDIA/nccl-tests/issues/196); on more nodes an inner vertex moves
``2 nbytes / channels`` per NIC direction, NCCL's tuner's ``0.5 x nChannels x
bwInter`` algorithm bandwidth (tuning.cc). Units: bytes, seconds.
"""

from __future__ import annotations

import functools

import numpy as np

from simcluster.collectives.base import CollectiveCall, CommContext, Phase
from simcluster.network.flow import FlowBatch, FlowSpec

__all__ = [
    "binary_tree_edges",
    "second_tree",
    "tree_channels",
    "group_flows",
    "allreduce",
    "allreduce_batch",
]


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


#: fewest tree vertices :func:`binary_tree_edge_array` climbs as arrays (16 nodes:
#: ~120 us as arrays, ~8 us by the loop; even at 128)
_ARRAY_FROM = 128


def binary_tree_edge_array(n: int) -> np.ndarray:
    """:func:`binary_tree_edges` as an ``(n - 1, 2)`` int array (same rows, same
    order), climbing every vertex at once."""
    if n <= 1:
        return np.zeros((0, 2), dtype=np.int64)
    if n < _ARRAY_FROM:  # the loop is quicker than the array climb's ~50 numpy calls
        return np.array(binary_tree_edges(n), dtype=np.int64).reshape(-1, 2)
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


def tree_channels(ctx: CommContext, nodes: list[list[int]]) -> int:
    """Search channels of the tree over ``nodes`` (each a list of ranks): one
    per NIC rail, at most the fewest ranks on a node, as the ring's; one
    inside a single node."""
    if len(nodes) <= 1:
        return 1
    return max(1, min(ctx.nics_per_node, min(len(r) for r in nodes)))


def _is_whole(ctx: CommContext, nodes: list[list[int]]) -> bool:
    """Every node of the group complete and in local order (template clusters)."""
    if getattr(ctx.cluster, "template", None) is None:
        return False
    R = ctx.cluster.ranks_per_node
    return all(len(r) == R and r[0] % R == 0 and r[-1] == r[0] + R - 1 for r in nodes) and all(
        r == list(range(r[0], r[0] + R)) for r in nodes
    )


def _local_plan(ctx: CommContext, channels: int):
    """For whole nodes: (head local index per channel, chain arcs as local
    (src, dst) arrays, channels using each arc); cached per channel count.

    Channel c's head is the first GPU of the node's first NVLink ring on NIC
    ``c mod NICs`` that no earlier channel heads (NCCL's search: channel c
    starts at that NIC, at a GPU next to it), or the ring's first such GPU;
    its chain walks the ring from there, forwards or backwards, whichever
    puts fewer channels on one step (ties: forwards), every step towards the
    head. (Chains of equal load also end together: fewer flow-end events.)
    """
    key = ("tree_plan", channels)
    hit = ctx.shapes.get(key)
    if hit is not None:
        return hit
    from simcluster.collectives.ring import _node_rings

    ring0 = _node_rings(ctx)[0]
    R = len(ring0)
    t = ctx.cluster.template
    nic = list(t.rank_nic) if t.nics else [0] * R
    nics = max(len(t.nics), 1)
    heads: list[int] = []
    count: dict[tuple[int, int], int] = {}
    for c in range(channels):
        on_rail = [k for k in range(R) if nic[ring0[k]] == c % nics]
        free = [k for k in on_rail if ring0[k] not in heads]
        k = (free or on_rail or [c * R // channels])[0]
        heads.append(ring0[k])
        forward = ring0[k:] + ring0[:k]
        backward = [forward[0], *reversed(forward[1:])]

        def load(order: list[int]) -> tuple[int, int]:
            # (most channels on one step, sum of squares) once this chain is added
            new = [count.get(e, 0) + 1 for e in zip(order[1:], order[:-1], strict=True)]
            return max(new, default=0), sum(x * x for x in new)

        order = forward if load(forward) <= load(backward) else backward
        for e in zip(order[1:], order[:-1], strict=True):
            count[e] = count.get(e, 0) + 1
    arcs = list(count)
    hit = (
        np.array(heads, dtype=np.int64),
        np.array([a for a, _ in arcs], dtype=np.int64),
        np.array([b for _, b in arcs], dtype=np.int64),
        np.array([count[e] for e in arcs], dtype=np.float64),
    )
    ctx.shapes[key] = hit
    return hit


def _trees(m: int) -> list[np.ndarray]:
    """The (child, parent) node-index arrays of the double binary tree over m nodes."""
    if m <= 1:
        return [np.zeros((0, 2), dtype=np.int64)]
    a = binary_tree_edge_array(m)
    b = m - 1 - a if m % 2 == 0 else (a + 1) % m  # second_tree, as arrays
    return [a, b]


def group_flows(ctx: CommContext, group: tuple[int, ...], nbytes: float):
    """The reduce phase of one group as arrays: (src, dst, bytes per flow,
    number of tree flows first in them, chain length, tree height).

    Tree edges first (first tree, channel by channel, then the second tree),
    then the chain steps, merged per (src, dst) over channels and trees.
    """
    nodes = ctx.split_by_node(group)
    m = len(nodes)
    C = tree_channels(ctx, nodes)
    trees = _trees(m)
    T = len(trees)
    share = nbytes / (T * C)  # one tree of one channel
    chain_len = max(len(r) for r in nodes) - 1
    if _is_whole(ctx, nodes):
        heads, ls, ld, cnt = _local_plan(ctx, C)
        base = np.array([r[0] for r in nodes], dtype=np.int64)
        t_src = [base[e[:, 0]][:, None] + heads[None, :] for e in trees]
        t_dst = [base[e[:, 1]][:, None] + heads[None, :] for e in trees]
        # channel by channel, each channel's edges in tree order
        src = [x.T.ravel() for x in t_src]
        dst = [x.T.ravel() for x in t_dst]
        n_tree = sum(s.size for s in src)
        c_src = (base[:, None] + ls[None, :]).ravel()
        c_dst = (base[:, None] + ld[None, :]).ravel()
        c_bytes = np.tile(cnt * (share * T), m)
    else:
        # other groups: channel c enters each node at its (c * size // C)-th rank
        hd = [[r[(c * len(r)) // C] for c in range(C)] for r in nodes]
        src, dst = [], []
        for e in trees:
            src.append(np.array([hd[ch][c] for c in range(C) for ch, _ in e], dtype=np.int64))
            dst.append(np.array([hd[p][c] for c in range(C) for _, p in e], dtype=np.int64))
        n_tree = sum(s.size for s in src)
        count: dict[tuple[int, int], int] = {}
        for r in nodes:
            for c in range(C):
                k = (c * len(r)) // C
                order = r[k:] + r[:k]
                for i in range(len(order) - 1):
                    a = (order[i + 1], order[i])
                    count[a] = count.get(a, 0) + 1
        c_src = np.array([a for a, _ in count], dtype=np.int64)
        c_dst = np.array([b for _, b in count], dtype=np.int64)
        c_bytes = np.array([count[a] for a in count], dtype=np.float64) * (share * T)
    src_all = np.concatenate([*src, c_src]) if src else c_src
    dst_all = np.concatenate([*dst, c_dst]) if dst else c_dst
    b_all = np.concatenate([np.full(n_tree, share), c_bytes])
    return src_all, dst_all, b_all, n_tree, chain_len, _height(m)


def _depth(ctx: CommContext, src, dst, n_tree: int, chain_len: int, height: int, routes=None):
    """Pipeline depth (s; one column per protocol under protocols): chain
    steps at the intra-node step latency, tree levels at the network one (NCCL's
    model); without protocols every step at the largest path latency plus overhead."""
    if ctx.active is not None:
        a_in = _max_class(ctx.active, ctx.hop_classes(src[n_tree:], dst[n_tree:]))
        a_net = _max_class(ctx.active, ctx.hop_classes(src[:n_tree], dst[:n_tree]))
        return chain_len * a_in + height * a_net
    f, link = routes if routes is not None else ctx.cluster.routes(src, dst)
    alpha = ctx.path_latencies(f, link, src.size) + ctx.per_message_overhead
    return (chain_len + height) * (float(alpha.max()) if alpha.size else 0.0)


def _routes(ctx: CommContext, src: np.ndarray, dst: np.ndarray):
    # NCCL as modelled by the protocols: across nodes on the receiver's rail (PXN)
    return ctx.pxn_routes(src, dst) if ctx.active is not None else ctx.cluster.routes(src, dst)


def allreduce(ctx: CommContext, call: CollectiveCall, group: tuple[int, ...]) -> list[Phase]:
    if len(group) < 2:
        return []
    src, dst, nb, n_tree, chain_len, height = group_flows(ctx, group, call.nbytes)
    depth = _depth(ctx, src, dst, n_tree, chain_len, height)
    route = ctx.pxn_route if ctx.active is not None else ctx.cluster.route
    up: Phase = []
    down: Phase = []
    lat = depth if isinstance(depth, np.ndarray) else float(depth)
    for a, b, x in zip(src.tolist(), dst.tolist(), nb.tolist(), strict=True):
        up.append(FlowSpec(route(a, b), float(x), lat, a, b))
    for a, b, x in zip(src.tolist(), dst.tolist(), nb.tolist(), strict=True):
        down.append(FlowSpec(route(b, a), float(x), lat, b, a))
    return [up, down]


def allreduce_batch(ctx: CommContext, call: CollectiveCall) -> list[FlowBatch]:
    """:func:`allreduce` of every group at once, as two flow batches (the same
    flows, in the same order, as lowering each group and merging the phases).
    Under protocols the latency holds one column per protocol."""
    parts, caps = [], []
    tuned = ctx.active is not None and ctx.tree_channel_max is not None
    for g in call.groups:
        if len(g) < 2:
            continue
        src, dst, nb, n_tree, chain_len, height = group_flows(ctx, tuple(g), call.nbytes)
        depth = _depth(ctx, src, dst, n_tree, chain_len, height)
        parts.append((src, dst, nb, depth))
        if tuned:
            cap = np.full(src.size, np.inf)
            cap[:n_tree] = _tuner_edge_cap(ctx, len(ctx.split_by_node(tuple(g))))
            caps.append(cap)
    if not parts:
        return []
    out = [_batch_of(ctx, parts, False), _batch_of(ctx, parts, True)]
    if tuned:
        cap = np.concatenate(caps)
        for b in out:
            b._cache[TUNER_RATE_CAP] = cap
    return out


#: ``FlowBatch._cache`` key of the per-flow rate cap (wire bytes/s) that ``auto``'s
#: estimate applies and the simulation does not (see :func:`_tuner_edge_cap`)
TUNER_RATE_CAP = "tuner_rate_cap"


def _tuner_edge_cap(ctx: CommContext, nodes: int) -> float:
    """NCCL's tuner cap as a rate limit on one tree edge flow (wire bytes/s).

    NCCL's model (``src/graph/tuning.cc``, ``ncclTopoTuneModel``) caps the
    tree's bus bandwidth at ``nChannels x perChMaxTreeBw`` (one value for 1, 2
    and more nodes) after the Simple refinement (x 0.92), and takes half of it
    as algorithm bandwidth (LL and LL128 scale that). A tree edge flow here
    carries ``nbytes / (2 x channels)`` per phase, so that algorithm bandwidth
    is a wire rate of ``perChMaxTreeBw / (2 x Simple's tree fraction)`` per
    edge flow, whatever the protocol. It is the tuner's model of what one
    channel sustains: ``auto`` chooses with it, as NCCL does; the simulated
    flows are not capped.
    """
    one, two, more = ctx.tree_channel_max
    per_channel = one if nodes <= 1 else two if nodes == 2 else more
    simple = ctx.protocols.get("Simple")
    frac = simple.bandwidth_fraction["tree"] if simple is not None else 1.0
    return per_channel / (2 * frac)


def _max_class(act: dict, cls: np.ndarray):
    """Elementwise max of the step latencies of the hop classes present (0.0 for none)."""
    names = ("nvlink", "pcie", "net")
    present = [names[c] for c in np.unique(cls)]
    return functools.reduce(np.maximum, (act[c] for c in present), 0.0)


def _batch_of(ctx: CommContext, parts: list, reverse: bool) -> FlowBatch:
    src = np.concatenate([d if reverse else s for s, d, _, _ in parts])
    dst = np.concatenate([s if reverse else d for s, d, _, _ in parts])
    nbytes = np.concatenate([nb for _, _, nb, _ in parts])
    if ctx.active is not None:
        latency = np.concatenate(
            [np.broadcast_to(dep, (s.size, np.size(dep))) for s, _, _, dep in parts]
        )
    else:
        latency = np.concatenate([np.full(s.size, float(dep)) for s, _, _, dep in parts])
    entry_flow, entry_link = _routes(ctx, src, dst)
    return FlowBatch(entry_flow, entry_link, nbytes, latency)

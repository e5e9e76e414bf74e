"""NCCL-like channels: ring orders searched along NVLink inside a node.

NCCL builds several *channels*, each a ring through the node's GPUs that uses
NVLink wherever it can, and splits every collective's bytes over them. On a
mesh (the DGX-1 hybrid cube-mesh, fully connected 4-GPU boards) rank order is
not such a ring (0 -> 5 has no NVLink) and one ring leaves most NVLinks idle.

:func:`node_rings` searches the node template once: every Hamiltonian cycle
over direct NVLink links (both directions), then greedily the set of directed
cycles that minimises the time to move one byte split evenly over them,
``max over links (channels on the link / channels) / link bandwidth``, adding
the best next ring up to :data:`MAX_RINGS` (ties to the ring that spreads the
load most evenly, the sum of squared link loads) and keeping the shortest
prefix with the least time; the set of every directed NVLink ring, each once,
competes with those prefixes (a fully connected 4-GPU board has 6 such rings,
and only all 6 load every NVLink equally). Nodes without direct NVLinks
(NVSwitch, PCIe) keep rank order: every order is as good there.

Units: bandwidth bytes/s per direction.
"""

from __future__ import annotations

__all__ = ["node_rings", "hamiltonian_cycles"]

#: Enumeration bound (cycles, not channels) so that large meshes stay cheap.
MAX_CYCLES = 20000
#: Most channels the search returns (NCCL's MAXCHANNELS is 32; 16 rings suffice here).
MAX_RINGS = 16


def hamiltonian_cycles(adj: list[list[int]], limit: int = MAX_CYCLES) -> list[tuple[int, ...]]:
    """Undirected Hamiltonian cycles of a graph on 0..n-1 (each once, from 0).

    adj: neighbour lists. A cycle is listed once: starting at 0, with its
    second vertex smaller than its last. At most ``limit`` cycles.
    """
    n = len(adj)
    if n < 3:
        return []
    out: list[tuple[int, ...]] = []
    path = [0]
    used = [False] * n
    used[0] = True

    def dfs() -> bool:
        if len(out) >= limit:
            return False
        u = path[-1]
        if len(path) == n:
            if 0 in adj[u] and path[1] < path[-1]:
                out.append(tuple(path))
            return True
        for v in adj[u]:
            if not used[v]:
                used[v] = True
                path.append(v)
                dfs()
                path.pop()
                used[v] = False
        return True

    dfs()
    return out


def nvlink_ring_candidates(
    template,
) -> tuple[int, dict[tuple[int, int], float], list[list[int]]] | None:
    """(ranks per node, NVLink bandwidth in bytes/s per local rank pair both ways,
    every NVLink Hamiltonian cycle in both directions), or None when the node has no
    NVLink ring (fewer than 3 ranks, no NVLink, no cycle through every GPU)."""
    R = template.ranks_per_node
    index = {v: i for i, v in enumerate(template.ranks)}
    cap: dict[tuple[int, int], float] = {}
    for u, v, a in template.edges:
        if a["kind"] == "nvlink" and u in index and v in index:
            i, j = index[u], index[v]
            cap[(i, j)] = cap[(j, i)] = float(a["bandwidth"])
    if R < 3 or not cap:
        return None
    adj = [sorted(j for (i, j) in cap if i == k) for k in range(R)]
    cycles = hamiltonian_cycles(adj)
    if not cycles:
        return None
    directed = []
    for c in cycles:
        directed.append(list(c))
        directed.append([c[0], *reversed(c[1:])])
    return R, cap, directed


def node_rings(template) -> list[list[int]]:
    """Local rank orders, one per intra-node channel (see module doc)."""
    found = nvlink_ring_candidates(template)
    if found is None:
        return [list(range(template.ranks_per_node))]
    R, cap, directed = found

    def edges(order: list[int]) -> list[tuple[int, int]]:
        return [(order[i], order[(i + 1) % R]) for i in range(R)]

    def score(counts: dict[tuple[int, int], int], k: int) -> tuple[float, float]:
        # time to move one byte split over k rings, then the spread of the load
        worst = max(n / cap[e] for e, n in counts.items())
        spread = sum((n / cap[e]) ** 2 for e, n in counts.items())
        return worst / k, spread / (k * k)

    chosen: list[list[int]] = []
    times: list[float] = []
    ring_edges = [edges(order) for order in directed]  # listed once, read every round
    # The greedy rounds score every ring added to the load so far. Links are numbered
    # in order of first appearance over the rings (the order a dict of loads filled
    # ring by ring would list them), each link's terms n / cap and (n / cap) ** 2 of
    # score() tabulated for the loads it can reach: a candidate's terms are the
    # current ones with its own links' raised by one, added up in link order (a
    # link not loaded yet adds 0.0, which leaves the sums as they were).
    number: dict[tuple[int, int], int] = {}
    for es in ring_edges:
        for e in es:
            number.setdefault(e, len(number))
    caps = [cap[e] for e in number]
    most = MAX_RINGS + 2  # loads 0 .. MAX_RINGS + 1: a ring crosses a link at most once
    ratio = [[n / c for n in range(most)] for c in caps]
    square = [[(n / c) ** 2 for n in range(most)] for c in caps]
    ring_ids = [[number[e] for e in es] for es in ring_edges]
    load = [0] * len(caps)
    worst_now = [0.0] * len(caps)  # ratio[i][load[i]]
    spread_now = [0.0] * len(caps)  # square[i][load[i]]
    while len(chosen) < MAX_RINGS:
        pick, pick_ids, pick_score = None, None, (float("inf"), float("inf"))
        k = len(chosen) + 1
        for order, ids in zip(directed, ring_ids, strict=True):
            w, q = worst_now.copy(), spread_now.copy()
            for i in ids:  # distinct links: a cycle leaves each GPU once
                w[i], q[i] = ratio[i][load[i] + 1], square[i][load[i] + 1]
            s = max(w) / k, sum(q) / (k * k)
            if s[0] < pick_score[0] * (1 - 1e-9) or (
                s[0] <= pick_score[0] * (1 + 1e-9) and s[1] < pick_score[1] * (1 - 1e-9)
            ):
                pick, pick_ids, pick_score = order, ids, s
        chosen.append(pick)
        times.append(pick_score[0])
        for i in pick_ids:
            load[i] += 1
            worst_now[i], spread_now[i] = ratio[i][load[i]], square[i][load[i]]
    candidates = [(times[i], i + 1, chosen[: i + 1]) for i in range(len(chosen))]
    if len(directed) <= MAX_RINGS:  # every NVLink ring, each once
        every: dict[tuple[int, int], int] = {}
        for es in ring_edges:
            for e in es:
                every[e] = every.get(e, 0) + 1
        candidates.append((score(every, len(directed))[0], len(directed), directed))
    best = min(candidates, key=lambda c: (c[0] * (1 + 1e-9), c[1]))
    return [list(r) for r in best[2]]

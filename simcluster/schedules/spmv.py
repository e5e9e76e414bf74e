"""Model-parallel sparse DNN training by SpMV (shared/papers/004_*, sections 4-5).

The rows of every weight matrix ``W^k`` are split among the P ranks by a
partitioner (``kahypar`` / ``mtkahypar``: the section-5 hypergraph model with
fixed vertices; ``random``: the paper's SGD baseline). One step is SGD on
``batch`` input vectors (``workload.batch_per_gpu``; 1 = one vector, more =
mini-batch SGD with SpMM), per rank ``m``:

SpFF, layer k = 1..L (Algorithm 2)
    ``f{k}.pack``   gather the entries of ``x^{k-1}`` other ranks need, one buffer
                    per message (category ``comm``);
    ``f{k}.x``      non-blocking sends of the layer's messages (p2p, ``comm``);
    ``f{k}.loc``    local SpMV over the nonzeros whose inputs are local, overlapping
                    the sends (``spmv``);
    ``f{k}.rem``    once the messages to ``m`` arrived: the remote part, then the
                    activation (``spmv``).
SpBP, layer k = L..1 (Algorithm 3)
    ``b{k}.spmv``   ``delta^k`` (sum of the partial sums received, times f'), then
                    ``s^k = (W_m^k)^T delta^k`` (``spmv``); for k = 1 only
                    ``delta^1`` (``b1.delta``): ``delta^0`` is never used;
    ``b{k}.pack``, ``b{k}.x``  send the partial sums back along the SpFF pairs,
                    reversed (``comm``);
    ``b{k}.upd``    outer-product update of the owned rows, overlapping the sends
                    (``update``).

Kernel times come from the device profile (``spmv``, ``outer_update``,
``elementwise`` for each message buffer and for the activations); an entry is
``word_bytes`` bytes times the batch. The engine sees a layer's exchange as one
p2p collective held by every rank that sends or receives in it: the inter-node
messages of each node pair travel as one flow between the two nodes' lowest
ranks, carrying the layer's mean node-pair bytes (so the layer's inter-node
bytes are exact and NIC contention is computed), and pay the network profile's
start-up latency once, concurrently with the other pairs. Intra-node messages
are shared-memory copies charged to the sender's pack. Per-message CPU cost is
the launch overhead of each message's pack (and, in SpBP, sum) kernel.

A step is ``batch`` vectors, every rank takes part in every vector, so a run of
``vectors`` input vectors per epoch has ``vectors / batch`` steps at any P (the
study's data-parallel step count is not used). Time per input vector = step
time / batch. The Table 1 metrics of the partition and its partitioning time
are in each record's ``segments[].extra``; ``simcluster spmv-table`` prints them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import Field

from simcluster.partition import (
    LayerComm,
    NetworkPartition,
    PartitionMetrics,
    comm_plan,
    partition_network,
    table1_metrics,
)
from simcluster.partition.keys import unique_inverse
from simcluster.program import CollectiveCall, Groups, Op, RankClass, collective, compute
from simcluster.schedules.base import (
    BuildContext,
    Iteration,
    Options,
    RunShape,
    Schedule,
    Segment,
    register,
)
from simcluster.workload.radixnet import graph_challenge_radixnet
from simcluster.workload.sparse import SparseDNN, random_k_per_row

__all__ = ["SpMV", "SpMVOptions", "network_for", "partition_for", "table1_for"]


class SpMVOptions(Options):
    neurons: int = Field(1024, ge=2, le=1 << 22, description="neurons per layer")
    layers: int = Field(120, ge=1, le=100_000, description="weight layers")
    generator: Literal["radixnet", "random"] = Field(
        "radixnet", description="RadiX-Net (Graph Challenge shape) or k random inputs per row"
    )
    connections: int = Field(32, ge=1, le=4096, description="inputs per neuron")
    radix: int = Field(2, ge=2, le=4096, description="RadiX-Net radix (width = connections/radix)")
    permute: bool = Field(True, description="relabel RadiX-Net neurons at random (seeded)")
    network_seed: int = Field(0, ge=0, le=2**32 - 1, description="seed of the network")
    partitioner: Literal["kahypar", "mtkahypar", "random"] = "kahypar"
    epsilon: float = Field(0.01, ge=0, le=1, description="allowed imbalance per layer")
    kahypar_config: str | None = Field(None, description=".ini file; default: shipped preset")
    mtkahypar_preset: Literal["deterministic", "default", "quality"] = "deterministic"
    threads: int | None = Field(
        None, ge=1, le=1024, description="Mt-KaHyPar threads (first use wins)"
    )
    cache: bool = Field(True, description="keep partitions on disk")
    cache_dir: str | None = Field(None, description="default $SIMCLUSTER_CACHE_DIR or ~/.cache")
    vectors: int = Field(60_000, ge=1, description="input vectors per epoch (MNIST: 60000)")
    word_bytes: int = Field(4, ge=1, le=16, description="bytes per vector entry on the wire")


# --- network and partition (cached in memory; partitions also on disk) ----------------------


@lru_cache(maxsize=8)
def _network(gen: str, neurons: int, layers: int, k: int, radix: int, permute: bool, seed: int):
    if gen == "radixnet":
        return graph_challenge_radixnet(neurons, layers, k, permute, seed, radix)
    return random_k_per_row(neurons, layers, k, seed)


def network_for(o: SpMVOptions) -> SparseDNN:
    """The sparse DNN the options describe."""
    try:
        return _network(
            o.generator, o.neurons, o.layers, o.connections, o.radix, o.permute, o.network_seed
        )
    except ValueError as exc:
        from simcluster.errors import UserError

        raise UserError(f"spmv options: {exc}") from None


_PARTS: dict[tuple, tuple[NetworkPartition, list[LayerComm], PartitionMetrics]] = {}
#: Table 1 metrics outlive their (large) plans in ``_PARTS``: a scenario's table after
#: its run needs no plan rebuilt
_METRICS: dict[tuple, PartitionMetrics] = {}


def _key(o: SpMVOptions, parts: int, seed: int) -> tuple:
    # the options that build the network name it (the generators are deterministic):
    # no hash of its nonzeros needed here
    return (
        _network_key(o),
        parts,
        o.partitioner,
        o.epsilon,
        seed,
        o.kahypar_config,
        o.mtkahypar_preset,
    )


def partition_for(
    o: SpMVOptions, parts: int, seed: int, progress: Callable | None = None, status: bool = True
) -> tuple[NetworkPartition, list[LayerComm], PartitionMetrics]:
    """(partition, per-layer communication, Table 1 metrics) for ``parts`` ranks."""
    net = network_for(o)
    key = _key(o, parts, seed)
    hit = _PARTS.get(key)
    if hit is None:
        # the random backend's remote reads and local nonzeros, reused by comm_plan
        reads: list = []
        local: list = []
        part = partition_network(
            net,
            parts,
            o.partitioner,
            o.epsilon,
            seed,
            cache=o.cache,
            cache_dir=o.cache_dir,
            kahypar_config=o.kahypar_config,
            mtkahypar_preset=o.mtkahypar_preset,
            threads=o.threads,
            progress=progress,
            status=status,
            reads=reads,
            local=local,
        )
        plan = comm_plan(net, part, reads, local)
        del reads, local
        hit = (part, plan, table1_metrics(plan, part))
        if len(_PARTS) >= 16:
            _PARTS.pop(next(iter(_PARTS)))
        _PARTS[key] = hit
        _METRICS[key] = hit[2]
    return hit


def table1_for(o: SpMVOptions, parts: int, seed: int = 0) -> PartitionMetrics:
    """The paper's Table 1 figures for these options at ``parts`` ranks."""
    hit = _METRICS.get(_key(o, parts, seed))
    return hit if hit is not None else partition_for(o, parts, seed)[2]


# --- programs --------------------------------------------------------------------------------


class _Costs:
    """Kernel times from the device profile, evaluated once per distinct argument.

    Every method takes per-rank (or per-message) integer arrays and returns seconds;
    zero work costs nothing (no kernel is launched).
    """

    def __init__(self, profile, batch: int, word_bytes: int) -> None:
        self.p = profile
        self.b = batch
        self.wb = word_bytes
        self._memo: dict[tuple, float] = {}

    def _map(self, family: str, fn, *cols: np.ndarray) -> np.ndarray:
        arrs = [np.asarray(c, dtype=np.int64).reshape(-1) for c in cols]
        if arrs[0].size == 0:
            return np.zeros(0)
        code = arrs[0]
        for c in arrs[1:]:  # one integer per argument tuple (one-to-one for values >= 0)
            code = code * (int(c.max()) + 1) + c
        uniq, inv = unique_inverse(code)
        at = np.empty(uniq.size, dtype=np.intp)
        at[inv] = np.arange(code.size)  # an entry with each code: all have the same arguments
        out = np.empty(at.size)
        for i, args in enumerate(zip(*(a[at].tolist() for a in arrs), strict=True)):
            key = (family, *args)
            t = self._memo.get(key)
            if t is None:
                t = 0.0 if not any(args) else float(fn(*args))
                self._memo[key] = t
            out[i] = t
        return out[inv]

    def spmv(self, nnz: np.ndarray, rows: np.ndarray) -> np.ndarray:
        k = self.p.kernel_time
        return self._map("spmv", lambda n, r: k("spmv", nnz=n, rows=r, batch=self.b), nnz, rows)

    def update(self, nnz: np.ndarray) -> np.ndarray:
        k = self.p.kernel_time
        return self._map("update", lambda n: k("outer_update", nnz=n, batch=self.b), nnz)

    def elementwise(self, elems: np.ndarray, bytes_per_elem: int) -> np.ndarray:
        """A memory-bound pass over ``elems x batch`` entries of ``bytes_per_elem`` bytes."""
        k = self.p.kernel_time
        per = bytes_per_elem * self.b
        return self._map(f"ew{per}", lambda n: k("elementwise", nbytes=n * per), np.asarray(elems))


@dataclass(frozen=True, eq=False)
class _Exchange:
    """One layer's messages as the engine sees them (SpBP uses the reverse pairs).

    forward / backward: one p2p call per direction whose pairs are the node pairs
        that exchange inter-node messages (one flow per pair, from the lowest rank
        of each node, carrying the mean node-pair bytes of the layer).
    sends / recvs: whether each rank sends / receives anything in SpFF.
    pack: SpFF sender CPU time: a gather per message, plus a copy through shared
        memory for intra-node messages. back_pack: the same for SpBP senders.
    combine: SpBP receiver time: a scatter-add per message received.
    """

    forward: CollectiveCall
    backward: CollectiveCall
    sends: np.ndarray
    recvs: np.ndarray
    pack: np.ndarray
    back_pack: np.ndarray
    combine: np.ndarray


class _NodePairs:
    """Rank pairs ``(rep[a], rep[b])`` of node pairs ``a * width + b``.

    ``rep[n]`` is the lowest rank of node ``n``. The pair tuples are made once and
    shared by every layer's calls (most layers use most node pairs).
    """

    def __init__(self, rep: np.ndarray) -> None:
        self.rep = rep
        self.width = w = int(rep.size)
        small = w * w <= 1 << 22
        self.table = np.empty(w * w, dtype=object) if small else None
        self.made = np.zeros(w * w, dtype=bool) if small else None

    def __call__(self, keys: np.ndarray) -> Groups:
        w, rep = self.width, self.rep
        src, dst = rep[keys // w], rep[keys % w]
        flat = np.stack([src, dst], axis=1).reshape(-1)
        if self.table is None or self.made is None:
            return Groups(zip(src.tolist(), dst.tolist(), strict=True), flat)
        new = keys[~self.made[keys]]
        if new.size:
            made = zip(rep[new // w].tolist(), rep[new % w].tolist(), strict=True)
            self.table[new] = np.fromiter(made, dtype=object, count=new.size)
            self.made[new] = True
        return Groups(self.table[keys].tolist(), flat)


class _Scratch:
    """Work arrays reused from layer to layer (views of the first ``n`` entries of one
    array per name, grown as needed): a layer's passes over its ~half a million
    messages then write into memory already touched instead of fresh pages."""

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, n: int, dtype) -> np.ndarray:
        a = self._arrays.get(name)
        if a is None or a.size < n or a.dtype != dtype:
            a = self._arrays[name] = np.empty(max(n, 1), dtype=dtype)
        return a[:n]


def _exchange(
    lc: LayerComm,
    node: np.ndarray,
    pairs: _NodePairs,
    cost: _Costs,
    wire: int,
    scratch: _Scratch | None = None,
) -> _Exchange:
    P, wb = lc.parts, cost.wb
    n = lc.words.size
    scratch = _Scratch() if scratch is None else scratch
    # the 32-bit message arrays as intp, once: indexing and bincount would convert
    # them into fresh arrays at every use
    src = scratch.get("src", n, np.intp)
    dst = scratch.get("dst", n, np.intp)
    words = scratch.get("words", n, np.intp)
    np.copyto(src, lc.src)
    np.copyto(dst, lc.dst)
    np.copyto(words, lc.words)
    # every index is in range: "clip" only spares ``take`` buffering its output
    src_node = np.take(node, src, out=scratch.get("src_node", n, node.dtype), mode="clip")
    dst_node = np.take(node, dst, out=scratch.get("dst_node", n, node.dtype), mode="clip")
    intra = np.flatnonzero(np.equal(src_node, dst_node, out=scratch.get("intra", n, bool)))
    # message sizes repeat: price each distinct size once, then look them up by size
    sizes = np.flatnonzero(np.bincount(words)) if n else words
    top = int(sizes[-1]) + 1 if sizes.size else 1
    gather = cost.elementwise(sizes, 2 * wb + 4)  # read value + index, write buffer
    shm = cost.elementwise(sizes, 2 * wb)  # a copy through shared memory (intra-node)
    lut = np.zeros((3, top))
    lut[0, sizes] = gather + 0.0  # inter-node: the gather
    lut[1, sizes] = gather + shm  # intra-node: gather + copy
    lut[2, sizes] = cost.elementwise(sizes, 3 * wb + 4)  # read buffer, add into s, index
    pack = np.take(lut[0], words, out=scratch.get("pack", n, np.float64), mode="clip")
    pack[intra] = lut[1][words[intra]]
    scatter = np.take(lut[2], words, out=scratch.get("scatter", n, np.float64), mode="clip")

    def per_rank(who: np.ndarray, t: np.ndarray) -> np.ndarray:
        return np.bincount(who, weights=t, minlength=P) if t.size else np.zeros(P)

    width = pairs.width
    n_inter = n - intra.size
    if n_inter and width * width <= 2 * n_inter + (1 << 12):  # node pairs by bincount
        # intra-node messages on the diagonal; codes and weights in the types bincount
        # works in (it would convert them into fresh arrays); whole numbers: exact sums
        code = np.multiply(src_node, width, out=scratch.get("code", n, np.intp), dtype=np.intp)
        np.add(code, dst_node, out=code)
        weights = scratch.get("weights", n, np.float64)
        np.copyto(weights, words)
        total = np.bincount(code, weights=weights, minlength=width * width)
        total[:: width + 1] = 0
        # a node pair with messages has words (every message has >= 1)
        keys = np.flatnonzero(total if sizes[0] > 0 else np.bincount(code, minlength=total.size))
        if sizes[0] == 0:
            keys = keys[keys % (width + 1) != 0]
        nbytes = total[keys] * wire
    else:
        inter = src_node != dst_node
        keys, inv = unique_inverse((src_node * width + dst_node)[inter])
        nbytes = np.bincount(inv, weights=words[inter]) * wire if keys.size else np.zeros(0)
    mean = float(nbytes.mean()) if nbytes.size else 0.0
    back_keys = (keys % width) * width + keys // width  # the same node pairs, reversed
    return _Exchange(
        forward=CollectiveCall("p2p", pairs(keys), mean, "direct"),
        backward=CollectiveCall("p2p", pairs(back_keys), mean, "direct"),
        sends=lc.send_messages() > 0,
        recvs=np.bincount(dst, minlength=P) > 0,
        pack=per_rank(src, pack),
        back_pack=per_rank(dst, pack),
        combine=per_rank(src, scatter),
    )


class _Slots:
    """Per-rank programs built slot by slot, folded into one class per program shape.

    A slot holds one op (or none) per rank: a compute op with a per-rank duration,
    or a collective. Ranks whose slots hold the same ops up to their durations run
    one :class:`RankClass` whose compute ops last 1 s in the template and whose
    :attr:`RankClass.factors` are the ranks' durations in seconds: the engine runs
    it once with a clock per rank, with the same results as one class per rank
    (``tests/test_spmv.py``). With random rows at large P every rank sends and
    receives in every layer, so all ranks share one class.
    """

    def __init__(self, P: int) -> None:
        self.P = P
        self.codes: list[np.ndarray] = []  # per slot: variant per rank, -1 = no op
        self.variants: list[tuple[Op, ...]] = []
        self.times: list[np.ndarray | None] = []  # per slot: durations (s), None: collective

    def _code(self, flag: np.ndarray | None, where: np.ndarray | None) -> np.ndarray:
        code = np.zeros(self.P, dtype=np.int8) if flag is None else np.where(flag, 0, 1)
        code = code.astype(np.int8)
        if where is not None:
            code[~where] = -1
        return code

    def timed(self, t: np.ndarray, op: Op, where: np.ndarray | None = None) -> None:
        """A compute slot: ``op`` (its duration ignored) lasting ``t[m]`` on rank m."""
        self.add_timed(None, t, op, op, where)

    def add_timed(
        self, flag: np.ndarray | None, t: np.ndarray, yes: Op, no: Op, where=None
    ) -> None:
        """A compute slot: ``yes`` where ``flag``, else ``no``, lasting ``t[m]``."""
        one = (replace(yes, duration=1.0), replace(no, duration=1.0))
        self.codes.append(self._code(flag, where))
        self.variants.append(one)
        self.times.append(np.broadcast_to(np.asarray(t, dtype=np.float64), (self.P,)))

    def call(self, flag: np.ndarray | None, yes: Op, no: Op, where=None) -> None:
        """A collective slot: ``yes`` where ``flag`` (all ranks if None), else ``no``."""
        self.codes.append(self._code(flag, where))
        self.variants.append((yes, no))
        self.times.append(None)

    def programs(self) -> list[RankClass]:
        if not self.codes:
            return [RankClass(f"r{m}", (m,)) for m in range(self.P)]
        table = np.ascontiguousarray(np.stack(self.codes, axis=1))  # rank x slot
        # rows grouped by their bytes, groups in order of lowest rank
        group: dict[bytes, int] = {}
        rows = table.view(np.dtype((np.void, table.shape[1]))).reshape(-1).tolist()
        inv = np.fromiter(
            (group.setdefault(b, len(group)) for b in rows), dtype=np.intp, count=self.P
        )
        out = []
        for g in range(len(group)):
            ranks = np.flatnonzero(inv == g)
            row = table[ranks[0]].tolist()
            ops = [self.variants[s][c] for s, c in enumerate(row) if c >= 0]
            timed = [s for s, c in enumerate(row) if c >= 0 and self.times[s] is not None]
            cols = [self.times[s][ranks] for s in timed]  # type: ignore[index]
            factors = np.stack(cols, axis=1) if cols else np.zeros((ranks.size, 0))
            m = int(ranks[0])
            name = f"r{m}" if ranks.size == 1 else f"r{m}+{ranks.size - 1}"
            out.append(RankClass(name, tuple(ranks.tolist()), ops, factors=factors))
        return out


@register
class SpMV(Schedule):
    name = "spmv"
    summary = "model-parallel sparse DNN SGD: row-partitioned SpMV, p2p between layers"
    needs_model = False  # the sparse network comes from the options

    @classmethod
    def prepare(cls, scenario) -> None:
        prefetch_partitions(scenario)  # in parallel, before the study asks for them

    @classmethod
    def tables(cls, scenario, records=None):
        return table1_tables(scenario, records)

    Options = SpMVOptions

    @classmethod
    def check_options(cls, options: Options) -> None:
        network_for(options)  # type: ignore[arg-type]  # radix / power-of-two constraints

    def plan(self, ctx: BuildContext, run: RunShape) -> list[Segment]:
        o: SpMVOptions = self.options  # type: ignore[assignment]
        full, rem = divmod(o.vectors, ctx.batch)
        segs = []
        if full:
            segs.append(Segment("step", self.build(ctx), full * run.epochs, 1, plain=True))
        if rem:
            segs.append(
                Segment("last step", self.build(ctx.with_batch(rem)), run.epochs, 1, plain=True)
            )
        return segs

    def build(self, ctx: BuildContext) -> Iteration:
        o: SpMVOptions = self.options  # type: ignore[assignment]
        net = network_for(o)
        part, plan, metrics = partition_for(o, ctx.gpus, ctx.seed)
        classes = self._programs(ctx, net, plan)
        extra = {
            "network": net.name,
            "network_description": net.description,
            "partitioner": o.partitioner,
            "partition_cached": part.cached,
            "table1": metrics.as_dict(),
            "vectors_per_step": ctx.batch,
        }
        return Iteration(classes, samples=ctx.batch, extra=extra)

    def _programs(self, ctx: BuildContext, net: SparseDNN, plan: list[LayerComm]):
        o: SpMVOptions = self.options  # type: ignore[assignment]
        P, L, wb = ctx.gpus, net.num_layers, o.word_bytes
        cost = _Costs(ctx.profile, ctx.batch, wb)
        node = np.asarray(ctx.cluster.rank_node[:P], dtype=np.int64)
        rep = np.zeros(int(node.max()) + 1 if node.size else 1, dtype=np.int64)
        nodes, first = np.unique(node, return_index=True)
        rep[nodes] = first  # lowest rank of each node
        pairs = _NodePairs(rep)
        if pairs.width * pairs.width < 1 << 31:  # node-pair codes fit 32 bits: half the bytes
            node = node.astype(np.int32)
        scratch = _Scratch()
        ex = [_exchange(lc, node, pairs, cost, ctx.batch * wb, scratch) for lc in plan]
        del scratch
        slots = _Slots(P)

        for k in range(1, L + 1):  # SpFF
            lc, x = plan[k - 1], ex[k - 1]
            act = cost.elementwise(lc.rows, 3 * wb)  # f(z) and f'(z)
            t_loc = cost.spmv(lc.nnz_local, lc.rows)
            t_rem = cost.spmv(lc.nnz_remote, lc.rows_remote) + act
            pid, xid, loc, rem = f"f{k}.pack", f"f{k}.x", f"f{k}.loc", f"f{k}.rem"
            slots.timed(x.pack, compute(pid, 0, "comm"), x.sends)
            slots.call(
                x.sends,
                collective(xid, x.forward, "comm", (pid,)),
                collective(xid, x.forward, "comm"),
                x.sends | x.recvs,
            )
            slots.timed(t_loc, compute(loc, 0, "spmv"))
            slots.add_timed(
                x.recvs, t_rem, compute(rem, 0, "spmv", (xid,)), compute(rem, 0, "spmv")
            )

        for k in range(L, 0, -1):  # SpBP: the SpFF pairs reversed
            lc, x = plan[k - 1], ex[k - 1]
            delta = cost.elementwise(lc.rows, 3 * wb)  # delta^k = s^{k+1} * f'(z^k)
            above = ex[k] if k < L else None
            back = above.sends if above is not None else np.zeros(P, dtype=bool)
            if above is not None:
                delta = delta + above.combine
            upd = compute(f"b{k}.upd", 0, "update")
            t_upd = cost.update(lc.nnz)
            if k == 1:
                slots.add_timed(
                    back,
                    delta,
                    compute("b1.delta", 0, "spmv", ("b2.x",)),
                    compute("b1.delta", 0, "spmv"),
                )
                slots.timed(t_upd, upd)
                continue
            t_bsp = delta + cost.spmv(lc.nnz, lc.rows)
            bsp, pid, xid, wait = f"b{k}.spmv", f"b{k}.pack", f"b{k}.x", (f"b{k + 1}.x",)
            slots.add_timed(back, t_bsp, compute(bsp, 0, "spmv", wait), compute(bsp, 0, "spmv"))
            sends, recvs = x.recvs, x.sends
            slots.timed(x.back_pack, compute(pid, 0, "comm"), sends)
            slots.call(
                sends,
                collective(xid, x.backward, "comm", (pid,)),
                collective(xid, x.backward, "comm"),
                sends | recvs,
            )
            slots.timed(t_upd, upd)
        return slots.programs()


# --- scenario-level helpers for the CLI: warm the partition cache, Table 1 --------------------


def spmv_specs(sc) -> list[tuple[str, SpMVOptions]]:
    """(label, options) of every ``spmv`` schedule of a scenario."""
    return [
        (spec.display, SpMVOptions.model_validate(spec.options))
        for spec in sc.schedules
        if spec.name == SpMV.name
    ]


def _prefetch_job(options: dict, parts: int, seed: int) -> tuple[float, bool]:
    import sys

    # in a log, a long job says it is alive (a plain line every 30 s); on a terminal the
    # parent's job line is the only one
    status = not sys.stderr.isatty()
    part = partition_for(SpMVOptions.model_validate(options), parts, seed, status=status)[0]
    return part.seconds, part.cached


def _is_cached(o: SpMVOptions, parts: int, seed: int) -> bool:
    """Whether the partition is in the user cache or shipped with the package."""
    from simcluster.partition.network import find_cached

    hit = find_cached(
        network_for(o),
        parts,
        o.partitioner,
        o.epsilon,
        seed,
        o.cache_dir,
        o.kahypar_config,
        o.mtkahypar_preset,
    )
    return hit is not None


def prefetch_partitions(sc, workers: int | None = None) -> None:
    """Compute the scenario's missing hypergraph partitions, KaHyPar jobs in parallel.

    Phases of one network depend on each other, but (network, P) jobs do not;
    with ``workers`` processes (default: CPU count) a cold cache fills that much
    faster. Mt-KaHyPar jobs run here, one after another (they are multi-threaded).
    Partitions already cached (or shipped with the package) are not jobs. Progress
    goes to stderr: one self-overwriting line on a terminal, else one line per
    finished job (so that logs show it too).
    """
    import os
    import sys
    import time
    from concurrent.futures import as_completed

    jobs = [
        (label, o, p)
        for label, o in spmv_specs(sc)
        for p in sc.study.gpus
        if o.partitioner != "random" and o.cache and p > 1 and not _is_cached(o, p, sc.seed)
    ]
    if not jobs:
        return
    jobs.sort(key=lambda j: -j[1].neurons * j[2])  # biggest first

    tty = sys.stderr.isatty()
    t0 = time.perf_counter()
    kah = [j for j in jobs if j[1].partitioner == "kahypar"]
    other = [j for j in jobs if j[1].partitioner != "kahypar"]
    n = min(workers or os.cpu_count() or 1, len(kah))
    sys.stderr.write(
        f"partitioning {len(jobs)} (network, P) jobs not in the cache, "
        f"{max(n, 1)} at a time; each takes seconds to minutes\n"
    )
    sys.stderr.flush()

    def note(done: int, label: str, parts: int, sec: float, cached: bool) -> None:
        how = "cached" if cached else f"{sec:.1f} s"
        text = (
            f"partitions {done}/{len(jobs)}: {label} P={parts} ({how}, "
            f"{time.perf_counter() - t0:.0f} s so far)"
        )
        sys.stderr.write(f"\r{text}\x1b[K" if tty else text + "\n")
        sys.stderr.flush()

    done = 0
    if n > 1:
        from simcluster.workers import process_pool

        with process_pool(n) as pool:
            futs = {
                pool.submit(_prefetch_job, o.model_dump(), p, sc.seed): (label, p)
                for label, o, p in kah
            }
            for f in as_completed(futs):
                sec, cached = f.result()
                done += 1
                note(done, *futs[f], sec, cached)
    else:
        other = kah + other
    for label, o, p in other:
        part = partition_for(o, p, sc.seed)[0]
        done += 1
        note(done, label, p, part.seconds, part.cached)
    if tty:
        sys.stderr.write("\r\x1b[K")


def _network_key(o: SpMVOptions) -> tuple:
    return (o.generator, o.neurons, o.layers, o.connections, o.radix, o.permute, o.network_seed)


def _fmt(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def table1_tables(sc, records: list[dict] | None = None) -> list[tuple[str, list[str], list]]:
    """The paper's Table 1 for each network of the scenario: (title, headers, rows).

    Per P: a ratio row (hypergraph / random) when the scenario has both, then the
    actual values of every partitioner. With ``records`` (from a run), the time per
    input vector and its breakdown on rank 0 are added: SpMV and update are kernel
    time, comm is the rest (packing, sends, waiting for messages and for partners).
    """
    specs = spmv_specs(sc)
    groups: dict[tuple, list[tuple[str, SpMVOptions]]] = {}
    for label, o in specs:
        groups.setdefault(_network_key(o), []).append((label, o))
    rec = {(r["schedule"], r["gpus"]): r for r in records or []}
    headers = ["P", "partitioner", "avg vol", "max vol", "avg msgs", "max msgs", "imbalance"]
    headers += ["partition s (wall)"]
    if records:
        headers += ["t/vector", "comm", "SpMV", "update"]
    out = []
    for members in groups.values():
        net = network_for(members[0][1])
        base = next(((lab, o) for lab, o in members if o.partitioner == "random"), None)
        rows: list[list] = []
        for p in sc.study.gpus:
            m = {lab: table1_for(o, p, sc.seed) for lab, o in members}
            shown = False  # P printed on this size's first row
            if base is not None:
                r0 = m[base[0]]
                for lab, o in members:
                    if o.partitioner == "random":
                        continue
                    h = m[lab]
                    ratio = [
                        h.avg_volume / r0.avg_volume if r0.avg_volume else float("nan"),
                        h.max_volume / r0.max_volume if r0.max_volume else float("nan"),
                        h.avg_messages / r0.avg_messages if r0.avg_messages else float("nan"),
                        h.max_messages / r0.max_messages if r0.max_messages else float("nan"),
                    ]
                    row = [p, f"{lab} / {base[0]}", *(f"{v:.2f}" for v in ratio), "", ""]
                    rows.append(row + ([""] * 4 if records else []))
                    shown = True
            for lab, _o in members:
                t = m[lab]
                row = [
                    "" if shown else p,
                    lab,
                    _fmt(t.avg_volume),
                    _fmt(t.max_volume),
                    _fmt(t.avg_messages, 2),
                    _fmt(t.max_messages, 2),
                    f"{t.imbalance:.3f}",
                    f"{t.partition_s:.1f}",
                ]
                if records:
                    r = rec.get((lab, p))
                    if r is None:
                        row += ["-"] * 4
                    else:
                        b = r.get("breakdown_s", {})
                        per = 1.0 / max(_samples_per_step(r), 1)
                        t_vec = r["iteration_time_s"] * per
                        spmv, upd = b.get("spmv", 0.0) * per, b.get("update", 0.0) * per
                        row += [_us(t_vec), _us(t_vec - spmv - upd), _us(spmv), _us(upd)]
                rows.append(row)
                shown = True
        title = (
            f"{net.name}: {net.description}. Table 1 of the SpMV paper, per layer of one "
            f"SpFF pass (SpBP mirrors it), volumes in vector entries"
        )
        out.append((title, headers, rows))
    return out


def _samples_per_step(record: dict) -> int:
    seg = (record.get("segments") or [{}])[0]
    return int(seg.get("extra", {}).get("vectors_per_step", 1))


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} us"

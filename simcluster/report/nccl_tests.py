"""The simulator's own nccl-tests table: one collective per size on a cluster.

What the columns mean follows NVIDIA/nccl-tests (README "Performance" and
src/common.cu): ``size`` is the bytes of the test buffer (the output buffer
of all_gather, the input buffer of reduce_scatter, each rank's send buffer of
alltoall), ``count`` the elements of the per-rank ``count`` argument, ``type``
float (4 bytes), ``time`` in microseconds, ``algbw = size / time`` and
``busbw = algbw x factor`` in GB/s (1e9 bytes/s) with nccl-tests' bus
bandwidth factors:

=============== ==================== =========
op              factor               count
=============== ==================== =========
all_reduce      2 (n - 1) / n        size / 4
all_gather      (n - 1) / n          size / 4 / n
reduce_scatter  (n - 1) / n          size / 4 / n
alltoall        (n - 1) / n          size / 4 / n
broadcast       1                    size / 4
reduce          1                    size / 4
sendrecv        1                    size / 4
=============== ==================== =========

Every rank of the cluster is in one communicator, as ``mpirun -np <GPUs>``
with ``-g 1``. Each size is lowered once (``auto`` picks algorithm and
protocol by estimated time, as NCCL's tuner does) and its phases are run on
the network model (max-min sharing by default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from simcluster.collectives import CollectiveCall, CommContext, lower
from simcluster.errors import ConfigError
from simcluster.network.backend import run_phases

__all__ = [
    "NCCL_TEST_OPS",
    "NcclTestOp",
    "parse_size",
    "sizes_between",
    "run_nccl_tests",
    "format_rows",
]

WORD = 4  # float32


@dataclass(frozen=True)
class NcclTestOp:
    """One nccl-tests binary: our op, its redop / root columns, busbw factor."""

    name: str
    op: str
    redop: str
    root: int
    per_rank_count: bool  # count column is size / 4 / n

    def factor(self, n: int) -> float:
        if self.name == "all_reduce":
            return 2.0 * (n - 1) / n
        if self.name in ("all_gather", "reduce_scatter", "alltoall"):
            return (n - 1) / n
        return 1.0


NCCL_TEST_OPS: dict[str, NcclTestOp] = {
    o.name: o
    for o in (
        NcclTestOp("all_reduce", "allreduce", "sum", -1, False),
        NcclTestOp("all_gather", "allgather", "none", -1, True),
        NcclTestOp("reduce_scatter", "reduce_scatter", "sum", -1, True),
        NcclTestOp("alltoall", "alltoall", "none", -1, True),
        NcclTestOp("broadcast", "broadcast", "none", 0, False),
        NcclTestOp("reduce", "reduce", "sum", 0, False),
        NcclTestOp("sendrecv", "p2p", "none", -1, False),
    )
}

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
#: largest -b / -e (bytes) without a device profile to check them against: a thousand
#: times the memory of any GPU (nccl-tests allocates the buffers on every GPU)
MAX_SIZE = 1 << 50


def parse_size(text: str, flag: str = "-b") -> int:
    """nccl-tests size syntax: ``8``, ``64K``, ``8M``, ``8G`` (powers of 1024), bytes."""
    s = str(text).strip().upper()
    unit = s[-1] if s and s[-1] in _UNITS and not s[-1].isdigit() else ""
    num = s[:-1] if unit else s
    try:
        value = float(num) * _UNITS[unit]
    except ValueError:
        raise ConfigError(None, flag, text, "not a size", "e.g. 8, 64K, 8M, 8G") from None
    if not math.isfinite(value):
        raise ConfigError(None, flag, text, "must be a finite size", "e.g. 8, 64K, 8M, 8G")
    if value < 0:
        raise ConfigError(None, flag, text, "must be >= 0 bytes")
    return int(value)


def sizes_between(begin: int, end: int, factor: int) -> list[int]:
    """nccl-tests' -b/-e/-f sweep: begin, begin*f, ... up to end (inclusive)."""
    if factor < 2:
        raise ConfigError(None, "-f", factor, "the step factor must be an integer >= 2")
    if end < begin:
        raise ConfigError(None, "-e", end, f"smaller than -b ({begin} bytes)")
    out, s = [], max(begin, 1) if begin else 0
    if s == 0:
        out.append(0)
        s = 1
    while s <= end:
        out.append(s)
        s *= factor
    return out


def check_buffers_fit(
    op: str, sizes: list[int], ranks: int, memory: float | None, profile: str, flag_value: str
) -> None:
    """Refuse sizes whose buffers exceed the GPU's ``memory`` (bytes), as real
    nccl-tests fails to allocate them: a send and a receive buffer per GPU, one of
    them 1/``ranks`` the size for allgather and reduce_scatter. ``flag_value`` is
    the ``-e`` the user gave (for the message)."""
    if not sizes or not memory:
        return
    per_byte = 1 + (1 / ranks if NCCL_TEST_OPS[op].per_rank_count else 1)
    need = max(sizes) * per_byte
    if need > memory:
        raise ConfigError(
            None, "-e", flag_value,
            f"its send and receive buffers take {need / 2**30:.1f} GiB per GPU, more than "
            f"the {memory / 2**30:.0f} GiB of {profile}",
            f"-e at most {int(memory // per_byte) // 2**20}M",
        )  # fmt: skip


def run_nccl_tests(
    ctx: CommContext,
    op: str,
    sizes: list[int],
    network_model: str = "maxmin",
    algorithm: str = "auto",
    protocol: str = "auto",
    gpus_per_thread: int = 1,
    launch_s: float = 0.0,
) -> list[dict[str, Any]]:
    """One row per size: the columns of nccl-tests plus the algorithm chosen.

    Time in us, bandwidths in GB/s (1e9 B/s); sizes rounded down as
    nccl-tests does to a whole number of floats per rank.

    ``gpus_per_thread`` is nccl-tests' ``-g``: one host thread enqueues the
    collective on each of its GPUs in turn, ``launch_s`` seconds each (the
    device profile's kernel launch overhead). Iterations run back to back, so
    host launches and GPU work overlap and a row takes the longer of the two:
    ``max(collective, gpus_per_thread * launch_s)``; it shows only where the
    collective is shorter (small sizes). When ``gpus_per_thread`` covers every rank
    the run is one process (``ctx.one_process``), as nccl-tests with ``-t 1``.
    """
    host_s = max(int(gpus_per_thread), 1) * float(launch_s)
    t = NCCL_TEST_OPS[op]
    n = ctx.cluster.num_ranks
    # one thread driving every GPU is one process: nccl-tests then creates the
    # communicators with ncclCommInitAll (read by a profile of selection nccl-2.4)
    ctx.one_process = int(gpus_per_thread) >= n
    ranks = tuple(range(n))
    rows = []
    for size in sizes:
        count = size // WORD // (n if t.per_rank_count else 1)
        nbytes_buf = count * WORD * (n if t.per_rank_count else 1)
        if t.op == "allgather":
            per_rank = float(count * WORD)  # bytes each rank contributes
        elif t.op == "alltoall":
            per_rank = float(count * WORD)  # bytes to each peer
        else:
            per_rank = float(nbytes_buf)
        if t.op == "p2p":
            groups = tuple((r, (r + 1) % n) for r in ranks) if n > 1 else ()
        else:
            groups = (ranks,)
        call = CollectiveCall(
            t.op, groups, per_rank, algorithm if t.op == "allreduce" else "auto",
            max(t.root, 0), protocol,
        )  # fmt: skip
        name, phases = lower(ctx, call)
        seconds = run_phases(network_model, ctx.capacity, ctx.inter_node_link, phases)
        seconds = max(seconds, host_s)
        algbw = nbytes_buf / seconds / 1e9 if seconds > 0 else 0.0
        rows.append(
            {
                "size": nbytes_buf,
                "count": count,
                "type": "float",
                "redop": t.redop,
                "root": t.root,
                "time_us": seconds * 1e6,
                "algbw_GBps": algbw,
                "busbw_GBps": algbw * t.factor(n),
                "algorithm": name,
            }
        )
    return rows


def format_rows(rows: list[dict[str, Any]], header: list[str]) -> str:
    """The table as nccl-tests prints it (one time/algbw/busbw group)."""
    lines = [f"# {h}" for h in header]
    lines.append(
        f"#{'size':>11}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
        f"  {'time':>9}  {'algbw':>7}  {'busbw':>7}  algorithm"
    )
    lines.append(
        f"#{'(B)':>11}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}"
        f"  {'(us)':>9}  {'(GB/s)':>7}  {'(GB/s)':>7}"
    )
    for r in rows:
        lines.append(
            f"{r['size']:>12}  {r['count']:>12}  {r['type']:>8}  {r['redop']:>6}  {r['root']:>6}"
            f"  {r['time_us']:>9.2f}  {r['algbw_GBps']:>7.2f}  {r['busbw_GBps']:>7.2f}"
            f"  {r['algorithm']}"
        )
    if rows:
        avg = sum(r["busbw_GBps"] for r in rows) / len(rows)
        lines.append(f"# Avg bus bandwidth    : {avg:.4g}")
    return "\n".join(lines)

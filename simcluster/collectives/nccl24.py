"""NCCL 2.4's kernel choice: by byte thresholds, not by estimated time.

NCCL 2.5 introduced the tuning model (``src/graph/tuning.cc``) whose constants a
network profile's ``protocols`` carry and whose choice ``auto`` follows (the least
estimated time). NCCL 2.4 had no such model and no LL128 protocol (LL128 first
appears in v2.5.6-1, ``src/collectives/device/*.h``). A network profile whose
``network.protocols.selection`` is ``nccl-2.4`` chooses as NCCL 2.4 does; the
facts, from github NVIDIA/nccl at tag v2.4.8-1:

- ``src/enqueue.cc`` ``getKernelInfo``: the LL kernel's threads start at
  ``NCCL_LL_MIN_NTHREADS`` = 64 and double while ``ceil(nBytes / (nt x
  nchunksPerLoop))`` exceeds ``min(threadThreshold, NCCL_LL_CHANNEL_THRESHOLD)``
  = 8 bytes and ``2 nt`` stays within ``NCCL_LL_MAX_NTHREADS`` = ``MAXTHREADS`` = 256
  (``src/include/devcomm.h``; ``comm->nThreads`` is 256 off Kepler,
  ``src/include/rings.h`` ``getDefaultThreads``); its channels are ``ceil(nBytes /
  (nt x nchunksPerLoop x 8))``, at least 1 and at most the communicator's
  channels. The collective runs LL when ``nBytes <= nc x nt x nchunksPerLoop x
  perThreadThreshold`` (``perThreadThreshold`` = ``threadThreshold``, x 4 for
  tree patterns), else Simple on every channel.
- ``src/include/enqueue.h``: ``NCCL_THREAD_THRESHOLD`` = 64 (Volta and newer; 32
  before, not modelled); ``src/init.cc`` ``ncclThreadThreshold`` doubles it when its
  ``multiNode`` argument is non-zero: ``initTransportsRank`` (``ncclCommInitRank``,
  one process per GPU) passes the number of nodes, so it is doubled even on one
  node; ``initTransportsAll`` (``ncclCommInitAll``, one process driving every GPU,
  as nccl-tests runs without MPI) passes 0.
- ``src/enqueue.cc`` ``getLoopInfo``: ``nchunksPerLoop`` is the rank count for
  ring patterns (allreduce, allgather, reduce-scatter) and 1 for trees and
  pipelines (broadcast, reduce); ``src/misc/argcheck.cc``: ``nBytes`` is count x
  type size, times the rank count for allgather and reduce-scatter.
- ``src/enqueue.cc`` ``getPatternInfo``: an allreduce runs the tree when ``nBytes
  <= treeThreshold``; ``src/init.cc`` ``ncclTreeThreshold``: 0 on one node (and
  whenever the ring's latency ``6 (nranks - 1)`` us is at most the tree's ``15
  log2(nnodes) + 4 (nranks / nnodes - 1)`` us); otherwise, with ``ringbw`` = 5000
  x channels B/us over NVLink (5000 without), ``treebw`` = 3/4 of it over NVLink
  (x 2 on two nodes; 2/3 without NVLink), unbounded when the tree is faster, else
  ``ringbw treebw / (ringbw - treebw) x (ringlat - treelat)`` bytes.

The communicator's channels are the simulator's (``ring.ring_orders``: the node's
NVLink rings, or one per NIC rail across nodes), an assumption where NCCL 2.4's
ring search found another count. Ops NCCL 2.4 did not have (send/recv,
alltoall) keep the time-based choice. Sizes in bytes.
"""

from __future__ import annotations

import math

__all__ = [
    "SELECTION",
    "LL_MIN_THREADS",
    "LL_MAX_THREADS",
    "LL_CHANNEL_THRESHOLD",
    "THREAD_THRESHOLD",
    "thread_threshold",
    "ll_kernel",
    "ll_threshold",
    "tree_threshold",
    "chunks_per_loop",
    "nccl_bytes",
    "choose",
    "supports",
]

#: ``network.protocols.selection`` value that selects this model
SELECTION = "nccl-2.4"
#: NCCL_LL_MIN_NTHREADS (src/include/enqueue.h)
LL_MIN_THREADS = 64
#: NCCL_LL_MAX_NTHREADS = MAXTHREADS (src/include/devcomm.h), = comm->nThreads off Kepler
LL_MAX_THREADS = 256
#: NCCL_LL_CHANNEL_THRESHOLD, bytes per thread before more channels (src/include/enqueue.h)
LL_CHANNEL_THRESHOLD = 8
#: NCCL_THREAD_THRESHOLD, bytes per thread before leaving LL, Volta and newer
THREAD_THRESHOLD = 64

#: ops NCCL 2.4 had, and whether their pattern is a ring (nchunksPerLoop = ranks)
_RING_PATTERN = {
    "allreduce": True,
    "allgather": True,
    "reduce_scatter": True,
    "broadcast": False,
    "reduce": False,
}


def thread_threshold(one_process: bool) -> int:
    """``comm->threadThreshold`` (bytes per thread): 64, doubled unless one process
    created every rank's communicator (``ncclCommInitAll``)."""
    return THREAD_THRESHOLD if one_process else 2 * THREAD_THRESHOLD


def ll_kernel(nbytes: int, chunks_per_loop: int, channels: int, threshold: int) -> tuple[int, int]:
    """(threads, channels) of NCCL 2.4's LL kernel for ``nbytes``."""
    per_thread = min(threshold, LL_CHANNEL_THRESHOLD)
    nt = LL_MIN_THREADS
    while -(-nbytes // (nt * chunks_per_loop)) > per_thread and nt * 2 <= LL_MAX_THREADS:
        nt *= 2
    nc = -(-nbytes // (nt * chunks_per_loop * per_thread))
    return nt, min(max(nc, 1), channels)


def ll_threshold(
    nbytes: int, chunks_per_loop: int, channels: int, threshold: int, tree: bool = False
) -> int:
    """Largest ``nBytes`` NCCL 2.4 runs in LL, for the kernel it would use at ``nbytes``."""
    nt, nc = ll_kernel(nbytes, chunks_per_loop, channels, threshold)
    return nc * nt * chunks_per_loop * threshold * (4 if tree else 1)


def tree_threshold(nnodes: int, nranks: int, channels: int, nvlink: bool) -> float:
    """``comm->treeThreshold`` in bytes (0: never the tree; inf: always)."""
    ringbw = 5000.0 * channels if nvlink else 5000.0
    treebw = ringbw * 3 / 4 if nvlink else ringbw * 2 / 3
    if nvlink and nnodes == 2:
        treebw *= 2
    ringlat = 6.0 * (nranks - 1)
    treelat = 15.0 * math.log2(max(nnodes, 1)) + 4.0 * (nranks / max(nnodes, 1) - 1)
    if nnodes < 2 or ringlat <= treelat:
        return 0.0
    if treebw > ringbw:
        return math.inf
    return float(int(ringbw * treebw / (ringbw - treebw) * (ringlat - treelat)))


def chunks_per_loop(op: str, tree: bool, nranks: int) -> int:
    """``nchunksPerLoop`` of the op's pattern."""
    return nranks if _RING_PATTERN[op] and not tree else 1


def nccl_bytes(op: str, nbytes: float, nranks: int) -> int:
    """NCCL's ``nBytes`` for a call of ``nbytes`` (the simulator's meaning, see
    :data:`simcluster.program.OPS`): the allgather's is the gathered buffer."""
    return int(nbytes * nranks) if op == "allgather" else int(nbytes)


def choose(
    op: str,
    nbytes: float,
    nranks: int,
    nnodes: int,
    channels: int,
    nvlink: bool,
    one_process: bool,
    algorithm: str = "auto",
    protocol: str = "auto",
) -> tuple[str | None, str]:
    """(algorithm, protocol) NCCL 2.4 runs; algorithm None: the op's only one.

    An ``algorithm`` or ``protocol`` other than ``auto`` is kept. ``op`` must be one
    NCCL 2.4 had (a key of the ring-pattern table)."""
    b = nccl_bytes(op, nbytes, nranks)
    name: str | None = None
    if op == "allreduce":
        name = algorithm
        if name == "auto":
            limit = tree_threshold(nnodes, nranks, channels, nvlink)
            name = "tree" if 0 < b <= limit else "ring"
    elif algorithm != "auto":
        name = algorithm
    if protocol != "auto":
        return name, protocol
    tree = name == "tree"
    k = chunks_per_loop(op, tree, nranks)
    limit = ll_threshold(b, k, channels, thread_threshold(one_process), tree)
    return name, ("LL" if b <= limit else "Simple")


def supports(op: str) -> bool:
    """Did NCCL 2.4 have ``op`` (else the time-based choice applies)?"""
    return op in _RING_PATTERN

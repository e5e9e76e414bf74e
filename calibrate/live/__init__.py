"""Live runs: the communication patterns of the data-parallel schedules, for real.

``python -m calibrate.live --nproc 2 --out live.json`` spawns gloo processes on this
host; ``torchrun --nproc-per-node 4 --nnodes N ... -m calibrate.live --out live.json``
runs the same program on a cluster (NCCL when CUDA is there, else gloo). Each
pattern runs real compute (forward, backward, SGD step of a small ResNet) and the
collectives of its schedule, one phase after another with blocking collectives,
each phase timed on every rank:

- ``ddp``: gradients flattened into buckets (1 MiB first, then 25 MiB, backward
  order), one allreduce per bucket;
- ``topk``: per parameter tensor, top 1% by magnitude, values + int32 indices packed
  and allgathered, then scatter-added;
- ``hsadmm``: a local step, then the consensus of PRUNEX with real process groups:
  intra-node allreduce (new_group per node), the leader's channel projection and
  uint8 mask, mask OR by allreduce MAX over the leaders' group, compaction of the
  kept channels, bucketed inter-node allreduce of the compacted buffer, decompression,
  intra-node broadcast from the leader, dual update, residual allreduce;
- ``nodebased``: intra-node gradient allreduce every step, parameter averaging over
  all ranks every K' steps;
- ``fusion``: SSFusion-style fused buffers: small tensors allreduced dense, large
  ones sparsified and allgathered, per buffer.

Before the patterns, an allreduce sweep over sizes (same processes, same machine)
gives ``t = a + n * b``, the link costs the simulator's ``localhost`` topology uses;
on gloo, calibrate.gloo's sweep (allreduce, allgather, broadcast, a skewed-arrival
test) and CPU-sharing test run too, and the sharing test again before each pattern
and after the last: the constants of :mod:`simcluster.network.gloo`.
``--trace FILE`` also records ``calibrate.trace``'s interleaved trace of the model on
rank 0 alone (the others asleep in a barrier) just before the first pattern.
Rank 0 writes the exact configuration, the calibration, every op (collective,
groups, bytes) and every rank's per-phase, per-iteration seconds to JSON;
``simcluster validate --live FILE`` simulates the same ops and reports the error
per phase.
"""

__all__ = ["main"]


def main(argv=None) -> int:
    from .run import main as _main

    return _main(argv)

#!/bin/bash
# NCCL collective sweep over every GPU of the Slurm job, one torchrun per node.
# Called by puhti_calibrate.sbatch through `srun --ntasks-per-node=1`; usable by hand too:
#   srun -N2 --ntasks-per-node=1 --gres=gpu:v100:4 bash calibrate/jobs/torchrun_collectives.sh OUT.json
#
# Scopes measured (calibrate/collectives.py): the whole job ("world"), the 4 GPUs of each
# node at once ("intra", NVLink), one rank per node ("inter", InfiniBand).
# Nominal link rates for link_efficiency (Puhti, topologies/puhti.yaml):
#   nvlink      2 NVLink2 links x 25 GB/s per GPU pair and direction  = 50e9 bytes/s
#   infiniband  one HDR100 rail per GPU-NIC path, 100 Gb/s            = 12.5e9 bytes/s
set -euo pipefail

OUT=${1:?usage: torchrun_collectives.sh OUT.json}
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
MAX_BYTES=${MAX_BYTES:-1e9}
NVLINK_RATE=${NVLINK_RATE:-50e9}
IB_RATE=${IB_RATE:-12.5e9}
PYTHON=${PYTHON:-python3}
MASTER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export PYTHONPATH="${REPO:-$PWD}${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}

exec "$PYTHON" -m torch.distributed.run \
    --nnodes="$SLURM_JOB_NUM_NODES" --nproc-per-node="$GPUS_PER_NODE" \
    --rdzv-backend=c10d --rdzv-endpoint="$MASTER:29500" --rdzv-id="$SLURM_JOB_ID" \
    -m calibrate.collectives --backend nccl --out "$OUT" --max-bytes "$MAX_BYTES" \
    --link-nominal "nvlink=intra:$NVLINK_RATE" --link-nominal "infiniband=inter:$IB_RATE" \
    ${FORCE:+--force}

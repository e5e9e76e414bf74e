#!/bin/bash
# Measured CUDA device profile of one GPU, in one short unattended run (e.g. a lent
# H100/H200 machine with a fixed time budget). Run from the repository root:
#
#   OUT=/tmp/out bash calibrate/jobs/device_cuda.sh
#
# Steps, all logged (set -x) to $OUT/log.txt:
#   1. nvidia-smi -L, torch version and the GPU's name, multiprocessors, memory, L2;
#   2. quick calibration (safety net)        -> $OUT/<gpu>-quick.json
#   3. full calibration, in what time is left -> $OUT/<gpu>-measured.json
#      with its network profile (gloo, 2 local ranks on one GPU machine)
#                                            -> $OUT/network/<gpu>-measured.json
#   4. when ANCHORS_S > 0: whole training steps (calibrate/anchors.py) in at most
#      ANCHORS_S seconds                      -> $OUT/anchors-<gpu>.json
#   5. `calibrate check` (a ResNet's forward + backward, simulated vs torch) of the
#      full profile (else the quick one) for each MODEL:BATCH of CHECKS
#      (default resnet18-cifar at 32 and 256, resnet50 at 32) and each precision of
#      CHECK_PRECISIONS measured                -> $OUT/check-*.json
# PRECISIONS (default fp32,tf32,amp,amp_bf16) are the precisions measured; FULL_MAX_S caps
# the full run's seconds.
#   6. a Kineto trace of one training step per MODEL:BATCH of TRACES (default those of
#      CHECKS; TRACES= skips) for `workload: {trace: FILE}`  -> $OUT/traces/<gpu>-<m>-b<b>.json
#   7. when DDP_S > 0: DDP's own cost (calibrate/ddp_overhead.py: one training step plain
#      and under one-rank DDP at DDP_ARGS, default ResNet-50 and BERT-large at 1 and 25 MiB
#      in fp32 and amp, with the no-group baseline) in at most DDP_S seconds
#                                               -> $OUT/ddp-overhead-<gpu>.json
#      (`python -m calibrate.ddp_overhead --summarize` splits it per tensor and per bucket)
# <gpu> comes from torch's device name: h200, h100-sxm-80gb, h100-pcie-80gb, ...
# The file stems are the profile names: copied to calibrate/profiles/ and
# calibrate/profiles/network/ they load as `profile: <gpu>-measured` and
# `network_profile: <gpu>-measured`.
#
# The script ends by DEADLINE seconds (default 420): the full run gets the time left after
# the quick run minus CHECK_RESERVE_S, ANCHORS_S and DDP_S, and is stopped with `timeout`
# if it needs more.
# FULL_ROUNDS (default 2) sets the full plan's interleaved rounds (the plan's own default
# is 3; 2 keeps a whole H100/H200 run near 4-5 minutes).
#
# Python packages: python3 needs torch (with CUDA) and simcluster's dependencies. Wheels
# of missing pure dependencies (simpy, pydantic, ...) found in .whl/ are installed into
# /tmp/site first (the device machine has no package index).
#
# QUICK=0 skips step 2 (when a profile to fall back on exists already).
#
# Overrides for a dry run without a GPU (WHEELS=none: the venv has the dependencies), e.g.:
#   OUT=/tmp/dry DEVICE=cpu QUICK_ARGS=--tiny FULL_ARGS=--tiny WHEELS=none \
#       PYTHON=.venv/bin/python bash calibrate/jobs/device_cuda.sh

set -uo pipefail   # not -e: a failed step is logged and the next one still runs

: "${OUT:?set OUT to the output folder}"
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
DEADLINE=${DEADLINE:-420}
CHECK_RESERVE_S=${CHECK_RESERVE_S:-40}
FULL_ROUNDS=${FULL_ROUNDS:-2}
QUICK_ARGS=${QUICK_ARGS:---quick}
FULL_ARGS=${FULL_ARGS:---rounds $FULL_ROUNDS}
CHECKS=${CHECKS:-resnet18-cifar:32 resnet18-cifar:256 resnet50:32}
CHECK_PRECISIONS=${CHECK_PRECISIONS:-fp32 tf32 amp}
PRECISIONS=${PRECISIONS:-fp32,tf32,amp,amp_bf16}
FULL_MAX_S=${FULL_MAX_S:-100000}
ANCHORS_S=${ANCHORS_S:-0}
ANCHORS_ARGS=${ANCHORS_ARGS:-}
TRACES=${TRACES-$CHECKS}
DDP_S=${DDP_S:-0}
DDP_ARGS=${DDP_ARGS:---no-group-baseline}
QUICK=${QUICK:-1}
WHEELS=${WHEELS:-.whl}
export PYTHONUNBUFFERED=1

mkdir -p "$OUT/network"

main() {
    set -x
    date -u
    if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --upgrade --target /tmp/site "$WHEELS"/*.whl || return 1
        export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}
    else
        export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    fi

    # 1. what this machine is
    nvidia-smi -L || true
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
    GPU=$("$PYTHON" - <<'EOF'
import re, sys, torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"cuDNN {torch.backends.cudnn.version()}", file=sys.stderr)
if not torch.cuda.is_available():
    print("no CUDA device", file=sys.stderr)
    print("nocuda")
    sys.exit(0)
p = torch.cuda.get_device_properties(0)
print(f"device 0: {p.name}, {p.multi_processor_count} SMs, "
      f"{p.total_memory / 2**30:.1f} GiB, L2 {getattr(p, 'L2_cache_size', 0) / 2**20:.0f} MiB",
      file=sys.stderr)
n = p.name.lower()
if "h200" in n:
    slug = "h200"
elif "h100" in n:
    slug = "h100-" + ("pcie" if "pcie" in n else "sxm") + ("-80gb" if "80gb" in n else "")
else:
    slug = re.sub(r"[^a-z0-9]+", "-", n.replace("nvidia", "")).strip("-")
print(slug)
EOF
)
    [ -n "$GPU" ] || GPU=gpu
    echo "gpu slug: $GPU; elapsed ${SECONDS} s"

    # 2. quick calibration (safety net; no collective sweep: the full run makes one)
    if [ "$QUICK" != 0 ]; then
        timeout -k 10 150 "$PYTHON" -m simcluster.cli calibrate --device "$DEVICE" $QUICK_ARGS \
            --precisions "$PRECISIONS" --no-network --out "$OUT/$GPU-quick.json" --force
        echo "quick: exit $?; elapsed ${SECONDS} s"
    fi

    # 3. full calibration in the time left (the device profile is written before the
    #    collective sweep starts, so a stop during the sweep keeps it)
    left=$((DEADLINE - SECONDS - CHECK_RESERVE_S - ANCHORS_S - DDP_S))
    [ "$left" -le "$FULL_MAX_S" ] || left=$FULL_MAX_S
    if [ "$left" -gt 60 ]; then
        timeout -k 10 "$left" "$PYTHON" -m simcluster.cli calibrate --device "$DEVICE" \
            $FULL_ARGS --precisions "$PRECISIONS" --out "$OUT/$GPU-measured.json" \
            --network-out "$OUT/network/$GPU-measured.json" --force
        echo "full: exit $? (124: stopped by timeout after $left s); elapsed ${SECONDS} s"
    else
        echo "full: skipped, only $left s left"
    fi

    # 4. whole training steps (samples/s), the device's own anchors (calibrate/anchors.py)
    if [ "$ANCHORS_S" -gt 0 ]; then
        left=$((DEADLINE - SECONDS - CHECK_RESERVE_S))
        [ "$left" -le "$ANCHORS_S" ] || left=$ANCHORS_S
        timeout -k 10 $((left + 20)) "$PYTHON" -m calibrate.anchors --device "$DEVICE" \
            --precisions "$PRECISIONS" --deadline-s "$left" $ANCHORS_ARGS \
            --out "$OUT/anchors-$GPU.json"
        echo "anchors: exit $?; elapsed ${SECONDS} s"
    fi

    # 5. simulated vs measured forward + backward of ResNets, per precision
    prof="$OUT/$GPU-measured.json"
    [ -s "$prof" ] || prof="$OUT/$GPU-quick.json"
    if [ -s "$prof" ]; then
        for c in $CHECKS; do
            m=${c%%:*} b=${c##*:}
            for p in $CHECK_PRECISIONS; do
                case ",$PRECISIONS," in *",$p,"*) ;; *) continue ;; esac
                left=$((DEADLINE - SECONDS))
                [ "$left" -gt 15 ] || { echo "check $c $p: skipped, $left s left"; continue; }
                timeout -k 5 "$left" "$PYTHON" -m simcluster.cli calibrate check \
                    --profile "$prof" --device "$DEVICE" --model "$m" --batch "$b" \
                    --precision "$p" --json | tee "$OUT/check-$m-b$b-$p.json"
            done
        done
    fi

    # 5. one trace per model (calibrate.trace: warm-up, then profiled steps)
    mkdir -p "$OUT/traces"
    for c in $TRACES; do
        m=${c%%:*} b=${c##*:}
        left=$((DEADLINE - SECONDS))
        [ "$left" -gt 15 ] || { echo "trace $c: skipped, $left s left"; continue; }
        timeout -k 5 "$left" "$PYTHON" -m calibrate.trace --model "$m" --batch "$b" \
            --device "$DEVICE" --out "$OUT/traces/$GPU-$m-b$b.json"
    done
    # 7. DDP's own cost on one rank (DDP_S was kept back from the full run above)
    if [ "$DDP_S" -gt 0 ]; then
        left=$((DEADLINE - SECONDS))
        [ "$left" -le "$DDP_S" ] || left=$DDP_S
        if [ "$left" -gt 20 ]; then
            timeout -k 10 "$left" "$PYTHON" -m calibrate.ddp_overhead --device "$DEVICE" \
                --deadline-s $((left - 15)) $DDP_ARGS --out "$OUT/ddp-overhead-$GPU.json" --force
            echo "ddp_overhead: exit $?; elapsed ${SECONDS} s"
        else
            echo "ddp_overhead: skipped, $left s left"
        fi
    fi
    ls -la "$OUT" "$OUT/network" "$OUT/traces"
    echo "done; elapsed ${SECONDS} s"
}

main 2>&1 | tee "$OUT/log.txt"

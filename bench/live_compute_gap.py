"""Check (not a test): the CPU profile's forward / backward for the live runs' model
against the same step timed in one process alone.

Usage: python bench/live_compute_gap.py [--batch 8] [--steps 6] [--profile cpu-xeon-1core]

Times ``calibrate.live``'s ResNet-18 (CIFAR stem) with 1 torch thread: forward (with
the loss) and backward, thread CPU time (the profile's ``--clock cpu``) and wall time,
after one warm-up step; prints the medians beside the profile's layer sums
(``simcluster.validation.live._predicted_compute``) and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--profile", default="cpu-xeon-1core")
    a = p.parse_args(argv)
    import torch

    from calibrate.live.model import resnet18_cifar
    from simcluster.compute import load_profile
    from simcluster.validation.live import _predicted_compute

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = resnet18_cifar(10)
    x = torch.randn(a.batch, 3, 32, 32)
    y = torch.randint(0, 10, (a.batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    load0 = os.getloadavg()[0]
    rows: dict[str, list[float]] = {"fwd_cpu": [], "bwd_cpu": [], "fwd_wall": [], "bwd_wall": []}
    for i in range(a.steps + 1):
        model.zero_grad(set_to_none=False)
        c0, t0 = time.thread_time(), time.perf_counter()
        loss = loss_fn(model(x), y)
        c1, t1 = time.thread_time(), time.perf_counter()
        loss.backward()
        c2, t2 = time.thread_time(), time.perf_counter()
        if i:
            rows["fwd_cpu"].append(c1 - c0)
            rows["bwd_cpu"].append(c2 - c1)
            rows["fwd_wall"].append(t1 - t0)
            rows["bwd_wall"].append(t2 - t1)
    pred = _predicted_compute(load_profile(a.profile), "resnet18-cifar", a.batch)
    for k, v in rows.items():
        print(f"{k:9s} median {statistics.median(v) * 1e3:7.1f} ms "
              f"(range {min(v) * 1e3:.1f}-{max(v) * 1e3:.1f})")  # fmt: skip
    print(f"profile {a.profile}: forward {pred['forward'] * 1e3:.1f} ms, "
          f"backward {pred['backward'] * 1e3:.1f} ms")  # fmt: skip
    print(f"1-min load {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

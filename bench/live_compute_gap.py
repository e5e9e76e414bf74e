"""Check (not a test): the CPU profile's forward / backward for the live runs' model
against the same step timed in one process alone.

Usage: python bench/live_compute_gap.py [--batch 8] [--steps 6] [--profile cpu-xeon-1core]

Times ``calibrate.live``'s ResNet-18 (CIFAR stem) with 1 torch thread: forward (with
the loss) and backward, thread CPU time (the profile's ``--clock cpu``) and wall time,
after one warm-up step; prints the medians beside the profile's layer sums
(``simcluster.validation.live._predicted_compute``) and the load average.

``--breakdown`` also splits the gap (each figure measured in this process, now):

* host speed now against the calibration run: the profile's canary (fp32 256^3 matmul,
  ``provenance.canary_s``) timed again; the live runs' CPU-sharing job alone
  (``calibrate.gloo._Job``) over the profile's time for it, the ratio live validation
  applies (``simcluster.validation.live._host_speed``); and the zoo layers timed as
  ``simcluster calibrate`` times them (``calibrate.layers.time_layer``, same timer
  settings, one round) summed over the model;
* first-touch page faults: minor faults and system CPU time of each pass
  (``getrusage(RUSAGE_THREAD)``, 4 ms ticks: a mean over the steps). A training step
  allocates its weight gradients and activations afresh; glibc returns the freed heap
  top to the kernel between steps (``M_TRIM_THRESHOLD``), so the next step faults the
  pages in again. A layer benchmark reallocates one size over and over from the heap
  and pays almost none. Run the script again with ``MALLOC_TRIM_THRESHOLD_=4000000000
  MALLOC_MMAP_THRESHOLD_=4000000000`` in the environment to see the step without them;
* the gradient accumulation the live step does (``zero_grad(set_to_none=False)``, so
  backward adds each new weight gradient into ``.grad``): the profile's elementwise
  kernel over 3 x the parameter bytes, an op no layer benchmark contains (the profile's
  backward above includes it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
    p.add_argument("--breakdown", action="store_true", help="host speed, faults, layer sum")
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
    names = [f"{p}_{q}" for p in ("fwd", "bwd") for q in ("minflt", "sys")]
    faults: dict[str, list[float]] = {k: [] for k in names}
    for i in range(a.steps + 1):
        model.zero_grad(set_to_none=False)
        r0 = resource.getrusage(resource.RUSAGE_THREAD)
        c0, t0 = time.thread_time(), time.perf_counter()
        loss = loss_fn(model(x), y)
        c1, t1 = time.thread_time(), time.perf_counter()
        r1 = resource.getrusage(resource.RUSAGE_THREAD)
        loss.backward()
        c2, t2 = time.thread_time(), time.perf_counter()
        r2 = resource.getrusage(resource.RUSAGE_THREAD)
        if i:
            for k, (u, v) in {"fwd": (r0, r1), "bwd": (r1, r2)}.items():
                faults[f"{k}_minflt"].append(v.ru_minflt - u.ru_minflt)
                faults[f"{k}_sys"].append(v.ru_stime - u.ru_stime)
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
    if a.breakdown:
        _breakdown(a, model, faults, pred)
    print(f"1-min load {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    return 0


def _breakdown(a, model, faults: dict[str, list[float]], pred: dict[str, float]) -> None:
    import torch

    from calibrate.layers import layer_key, time_layer
    from calibrate.timing import Timer
    from simcluster.compute import load_profile
    from simcluster.compute.measured import MeasuredProfile
    from simcluster.workload import build_model

    for k in ("fwd", "bwd"):
        print(f"{k} page faults {statistics.mean(faults[k + '_minflt']):.0f} per step "
              f"({statistics.mean(faults[k + '_minflt']) * 4096 / 2**20:.1f} MiB of 4 KiB "
              f"pages), system CPU {statistics.mean(faults[k + '_sys']) * 1e3:.1f} ms")  # fmt: skip
    prof = load_profile(a.profile)
    pbytes = 4 * sum(p.numel() for p in model.parameters())
    if isinstance(prof, MeasuredProfile):
        acc = prof.elementwise_time(3 * pbytes)
        print(f"gradient accumulation (.grad += new, {pbytes / 2**20:.1f} MiB): profile "
              f"{acc * 1e3:.1f} ms (in the backward above; no layer bench has it)")  # fmt: skip
    raw = json.loads((ROOT / "calibrate" / "profiles" / f"{a.profile}.json").read_text())
    cal = statistics.median(raw["provenance"].get("canary_s") or [float("nan")])
    x = torch.randn(256, 256)
    w = torch.randn(256, 256)
    ts = []
    for _ in range(200):
        t = time.thread_time()
        x @ w
        ts.append(time.thread_time() - t)
    now = statistics.median(ts)
    print(f"canary (fp32 256^3 matmul): {now * 1e3:.3f} ms now, {cal * 1e3:.3f} ms in the "
          f"profile's run: host x{now / cal:.2f}")  # fmt: skip
    from calibrate.gloo import _Job
    from simcluster.validation.live import _job_seconds

    job = _Job(torch)
    job(3)
    alone = statistics.median(job(10, time.thread_time) / 10 for _ in range(5))
    speed = alone / _job_seconds(prof)
    print(f"sharing test's job alone (as live validation reads it): {alone * 1e3:.3f} ms, "
          f"profile {_job_seconds(prof) * 1e3:.3f} ms: host x{speed:.2f}; profile x host: "
          f"forward {pred['forward'] * speed * 1e3:.1f} ms, "
          f"backward {pred['backward'] * speed * 1e3:.1f} ms")  # fmt: skip
    timer = Timer(torch.device("cpu"), warmup=1, reps=5, min_sample_s=0.005, clock="cpu")
    cache: dict[tuple, tuple[float, float]] = {}
    fwd = bwd = 0.0
    for layer in build_model("resnet18-cifar", 32, 10).layers:
        key = layer_key(layer, a.batch)
        if key not in cache:
            r = time_layer(layer, a.batch, torch.device("cpu"), timer)
            b = r["bwd_all"].median if "bwd_all" in r else r.get("bwd_weight", r["fwd"]).median
            cache[key] = (r["fwd"].median, b)
        fwd += cache[key][0]
        bwd += cache[key][1]
    print(f"layer sum timed now as calibrate times it: forward {fwd * 1e3:.1f} ms, backward "
          f"{bwd * 1e3:.1f} ms (profile x{fwd / pred['forward']:.2f}, "
          f"x{bwd / pred['backward']:.2f})")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())

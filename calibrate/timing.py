"""Timing kernels: warm-up, repetitions, synchronisation, median and spread.

On CUDA every sample is bracketed by ``torch.cuda.Event`` records and read after a
synchronisation; on the CPU by :func:`time.perf_counter` (``clock="wall"``) or by the
calling thread's CPU time (``clock="cpu"``, :func:`time.thread_time`), which with one
torch thread is the time the kernel takes on a core of its own: time the thread spends
descheduled while other processes use the CPUs does not count. Calls shorter than
``min_sample_s`` are repeated ``inner`` times inside one sample and the sample is
divided by ``inner``, so the timer's own cost stays below a few percent.
All times are seconds.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

__all__ = ["Measurement", "Timer"]


@dataclass
class Measurement:
    """Per-call seconds of ``reps`` samples (each the mean of ``inner`` calls)."""

    samples: list[float]
    inner: int
    warmup: int

    @property
    def median(self) -> float:
        return float(statistics.median(self.samples))

    @property
    def q1(self) -> float:
        return _quantile(self.samples, 0.25)

    @property
    def q3(self) -> float:
        return _quantile(self.samples, 0.75)

    @property
    def spread(self) -> float:
        """Inter-quartile range over the median (dimensionless)."""
        m = self.median
        return (self.q3 - self.q1) / m if m > 0 else 0.0

    def to_json(self) -> dict:
        return {
            "median_s": _sig(self.median),
            "q1_s": _sig(self.q1),
            "q3_s": _sig(self.q3),
            "samples_s": [_sig(s) for s in self.samples],
            "inner": self.inner,
        }


def _sig(x: float, digits: int = 4) -> float:
    """``x`` rounded to ``digits`` significant digits (keeps profile files small)."""
    if x == 0 or not math.isfinite(x):
        return float(x)
    return float(f"{x:.{digits}g}")


def _quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    if len(s) == 1:
        return float(s[0])
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))


@dataclass
class Timer:
    """Times a zero-argument callable on ``device``.

    warmup: calls before timing (also used to pick ``inner``).
    reps: timed samples; the profile keeps all of them and uses the median.
    min_sample_s: a sample lasts at least about this long (seconds).
    max_inner: cap on calls per sample.
    clock: ``wall`` or ``cpu`` (thread CPU time; CPU device with one torch thread only).
    budget_s: when set, calls longer than ``budget_s / reps`` get fewer samples (at least 3).
    """

    device: torch.device
    warmup: int = 2
    reps: int = 5
    min_sample_s: float = 2e-3
    max_inner: int = 200
    clock: str = "wall"
    budget_s: float | None = None
    calls: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.clock not in ("wall", "cpu"):
            raise ValueError(f"clock must be 'wall' or 'cpu', got {self.clock!r}")
        if self.clock == "cpu" and (self.device.type != "cpu" or torch.get_num_threads() != 1):
            raise ValueError("clock 'cpu' times a CPU device running one torch thread")

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def _run(self, fn: Callable[[], object], inner: int) -> float:
        """Seconds for ``inner`` back-to-back calls, synchronised at both ends."""
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            self.sync()
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1e-3
        clock = time.thread_time if self.clock == "cpu" else time.perf_counter
        t0 = clock()
        for _ in range(inner):
            fn()
        return clock() - t0

    def measure(
        self, fn: Callable[[], object], after_sample: Callable[[], object] | None = None
    ) -> Measurement:
        """Samples of ``fn``; ``after_sample`` runs untimed after each (e.g. frees outputs)."""
        est = math.inf
        for _ in range(max(self.warmup, 1)):
            est = min(est, self._run(fn, 1))
            if after_sample:
                after_sample()
        inner = 1
        if est < self.min_sample_s:
            inner = int(min(self.max_inner, math.ceil(self.min_sample_s / max(est, 1e-9))))
        reps = self.reps
        if self.budget_s is not None and est * inner * reps > self.budget_s:
            reps = max(3, min(reps, int(self.budget_s / max(est * inner, 1e-9))))
        samples = []
        for _ in range(reps):
            samples.append(self._run(fn, inner) / inner)
            if after_sample:
                after_sample()
        self.calls += self.warmup + reps * inner
        return Measurement(samples, inner, self.warmup)

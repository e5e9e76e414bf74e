"""Timing kernels: warm-up, repetitions, synchronisation, median and spread.

On CUDA every sample is bracketed by ``torch.cuda.Event`` records and read after a
synchronisation; on the CPU by :func:`time.perf_counter` (``clock="wall"``) or by the
calling thread's CPU time (``clock="cpu"``, :func:`time.thread_time`), which with one
torch thread is the time the kernel takes on a core of its own: time the thread spends
descheduled while other processes use the CPUs does not count. Calls shorter than
``min_sample_s`` are repeated ``inner`` times inside one sample and the sample is
divided by ``inner``, so the timer's own cost stays below a few percent.
All times are seconds.

Host ahead (``host_ahead``, CUDA only): a call timed alone costs the larger of the
host's time to issue it (Python, dispatch, autocast, the autograd engine started by
``torch.autograd.grad``: 35-90 us per call on the lent H100 / H200 hosts) and the GPU's
time to run it, since the GPU waits for each launch. In a training step the host issues
the next layers while the GPU still runs earlier ones, so a layer costs the step its GPU
time (the profiles measured per call put 89-94 % of their amp layer-pass samples, 76 %
of their fp32 ones, below twice their fit's constant, and summed a ResNet-50 batch-32 amp
forward + backward to 26.4 ms where the whole network ran in 16.4-17.0 ms on the same
H100). Where a step is host-bound (a small model, a slow host) the host's issue time
sets its pace instead; the step model has no host side yet, which the host times kept
here are for. With ``host_ahead`` a sample
first queues a GPU sleep kernel long enough for the host to issue all its calls
meanwhile, then times the calls between CUDA events recorded after the sleep: the GPU's
time for them, back to back, as in a step. The host's issue time per call is kept beside
it (:attr:`Measurement.host`). Where the host was still issuing when the sleep ended, the
sample is redone with a longer sleep (:data:`HOST_AHEAD_TRIES`), then kept as timed
(counted in :attr:`Timer.host_behind`).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

__all__ = ["Measurement", "Timer", "HOST_AHEAD_MAX_INNER", "HOST_AHEAD_TRIES"]

#: the most calls one host-ahead sample queues: the GPU runs nothing while it sleeps, and
#: CUDA's queue of pending launches (about a thousand) must hold them all; a backward call
#: launches several kernels
HOST_AHEAD_MAX_INNER = 32
#: tries of a host-ahead sample, each with twice the host's last issue time as its sleep
HOST_AHEAD_TRIES = 3
#: a host-ahead sample's sleep: this many times the host's issue time for its calls, as
#: the warm-up calls measured it, and at least HOST_AHEAD_MIN_LEAD_S (the warm-up's own
#: sleep); never longer than HOST_AHEAD_MAX_LEAD_S (seconds)
HOST_AHEAD_MARGIN = 1.5
HOST_AHEAD_MIN_LEAD_S = 1e-3
HOST_AHEAD_MAX_LEAD_S = 0.5


@dataclass
class Measurement:
    """Per-call seconds of ``reps`` samples (each the mean of ``inner`` calls)."""

    samples: list[float]
    inner: int
    warmup: int
    #: host-ahead timing: the host's seconds per call to issue each sample's calls
    host: list[float] | None = None

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
        out = {
            "median_s": _sig(self.median),
            "q1_s": _sig(self.q1),
            "q3_s": _sig(self.q3),
            "samples_s": [_sig(s) for s in self.samples],
            "inner": self.inner,
        }
        if self.host is not None:
            out["host_samples_s"] = [_sig(s) for s in self.host]
        return out


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
    host_ahead: on CUDA, time the GPU's work with the host issuing ahead of it (module
        doc); ignored on a CPU device, where host and device are one.
    """

    device: torch.device
    warmup: int = 2
    reps: int = 5
    min_sample_s: float = 2e-3
    max_inner: int = 200
    clock: str = "wall"
    budget_s: float | None = None
    host_ahead: bool = False
    calls: int = field(default=0, init=False)
    #: host-ahead samples kept after :data:`HOST_AHEAD_TRIES` with the host still issuing
    host_behind: int = field(default=0, init=False)
    _lead_s: float = field(default=HOST_AHEAD_MIN_LEAD_S, init=False)
    _sleep_hz: float = field(default=0.0, init=False)
    _host_s: float = field(default=0.0, init=False)

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

    @property
    def ahead(self) -> bool:
        """Whether samples are timed with the host ahead of the GPU."""
        return self.host_ahead and self.cuda

    def _sleep_rate(self) -> float:
        """Cycles per second of ``torch.cuda._sleep`` on this GPU (measured once)."""
        if not self._sleep_hz:
            cycles = 1_000_000
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            self.sync()
            a.record()
            torch.cuda._sleep(cycles)
            b.record()
            b.synchronize()
            self._sleep_hz = cycles / max(a.elapsed_time(b) * 1e-3, 1e-9)
        return self._sleep_hz

    def _run_ahead(self, fn: Callable[[], object], inner: int) -> float:
        """GPU seconds for ``inner`` calls issued while the GPU sleeps (module doc); the
        host's issue time of the last try is left in ``_host_s``."""
        gpu = 0.0
        for _ in range(HOST_AHEAD_TRIES):
            lead = torch.cuda.Event(enable_timing=True)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            self.sync()
            t0 = time.perf_counter()
            lead.record()
            torch.cuda._sleep(int(self._lead_s * self._sleep_rate()))
            start.record()
            t1 = time.perf_counter()
            for _ in range(inner):
                fn()
            t2 = time.perf_counter()
            end.record()
            end.synchronize()
            self._host_s = t2 - t1
            gpu = start.elapsed_time(end) * 1e-3
            # the GPU cannot have begun the sleep before the host queued it, so the host
            # was ahead if it issued everything within the sleep's length from then on
            if t2 - t0 < lead.elapsed_time(start) * 1e-3:
                return gpu
            self._lead_s = min(HOST_AHEAD_MAX_LEAD_S, max(self._lead_s, 2.0 * (t2 - t0)))
        self.host_behind += 1
        return gpu

    def _run(self, fn: Callable[[], object], inner: int) -> float:
        """Seconds for ``inner`` back-to-back calls, synchronised at both ends."""
        if self.ahead:
            return self._run_ahead(fn, inner)
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
        est = issue = math.inf
        self._lead_s = HOST_AHEAD_MIN_LEAD_S
        for _ in range(max(self.warmup, 1)):
            est = min(est, self._run(fn, 1))
            issue = min(issue, self._host_s)
            if after_sample:
                after_sample()
        inner = 1
        cap = min(self.max_inner, HOST_AHEAD_MAX_INNER) if self.ahead else self.max_inner
        if est < self.min_sample_s:
            inner = int(min(cap, math.ceil(self.min_sample_s / max(est, 1e-9))))
        if self.ahead:  # the sleep covers the host's issue time of a sample's calls
            lead = HOST_AHEAD_MARGIN * inner * issue
            self._lead_s = min(HOST_AHEAD_MAX_LEAD_S, max(HOST_AHEAD_MIN_LEAD_S, lead))
        reps = self.reps
        if self.budget_s is not None and est * inner * reps > self.budget_s:
            reps = max(3, min(reps, int(self.budget_s / max(est * inner, 1e-9))))
        samples = []
        host: list[float] | None = [] if self.ahead else None
        for _ in range(reps):
            samples.append(self._run(fn, inner) / inner)
            if host is not None:
                host.append(self._host_s / inner)
            if after_sample:
                after_sample()
        self.calls += self.warmup + reps * inner
        return Measurement(samples, inner, self.warmup, host)

"""Host-ahead timing of layer passes (calibrate/timing.py), on a simulated GPU.

The CUDA calls the timer makes (events, ``torch.cuda._sleep``, synchronisation) are
replaced by a fake GPU whose clock advances by the sleep's length and by a fixed time
per call; the host's time is real (each call sleeps on the host), so the timer's check
that the host issued every call before the GPU woke is exercised as on a device.
"""

from __future__ import annotations

import time

import pytest
import torch

from calibrate import timing
from calibrate.models import time_host_ahead
from calibrate.timing import HOST_AHEAD_MAX_INNER, HOST_AHEAD_TRIES, Timer

HZ = 1.0e9  # cycles per second of the fake GPU's sleep


class FakeGPU:
    """A GPU clock (seconds): sleeps and calls advance it; events read it."""

    def __init__(self, sleeps: bool = True) -> None:
        self.clock = 0.0
        self.sleeps = sleeps
        self.slept: list[float] = []
        gpu = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.stamp = 0.0

            def record(self) -> None:
                self.stamp = gpu.clock

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, other: Event) -> float:  # milliseconds, as CUDA's
                return (other.stamp - self.stamp) * 1e3

        self.Event = Event

    def sleep(self, cycles: int) -> None:
        s = cycles / HZ
        self.slept.append(s)
        if self.sleeps:
            self.clock += s


@pytest.fixture
def gpu(monkeypatch):
    fake = FakeGPU()
    monkeypatch.setattr(torch.cuda, "Event", fake.Event)
    monkeypatch.setattr(torch.cuda, "_sleep", fake.sleep)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    return fake


def call(gpu: FakeGPU, gpu_s: float, host_s) -> object:
    """A layer pass: ``host_s()`` seconds on the host, ``gpu_s`` on the GPU."""

    def fn() -> None:
        time.sleep(host_s())
        gpu.clock += gpu_s

    return fn


def test_host_ahead_times_the_gpu_and_keeps_the_host_issue_time(gpu):
    timer = Timer(torch.device("cuda"), warmup=1, reps=3, min_sample_s=2e-3, host_ahead=True)
    m = timer.measure(call(gpu, 1e-6, lambda: 2e-4))
    # the GPU's 1 us per call, not the host's 200 us: what the call costs a step
    assert m.samples == pytest.approx([1e-6] * 3)
    assert m.inner == HOST_AHEAD_MAX_INNER  # capped: the queue must hold every call
    assert m.host is not None and len(m.host) == 3
    assert all(2e-4 <= h < 5e-2 for h in m.host)
    assert timer.host_behind == 0
    # each sample's sleep covered its calls' issue time (1.5 x the warm-up call's)
    assert min(gpu.slept[-3:]) >= HOST_AHEAD_MAX_INNER * 2e-4
    assert "host_samples_s" in m.to_json()


def test_a_sample_whose_host_fell_behind_is_redone_with_a_longer_sleep(gpu, monkeypatch):
    monkeypatch.setattr(timing, "HOST_AHEAD_MARGIN", 0.01)  # sleeps sized far too short
    timer = Timer(torch.device("cuda"), warmup=1, reps=3, min_sample_s=2e-3, host_ahead=True)
    m = timer.measure(call(gpu, 5e-6, lambda: 1e-3))
    assert m.samples == pytest.approx([5e-6] * 3)
    assert timer.host_behind == 0
    # the first sample's sleep was too short: tried again with twice the host's issue time
    # of the failed try (the rate probe, the warm-up, three samples and the retry)
    assert len(gpu.slept) >= 6
    assert max(gpu.slept) >= 2 * HOST_AHEAD_MAX_INNER * 1e-3


def test_samples_the_host_never_got_ahead_of_are_counted(monkeypatch):
    fake = FakeGPU(sleeps=False)  # a GPU that does not sleep: the host is always behind
    monkeypatch.setattr(torch.cuda, "Event", fake.Event)
    monkeypatch.setattr(torch.cuda, "_sleep", fake.sleep)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(timing, "HOST_AHEAD_MIN_LEAD_S", 1e-4)
    timer = Timer(torch.device("cuda"), warmup=1, reps=3, min_sample_s=0.0, host_ahead=True)
    monkeypatch.setattr(timer, "_sleep_hz", HZ)  # no rate probe: this GPU never sleeps
    m = timer.measure(call(fake, 1e-5, lambda: 1e-4))
    assert m.samples == pytest.approx([1e-5] * 3)
    assert timer.host_behind == 1 + 3  # the warm-up and every sample
    assert len(fake.slept) == (1 + 3) * HOST_AHEAD_TRIES


def test_host_ahead_is_per_call_timing_on_a_cpu():
    timer = Timer(torch.device("cpu"), warmup=1, reps=3, min_sample_s=0.0, host_ahead=True)
    assert not timer.ahead
    m = timer.measure(lambda: time.sleep(1e-4))
    assert m.host is None and "host_samples_s" not in m.to_json()
    assert all(s >= 1e-4 for s in m.samples)


def test_a_whole_step_with_the_host_ahead_gives_gpu_and_host_time(gpu):
    timer = Timer(torch.device("cuda"), warmup=1, reps=3, min_sample_s=0.0)
    out = time_host_ahead(call(gpu, 2e-3, lambda: 5e-4), timer, rounds=2)
    assert out["gpu_s"] == pytest.approx(2e-3)  # GPU-bound: the GPU's 2 ms
    assert 5e-4 <= out["host_issue_s"] < 5e-2
    assert len(out["gpu_rounds_s"]) == 2 and out["host_behind"] == 0
    assert not timer.host_ahead  # the caller's timer is left as it was


def test_the_calibration_check_reports_the_step_with_the_host_ahead():
    from calibrate.runner import Item, _checks
    from calibrate.timing import Measurement
    from simcluster.compute.loader import read_profile_data

    meta = {"model": "resnet18-cifar", "input_size": 32, "batch": 32}
    item = Item("check/r", "check", meta, lambda timer: {}, torch.device("cuda"))
    per_call = Measurement([0.010, 0.011, 0.012], 1, 1)
    ahead = Measurement([0.008, 0.008, 0.009], 1, 1, host=[0.004, 0.005, 0.004])
    data = read_profile_data("h100-sxm-80gb-measured")
    (rec,) = _checks([item], {"check/r": [{"t": per_call, "t_gpu": ahead}]}, data)
    assert rec["measured_s"] == pytest.approx(0.011)
    assert rec["measured_gpu_s"] == pytest.approx(0.008)
    assert rec["host_issue_s"] == pytest.approx(0.004)
    sim = rec["simulated_s"]
    assert rec["gpu_error"] == pytest.approx((sim - 0.008) / 0.008, abs=1e-3)
    assert rec["gpu_rounds"][0]["host_samples_s"] == [0.004, 0.005, 0.004]
    # without the host-ahead timing (a CPU device) the record is as before
    (plain,) = _checks([item], {"check/r": [{"t": per_call}]}, data)
    assert "measured_gpu_s" not in plain

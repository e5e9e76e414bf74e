"""Live validation's compute terms from the CPU profile: the host-speed ratio read from
the sharing tests and the live step's backward (closed forms over the profile)."""

from __future__ import annotations

import statistics

import pytest

from simcluster.compute import load_profile
from simcluster.validation.live import _host_speed, _job_seconds, _predicted_compute
from simcluster.workload import build_model

JOB = "10 x conv3x3 64->64 on 8x64x16x16, forward + backward, 1 torch thread"


@pytest.fixture(scope="module")
def cpu():
    return load_profile("cpu-xeon-1core")


def test_host_speed_is_job_alone_per_call_over_profile(cpu):
    before = {"job": JOB, "alone_s": [0.030, 0.024, 0.026]}
    after = {"job": JOB, "alone_s": [0.040, 0.050, 0.045]}
    per_call = statistics.mean([0.026 / 10, 0.045 / 10])
    assert _host_speed(cpu, [before, after]) == pytest.approx(per_call / _job_seconds(cpu))


def test_host_speed_needs_the_jobs_repetitions_and_samples(cpu):
    assert _host_speed(cpu, [{"job": "conv3x3", "alone_s": [0.02]}]) is None
    assert _host_speed(cpu, [{"job": JOB, "alone_s": []}]) is None


def test_job_seconds_positive_and_below_the_model_step(cpu):
    job = _job_seconds(cpu)
    step = _predicted_compute(cpu, "resnet18-cifar", 8)
    assert 0 < job < step["forward"] + step["backward"]


def test_backward_adds_gradient_accumulation_and_drops_first_input_gradient(cpu):
    model = build_model("resnet18-cifar", 32, 10)
    full = sum(
        cpu.layer_time(layer, 8, "fp32", "bwd_input")
        + cpu.layer_time(layer, 8, "fp32", "bwd_weight")
        for layer in model.layers
    )
    first_input = cpu.layer_time(model.layers[0], 8, "fp32", "bwd_input")
    accumulate = cpu.elementwise_time(3.0 * 4 * model.params)
    assert first_input > 0 and accumulate > 0
    got = _predicted_compute(cpu, "resnet18-cifar", 8)["backward"]
    assert got == pytest.approx(full - first_input + accumulate)

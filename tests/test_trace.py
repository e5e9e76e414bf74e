"""Workloads read from PyTorch traces: reading, bad traces, schedules, recording."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simcluster.cli import main as cli_main
from simcluster.errors import ConfigError
from simcluster.scenario import parse_scenario, workload_profile
from simcluster.study import run_scenario
from simcluster.workload.trace import read_trace

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--module", "calibrate.models:small_cnn", "--input-shape", "3,8,8"]


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> Path:
    """A real trace of the small CNN at batch 4 (2 profiled steps) recorded here."""
    from calibrate.trace import main

    out = tmp_path_factory.mktemp("trace") / "t.json"
    assert main([*SMALL, "--batch", "4", "--warmup", "1", "--steps", "2", "--out", str(out)]) == 0
    return out


def _module():
    from calibrate.models import small_cnn

    return small_cnn(10)


def test_reads_layers_gradients_and_passes(traced):
    m = read_trace(traced)
    module = _module()
    shapes = sorted(p.numel() for p in module.parameters())
    assert sorted(n for layer in m.layers for n in layer.param_tensors) == shapes
    assert m.params == sum(shapes) and m.batch == 4 and m.device == "cpu"
    convs = [x for x in m.layers if x.op == "conv"]
    assert [(c.shape["cin"], c.shape["cout"], c.shape["kh"]) for c in convs] == [
        (3, 32, 3), (32, 64, 3), (64, 128, 3),
    ]  # fmt: skip
    assert [x.op for x in m.trainable_layers()] == ["conv", "norm"] * 3 + ["linear"]
    passes = m.pass_seconds()
    assert passes["forward"] > 0 and passes["backward"] > 0 and passes["optimizer"] > 0
    # gradients become ready from the classifier back to the first convolution
    ready = [i for i in m.backward_order if m.layers[i].params]
    assert [m.layers[i].op for i in ready] == ["linear"] + ["norm", "conv"] * 3
    assert any("2 profiler steps" in n and "median one" in n for n in m.notes)


def test_replayed_single_rank_is_the_traced_step(traced):
    m = read_trace(traced)
    sc = parse_scenario(_scenario(traced, 4, [1]), "s.yaml")
    rec = run_scenario(sc).records[0]
    assert rec["iteration_time_s"] == pytest.approx(sum(m.pass_seconds().values()), rel=1e-9)
    assert "trace" in rec["profile"]


def _scenario(trace: Path, batch: int, gpus: list[int], schedules=("ddp",), **extra) -> dict:
    return {
        "name": "tr",
        "topology": "localhost",
        "profile": "cpu-xeon-1core",
        "network_profile": "gloo-localhost",
        "workload": {"trace": str(trace), "batch_per_gpu": batch, "dataset_size": 64, **extra},
        "schedules": [{"name": s} for s in schedules],
        "study": {"kind": "strong", "gpus": gpus},
    }


def test_every_data_parallel_schedule_runs_on_a_trace(traced):
    from simcluster.schedules import list_schedules

    names = [n for n in list_schedules() if n != "spmv"]
    sc = parse_scenario(_scenario(traced, 4, [1, 2, 4], names), "s.yaml")
    recs = run_scenario(sc).records
    assert {r["schedule"] for r in recs} == set(names)
    ddp = {r["gpus"]: r for r in recs if r["schedule"] == "ddp"}
    assert ddp[1]["comm_s"] == 0 and ddp[4]["comm_s"] > 0


def test_scaled_to_another_device_by_the_transfer_model(traced):
    sc = parse_scenario(
        {**_scenario(traced, 4, [1]), "profile": "v100-sxm2-32gb", "topology": "puhti",
         "network_profile": "nccl-spec"} | {"workload": {"trace": str(traced), "batch_per_gpu": 4,
         "dataset_size": 64, "trace_profile": "cpu-xeon-1core"}}, "s.yaml",
    )  # fmt: skip
    m = read_trace(traced)
    prof = workload_profile(sc, m)
    assert "scaled from" in prof.describe() and "transfer model" in prof.describe()
    conv = next(x for x in m.layers if x.op == "conv")
    fast = prof.layer_time(conv, 4, "fp32", "fwd")
    assert 0 < fast < conv.shape["fwd_s"]  # a V100 is faster than one CPU core
    rec = run_scenario(sc).records[0]
    assert rec["iteration_time_s"] < sum(m.pass_seconds().values())


def test_partial_batch_scales_with_samples(traced):
    sc = parse_scenario(_scenario(traced, 4, [1]), "s.yaml")
    m = read_trace(traced)
    prof = workload_profile(sc, m)
    layer = m.trainable_layers()[0]
    assert prof.layer_time(layer, 2, "fp32", "fwd") == pytest.approx(layer.shape["fwd_s"] / 2)
    assert prof.layer_time(layer, 4, "fp32", "bwd_input") == 0.0


@pytest.mark.parametrize(
    "workload, path, text",
    [
        ({"batch_per_gpu": 8}, "workload.batch_per_gpu", "recorded at batch 4"),
        ({"precision": "amp"}, "workload.precision", "fp32"),
        ({"model": "resnet18"}, "workload.trace", "not both"),
        ({"trace_profile": "v100-sxm2-32gbb"}, "workload.trace_profile", "did you mean"),
    ],
)
def test_scenario_checks_against_the_trace(traced, workload, path, text):
    d = _scenario(traced, 4, [1])
    d["workload"].update(workload)
    with pytest.raises(ConfigError) as info:
        parse_scenario(d, "s.yaml")
    assert info.value.path == path and text in str(info.value)


# ----------------------------------------------------------------------------- bad traces


def _record(path: Path, backward: bool, grad: bool = True, shapes: bool = True) -> Path:
    from torch.profiler import ProfilerActivity, profile

    model = _module()
    x = torch.randn(2, 3, 8, 8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes) as prof:
        with torch.set_grad_enabled(grad):
            loss = model(x).sum()
        if backward:
            loss.backward()
    prof.export_chrome_trace(str(path))
    return path


@pytest.mark.parametrize(
    "make, text",
    [
        (lambda p, t: p.write_text(t.read_text()[: len(t.read_text()) // 2]), "truncated JSON"),
        (lambda p, t: p.write_text("not json at all"), "not valid JSON"),
        (lambda p, t: p.write_text(json.dumps({**json.loads(t.read_text()), "schemaVersion": 9})),
         "unknown Kineto trace format version"),
        (lambda p, t: p.write_text(json.dumps({"events": []})), "no traceEvents"),
        (lambda p, t: p.write_text(json.dumps({"schema": "1.1.1-chakra", "nodes": []})),
         "execution trace"),
        (lambda p, t: _record(p, backward=False, grad=False), "inference only"),
        (lambda p, t: _record(p, backward=False), "no backward pass"),
        (lambda p, t: _record(p, backward=True, shapes=False), "record_shapes=True"),
    ],
)  # fmt: skip
def test_bad_traces_exit_2_and_say_what_is_missing(tmp_path, traced, capsys, make, text):
    bad = tmp_path / "bad.json"
    make(bad, traced)
    assert cli_main(["trace-summary", str(bad)]) == 2
    err = capsys.readouterr().err
    assert text in err and str(bad) in err


def test_trace_summary_prints_what_was_read(traced, capsys):
    assert cli_main(["trace-summary", str(traced)]) == 0
    out = capsys.readouterr().out
    for part in ("layers:", "kernel time per pass: forward", "gradients: 11 tensors",
                 "gradient-ready order", "ignored / assumed:"):  # fmt: skip
        assert part in out


def test_gpu_kernels_are_timed_through_their_external_ids():
    """A hand-made GPU trace: kernel durations, not host-side operator durations, count."""

    def op(name, ts, dur, tid=1, **args):
        return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "tid": tid,
                "args": args}  # fmt: skip

    def kernel(ext, ts, dur):
        return {"ph": "X", "cat": "kernel", "name": "k", "ts": ts, "dur": dur, "tid": 7,
                "args": {"External id": ext}}  # fmt: skip

    bwd = "autograd::engine::evaluate_function: "
    events = [
        op("aten::linear", 0, 10, **{"Sequence number": 5, "External id": 1}),
        op("aten::relu", 20, 5, **{"Sequence number": 6, "External id": 2}),
        op(bwd + "ReluBackward0", 40, 5, tid=2, **{"Sequence number": 6}),
        op("aten::threshold_backward", 41, 3, tid=2, **{"External id": 3}),
        op(bwd + "AddmmBackward0", 50, 8, tid=2, **{"Sequence number": 5}),
        op("aten::mm", 51, 6, tid=2, **{"External id": 4}),
        op(bwd + "torch::autograd::AccumulateGrad", 60, 2, tid=2),
        op("torch::autograd::AccumulateGrad", 60.5, 1, tid=2, **{"Input Dims": [[4, 8]]}),
        kernel(1, 100, 300.0), kernel(2, 400, 20.0), kernel(3, 500, 40.0),
        kernel(4, 600, 500.0), kernel(99, 700, 1000.0),
    ]  # fmt: skip
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "gpu.json"
        p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events,
                                 "deviceProperties": [{"name": "NVIDIA H100"}]}))  # fmt: skip
        m = read_trace(p)
    assert m.device == "NVIDIA H100"
    assert [x.shape["fwd_s"] for x in m.layers] == pytest.approx([300e-6, 20e-6])
    assert [x.shape["bwd_s"] for x in m.layers] == pytest.approx([500e-6, 40e-6])
    assert m.layers[0].param_tensors == (32,) and m.backward_order == (1, 0)
    assert any("ignored 1 GPU kernels" in n for n in m.notes)


# ----------------------------------------------------------------------------- recording


def test_torchvision_absent_is_a_clear_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "calibrate.trace", "--model", "torchvision:resnet50",
         "--batch", "2", "--out", str(tmp_path / "t.json")],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        import torchvision  # noqa: F401
    except Exception:
        assert proc.returncode == 2
        assert "needs torchvision" in proc.stderr and "--module" in proc.stderr
        assert "Traceback" not in proc.stderr
    else:  # pragma: no cover - torchvision installed: it traces
        assert proc.returncode == 0


@pytest.mark.parametrize(
    "args, text",
    [
        (["--module", "calibrate.models"], "PACKAGE.MODULE:FUNCTION"),
        (["--module", "calibrate.models:nope"], "no function 'nope'"),
        (["--module", "no_such_pkg:f"], "cannot import"),
        (["--model", "resnet9"], "resnet9"),
    ],
)
def test_bad_model_specs_exit_2(tmp_path, args, text):
    from calibrate.trace import main

    proc_out = tmp_path / "t.json"
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main([*args, "--batch", "2", "--out", str(proc_out)]) == 2
    assert text in err.getvalue()


def test_timed_mode_writes_unprofiled_step_times(tmp_path):
    from calibrate.trace import main

    out = tmp_path / "timed.json"
    assert main([*SMALL, "--batch", "2", "--warmup", "1", "--timed", "3", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert len(data["iterations_s"]) == 3 and data["median_s"] > 0 and data["batch"] == 2


# ----------------------------------------------------------------------------- live


def test_live_rejects_a_bad_module_before_spawning(capsys):
    from calibrate.live.run import main

    assert main(["--nproc", "2", "--module", "calibrate.models:nope", "--out", "x.json"]) == 2
    assert "no function 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_live_runs_the_traced_module(tmp_path):
    import os

    out = tmp_path / "live.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "calibrate.live", "--nproc", "2", "--patterns", "ddp", *SMALL,
         "--batch", "4", "--iterations", "1", "--warmup", "1", "--calibration-reps", "2",
         "--trace", str(tmp_path / "t.json"), "--trace-steps", "2", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["config"]["module"] == "calibrate.models:small_cnn"
    ops = data["ranks"][0]["patterns"]["ddp"]["ops"][0]
    nbytes = sum(o["nbytes"] for o in ops if o.get("kind") == "allreduce")
    assert nbytes == 4 * sum(p.numel() for p in _module().parameters())
    # the trace rank 0 recorded alone before the pattern: same model, batch and threads
    assert data["trace"]["file"] == str(tmp_path / "t.json")
    m = read_trace(tmp_path / "t.json")
    assert m.batch == 4 and m.header["torch_threads"] == 1 and len(m.layers) > 0
    factors = data["gloo_share_by_pattern"]["ddp"]["before"]
    assert factors["factor_wall"] > 0 and len(factors["alone_wall_s"]) == 3


def test_execution_trace_supplies_the_gradient_shapes(tmp_path):
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile

    from calibrate.trace import Step

    step = Step(_module(), 2, (3, 8, 8), torch.device("cpu"))
    step()
    kineto, et = tmp_path / "k.json", tmp_path / "et.json"
    observer = ExecutionTraceObserver().register_callback(str(et))
    with profile(activities=[ProfilerActivity.CPU], execution_trace_observer=observer) as prof:
        step()
    prof.export_chrome_trace(str(kineto))
    with pytest.raises(ConfigError, match="no tensor shapes"):
        read_trace(kineto)
    m = read_trace(kineto, et)
    assert m.params == sum(p.numel() for p in _module().parameters())
    with pytest.raises(ConfigError, match="not an execution trace"):
        read_trace(kineto, kineto)


def test_execution_trace_needs_a_trace(traced):
    d = _scenario(traced, 4, [1])
    d["workload"] = {"model": "resnet18", "batch_per_gpu": 4, "dataset_size": 64,
                     "execution_trace": "et.json"}  # fmt: skip
    with pytest.raises(ConfigError, match="only with workload.trace"):
        parse_scenario(d, "s.yaml")


def test_model_names_build_the_zoo_resnets():
    from calibrate.trace import build_module, default_input_shape
    from simcluster.workload import build_model

    module, what = build_module("resnet18-cifar", None, 10)
    assert what == "resnet18-cifar"
    assert sum(p.numel() for p in module.parameters()) == build_model("resnet18-cifar").params
    assert default_input_shape("resnet18-cifar") == (3, 32, 32)
    assert default_input_shape("torchvision:resnet50") == (3, 224, 224)


def test_layers_carry_module_names(traced):
    names = [x.name for x in read_trace(traced).trainable_layers()]
    assert names[0] == "0:0/aten::conv2d" and names[-1].endswith(":11/aten::linear")


# ----------------------------------------------------------------------------- interleaved


def test_recording_interleaves_unprofiled_steps_and_measures_the_profiler(traced):
    data = json.loads(traced.read_text())
    inter = data["simcluster"]["interleaved"]
    # --steps 2: two cycles of 2 unprofiled, a profiler warm-up and a recorded step
    assert len(inter["unprofiled_step_s"]) == 4 and len(inter["profiled_step_s"]) == 4
    assert inter["unprofiled_median_s"] > 0 and inter["profiler_overhead_s_per_op"] >= 0
    marks = [e for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(marks) == 2  # both cycles' recorded steps in the one file


def _with_profiler_cost(traced: Path, tmp: Path, per_op: float) -> Path:
    data = json.loads(traced.read_text())
    data["simcluster"]["interleaved"]["profiler_overhead_s_per_op"] = per_op
    out = tmp / f"cost-{per_op}.json"
    out.write_text(json.dumps(data))
    return out


def _step_window(data: dict, total: float) -> tuple[list[dict], float]:
    """The recorded step whose span from its first to its last unit is ``total``."""
    evs = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    best = None
    for m in (e for e in evs if e["name"].startswith("ProfilerStep#")):
        win = [e for e in evs if m["ts"] <= e["ts"] < m["ts"] + m["dur"]
               and (e.get("cat") == "cpu_op" or e["name"].startswith("Optimizer."))]  # fmt: skip
        span = (max(e["ts"] + e["dur"] for e in win) - min(e["ts"] for e in win)) * 1e-6
        if best is None or abs(span - total) < abs(best[1] - total):
            best = (win, span)
    assert best is not None
    return best


def test_cpu_trace_counts_host_time_and_takes_off_the_profiler_cost(traced, tmp_path):
    plain = read_trace(_with_profiler_cost(traced, tmp_path, 0.0))
    total = sum(plain.pass_seconds().values())
    win, span = _step_window(json.loads(traced.read_text()), total)
    # every operator and the host time between them: the step from first to last unit
    assert total == pytest.approx(span, abs=1e-8)  # ts are in us, 3 decimals
    assert any("host time between operators" in n and "counted" in n for n in plain.notes)
    cost = 1e-9  # below every operator's duration: none is cut to zero
    less = read_trace(_with_profiler_cost(traced, tmp_path, cost))
    ops = sum(1 for e in win if e.get("cat") == "cpu_op")
    taken = total - sum(less.pass_seconds().values())
    assert taken == pytest.approx(cost * ops, rel=1e-4)  # once per recorded operator
    assert any("profiler cost 0.001 us" in n for n in less.notes)


def test_bad_profiler_cost_in_the_header_is_a_config_error(traced, tmp_path):
    with pytest.raises(ConfigError, match="profiler_overhead_s_per_op"):
        read_trace(_with_profiler_cost(traced, tmp_path, -1.0))


def test_profiler_cost_is_a_small_positive_time():
    from calibrate.trace import profiler_cost

    per_op = profiler_cost(calls=100, rounds=3)
    assert 0.0 <= per_op < 1e-4  # microseconds, not milliseconds

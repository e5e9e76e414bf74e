"""Bad input found by hand beyond the fuzzer: each case was accepted silently, wrote over
a user's file, or failed without naming where.

Each test runs ``simcluster.cli.main`` in this process and checks the exit code and the
one ``simcluster: error:`` line: the file, the field path, the value and what is
allowed. None needs torch or simulates more than a second or two.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from simcluster.cli import main
from tests.test_bad_user_files import _error, fuzz

ROOT = Path(__file__).resolve().parents[1]
ANCHOR = ROOT / "scenarios" / "references" / "scenarios" / "anchor-resnet50.yaml"


# ------------------------------------------------------------- validate: failed cases


def _references(tmp_path: Path, metric: dict, overrides: dict | None = None) -> Path:
    """A folder with one reference file of one case on the single-GPU anchor scenario."""
    case = {
        "id": "a",
        "what": "throughput",
        "source": "a test",
        "scenario": str(ANCHOR),
        "metric": metric,
        "reference": 367,
        "unit": "samples/s",
        "confidence": "medium",
    }
    if overrides:
        case["overrides"] = overrides
    folder = tmp_path / "refs"
    folder.mkdir()
    doc = {"paper": "X", "source": "a test", "cases": [case]}
    (folder / "x.yaml").write_text(yaml.safe_dump(doc))
    return folder


FIELD = {"kind": "field", "schedule": "ddp", "gpus": 1, "field": "throughput_samples_per_s"}


@pytest.mark.parametrize(
    "metric, overrides, where, shown",
    [
        ({**FIELD, "field": "throughput_samples_per_sx"}, None, "cases[0].metric.field",
         "did you mean 'throughput_samples_per_s'"),
        ({**FIELD, "schedule": "dpp"}, None, "cases[0].metric.schedule", "did you mean 'ddp'"),
        ({**FIELD, "gpus": 2}, None, "cases[0].metric.gpus", "no run at 2 GPUs (have [1])"),
        (FIELD, {"workload.batch_per_gpu": -1}, "cases[0].overrides",
         "workload.batch_per_gpu: out of range (got -1); allowed: a value >= 1"),
    ],
)  # fmt: skip
def test_validate_case_that_fails_exits_2_naming_the_reference_field(
    tmp_path, capsys, metric, overrides, where, shown
):
    """Was: exit 0, the failure only in the table, without the file or the field."""
    refs = _references(tmp_path, metric, overrides)
    out = tmp_path / "v"
    argv = ["validate", "--references", str(refs), "--out", str(out), "--no-plot"]
    assert main(argv) == 2
    line = _error(capsys)
    assert "1 of 1 case(s) failed to run" in line
    assert f"{refs / 'x.yaml'}: {where}:" in line and shown in line and "(case a)" in line
    cases = json.loads((out / "validation.json").read_text())["cases"]
    assert [c["status"] for c in cases] == ["failed"]  # the report is still written


def test_validate_exits_0_when_every_case_runs(tmp_path, capsys):
    refs = _references(tmp_path, FIELD)
    argv = ["validate", "--references", str(refs), "--out", str(tmp_path / "v"), "--no-plot"]
    assert main(argv) == 0
    assert "simcluster: error" not in capsys.readouterr().err


def test_validate_case_that_raises_unexpectedly_is_a_bug_report_exit_3(
    tmp_path, capsys, monkeypatch
):
    import simcluster.study

    def broken(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(simcluster.study, "run_scenario", broken)
    refs = _references(tmp_path, FIELD)
    argv = ["validate", "--references", str(refs), "--out", str(tmp_path / "v"), "--no-plot"]
    assert main(argv) == 3
    line = _error(capsys)
    assert f"{refs / 'x.yaml'}: cases[0]: ZeroDivisionError: float division by zero" in line


# ------------------------------------------------------------ search folders


@pytest.mark.parametrize("env", ["SIMCLUSTER_TOPOLOGIES", "SIMCLUSTER_SCENARIOS"])
@pytest.mark.parametrize("kind, problem", [("missing", "no such folder"),
                                           ("file", "is a file, not a folder")])  # fmt: skip
def test_search_folder_variable_naming_no_folder_is_an_error(
    tmp_path, capsys, monkeypatch, env, kind, problem
):
    """Was: the folder skipped without a word (a scenario or topology there "unknown")."""
    bad = tmp_path / "x"
    if kind == "file":
        bad.write_text("")
    monkeypatch.setenv(env, f"{tmp_path}:{bad}")
    assert main(["list"]) == 2
    line = _error(capsys)
    assert f"${env}: {problem} (got '{bad}'); allowed: existing folders separated by ':'" in line


def test_topologies_flag_naming_no_folder_is_an_error(tmp_path, capsys):
    assert main(["--topologies", str(tmp_path / "nope"), "topo", "puhti", "--no-png"]) == 2
    assert f"--topologies: no such folder (got '{tmp_path / 'nope'}'); allowed: a folder" in (
        _error(capsys)
    )


# ------------------------------------------------------------ topo --png


def test_topo_refuses_to_draw_over_the_users_own_png(tmp_path, capsys):
    """Was: the user's file replaced by the drawing without a word."""
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"my holiday picture")
    assert main(["topo", "puhti", "--png", str(mine)]) == 2
    line = _error(capsys)
    assert "--png: file exists and was not drawn by simcluster; pass --force" in line
    assert str(mine) in line and mine.read_bytes() == b"my holiday picture"
    assert main(["topo", "puhti", "--png", str(mine), "--force"]) == 0
    assert mine.read_bytes().startswith(b"\x89PNG")
    assert main(["topo", "puhti", "--png", str(mine)]) == 0  # its own drawing: redrawn


def test_topo_png_that_is_a_folder_is_named(tmp_path, capsys):
    folder = tmp_path / "d.png"
    folder.mkdir()
    assert main(["topo", "puhti", "--png", str(folder)]) == 2
    assert f"--png: is a folder (got '{folder}'); allowed: a file name ending in .png" in (
        _error(capsys)
    )


def test_topo_png_and_no_png_together_are_refused(tmp_path, capsys):
    """Was: the summary printed and nothing drawn, the --png file silently ignored."""
    png = tmp_path / "t.png"
    assert main(["topo", "puhti", "--png", str(png), "--no-png"]) == 2
    assert "with --no-png" in _error(capsys) and not png.exists()


# ------------------------------------------------------------ fitted coefficients

PROFILES = ROOT / "calibrate" / "profiles"


def _scenario(tmp_path: Path, **fields) -> Path:
    doc = {**fuzz.TINY, "name": "t", **fields}  # the fuzzer's small valid scenario
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    "source, key, place, value, path, bound",
    [
        ("a100-80gb-sxm-derived.json", "profile", ("device", "compute", "fp32", "conv", "fwd"),
         ("coef", 1, 1e300), "device.compute.fp32.conv.fwd.coef[1]", "a value <= 0.001"),
        ("a100-80gb-sxm-derived.json", "profile", ("device", "compute", "fp32", "conv", "fwd"),
         ("coef", 0, 5.0), "device.compute.fp32.conv.fwd.coef[0]", "a value <= 1.0"),
        ("network/h200-measured.json", "network_profile",
         ("network", "collectives", "world", "allreduce"), ("beta_s_per_byte", None, 1e300),
         "network.collectives.world.allreduce.beta_s_per_byte", "a value <= 0.001"),
    ],
)  # fmt: skip
def test_fitted_coefficient_too_large_for_floats_is_refused(
    tmp_path, capsys, source, key, place, value, path, bound
):
    """Was: a per-byte cost of 1e300 s loaded, and the run stopped at a NaN efficiency
    with an internal-error line (exit 3) that named no file."""
    data = json.loads((PROFILES / source).read_text())
    node = data
    for part in place:
        node = node[part]
    field, index, number = value
    if index is None:
        node[field] = number
    else:
        node[field][index] = number
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(data))
    fields = {key: str(profile)}
    if key == "network_profile":
        fields.update(topology="localhost", profile="cpu-xeon-1core", study={"gpus": [2]})
    out = tmp_path / "out"
    assert main(["run", str(_scenario(tmp_path, **fields)), "--no-plots", "--out", str(out)]) == 2
    line = _error(capsys)
    assert f"{profile}: {path}: out of range (got {number!r}); allowed: {bound}" in line


# ------------------------------------------------------------ names too long for a path


def test_reference_case_scenario_too_long_for_a_path_is_named_at_load(tmp_path, capsys):
    """Was: "xxxx...: File name too long" from the file system, naming no file."""
    refs = _references(tmp_path, FIELD)
    doc = yaml.safe_load((refs / "x.yaml").read_text())
    doc["cases"][0]["scenario"] = "x" * 10_000
    (refs / "x.yaml").write_text(yaml.safe_dump(doc))
    argv = ["validate", "--references", str(refs), "--out", str(tmp_path / "v"), "--no-plot"]
    assert main(argv) == 2
    line = _error(capsys)
    assert f"{refs / 'x.yaml'}: cases[0].scenario: not a usable path" in line
    assert "... (10002 characters)" in line and len(line) < 400  # the value is cut


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["topo", "x" * 300, "--no-png"], "topology: unknown topology"),
        (["nccl-tests", "--topology", "dgx-a100", "--profile", "x" * 300],
         "profile: unknown profile"),
        (["nccl-tests", "--topology", "dgx-a100", "--network-profile", "x" * 300 + ".json"],
         "network profile: no such network profile file"),
    ],
)  # fmt: skip
def test_name_too_long_for_a_path_is_an_unknown_name(capsys, argv, shown):
    """Was: the search folder's path and "File name too long" (an OSError at the top)."""
    assert main(argv) == 2
    line = _error(capsys)
    assert shown in line and "characters)); allowed:" in line


# ------------------------------------------------------------ did you mean: a name's part


@pytest.mark.parametrize(
    "field, value, near",
    [
        ("profile", "v100", "did you mean 'v100-sxm2-32gb' or 'v100-sxm2-32gb-derived'?"),
        ("profile", "cpu", "did you mean 'cpu-epyc-1core' or 'cpu-xeon-1core'?"),
        # four a100 profiles (spec SXM and PCIe, both derived) are more than did_you_mean
        # offers by name part (3): the full allowed list alone
        ("profile", "a100", "v100s-pcie-32gb"),
    ],
)  # fmt: skip
def test_device_name_alone_suggests_the_profiles_named_after_it(
    tmp_path, capsys, field, value, near
):
    """Was: the whole list of profiles and no suggestion (no name is close as a whole)."""
    scenario = _scenario(tmp_path, **{field: value})
    assert main(["run", str(scenario), "--no-plots", "--out", str(tmp_path / "o")]) == 2
    line = _error(capsys)
    assert f"{scenario}: {field}: unknown {field} (got '{value}'); allowed: " in line
    assert line.endswith(near)


def test_did_you_mean_offers_parts_only_when_few_and_nothing_is_close():
    from simcluster.errors import did_you_mean

    names = ["puhti", "puhti-xl", "puhti-2l", "puhti-mega", "dgx-a100"]
    assert did_you_mean("puhty", names)[0] == "puhti"  # close as a whole: as before
    assert did_you_mean("a100", names) == ["dgx-a100"]
    assert did_you_mean("x", ["x-1", "x-2"]) == []  # one letter is no name
    many = ["big-a-2l", "big-b-2l", "big-c-2l", "big-d-2l"]
    assert did_you_mean("2l", many) == []  # too many to help


# ------------------------------------------------------------ profile keys misspelt


def _edit(data: dict, where: tuple, old: str | None, new: str, value=None) -> None:
    node = data
    for part in where:
        node = node[part]
    node[new] = node.pop(old) if old else value


@pytest.mark.parametrize(
    "source, key, where, old, new, value, path, near",
    [
        ("v100-sxm2-32gb.json", "profile", ("device",), "memory_bandwidth", "memory_bandwith",
         None, "device.memory_bandwith", "did you mean 'memory_bandwidth'"),
        ("v100-sxm2-32gb.json", "profile", (), "provenance", "provenanse", None, "provenanse",
         "did you mean 'provenance'"),
        ("v100-sxm2-32gb.json", "profile", ("device", "host"), None, "launch_overhead", 1e-6,
         "device.host.launch_overhead", "did you mean 'launch_overhead_s'"),
        ("network/nccl-spec.json", "network_profile", ("network",), "per_message_overhead_s",
         "per_message_overhead", None, "network.per_message_overhead",
         "did you mean 'per_message_overhead_s'"),
        ("network/nccl-spec.json", "network_profile", ("network", "link_efficiency"), None,
         "nvlnk", 0.5, "network.link_efficiency.nvlnk", "did you mean 'nvlink'"),
    ],
)  # fmt: skip
def test_misspelt_profile_key_is_refused_not_carried_unread(
    tmp_path, capsys, source, key, where, old, new, value, path, near
):
    """Was: exit 0; profile sections keep unknown keys (notes), so the value meant for
    ``memory_bandwidth`` was never read and the shipped default was simulated."""
    data = json.loads((PROFILES / source).read_text())
    _edit(data, where, old, new, value)
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(data))
    scenario = _scenario(tmp_path, **{key: str(profile)})
    assert main(["run", str(scenario), "--no-plots", "--out", str(tmp_path / "o")]) == 2
    line = _error(capsys)
    assert f"{profile}: {path}: unknown key (got '{new}'); allowed: " in line and near in line


def test_profile_note_far_from_any_key_still_passes(tmp_path, capsys):
    data = json.loads((PROFILES / "v100-sxm2-32gb.json").read_text())
    data["device"]["comment"] = "measured on node 7"
    data["remarks"] = ["a note"]
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(data))
    scenario = _scenario(tmp_path, profile=str(profile))
    assert main(["run", str(scenario), "--no-plots", "--out", str(tmp_path / "o")]) == 0


# ------------------------------------------------------------ sweep --set into profiles


@pytest.mark.parametrize(
    "axis, shown",
    [
        ("profile.peak_tflops=0", ": profile.peak_tflops: no such field in the profile (a new "
         "key there would go unread) (got 'peak_tflops'); allowed: device, kind, name"),
        ("profile.device.memory_bandwith=1e9", ": profile.device.memory_bandwith: no such field "
         "in the profile"),
        ("network_profile.foo=1", ": network_profile.foo: no such field in the network profile"),
        ("profile.device.peak_flops.fp16=1e14", "profile v100-sxm2-32gb with the point's values: "
         "device.peak_flops.fp16: unknown key (got 'fp16'); allowed: fp32, tf32_tensor, "
         "fp16_tensor, bf16_tensor; did you mean 'fp16_tensor'?"),
        ("network_profile.network.transport.net=socket", "network profile nccl-spec with the "
         "point's values: network.transport: net: socket needs connection_bandwidth and "
         "socket_per_message_s"),
        ("topology.nodes.nic.bw=1", "topology puhti with the point's values: nodes: unknown key "
         "(got 'nodes')"),
    ],
)  # fmt: skip
def test_sweep_axis_into_a_profile_or_topology_is_checked_and_named(tmp_path, capsys, axis, shown):
    """Was: a new profile key accepted and never read (exit 0); a socket transport without
    its numbers a TypeError traceback; errors named the hashed copy under --out."""
    scenario = _scenario(tmp_path)
    out = tmp_path / "sw"
    assert main(["sweep", str(scenario), "--set", axis, "--out", str(out), "--no-plots"]) == 2
    line = _error(capsys)
    assert shown in line and str(out) not in line


def test_sweep_value_in_e_notation_is_a_number(tmp_path, capsys):
    """Was: 1e11 read as the string '1e11' (YAML 1.1), so "wrong type ... a number"."""
    scenario = _scenario(tmp_path)
    axis = "profile.device.memory_bandwidth=1e11,2e11"
    assert main(["sweep", str(scenario), "--set", axis, "--out", str(tmp_path / "sw"),
                 "--no-plots"]) == 0  # fmt: skip


# ------------------------------------------------------------ flags that were ignored


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["nccl-tests", "--topology", "dgx-a100", "-g", "9", "--profile", "a100-80gb-sxm"],
         "-g: GPUs per thread out of range (got 9); allowed: 1..8 (the GPUs of one dgx-a100 "
         "node)"),
        (["nccl-tests", "--topology", "dgx-a100", "-g", "100000", "--profile", "a100-80gb-sxm"],
         "-g: GPUs per thread out of range (got 100000)"),
    ],
)  # fmt: skip
def test_nccl_tests_more_gpus_per_thread_than_a_node_has(capsys, argv, shown):
    """Was: exit 0, a table of 100,000 launches per iteration on an 8-GPU node."""
    assert main(argv) == 2
    assert shown in _error(capsys)


def test_sweep_scheduler_without_dask_is_refused(tmp_path, capsys):
    """Was: the address ignored and the points run locally without a word."""
    argv = ["sweep", str(_scenario(tmp_path)), "--set", "seed=1", "--scheduler", "tcp://h:8786",
            "--out", str(tmp_path / "sw"), "--no-plots"]  # fmt: skip
    assert main(argv) == 2
    line = _error(capsys)
    assert "--scheduler: only used with --executor dask (got 'tcp://h:8786')" in line


def test_sweep_scheduler_at_no_ip_address_is_refused_at_once(tmp_path, capsys):
    """Was: a 30 s wait for tcp://256.0.0.1:1 to answer (fuzz seed 167067)."""
    argv = ["sweep", str(_scenario(tmp_path)), "--set", "seed=1,2", "--executor", "dask",
            "--scheduler", "tcp://256.0.0.1:1", "--out", str(tmp_path / "sw"),
            "--no-plots"]  # fmt: skip
    assert main(argv) == 2
    line = _error(capsys)
    assert "--scheduler: not a scheduler address (got 'tcp://256.0.0.1:1')" in line


@pytest.mark.parametrize(
    "which, make, shown",
    [
        ("live", None, "--references: no such folder (got '{refs}'); allowed: a folder of "
         "reference files"),
        ("live", "dir", "--references: has no live/ folder of recorded live runs (got '{refs}')"),
        ("paper", "file", "--references: is a file, not a folder (got '{refs}')"),
    ],
)  # fmt: skip
def test_validate_references_folder_that_is_not_there(tmp_path, capsys, which, make, shown):
    """Was (--set live): "no cases to validate", exit 0."""
    refs = tmp_path / "refs"
    if make == "dir":
        refs.mkdir()
    elif make == "file":
        refs.write_text("")
    argv = ["validate", "--set", which, "--references", str(refs), "--out", str(tmp_path / "v")]
    assert main(argv) == 2
    assert shown.format(refs=refs) in _error(capsys)
    assert not (tmp_path / "v").exists()  # refused before --out is made


# ------------------------------------------------------------ misspelt flags


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["run", "puhti64", "--outt", "x"],
         "unrecognized arguments: --outt x; did you mean '--out'? (see `simcluster run --help`)"),
        (["run", "puhti64", "--netwrk-model", "maxmin"], "did you mean '--network-model'?"),
        (["validate", "--refrences", "x"], "did you mean '--references'? (see `simcluster "
         "validate --help`)"),
        (["sweep", "puhti64", "--sett", "seed=1"], "did you mean '--set'?"),
        (["list", "--bogus"], "unrecognized arguments: --bogus (see `simcluster list --help`)"),
    ],
)  # fmt: skip
def test_misspelt_flag_gets_did_you_mean_from_its_subcommand(capsys, argv, shown):
    """Was: "unrecognized arguments: --outt x (see `simcluster --help`)", no suggestion."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert shown in _error(capsys)


def test_every_missing_field_is_named_at_once(tmp_path, capsys):
    """Was: "profile: missing required field [and 3 more problem(s)]": four runs to find
    the four fields."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: b\ntopology: puhti\n")
    assert main(["run", str(scenario), "--no-plots", "--out", str(tmp_path / "o")]) == 2
    line = _error(capsys)
    assert (f"{scenario}: profile: missing required field (also missing: workload, schedules, "
            "study)") in line and "more problem" not in line  # fmt: skip


# ------------------------------------------------------------ execution traces (--et)

ACC = "torch::autograd::AccumulateGrad"


@pytest.mark.parametrize(
    "node, path, shown",
    [
        ({"name": ACC, "inputs": 3}, "nodes[0].inputs", "not a mapping with a shapes list (got 3)"),
        ({"name": ACC, "inputs": {"shapes": 5}}, "nodes[0].inputs",
         "not a mapping with a shapes list (got {'shapes': 5})"),
        ({"name": ACC, "attrs": 7}, "nodes[0].attrs", "not a list of attributes (got 7)"),
    ],
)  # fmt: skip
def test_execution_trace_node_of_the_wrong_shape_is_named(tmp_path, capsys, node, path, shown):
    """Was: AttributeError / TypeError tracebacks from the AccumulateGrad nodes."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    import fuzz

    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(fuzz.synthetic_trace()))
    et = tmp_path / "et.json"
    et.write_text(json.dumps({"nodes": [node]}))
    assert main(["trace-summary", str(trace), "--et", str(et)]) == 2
    assert f"{et}: {path}: {shown}; allowed: a file written by torch.profiler" in _error(capsys)


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["--algo", "rng"], "--algo: unknown allreduce algorithm (got 'rng'); allowed: "
         "halving-doubling, hierarchical, leader, nvls, rabenseifner, ring, tree; "
         "did you mean 'ring'?"),
        (["--proto", "ll"], "--proto: unknown protocol (got 'll'); allowed: LL, LL128, Simple, "
         "auto; did you mean 'LL'?"),
        (["--op", "broadcast", "--algo", "ring"],
         "--algo: only all_reduce picks an algorithm, not --op broadcast (got 'ring'); "
         "allowed: auto"),
    ],
)  # fmt: skip
def test_nccl_tests_algorithm_and_protocol_errors_name_the_flag(capsys, argv, shown):
    """Was: "allreduce algorithm: ..." / "protocol: ..." (no flag); --algo ignored for
    other ops (exit 0)."""
    assert main(["nccl-tests", "--topology", "dgx-a100", "-e", "1K", *argv]) == 2
    assert shown in _error(capsys)


@pytest.mark.parametrize("flag, value", [("-e", "1e30"), ("-e", "1025T")])
def test_nccl_tests_size_beyond_any_gpu_is_refused(capsys, flag, value):
    """Was: exit 0, a table of 10^34-byte buffers."""
    assert main(["nccl-tests", "--topology", "dgx-a100", flag, value]) == 2
    assert f"{flag}: too large (got '{value}'); allowed: at most 1024T (2^50 bytes)" in (
        _error(capsys)
    )


def test_sweep_list_index_written_with_a_dot_gets_the_bracket_form(tmp_path, capsys):
    """Was: "schedules.0: cannot set a field inside a list value" with no way out."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({**fuzz.TINY, "schedules": [{"name": "ddp"}]}))
    argv = ["sweep", str(scenario), "--out", str(tmp_path / "o"), "--no-plots",
            "--set", "schedules.0.options.bucket_cap_mb=1,2"]  # fmt: skip
    assert main(argv) == 2
    line = _error(capsys)
    assert "schedules.0: cannot set a field inside a value of type list" in line
    assert "allowed: an index in brackets, 0..0" in line
    assert "did you mean 'schedules[0].options.bucket_cap_mb'?" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "{sc}", "--max-memory", "-1"],
        ["run", "{sc}", "--strict-memory", "--max-memory", "1e-9"],
        ["sweep", "{sc}", "--set", "workload.epochs=1,-1", "--no-plots"],
    ],
)
def test_a_refused_command_leaves_no_empty_results_folder(tmp_path, capsys, argv):
    """Was: the folder (and its parents) made while checking --out stayed behind, empty,
    after the command was refused."""
    sc = tmp_path / "s.yaml"
    sc.write_text(yaml.safe_dump(fuzz.TINY))
    out = tmp_path / "new" / "deeper" / "out"
    assert main([a.format(sc=sc) for a in argv] + ["--out", str(out)]) == 2
    _error(capsys)
    assert not (tmp_path / "new").exists()
    assert main(["run", str(sc), "--out", str(out), "--no-plots"]) == 0  # kept on success
    assert (out / "results.json").is_file()


def test_a_misspelt_choice_gets_did_you_mean(capsys):
    with pytest.raises(SystemExit) as info:  # argparse's own exit
        main(["nccl-tests", "--topology", "puhti", "--op", "allreduce"])
    assert info.value.code == 2
    line = capsys.readouterr().err
    assert "invalid choice: 'allreduce'" in line and "did you mean 'all_reduce'" in line
    assert main(["validate", "--set", "al"]) == 2
    assert "did you mean 'all'?" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["run", "{sc}", "--out", "", "--no-plots"], "--out: an empty name (got '')"),
        (["run", "{sc}", "--out", "  ", "--no-plots"], "--out: an empty name (got '  ')"),
        (["sweep", "{sc}", "--set", "seed=1,2", "--out", ""], "--out: an empty name (got '')"),
        (["topo", "dgx-a100", "--png", ""], "--png: an empty name (got '')"),
    ],
)
def test_an_empty_output_name_is_refused_not_read_as_the_default(
    tmp_path, capsys, monkeypatch, argv, shown
):
    """Was: the default results folder (or PNG) written without a word, where
    ``validate --out ""`` was already refused."""
    sc = str(_scenario(tmp_path))
    monkeypatch.chdir(tmp_path)  # where the default results/ would go
    assert main([a.replace("{sc}", sc) for a in argv]) == 2
    assert shown in _error(capsys)
    assert not (tmp_path / "results").exists()

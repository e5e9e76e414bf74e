"""Bad user files beyond scenarios and profiles: traces, nccl-tests logs, live runs,
reference folders, results folders that hold the user's own files.

Each test runs ``simcluster.cli.main`` in this process and checks the exit code 2
and the one ``simcluster: error:`` line: the file, the field, the value and what
is allowed. None needs torch or simulates more than a second.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from simcluster.cli import main

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import fuzz  # noqa: E402

LOG = ROOT / "tests" / "data" / "all_reduce_2x_dgx_a100.log"
LIVE = ROOT / "scenarios" / "references" / "live" / "localhost-2x1-r1.json"


def _error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("simcluster: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _trace(tmp_path: Path, text: str | bytes) -> Path:
    p = tmp_path / "trace.json"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


# ----------------------------------------------------------------------------- traces


def test_the_hand_made_trace_reads(tmp_path, capsys):
    """The fuzz base itself is a valid trace (else every trace mutant is an error)."""
    assert main(["trace-summary", str(_trace(tmp_path, json.dumps(fuzz.synthetic_trace())))]) == 0


def test_trace_with_a_utf8_bom_reads_like_a_scenario_does(tmp_path, capsys):
    text = b"\xef\xbb\xbf" + json.dumps(fuzz.synthetic_trace()).encode()
    assert main(["trace-summary", str(_trace(tmp_path, text))]) == 0


@pytest.mark.parametrize(
    "value, shown", [(-5.0, "-5.0"), (float("nan"), "nan"), (float("inf"), "inf")]
)
def test_trace_event_with_a_bad_duration_is_named(tmp_path, capsys, value, shown):
    doc = fuzz.synthetic_trace()
    doc["traceEvents"][1]["dur"] = value  # json writes NaN / Infinity as Python reads them
    p = _trace(tmp_path, json.dumps(doc))
    assert main(["trace-summary", str(p)]) == 2
    line = _error(capsys)
    assert str(p) in line and "traceEvents[1].dur" in line and shown in line
    assert ">= 0" in line


@pytest.mark.parametrize(
    "index, field, value, problem",
    [
        (0, "tid", {"a": 1}, "not a thread id"),  # was: unhashable type 'dict'
        (0, "args", [1], "not a mapping"),
        (0, "args.Sequence number", "5", "not an integer"),
        (7, "args.Input Dims", [[-1, 8]], "not a list of shapes"),  # was: exit 3, bytes < 0
    ],
)
def test_trace_event_field_of_the_wrong_type_is_named(tmp_path, capsys, index, field, value,
                                                       problem):  # fmt: skip
    doc = fuzz.synthetic_trace()
    ev = doc["traceEvents"][index]
    if field.startswith("args."):
        ev["args"][field[5:]] = value
    else:
        ev[field] = value
    p = _trace(tmp_path, json.dumps(doc))
    assert main(["trace-summary", str(p)]) == 2
    line = _error(capsys)
    assert str(p) in line and f"traceEvents[{index}].{field}" in line and problem in line


def test_trace_nested_too_deeply_is_an_error_not_a_recursion(tmp_path, capsys):
    p = _trace(tmp_path, "[" * 100_000 + "]" * 100_000)
    assert main(["trace-summary", str(p)]) == 2
    assert "nested too deeply" in _error(capsys)


def test_trace_that_is_a_folder_or_not_utf8(tmp_path, capsys):
    assert main(["trace-summary", str(tmp_path)]) == 2
    assert "is a folder, not a trace file" in _error(capsys)
    p = _trace(tmp_path, bytes(range(256)))
    assert main(["trace-summary", str(p)]) == 2
    line = _error(capsys)
    assert str(p) in line and "not UTF-8" in line and "0x80" in line


# ----------------------------------------------------------------------------- nccl-tests logs


def _row_edit(tmp_path: Path, old: str, new: str) -> Path:
    text = LOG.read_text()
    assert old in text
    p = tmp_path / LOG.name
    p.write_text(text.replace(old, new, 1))
    return p


@pytest.mark.parametrize(
    "old, new, field, shown",
    [
        ("   34.31 ", "   1e999 ", "time", "inf"),  # a time of infinity (was a math error)
        ("    0.01    0.01      0    34.45", "    0.01    nan      0    34.45", "busbw", "nan"),
        ("    0.01    0.01      0    34.45", "    0.01    0.01      3    34.45", "#wrong", "3"),
    ],
)
def test_nccl_tests_row_with_a_bad_number_is_named(tmp_path, capsys, old, new, field, shown):
    p = _row_edit(tmp_path, old, new)
    out = tmp_path / "fitted.json"
    assert main(["calibrate", "nccl-tests", str(p), "--out", str(out)]) == 2
    line = _error(capsys)
    assert str(p) in line and f": {field}:" in line and shown in line
    assert not out.exists()


def test_nccl_tests_row_with_a_size_past_a_float_is_named(tmp_path, capsys):
    """Was: OverflowError (int too large to convert to float) in the fit (fuzz seed
    161924)."""
    row = next(line for line in LOG.read_text().splitlines() if "   34.31 " in line)
    size = row.split()[0]
    p = _row_edit(tmp_path, row, row.replace(size, "9" * 400, 1))
    out = tmp_path / "fitted.json"
    assert main(["calibrate", "nccl-tests", str(p), "--out", str(out)]) == 2
    line = _error(capsys)
    assert str(p) in line and ": size: out of range" in line and "2^50" in line
    assert not out.exists()


def test_reference_case_with_a_negative_size_is_named(tmp_path, capsys):
    """Was: ValueError (nbytes must be >= 0) from the simulator (fuzz seed 161911)."""
    refs = tmp_path / "refs"
    refs.mkdir()
    case = {
        "id": "a", "what": "a", "source": "a", "unit": "us", "confidence": "low",
        "scenario": "scenarios/references/scenarios/nccl-dgx-a100.yaml", "reference": 1.0,
        "metric": {"kind": "nccl_tests", "nccl_op": "all_reduce", "nbytes": -4, "gpus": 8,
                   "value": "time_us"},
    }  # fmt: skip
    (refs / "x.yaml").write_text(yaml.safe_dump({"paper": "X", "source": "x", "cases": [case]}))
    assert main(["validate", "--references", str(refs), "--no-plot", "--out",
                 str(tmp_path / "v")]) == 2  # fmt: skip
    line = _error(capsys)
    assert "x.yaml: cases[0].metric.nbytes: out of range" in line and "(got -4)" in line


def test_nccl_tests_base_profile_typo_gets_did_you_mean(tmp_path, capsys):
    out = tmp_path / "fitted.json"
    argv = ["calibrate", "nccl-tests", str(LOG), "--base-profile", "ncl-spec", "--out", str(out)]
    assert main(argv) == 2
    line = _error(capsys)
    assert "(got 'ncl-spec')" in line and "did you mean 'nccl-spec'" in line


# ----------------------------------------------------------------------------- live runs


def _validate_live(tmp_path: Path, data: dict) -> tuple[Path, int]:
    """Write an edited live-run file and validate it: its path and the exit code."""
    p = tmp_path / "live.json"
    p.write_text(json.dumps(data))
    return p, main(["validate", "--live", str(p), "--out", str(tmp_path / "v"), "--no-plot"])


def test_live_run_with_a_rank_outside_its_collective_group(tmp_path, capsys):
    data = json.loads(LIVE.read_text())
    ops = data["ranks"][0]["patterns"]["ddp"]["ops"][0]
    call = next(o for o in ops if o["kind"] != "compute")
    call["groups"] = [[1]]  # rank 0 calls a collective of a group it is not in
    p, code = _validate_live(tmp_path, data)
    assert code == 2
    line = _error(capsys)
    assert str(p) in line and "malformed live-run file" in line


@pytest.mark.parametrize(
    ("edit", "field", "shown"),
    [
        (lambda s: s["ops"]["allreduce"][0].update(mean_s="abc"),
         "gloo.samples.ops.allreduce[0].mean_s", "(got 'abc')"),
        (lambda s: s["ops"]["allreduce"][0].update(nbytes=-5),
         "gloo.samples.ops.allreduce[0].nbytes", "(got -5)"),
        (lambda s: s["ops"].update(alreduce=s["ops"].pop("allreduce")),
         "gloo.samples.ops", "did you mean 'allreduce'"),
        (lambda s: s["ops"].update(allgather=[]), "gloo.samples.ops.allgather", "(got [])"),
        (lambda s: s["compute"].update(factor="fast"), "gloo.samples.compute.factor", "'fast'"),
        (lambda s: s.update(world="two"), "gloo.samples.world", "(got 'two')"),
    ],
)  # fmt: skip
def test_live_run_with_a_bad_gloo_sample_names_it(tmp_path, capsys, edit, field, shown):
    """Validation refits the run's gloo constants from its samples: a bad sample is named
    (it was silently a traceback or the stored fit)."""
    data = json.loads(LIVE.read_text())
    edit(data["gloo"]["samples"])
    p, code = _validate_live(tmp_path, data)
    assert code == 2
    line = _error(capsys)
    assert str(p) in line and f": {field}:" in line and shown in line


# ----------------------------------------------------------------------------- validate flags


def test_paper_typo_gets_did_you_mean(tmp_path, capsys):
    assert main(["validate", "--paper", "ANCHOR", "--out", str(tmp_path), "--no-plot"]) == 2
    line = _error(capsys)
    assert "allowed:" in line and "did you mean 'ANCHORS'" in line


# ----------------------------------------------------------------------------- results folders


TINY = {
    "name": "tiny",
    "topology": "localhost",
    "profile": "cpu-xeon-1core",
    "network_profile": "gloo-localhost",
    "workload": {"trace": None, "batch_per_gpu": 4, "dataset_size": 64},
    "schedules": [{"name": "ddp"}],
    "study": {"gpus": [2]},
}


@pytest.fixture
def tiny(tmp_path) -> Path:
    trace = _trace(tmp_path, json.dumps(fuzz.synthetic_trace()))
    sc = json.loads(json.dumps(TINY))
    sc["workload"]["trace"] = str(trace)
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump(sc))
    return p


def test_run_refuses_to_overwrite_the_users_own_file(tmp_path, capsys, tiny):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "results.csv").write_text("my numbers\n")
    (folder / "notes.txt").write_text("mine\n")
    assert main(["run", str(tiny), "--no-plots", "--out", str(folder)]) == 2
    line = _error(capsys)
    assert str(folder) in line and "results.csv" in line and "overwrite" in line
    assert (folder / "results.csv").read_text() == "my numbers\n"
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "results.csv"]


def test_run_into_a_folder_of_other_files_keeps_them_and_reruns(tmp_path, capsys, tiny):
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    for _ in range(2):  # the second run finds its own manifest: it may replace its files
        assert main(["run", str(tiny), "--no-plots", "--out", str(folder)]) == 0
    assert (folder / "notes.txt").read_text() == "mine\n"
    assert (folder / "results.json").exists()


def test_validate_refuses_to_overwrite_the_users_validation_json(tmp_path, capsys):
    folder = tmp_path / "v"
    folder.mkdir()
    (folder / "validation.json").write_text("{}\n")
    argv = ["validate", "--live", str(LIVE), "--out", str(folder), "--no-plot"]
    assert main(argv) == 2
    assert "validation.json" in _error(capsys)
    assert (folder / "validation.json").read_text() == "{}\n"


def test_calibrate_threads_zero_is_refused_not_read_as_the_default(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "m.json"
    assert main(["calibrate", "measure", "--threads", "0", "--tiny", "--out", str(out)]) == 2
    assert "--threads" in _error(capsys)
    assert not out.exists()


# ----------------------------------------------------------------------------- names and flags


@pytest.mark.parametrize(
    "argv, near",
    [
        (["run", "puhti6"], "puhti64"),
        (["sweep", "whatif-nodez", "--set", "seed=1"], "whatif-nodes"),
        (["spmv-table", "hsgd-graphchalenge"], "hsgd-graphchallenge"),
    ],
)
def test_misspelt_scenario_name_gets_did_you_mean(tmp_path, capsys, monkeypatch, argv, near):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    line = _error(capsys)
    assert "no such scenario file" in line and f"did you mean '{near}'" in line


def test_misspelt_scenario_path_gets_did_you_mean_from_its_folder(tmp_path, capsys):
    (tmp_path / "mine.yaml").write_text("name: mine\n")
    assert main(["run", str(tmp_path / "mien.yaml")]) == 2
    line = _error(capsys)
    assert "no such scenario file" in line and f"did you mean '{tmp_path / 'mine.yaml'}'" in line
    assert main(["run", str(tmp_path / "qqqqqqqqqqqq.yaml")]) == 2
    assert "did you mean" not in _error(capsys)


def test_misspelt_topology_path_gets_did_you_mean_from_its_folder(tmp_path, capsys):
    (tmp_path / "mynode.yaml").write_text("name: mynode\n")
    argv = ["nccl-tests", "--topology", str(tmp_path / "mynod.yaml"), "--nodes", "1"]
    assert main(argv) == 2
    line = _error(capsys)
    assert "topology file not found" in line
    assert f"did you mean '{tmp_path / 'mynode.yaml'}'" in line


def test_derive_refuses_measures_spec_flag(tmp_path, capsys):
    out = tmp_path / "d.json"
    argv = ["calibrate", "derive", "--from", "h100-sxm-80gb-measured", "--target",
            "v100-sxm2-32gb", "--out", str(out), "--spec", "h100-sxm"]  # fmt: skip
    assert main(argv) == 2
    assert "did you mean '--source-spec'" in _error(capsys)
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--batch", "--rounds"])
def test_calibrate_check_refuses_zero(capsys, flag):
    assert main(["calibrate", "check", "--profile", "v100-sxm2-32gb", flag, "0"]) == 2
    assert f"{flag}: must be >= 1 (got 0)" in _error(capsys)


# ----------------------------------------------------------------------------- environment


@pytest.mark.parametrize("text", ["abc", "-1", "0", "1.5"])
def test_bad_max_input_bytes_env_is_an_error_not_an_import_crash(
    tmp_path, capsys, monkeypatch, tiny, text
):
    from simcluster import inputs

    monkeypatch.setenv("SIMCLUSTER_MAX_INPUT_BYTES", text)
    limit, bad = inputs._max_bytes_from_env()
    assert bad == text and limit == 32 * 2**20
    monkeypatch.setattr(inputs, "_BAD_MAX_BYTES", bad)
    assert main(["run", str(tiny), "--no-plots", "--out", str(tmp_path / "o")]) == 2
    line = _error(capsys)
    assert "$SIMCLUSTER_MAX_INPUT_BYTES" in line and repr(text) in line and "integer > 0" in line


@pytest.mark.parametrize("limit", [10**14, 10**23])
def test_huge_max_input_bytes_env_reads_the_file_without_allocating_the_limit(
    tmp_path, monkeypatch, tiny, limit
):
    """A limit far beyond memory (or beyond a C index) was a MemoryError / OverflowError
    from ``read(limit + 1)``; the file is now read in pieces and the run goes on."""
    from simcluster import inputs

    monkeypatch.setattr(inputs, "MAX_BYTES", limit)
    assert main(["run", str(tiny), "--no-plots", "--out", str(tmp_path / "o")]) == 0


def test_partition_cache_dir_that_is_a_file_warns_and_keeps_the_result(tmp_path, capsys):
    from simcluster.partition import partition_network
    from simcluster.workload.radixnet import graph_challenge_radixnet

    blocker = tmp_path / "cache"
    blocker.write_text("the user's file\n")
    part = partition_network(graph_challenge_radixnet(1024, 2), 2, "kahypar", cache_dir=blocker)
    assert len(part.owners) == 3
    assert "cannot cache the partition" in capsys.readouterr().err
    assert blocker.read_text() == "the user's file\n"


# ----------------------------------------------------------------------------- reference files


def _reference(tmp_path: Path, metric: dict) -> Path:
    folder = tmp_path / "refs"
    folder.mkdir()
    doc = {
        "paper": "X",
        "source": "a test",
        "description": "one case",
        "cases": [
            {
                "id": "a",
                "what": "throughput",
                "source": "a test",
                "scenario": str(ROOT / "scenarios/references/scenarios/anchor-resnet50.yaml"),
                "metric": metric,
                "reference": 367,
                "unit": "samples/s",
                "confidence": "medium",
            }
        ],
    }
    (folder / "x.yaml").write_text(yaml.safe_dump(doc))
    return folder


def test_reference_metric_with_an_empty_name_is_refused_before_any_run(tmp_path, capsys):
    sel = {"schedule": "ddp", "gpus": 1}
    folder = _reference(tmp_path, {"kind": "ratio", "num": sel, "den": sel, "value": ""})
    argv = ["validate", "--references", str(folder), "--out", str(tmp_path / "v"), "--no-plot"]
    assert main(argv) == 2  # was: AttributeError 'NoneType' object has no attribute 'split'
    line = _error(capsys)
    assert str(folder / "x.yaml") in line and "cases[0].metric" in line and "field or value" in line


def test_reference_metric_misspelt_schedule_or_field_gets_did_you_mean():
    from simcluster.validation.cases import Select
    from simcluster.validation.metrics import MetricError, find_record, read_metric

    records = [{"schedule": "ddp", "gpus": 1, "throughput_samples_per_s": 2.0}]
    with pytest.raises(MetricError, match="did you mean 'ddp'"):
        find_record(records, Select(schedule="dp", gpus=1))
    from simcluster.validation.cases import Metric

    m = Metric(kind="field", schedule="ddp", gpus=1, field="throughput_samples_per_sx")
    with pytest.raises(MetricError, match="did you mean 'throughput_samples_per_s'"):
        read_metric(m, records)


def test_live_run_with_a_non_ascii_pattern_name_validates(tmp_path, capsys):
    data = json.loads(LIVE.read_text())
    cfg = data["config"]
    cfg["patterns"] = ["dp ü" if p == "ddp" else p for p in cfg["patterns"]]
    for r in data["ranks"]:
        r["patterns"]["dp ü"] = r["patterns"].pop("ddp")
    # was: pydantic ValidationError (a case id built from the names)
    assert _validate_live(tmp_path, data)[1] == 0


def test_calibrate_gloo_refuses_a_huge_process_count(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert main(["calibrate", "gloo", "--nproc", "2,100000", "--out", str(out)]) == 2
    line = _error(capsys)
    assert "--nproc" in line and "100000" in line and "4 per CPU" in line
    assert not out.exists()


def test_live_run_whose_ranks_call_different_collectives(tmp_path, capsys):
    data = json.loads(LIVE.with_name("localhost-2x1-r5.json").read_text())
    op = data["ranks"][0]["patterns"]["fusion"]["ops"][1][27]
    assert op["kind"] != "compute"
    op["phase"] = "renamed"  # rank 0 calls a collective rank 1 never calls
    # was: SimulationError traceback (the engine found collectives waiting forever)
    p, code = _validate_live(tmp_path, data)
    assert code == 2
    line = _error(capsys)
    assert str(p) in line and "collective calls do not match" in line


def test_node_of_more_than_1024_ranks_is_refused_before_routing(tmp_path, capsys):
    topo = yaml.safe_load((ROOT / "topologies" / "ceta-ciemat.yaml").read_text())
    topo["node"]["gpus"] = 4000  # was: accepted, 77 s routing 16 million rank pairs
    p = tmp_path / "t.yaml"
    p.write_text(yaml.safe_dump(topo))
    assert main(["topo", str(p), "--no-png"]) == 2
    line = _error(capsys)
    assert str(p) in line and "node.gpus" in line and "4000" in line and "1024" in line


# ------------------------------------------------- names that are folders or broken links


def _not_a_file(folder: Path, name: str, how: str) -> Path:
    """``folder/name`` made a folder, a link to nothing, or a link to itself."""
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    if how == "folder":
        p.mkdir()
    elif how == "dangling":
        p.symlink_to(folder / "gone")
    else:
        p.symlink_to(p.name)  # a link loop
    return p


_WHY = {
    "folder": "is a folder",
    "dangling": "which is not there",
    "loop": "is a link loop",
}


@pytest.mark.parametrize("how", list(_WHY))
@pytest.mark.parametrize(
    "kind, by",
    [("scenario", "name"), ("scenario", "path"), ("topology", "name"), ("topology", "path"),
     ("profile", "path"), ("network_profile", "path")],  # profiles: shipped names only
)  # fmt: skip
def test_a_name_or_path_that_is_a_folder_or_broken_link_says_so(
    tmp_path, capsys, monkeypatch, kind, by, how
):
    """Was: "no such scenario file; did you mean 'loop'?" (the name itself offered back),
    "unknown topology 'loop'" while `list` showed it, "unknown profile" for a path."""
    user = tmp_path / "user"
    suffix = ".json" if kind.endswith("profile") else ".yaml"
    entry = _not_a_file(user, f"odd{suffix}", how)
    if kind in ("scenario", "topology"):
        env = "SIMCLUSTER_SCENARIOS" if kind == "scenario" else "SIMCLUSTER_TOPOLOGIES"
        monkeypatch.setenv(env, str(user))
    value = "odd" if by == "name" else str(entry)
    out = ["--out", str(tmp_path / "out"), "--no-plots"]
    if kind == "scenario":
        argv = ["run", value, *out]
    else:
        sc = {**fuzz.TINY, kind: value}
        (tmp_path / "sc.yaml").write_text(yaml.safe_dump(sc))
        argv = ["run", str(tmp_path / "sc.yaml"), *out]
    assert main(argv) == 2
    line = _error(capsys)
    assert str(entry) in line and _WHY[how] in line, line
    assert "did you mean" not in line and "unknown" not in line, line
    if kind == "topology":  # the listing offers no name that cannot be read
        assert main(["list", "--json"]) == 0
        assert "odd" not in capsys.readouterr().out


# ----------------------------------------------------------- keys that are not names


@pytest.mark.parametrize(
    "where, key, shown",
    [
        ("<root>", "on", "a boolean"),
        ("<root>", "2020-01-01", "a date"),
        ("workload", "~", "null"),
        ("study", "8", "a number"),
        ("schedules[0].options", "1.5", "a number"),
        ("topology:node.nics", "3", "a number"),
    ],
)
def test_a_mapping_key_yaml_reads_as_no_name_is_named(tmp_path, where, key, shown, capsys):
    """Was: "study[1]: Keys should be strings" (pydantic's words, the key as a path
    step and no allowed); a key of an options mapping read as [key]."""
    sc = {**copy.deepcopy(fuzz.TINY), "schedules": [{"name": "ddp", "options": {}}]}
    target = tmp_path / "sc.yaml"
    if where.startswith("topology:"):
        doc = yaml.safe_load((ROOT / "topologies" / "puhti.yaml").read_text())
        target = tmp_path / "topo.yaml"
        sc["topology"] = str(target)
        where = where.split(":", 1)[1]
    else:
        doc = sc
    node = doc
    for step in where.replace("[0]", ".0").split(".") if where != "<root>" else []:
        node = node[int(step)] if step.isdigit() else node[step]
    node["PLACEHOLDER"] = 1
    text = yaml.safe_dump(doc).replace("PLACEHOLDER", key)
    target.write_text(text)
    if target.name == "topo.yaml":
        (tmp_path / "sc.yaml").write_text(yaml.safe_dump(sc))
    argv = ["run", str(tmp_path / "sc.yaml"), "--out", str(tmp_path / "o"), "--no-plots"]
    assert main(argv) == 2
    line = _error(capsys)
    assert f"{target}: {where}: a key that is {shown}" in line and "not a name" in line, line
    assert "allowed: a field name" in line


# ------------------------------------------------------ a file of another kind handed over

_KIND_FILES = {
    "scenario": ROOT / "scenarios" / "puhti64.yaml",
    "topology": ROOT / "topologies" / "puhti.yaml",
    "device profile": ROOT / "calibrate" / "profiles" / "h200-sxm.json",
    "network profile": ROOT / "calibrate" / "profiles" / "network" / "nccl-spec.json",
    "live-run": LIVE,
    "reference-case": ROOT / "scenarios" / "references" / "prunex.yaml",
}


def _as(src: Path, tmp_path: Path, suffix: str) -> Path:
    """``src`` rewritten as ``suffix`` (.yaml or .json), same content."""
    text = src.read_text()
    doc = json.loads(text) if src.suffix == ".json" else yaml.safe_load(text)
    out = tmp_path / f"given{suffix}"
    out.write_text(json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc))
    return out


@pytest.mark.parametrize(
    "expected, given",
    [
        ("scenario", "topology"), ("scenario", "reference-case"),
        ("topology", "scenario"), ("topology", "network profile"),
        ("device profile", "network profile"), ("device profile", "topology"),
        ("network profile", "device profile"), ("network profile", "live-run"),
        ("live-run", "device profile"), ("Kineto trace", "live-run"),
        ("reference-case", "scenario"),
    ],
)  # fmt: skip
def test_a_file_of_another_kind_is_named_as_such(tmp_path, capsys, expected, given):
    """Was: "topology: unknown key [and 9 more problem(s)]", "schema_version: unsupported
    profile schema", "device: missing field", "traceEvents: unknown trace format"."""
    out = ["--out", str(tmp_path / "o")]
    json_kinds = ("device profile", "network profile", "live-run", "Kineto trace")
    suffix = ".json" if expected in json_kinds else ".yaml"
    f = _as(_KIND_FILES[given], tmp_path, suffix)
    sc = tmp_path / "sc.yaml"
    field = {"topology": "topology", "device profile": "profile",
             "network profile": "network_profile"}.get(expected)  # fmt: skip
    if field:
        sc.write_text(yaml.safe_dump({**fuzz.TINY, field: str(f)}))
        argv = ["run", str(sc), *out, "--no-plots"]
    elif expected == "scenario":
        argv = ["run", str(f), *out, "--no-plots"]
    elif expected == "live-run":
        argv = ["validate", "--live", str(f), *out, "--no-plot"]
    elif expected == "Kineto trace":
        argv = ["trace-summary", str(f)]
    else:
        refs = tmp_path / "refs"
        refs.mkdir()
        f.rename(refs / "x.yaml")
        f = refs / "x.yaml"
        argv = ["validate", "--references", str(refs), *out, "--no-plot"]
    assert main(argv) == 2
    line = _error(capsys)
    assert f"{f}: <root>: this is a" in line and f" {given} file, not a" in line, line
    assert f" {expected} file" in line and "allowed:" in line, line


def test_a_home_path_in_a_scenario_is_expanded_and_a_blank_output_refused(
    tmp_path, capsys, monkeypatch
):
    """Was: `output: ~/runs` made a folder named '~' in the working folder, `topology:
    ~/t.yaml` was 'no such file', and `output: "  "` a folder named two spaces."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    (home / "t.yaml").write_text((ROOT / "topologies" / "puhti.yaml").read_text())
    sc = {**fuzz.TINY, "topology": "~/t.yaml", "output": "~/runs/x"}
    (work / "sc.yaml").write_text(yaml.safe_dump(sc))
    assert main(["run", "sc.yaml", "--no-plots"]) == 0
    assert (home / "runs" / "x" / "results.json").is_file()
    assert not (work / "~").exists()
    (work / "sc.yaml").write_text(yaml.safe_dump({**fuzz.TINY, "output": "  "}))
    assert main(["run", "sc.yaml", "--no-plots"]) == 2
    assert "output '  ': a blank folder name" in _error(capsys)
    assert sorted(p.name for p in work.iterdir()) == ["sc.yaml"]


@pytest.mark.parametrize("byte", [b"\x00", b"\x07", b"\x1b"])
def test_a_control_character_in_yaml_is_named_with_its_line(tmp_path, capsys, byte):
    """Was: "not valid YAML: cannot parse (got '?')": no line, no character."""
    f = tmp_path / "sc.yaml"
    f.write_bytes(b"name: x\nseed: 1" + byte + b"\n")
    assert main(["run", str(f)]) == 2
    line = _error(capsys)
    assert f"{f}: <yaml>: not valid YAML: a control character" in line
    assert f"character 0x{byte[0]:02x} at offset 15 (line 2)" in line


@pytest.mark.parametrize(
    "content, shown",
    [
        (b"", "the file is empty"),
        (b"# just a note\n---\n", "the file is empty"),
        ("name: x\n".encode("utf-16"), "UTF-16 text, not UTF-8"),
        ('{"a": 1}'.encode("utf-32"), "UTF-32 text, not UTF-8"),
    ],
)
@pytest.mark.parametrize("kind", ["scenario", "topology", "profile", "trace"])
def test_an_empty_or_utf16_file_says_so(tmp_path, capsys, kind, content, shown):
    """Was: "a scenario is a mapping (got 'NoneType')", "not valid JSON: Expecting value",
    "truncated JSON" for an empty file; "byte 0xff at offset 0" for UTF-16."""
    suffix = ".json" if kind in ("profile", "trace") else ".yaml"
    f = tmp_path / f"f{suffix}"
    f.write_bytes(content if suffix == ".yaml" or content[:1] != b"#" else b"  \n")
    sc = tmp_path / "sc.yaml"
    if kind in ("topology", "profile"):
        sc.write_text(yaml.safe_dump({**fuzz.TINY, kind: str(f)}))
        argv = ["run", str(sc), "--out", str(tmp_path / "o")]
    else:
        argv = ["run", str(f)] if kind == "scenario" else ["trace-summary", str(f)]
    assert main(argv) == 2
    line = _error(capsys)
    assert f"{f}: <root>: {shown}" in line, line


@pytest.mark.parametrize("value", [7, 10**400, True, 1e15])
@pytest.mark.parametrize(
    "field, section, src",
    [("profile", "peak_flops", "h200-sxm.json"),
     ("network_profile", "link_efficiency", "network/nccl-spec.json")],
)  # fmt: skip
def test_a_profile_mapping_written_as_one_number_is_a_type_error(
    tmp_path, capsys, field, section, src, value
):
    """Was: TypeError: 'int' object is not iterable (the near-miss check walked it)."""
    doc = json.loads((ROOT / "calibrate" / "profiles" / src).read_text())
    top = "device" if field == "profile" else "network"
    doc[top][section] = value
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    (tmp_path / "sc.yaml").write_text(yaml.safe_dump({**fuzz.TINY, field: str(f)}))
    assert main(["run", str(tmp_path / "sc.yaml"), "--out", str(tmp_path / "o")]) == 2
    line = _error(capsys)
    assert f"{f}: {top}.{section}: wrong type" in line and "allowed: a mapping" in line


@pytest.mark.parametrize("phase", ["", "   "])
def test_live_run_op_with_an_empty_phase_name_is_named(tmp_path, capsys, phase):
    """Was: a pydantic ValidationError traceback ("metric kind 'field' needs field") after
    every simulation had run (found by `bench/fuzz.py --seed 8181`, live seed 8237)."""
    doc = json.loads(LIVE.read_text())
    pattern = doc["config"]["patterns"][0]
    doc["ranks"][1]["patterns"][pattern]["ops"][0][1]["phase"] = phase
    f = tmp_path / "live.json"
    f.write_text(json.dumps(doc))
    argv = ["validate", "--live", str(f), "--out", str(tmp_path / "v"), "--no-plot"]
    assert main(argv) == 2
    line = _error(capsys)
    assert f"{f}: ranks[1].patterns.{pattern}.ops[0][1].phase: a phase needs a name" in line


@pytest.mark.parametrize(
    ("field", "shown"),
    [
        ("profile", "profile file is not a .json file"),
        ("topology", "topology file is not a .yaml or .yml file"),
        ("workload.input_pipeline.profile", "input profile file is not a .json file"),
    ],
)
def test_a_path_to_a_file_of_the_wrong_kind_says_so(tmp_path, capsys, field, shown):
    """A profile or topology given as a path to a file without the kind's suffix was
    refused as "profile file is a file"."""
    notes = tmp_path / "notes.txt"
    notes.write_text("not a profile\n")
    data = yaml.safe_load((ROOT / "scenarios" / "nodebased-deepest.yaml").read_text())
    where, key = (data["workload"]["input_pipeline"], "profile") if "." in field else (data, field)
    where[key] = str(notes)
    scen = tmp_path / "s.yaml"
    scen.write_text(yaml.safe_dump(data))
    assert main(["run", str(scen), "--out", str(tmp_path / "out")]) == 2
    line = _error(capsys)
    assert f"{field}: {shown} (got '{notes}')" in line and "or a ." in line


def _fit_edit(doc: dict, where: str, value) -> None:
    """Set ``doc``'s field at dotted ``where`` (the last key may be new)."""
    *path, last = where.split(".")
    for k in path:
        doc = doc[k]
    doc[last] = value


@pytest.mark.parametrize(
    "src, where, value, shown",
    [
        # a compute fit priced past its edge by a feature no layer pass has: was a
        # KeyError ('num_params') at the first layer of the run
        ("h200-measured", "device.compute.fp32.conv.fwd.beyond", {"num_params": 1e-9},
         "device.compute.fp32.conv.fwd.beyond.num_params: not a feature of this fit "
         "(got 'num_params'); allowed: flops, flops_wave, bytes, bytes_spill"),
        ("h200-measured", "device.compute.fp32.conv.fwd.edge", {"numel": 5.0},
         "device.compute.fp32.conv.fwd.edge.numel: not a feature of this fit"),
        ("h200-measured", "device.compute.fp32.conv.fwd.edge", {"flopz": 5.0},
         "device.compute.fp32.conv.fwd.edge.flopz: unknown feature (got 'flopz'); allowed: "
         "flops, flops_wave, bytes, bytes_spill; did you mean 'flops'?"),
        ("h200-measured", "device.compute.fp32.conv.fwd.features", ["const", "numel"],
         "device.compute.fp32.conv.fwd.features: unknown feature"),
        # a kernel fit past an edge of a feature its family has not: was a KeyError
        ("h200-measured", "device.kernels.compress.edge", {"flops": 1.0},
         "device.kernels.compress.edge.flops: not a feature of this fit (got 'flops'); "
         "allowed: numel, numel_spill"),
        # a kernel fit on a feature its family's calls do not compute: was a KeyError at
        # the first optimizer step (num_params is the optimizer's, numel the others')
        ("h200-measured", "device.kernels.optimizer.features", ["const", "numel"],
         "device.kernels.optimizer.features: unknown feature (got ['const', 'numel']); "
         "allowed: const, num_params, num_params_spill"),
        # beyond without an edge: "allowed: " named nothing
        ("h200-measured", "device.compute.amp.linear.fwd.edge", {},
         "device.compute.amp.linear.fwd.beyond.flops: a feature past the edge needs an edge "
         "(got 'flops'); allowed: an edge.flops beside"),
        # a null cache: run read it as absent, derive stopped on a TypeError
        ("cpu-epyc-1core", "device.roofline.llc_bytes", None,
         "device.roofline.llc_bytes: not a number (got None)"),
        ("cpu-epyc-1core", "device.roofline.llc_bytes", "32 MiB",
         "device.roofline.llc_bytes: not a number (got '32 MiB')"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("how", ["run", "derive"])
def test_a_fits_edge_or_cache_of_the_wrong_kind_is_named(
    tmp_path, capsys, src, where, value, shown, how
):
    doc = json.loads((ROOT / "calibrate" / "profiles" / f"{src}.json").read_text())
    _fit_edit(doc, where, value)
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    if how == "run":
        (tmp_path / "sc.yaml").write_text(yaml.safe_dump({**fuzz.TINY, "profile": str(f)}))
        argv = ["run", str(tmp_path / "sc.yaml"), "--out", str(tmp_path / "o")]
    else:
        out = tmp_path / "d.json"
        argv = ["calibrate", "derive", "--from", str(f), "--target", "h100-sxm", "--out", str(out)]
    assert main(argv) == 2
    line = _error(capsys)
    assert f"{f}: {shown}" in line, line
    assert not (tmp_path / "d.json").exists()


def test_topology_with_a_nodes_key_is_not_called_an_execution_trace(tmp_path, capsys):
    # "nodes" alone marked an execution trace; a topology may well use the word
    topo = tmp_path / "mine.yaml"
    topo.write_text("name: mine\nnodes: 2\ngpus_per_node: 4\n")
    assert main(["topo", str(topo)]) == 2
    line = capsys.readouterr().err
    assert "execution trace" not in line
    assert "nodes: unknown key" in line and "did you mean 'node'" in line


def _tiny_run(tmp_path: Path, epochs: float = 1, schedule: Any = "ddp") -> list[str]:
    """``simcluster run`` of a one-size ResNet-18 scenario on Puhti."""
    sc = {
        "name": "tiny", "topology": "puhti", "profile": "v100-sxm2-32gb",
        "network_profile": "nccl-spec",
        "workload": {"model": "resnet18", "dataset": "cifar10", "batch_per_gpu": 32,
                     "epochs": epochs},
        "schedules": [schedule], "study": {"kind": "single", "gpus": [8]},
    }  # fmt: skip
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump(sc))
    return ["run", str(p), "--out", str(tmp_path / "out")]


@pytest.mark.parametrize(
    ("edit", "shown"),
    [
        # was: OverflowError (cannot fit 'int' into an index-sized integer): a bucket of
        # 1e-300 MiB cut the model into more allreduces than an index holds (seed 162226)
        ({"schedule": {"name": "hsadmm", "options": {"bucket_mb": 1e-300}}},
         ("schedules[0].options.bucket_mb: out of range", ">= 0.25")),
        # was: an internal error (epoch_time_s = inf) for epochs 5e-324 (seed 165006)
        ({"epochs": 5e-324}, ("workload.epochs: out of range", ">= 0.001")),
    ],
)  # fmt: skip
def test_values_too_small_to_simulate_are_named(tmp_path, capsys, edit, shown):
    assert main(_tiny_run(tmp_path, **edit)) == 2
    line = _error(capsys)
    assert all(part in line for part in shown)


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        # was: read as the default 2,4,8 and measured for minutes (fuzz seed 163055)
        (["calibrate", "gloo", "--nproc", ""],
         "--nproc: not a comma list of integers >= 2 (got '')"),
        # was: read as the default model and measured
        (["calibrate", "check", "--model", "", "--profile", "h100-sxm"],
         "--model: unknown model (got '')"),
    ],
)  # fmt: skip
def test_an_empty_flag_value_is_refused_not_read_as_the_default(tmp_path, capsys, argv, shown):
    if argv[1] == "gloo":
        argv = [*argv, "--out", str(tmp_path / "g.json")]
    assert main(argv) == 2
    assert shown in _error(capsys)
    assert not (tmp_path / "g.json").exists()

"""Bad flags of the ``python -m calibrate.<tool>`` entry points (and ``simcluster calibrate
derive``): each is refused in one line, exit 2, before any timing or process starts, and
no tool writes over a file it did not write without ``--force``.

The tools need torch (``pytest.importorskip``); none times anything.
"""

from __future__ import annotations

import json

import pytest

from simcluster.paths import profiles_dir

ROOT_PROFILES = profiles_dir()


def _tool_error(capsys, tool: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith(f"calibrate.{tool}")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "args, shown",
    [
        (["--device", "tpu"], "--device: unknown device (got 'tpu'); allowed: cpu, cuda, cuda:N"),
        (["--reps", "0"], "--reps: out of range (got 0); allowed: an integer >= 1"),
        (["--rounds", "-1"], "--rounds: out of range (got -1)"),
        (["--warmup", "-1"], "--warmup: out of range (got -1); allowed: an integer >= 0"),
        (["--batches", "0"], "--batches: not a comma list of batch sizes (got '0')"),
        (["--batches", "64,x"], "--batches: not a comma list of batch sizes (got '64,x')"),
        (["--deadline-s", "nan"], "--deadline-s: out of range (got nan)"),
        (["--deadline-s", "-5"], "--deadline-s: out of range (got -5.0)"),
        (["--out", "{mine}"], "--out {mine}: file exists; pass --force to overwrite it"),
        (["--out", "{tmp}"], "--out {tmp}: is a folder; give a file name"),
        (["--out", "{mine}/a.json"], "--out {mine}/a.json: {mine} is a file, not a folder"),
    ],
)
def test_calibrate_anchors_bad_flag_exits_2_before_timing(tmp_path, capsys, args, shown):
    """Was: a traceback (--device tpu, --batches x), the user's --out overwritten, or a
    run with 0 reps (a median of nothing) or a NaN deadline."""
    pytest.importorskip("torch")
    from calibrate.anchors import main as anchors

    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "notes"}')
    fill = {"mine": mine, "tmp": tmp_path}
    argv = ["--device", "cpu", "--out", str(tmp_path / "a.json"), "--cases", "resnet50"]
    argv += [a.format(**fill) for a in args]
    assert anchors(argv) == 2
    assert shown.format(**fill) in _tool_error(capsys, "anchors")
    assert mine.read_text() == '{"my": "notes"}' and not (tmp_path / "a.json").exists()


@pytest.mark.parametrize(
    "args, shown",
    [
        (["--out", "{mine}"], "--out {mine}: file exists; pass --force to overwrite it"),
        (["--et", "{mine}"], "--et {mine}: file exists; pass --force to overwrite it"),
        (["--out", "{tmp}"], "--out {tmp}: is a folder"),
        (["--num-classes", "0"], "--num-classes >= 1"),
        (["--input-shape", "3,32"], "resnet18-cifar: one training step on input shape (3, 32) "
         "x batch 2 failed (RuntimeError: "),
        (["--input-shape", "3,32,32", "--tokens", "5"], "failed (RuntimeError: "),
    ],
)  # fmt: skip
def test_calibrate_trace_bad_flag_exits_2(tmp_path, capsys, args, shown):
    """Was: the user's --out overwritten by the trace; a shape the model refuses a
    RuntimeError traceback from deep inside torch."""
    pytest.importorskip("torch")
    from calibrate.trace import main as trace

    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "notes"}')
    fill = {"mine": mine, "tmp": tmp_path}
    argv = ["--model", "resnet18-cifar", "--batch", "2", "--warmup", "1", "--steps", "1",
            "--unprofiled", "1", "--out", str(tmp_path / "t.json")]  # fmt: skip
    argv += [a.format(**fill) for a in args]
    assert trace(argv) == 2
    assert shown.format(**fill) in _tool_error(capsys, "trace")
    assert mine.read_text() == '{"my": "notes"}'


def test_calibrate_trace_input_shape_with_an_empty_piece_is_refused(capsys):
    pytest.importorskip("torch")
    from calibrate.trace import main as trace

    with pytest.raises(SystemExit) as e:
        trace(["--model", "resnet18-cifar", "--batch", "2", "--input-shape", "3,x",
               "--out", "t.json"])  # fmt: skip
    assert e.value.code == 2
    assert "argument --input-shape: '3,x': comma-separated integers" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, shown",
    [
        (["--nproc", "0"], "--nproc: out of range (got 0); allowed: 1.."),
        (["--nproc", "100000"], "--nproc: out of range (got 100000)"),
        (["--nproc", "3", "--ranks-per-node", "2"],
         "--ranks-per-node: 3 processes do not fill nodes of 2 (got 2)"),
        (["--batch", "0"], "--batch: out of range (got 0); allowed: an integer >= 1"),
        (["--iterations", "-1"], "--iterations: out of range (got -1)"),
        (["--density", "0"], "--density: out of range (got 0.0); allowed: a fraction in (0, 1]"),
        (["--keep", "nan"], "--keep: out of range (got nan)"),
        (["--bucket-mb", "inf"], "--bucket-mb: out of range (got inf); allowed: megabytes > 0"),
        (["--out", "{mine}"], "--out {mine}: file exists; pass --force to overwrite it"),
        (["--trace", "{tmp}"], "--trace {tmp}: is a folder"),
        (["--repeats", "0"], "--repeats: out of range (got 0); allowed: an integer >= 1"),
        (["--repeats", "2", "--trace", "{tmp}/t.json"],
         "--trace: records one run (got --repeats 2); allowed: --repeats 1"),
        (["--repeats", "3", "--out", "{tmp}/mine.json"],
         "--out {tmp}/mine-r2.json: file exists; pass --force to overwrite it"),
        # was: a ValueError traceback from Path.with_name, or files beside the folder
        (["--repeats", "2", "--out", "."], "--out '.': names a folder, not a file"),
        (["--repeats", "2", "--out", "/"], "--out '/': names a folder, not a file"),
        (["--repeats", "2", "--out", "{tmp}"], "--out {tmp}: is a folder; give a file name"),
        (["--out", "{tmp}/new/"], "--out '{tmp}/new/': names a folder, not a file"),
        (["--out", ""], "--out '': names a folder, not a file"),
        (["--repeats", "2", "--out", "{mine}/x.json"],
         "--out {mine}/x-r1.json: {mine} is a file, not a folder"),
        # was: the trace written, then overwritten by the live run
        (["--out", "{tmp}/t.json", "--trace", "{tmp}/t.json"],
         "--trace {tmp}/t.json: is also the live-run file --out writes"),
        # was: a list of a billion file names built before any check (a hang)
        (["--repeats", "1000000000"], "--repeats: out of range (got 1000000000); allowed: 1..100"),
    ],
)  # fmt: skip
def test_calibrate_live_bad_flag_exits_2_before_any_process(tmp_path, capsys, args, shown):
    """Was: --batch 0 ran and wrote a live run of empty batches (exit 0); --out overwrote
    the previous recorded run."""
    pytest.importorskip("torch")
    from calibrate.live.run import main as live

    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "run"}')
    (tmp_path / "mine-r2.json").write_text('{"my": "run"}')  # a repeat of an earlier run
    fill = {"mine": mine, "tmp": tmp_path}
    argv = ["--nproc", "2", "--out", str(tmp_path / "l.json")] + [a.format(**fill) for a in args]
    assert live(argv) == 2
    assert shown.format(**fill) in _tool_error(capsys, "live")
    assert mine.read_text() == '{"my": "run"}' and not (tmp_path / "l.json").exists()


@pytest.mark.parametrize(
    "args, shown",
    [
        (["--out", "{mine}"], "--out {mine}: file exists; pass --force to overwrite it"),
        (["--raw", "{mine}"], "--raw {mine}: file exists; pass --force to overwrite it"),
        (["--reps", "0"], "--reps: out of range (got 0); allowed: an integer >= 1"),
        (["--from-raw", "{tmp}/none.json"], "--from-raw {tmp}/none.json: <root>: no such raw "
         "gloo measurement file"),
        (["--from-raw", "{mine}"], "--from-raw {mine}: not a raw file of `--raw` (no config, "
         "worlds, machine, command, duration_s)"),
        (["--from-raw", "{bad}"], "--from-raw {bad}: not a raw file of `--raw` (KeyError: "),
    ],
)  # fmt: skip
def test_calibrate_gloo_bad_flag_or_raw_file_exits_2(tmp_path, capsys, args, shown):
    """Was: --from-raw of a missing or foreign file a FileNotFoundError / KeyError
    traceback; an existing --out overwritten."""
    pytest.importorskip("torch")
    from calibrate.gloo import main as gloo

    mine = tmp_path / "mine.json"
    mine.write_text('{"my": "notes"}')
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"config": {}, "worlds": [{"x": 1}], "machine": {"cpus": 2},
                               "command": "c", "duration_s": 1}))  # fmt: skip
    fill = {"mine": mine, "tmp": tmp_path, "bad": bad}
    argv = ["--nproc", "2", "--out", str(tmp_path / "g.json")] + [a.format(**fill) for a in args]
    assert gloo(argv) == 2
    assert shown.format(**fill) in _tool_error(capsys, "gloo")
    assert mine.read_text() == '{"my": "notes"}' and not (tmp_path / "g.json").exists()


def test_calibrate_transfer_error_keeps_an_existing_json(tmp_path, capsys):
    from calibrate.transfer_error import main as transfer_error

    mine = tmp_path / "mine.json"
    mine.write_text("mine")
    with pytest.raises(SystemExit) as e:
        transfer_error(["h100-sxm-80gb-measured", "v100-sxm2-32gb", "--json", str(mine)])
    assert e.value.code == 2 and mine.read_text() == "mine"
    assert f"--json {mine}: file exists; pass --force" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, shown",
    [
        (["--rtol", "-1"], "--rtol: out of range (got -1.0); allowed: a fraction in (0, 1)"),
        (["--rtol", "nan"], "--rtol: out of range (got nan)"),
        (["--name", "a/b"], "--name: bad characters (got 'a/b')"),
    ],
)
def test_validation_fit_bad_flag_exits_2_before_fitting(tmp_path, capsys, args, shown):
    """Was: not checked; the fit simulated the bracket ends first (--rtol -1 cannot converge)."""
    from simcluster.validation.fit import main as fit

    argv = [
        "--case",
        "prunex-speedup-ddp-64",
        "--network-profile",
        "nccl-spec",
        "--param",
        "network.per_message_overhead_s",
        "--name",
        "x",
        "--out",
        str(tmp_path / "f.json"),
    ]
    assert fit(argv + args) == 2  # fmt: skip
    line = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert len(line) == 1 and shown in line[0]


@pytest.mark.parametrize(
    "args, shown",
    [
        ([], "launch with torchrun (RANK, MASTER_ADDR unset)"),
        (["--sizes", "x"], "--sizes: not a comma list of byte counts (got 'x')"),
        (["--sizes", "0,8"], "--sizes: not a comma list of byte counts (got '0,8')"),
        (["--ops", "allreduc"], "--ops: unknown collective (got 'allreduc'); allowed: "
         "allreduce, allgather, broadcast"),
        (["--threads", "0"], "--threads: out of range (got 0)"),
        (["--max-bytes", "nan"], "--max-bytes: out of range (got nan); allowed: bytes >= 8"),
    ],
)  # fmt: skip
def test_calibrate_collectives_bad_flag_or_launch_exits_2(monkeypatch, capsys, args, shown):
    """Was: a ValueError traceback from torch's rendezvous (not under torchrun) or from
    int('x') after the process group started."""
    pytest.importorskip("torch")
    from calibrate.collectives import main as collectives

    for var in ("RANK", "MASTER_ADDR"):
        monkeypatch.delenv(var, raising=False)
    assert collectives(["--out", "c.json", "--backend", "gloo", *args]) == 2
    assert shown in _tool_error(capsys, "collectives")


@pytest.mark.parametrize("var", ["RANK", "WORLD_SIZE", "LOCAL_RANK"])
def test_torchrun_rank_variables_that_are_not_numbers_exit_2(monkeypatch, capsys, var):
    """Was: a ValueError traceback from int() of the variable."""
    pytest.importorskip("torch")
    from calibrate.collectives import main as collectives
    from calibrate.live.run import main as live

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv(var, "1x")
    assert collectives(["--out", "c.json", "--backend", "gloo"]) == 2
    assert f"environment {var}='1x': not a rank count" in _tool_error(capsys, "collectives")
    assert live(["--iterations", "1", "--out", "l.json"]) == 2
    assert f"environment {var}='1x'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, name",
    [("--from", "nosuch"), ("--target", "v100"), ("--source-spec", "h10")],
)
def test_calibrate_derive_unknown_profile_names_its_flag(tmp_path, flag, name):
    """Was: "profile: unknown profile" for any of the three profile flags."""
    pytest.importorskip("torch")
    from calibrate import cli as cal_cli
    from simcluster.cli import build_parser
    from simcluster.errors import UnknownNameError

    given = {"--from": "v100-sxm2-32gb-derived", "--target": "v100-sxm2-32gb"}
    given[flag] = name
    argv = ["calibrate", "derive", "--out", str(tmp_path / "x.json")]
    argv += [x for kv in given.items() for x in kv]
    with pytest.raises(UnknownNameError) as e:
        cal_cli.run(build_parser().parse_args(argv))
    assert str(e.value).startswith(f"{flag}: unknown profile (got '{name}'); allowed: ")


def _tools(tmp_path):
    """(tool, argv without --out, flag) of each tool that writes a JSON file; none gets
    as far as measuring or fitting anything in these tests."""
    return [
        ("refit", ["h200-measured"], "--out"),
        ("transfer_error", ["h100-sxm-80gb-measured", "v100-sxm2-32gb"], "--json"),
        ("fit", ["--case", "prunex-speedup-ddp-64", "--network-profile", "nccl-spec",
                 "--param", "network.per_message_overhead_s", "--name", "x"], "--out"),
        ("gloo", ["calibrate", "gloo"], "--out"),
    ]  # fmt: skip


def _run_tool(tool: str, argv: list[str]) -> int:
    if tool == "refit":
        from calibrate.refit import main
    elif tool == "transfer_error":
        from calibrate.transfer_error import main
    elif tool == "fit":
        from simcluster.validation.fit import main
    else:
        from simcluster.cli import main
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's ap.error
        return exc.code


@pytest.mark.parametrize(
    "tool, where",
    [(t, w) for t in ("refit", "transfer_error", "fit", "gloo")
     for w in ("file on the way", "folder")]
    + [("refit", "missing folders")],  # the others would measure or fit: refit is quick
)  # fmt: skip
def test_an_output_file_behind_a_file_or_a_folder_is_refused_at_the_start(
    tmp_path, capsys, tool, where
):
    """Was: a traceback after the work (refit: FileNotFoundError for a folder not there;
    a file on the way: 'NotADirectoryError' / '<file>: File exists'), or a folder given as
    --out taken for an existing file ("pass --force", then IsADirectoryError)."""
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    out = {
        "file on the way": mine / "p.json",
        "folder": tmp_path,
        "missing folders": tmp_path / "new" / "sub" / "p.json",
    }[where]
    argv, flag = next((a, f) for t, a, f in _tools(tmp_path) if t == tool)
    force = ["--force"] if tool != "transfer_error" and where == "folder" else []
    if where == "missing folders":
        assert _run_tool(tool, [*argv, flag, str(out)]) == 0
        assert json.loads(out.read_text())["name"] == "h200-measured"
        return
    code = _run_tool(tool, [*argv, flag, str(out), *force])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    shown = f"{mine} is a file, not a folder" if where != "folder" else "is a folder; give a file"
    assert f"{flag} {out}: {shown}" in err, err
    assert mine.read_text() == "mine"


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["measure", "--spec", "h100-sxn"], "--spec: unknown profile (got 'h100-sxn')"),
        (["measure", "--models", "resnet5"], "--models: unknown model (got 'resnet5')"),
        (["measure", "--check", "resnet5:8"], "--check: unknown model (got 'resnet5')"),
        (["check", "--profile", "h200-sxn"], "--profile: unknown profile (got 'h200-sxn')"),
        (["check", "--profile", "h200-sxm", "--model", "resnet5"],
         "--model: unknown model (got 'resnet5')"),
    ],
)  # fmt: skip
def test_calibrate_names_given_by_flag_are_checked_and_name_the_flag(tmp_path, argv, shown):
    """Was: `measure --spec h100-sxn` measured for minutes and wrote the typo into the
    profile as device.spec_profile; a bad --models / --profile name was reported as the
    scenario field workload.model / profile."""
    pytest.importorskip("torch")
    from calibrate import cli as cal_cli
    from simcluster.cli import build_parser
    from simcluster.errors import ConfigError

    out = ["--out", str(tmp_path / "p.json"), "--tiny", "--no-network"]
    args = ["calibrate", *argv, *(out if argv[0] == "measure" else [])]
    with pytest.raises(ConfigError) as e:
        cal_cli.run(build_parser().parse_args(args))
    assert shown in str(e.value) and "did you mean" in str(e.value)
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["h200-measured", "--spec", "h200-sxn"], "--spec: unknown profile (got 'h200-sxn')"),
        (["nccl-spec.json"], "this is a network profile file, not a device profile file"),
    ],
)
def test_refit_names_its_spec_flag_and_a_profile_of_another_kind(tmp_path, capsys, argv, shown):
    """Was: "profile: unknown profile" for --spec; "--spec: missing: the profile names no
    spec_profile" for a network profile."""
    from calibrate.refit import main as refit
    from simcluster.paths import network_profiles_dir

    if argv[0].endswith(".json"):
        argv = [str(network_profiles_dir() / argv[0]), *argv[1:]]
    assert refit([*argv, "--out", str(tmp_path / "r.json")]) == 2
    assert shown in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    "argv, shown",
    [
        # each was ignored without a word: the first mode ran, or the full refit
        (["cpu-epyc-1core", "--kernels-llc", "--edges", "--llc-bytes", "1e6"],
         "--kernels-llc: not with --edges: each refits another part"),
        (["cpu-epyc-1core", "--edges", "--amp-from-bf16"], "--edges: not with --amp-from-bf16"),
        (["cpu-epyc-1core", "--edges", "--llc-bytes", "1e6"],
         "--llc-bytes: only sets the cache of --kernels-llc (got 1000000.0)"),
        (["cpu-epyc-1core", "--edges", "--spec", "h200-sxm"],
         "--spec: --edges reads no spec sheet (got 'h200-sxm')"),
        (["cpu-epyc-1core", "--kernels-llc", "--llc-bytes", "0.5"],
         "--llc-bytes: out of range (got 0.5); allowed: a whole number of bytes >= 1"),
        # was "samples.kernels: the profile holds no kernel samples" naming no file, or
        # "--spec: missing: the profile names no spec_profile" for a spec sheet
        (["h200-sxm", "--kernels-llc", "--llc-bytes", "1e6"],
         "h200-sxm.json: kind: a spec sheet: it holds no samples to refit from (got 'spec')"),
        (["h200-sxm"], "h200-sxm.json: kind: a spec sheet: it holds no samples"),
        (["h100-sxm-derived", "--edges"], "h100-sxm-derived.json: kind: derived from a measured "
         "profile: it holds no samples to refit from (got 'derived')"),
        (["{nosamples}", "--edges"], "{nosamples}: samples.compute: missing: the profile holds "
         "no compute samples"),
        # was: copied into the written profile, which then did not load
        (["{badllc}", "--edges"],
         "{badllc}: device.roofline.llc_bytes: not a number (got '32 MiB')"),
        (["{badllc}", "--kernels-llc", "--llc-bytes", "1e6"],
         "{badllc}: device.roofline.llc_bytes: not a number"),
    ],
)  # fmt: skip
def test_refit_refuses_flags_that_do_not_go_together_and_profiles_without_samples(
    tmp_path, capsys, argv, shown
):
    from calibrate.refit import main as refit

    src = json.loads((ROOT_PROFILES / "cpu-epyc-1core.json").read_text())
    fill = {"nosamples": tmp_path / "nos.json", "badllc": tmp_path / "llc.json"}
    fill["nosamples"].write_text(json.dumps({k: v for k, v in src.items() if k != "samples"}))
    src["device"]["roofline"]["llc_bytes"] = "32 MiB"
    fill["badllc"].write_text(json.dumps(src))
    argv = [a.format(**fill) for a in argv]
    assert refit([*argv, "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and shown.format(**fill) in err, err
    assert not (tmp_path / "r.json").exists()


def test_refit_edges_makes_the_out_folder(tmp_path, capsys):
    """Was: FileNotFoundError traceback for an --out in a folder not there yet (the other
    modes made it)."""
    from calibrate.refit import main as refit

    out = tmp_path / "new" / "sub" / "e.json"
    assert refit(["cpu-epyc-1core", "--edges", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["name"] == "cpu-epyc-1core"


@pytest.mark.parametrize(
    "args, shown",
    [
        (["--out", "{profile}"], "--out {profile}: file exists; pass --force to overwrite it"),
        (["--out", "{tmp}"], "--out {tmp}: is a folder; give a file name"),
        (["--out", "{tmp}/x.json", "--samples", "0"],
         "--samples: out of range (got 0); allowed: an integer 1..10000000"),
        (["--out", "{tmp}/x.json", "--repeats", "-1"], "--repeats: out of range (got -1)"),
        (["--pipeline", "imagenet", "--image", "{profile}", "--out", "{tmp}/x.json"],
         "--image: not an image PIL can decode (UnidentifiedImageError) (got {profile})"),
    ],
)  # fmt: skip
def test_input_pipeline_refuses_before_timing_and_keeps_an_existing_profile(
    tmp_path, capsys, monkeypatch, args, shown
):
    """Was: --out on the committed profile overwrote it without asking; a folder was a
    traceback (IsADirectoryError) after the minutes of timing."""
    from calibrate import input_pipeline

    def never(*a, **k):
        raise AssertionError("timed before checking the flags")

    monkeypatch.setattr(input_pipeline, "measure", never)
    profile = tmp_path / "mine.json"
    profile.write_text('{"kind": "input"}')
    fill = {"profile": str(profile), "tmp": str(tmp_path)}
    assert input_pipeline.main([a.format(**fill) for a in args]) == 2
    err = capsys.readouterr().err
    assert shown.format(**fill) in err and "Traceback" not in err, err
    assert profile.read_text() == '{"kind": "input"}'


def test_calibrate_live_repeats_need_spawned_processes(capsys):
    pytest.importorskip("torch")
    from calibrate.live.run import main as live

    assert live(["--repeats", "2", "--out", "l.json"]) == 2
    assert "--repeats: 2 runs need --nproc" in capsys.readouterr().err


def test_calibrate_live_repeats_write_numbered_files():
    pytest.importorskip("torch")
    from calibrate.live.run import repeat_outputs

    assert [str(p) for p in repeat_outputs("a/live.json", 1)] == ["a/live.json"]
    assert [str(p) for p in repeat_outputs("a/live.json", 3)] == [
        "a/live-r1.json", "a/live-r2.json", "a/live-r3.json"
    ]  # fmt: skip


def test_calibrate_live_repeats_refuse_older_repeats_beyond_the_new_ones(tmp_path, capsys):
    """Was: --force --repeats 3 rewrote r1-r3 and left an older r4, r5 beside them, which
    validate then scored as repeats of the new run."""
    pytest.importorskip("torch")
    from calibrate.live.run import main as live

    for k in (1, 4, 5):
        (tmp_path / f"l-r{k}.json").write_text('{"my": "run"}')
    argv = ["--nproc", "2", "--repeats", "3", "--force", "--out", str(tmp_path / "l.json")]
    assert live(argv) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'l-r4.json'}, {tmp_path / 'l-r5.json'} already hold repeats" in err
    assert (tmp_path / "l-r1.json").read_text() == '{"my": "run"}'


def test_calibrate_live_repeats_need_a_json_name(tmp_path, capsys):
    """Was: --repeats 2 --out noext wrote noext-r1, noext-r2, which --set live never reads."""
    pytest.importorskip("torch")
    from calibrate.live.run import main as live

    assert live(["--nproc", "2", "--repeats", "2", "--out", str(tmp_path / "noext")]) == 2
    assert "allowed: a name ending in .json" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())

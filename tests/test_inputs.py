"""The guarded reader: every input file gets the same limits and one-line errors."""

from __future__ import annotations

import time

import pytest

from simcluster.cli import main
from simcluster.errors import ConfigError
from simcluster.inputs import MAX_DEPTH, load_json, load_yaml, parse_json, parse_yaml

LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_billion_laughs_is_refused_quickly():
    t = time.perf_counter()
    with pytest.raises(ConfigError, match="aliases expand too far"):
        parse_yaml(LAUGHS, "x.yaml")
    assert time.perf_counter() - t < 2.0


def test_deep_nesting_is_refused_without_recursion_error():
    with pytest.raises(ConfigError, match="nested too deeply"):
        parse_yaml("[" * 1000 + "]" * 1000, "x.yaml")
    with pytest.raises(ConfigError, match="nested too deeply"):
        parse_json("[" * 5000 + "]" * 5000, "x.json")
    parse_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x.yaml")  # at the cap: fine


def test_duplicate_keys_are_refused_but_merge_keys_override():
    with pytest.raises(ConfigError, match="written twice"):
        parse_yaml("a: 1\nb: 2\na: 3\n", "x.yaml")
    with pytest.raises(ConfigError, match="written twice"):
        parse_json('{"a": 1, "a": 2}', "x.json")
    assert parse_yaml("x: &x {b: 1}\ny: {<<: *x, b: 2}")["y"] == {"b": 2}


@pytest.mark.parametrize("text", ["a: .nan", "a: [1, .inf]", "a: {b: -.inf}"])
def test_non_finite_numbers_are_refused(text):
    with pytest.raises(ConfigError, match="not a finite number"):
        parse_yaml(text, "x.yaml")


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": [Infinity]}', "[1e999]"])
def test_non_finite_json_is_refused(text):
    with pytest.raises(ConfigError, match="not a finite number"):
        parse_json(text, "x.json")


def test_non_utf8_names_the_byte(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_bytes(b"name: x\nbad: \xff\n")
    with pytest.raises(ConfigError, match=r"offset 13 \(line 2\)"):
        load_yaml(p)
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_json(p)


def test_size_cap_and_folder(tmp_path, monkeypatch):
    import simcluster.inputs as inputs

    monkeypatch.setattr(inputs, "MAX_BYTES", 100)
    p = tmp_path / "big.yaml"
    p.write_text("# " + "x" * 200 + "\na: 1\n")
    with pytest.raises(ConfigError, match="too large"):
        load_yaml(p)
    with pytest.raises(ConfigError, match="is a folder"):
        load_yaml(tmp_path)


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe", b"[" * 2000, LAUGHS.encode(), b"a: 1\na: 2\n", b"name: .nan\n"],
)
def test_cli_run_one_line_exit_2(tmp_path, capsys, content):
    p = tmp_path / "s.yaml"
    p.write_bytes(content)
    assert main(["run", str(p), "--no-plots", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(p) in err


def test_fifo_is_refused_not_waited_on(tmp_path):
    import os

    fifo = tmp_path / "s.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_yaml(fifo)

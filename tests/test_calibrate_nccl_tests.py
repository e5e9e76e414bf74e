"""`simcluster calibrate nccl-tests`: log reader, fit, round trip, bad logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibrate.nccl_tests import parse_log
from simcluster.cli import main

LOG = Path(__file__).parent / "data" / "all_reduce_2x_dgx_a100.log"


def test_parse_reads_header_hosts_version_and_rows():
    log = parse_log(LOG)
    assert log.op == "all_reduce"
    assert log.ranks == 16 and log.hosts == ["dgxa01", "dgxa02"] and log.nodes == 2
    assert log.nccl_version == "2.18.3"
    assert log.rows[0]["size"] == 8 and log.rows[-1]["size"] == 8 << 30
    assert log.rows[-1]["busbw"] == pytest.approx(195.49)


def test_round_trip_reproduces_busbw_above_1mb(tmp_path, capsys):
    out = tmp_path / "fit.json"
    argv = ["calibrate", "nccl-tests", str(LOG), "--topology", "dgx-a100", "--out", str(out)]
    assert main(argv) == 0
    prof = json.loads(out.read_text())
    assert prof["kind"] == "measured"
    prov = prof["provenance"]["logs"][0]
    assert prov["hosts"] == ["dgxa01", "dgxa02"] and prov["gpus"] == 16
    assert prov["nccl_version"] == "2.18.3" and prov["file"] == str(LOG)
    capsys.readouterr()
    assert main(["nccl-tests", "--topology", "dgx-a100", "--nodes", "2", "-b", "1M", "-e", "8G",
                 "--network-profile", str(out), "--json"]) == 0  # fmt: skip
    sim = {r["size"]: r["busbw_GBps"] for r in json.loads(capsys.readouterr().out)["rows"]}
    measured = {int(r["size"]): r["busbw"] for r in parse_log(LOG).rows if r["size"] >= 1 << 20}
    errors = {s: sim[s] / b - 1 for s, b in measured.items()}
    assert max(abs(e) for e in errors.values()) < 0.10, errors


def _write(tmp_path, text: str) -> Path:
    p = tmp_path / "x.log"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "mutate,where",
    [
        (lambda lines: lines[:-6], "line "),  # truncated: no Avg bus bandwidth
        (lambda lines: ["hello world", "this is not nccl-tests"], "line 2"),  # foreign
        (lambda lines: [x if "  1048576 " not in x else x[:40] for x in lines], "line "),
    ],
)
def test_bad_logs_exit_2_naming_file_and_line(tmp_path, capsys, mutate, where):
    lines = LOG.read_text().splitlines()
    bad = _write(tmp_path, "\n".join(mutate(lines)) + "\n")
    argv = ["calibrate", "nccl-tests", str(bad), "--out", str(tmp_path / "o.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and where in err and "Traceback" not in err

"""`simcluster nccl-tests`: nccl-tests' columns and busbw factors, JSON, errors."""

from __future__ import annotations

import json

import pytest

from simcluster.cli import main
from simcluster.report.nccl_tests import NCCL_TEST_OPS, parse_size, sizes_between


def _json(capsys, *argv):
    assert main(["nccl-tests", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_sizes_follow_nccl_tests_flags():
    assert parse_size("8G") == 8 << 30 and parse_size("64K") == 65536 and parse_size("8") == 8
    assert sizes_between(8, 64, 2) == [8, 16, 32, 64]


@pytest.mark.parametrize(
    ("text", "why"), [("nan", "finite size"), ("1e400", "finite size"), ("-5", ">= 0 bytes")]
)
def test_bad_sizes_say_what_is_wrong(text, why):
    from simcluster.errors import ConfigError

    with pytest.raises(ConfigError, match=why):
        parse_size(text)


@pytest.mark.parametrize("op", sorted(NCCL_TEST_OPS))
def test_every_op_has_consistent_columns(capsys, op):
    out = _json(
        capsys, "--topology", "dgx-a100", "--nodes", "1", "--op", op, "-b", "1M", "-e", "4M"
    )
    n = out["gpus"]
    t = NCCL_TEST_OPS[op]
    assert [r["size"] for r in out["rows"]] == [1 << 20, 2 << 20, 4 << 20]
    for r in out["rows"]:
        assert r["algbw_GBps"] == pytest.approx(r["size"] / (r["time_us"] * 1e-6) / 1e9)
        assert r["busbw_GBps"] == pytest.approx(r["algbw_GBps"] * t.factor(n))
        assert r["count"] == r["size"] // 4 // (n if t.per_rank_count else 1)
        assert r["root"] == (0 if op in ("broadcast", "reduce") else -1)
    # bigger messages are never faster
    times = [r["time_us"] for r in out["rows"]]
    assert times == sorted(times)


def test_busbw_factors_are_nccl_tests():
    assert NCCL_TEST_OPS["all_reduce"].factor(8) == pytest.approx(14 / 8)
    assert NCCL_TEST_OPS["all_gather"].factor(8) == pytest.approx(7 / 8)
    assert NCCL_TEST_OPS["broadcast"].factor(8) == 1.0


def test_text_table_has_nccl_tests_header(capsys):
    assert (
        main(["nccl-tests", "--topology", "dgx-a100", "--nodes", "1", "-b", "8", "-e", "64"]) == 0
    )
    out = capsys.readouterr().out
    assert "size" in out and "busbw" in out and "redop" in out and "Avg bus bandwidth" in out
    assert len([x for x in out.splitlines() if not x.startswith("#")]) == 4


def test_allreduce_large_message_limited_by_nvswitch_and_small_by_latency(capsys):
    out = _json(
        capsys, "--topology", "dgx-a100", "--nodes", "1", "-b", "8", "-e", "8G", "-f", "1024"
    )
    small, large = out["rows"][0], out["rows"][-1]
    assert small["algorithm"].endswith("/LL") and large["algorithm"].endswith("/Simple")
    # busbw of a large all_reduce tends to the NVSwitch port rate x efficiency
    assert 200 < large["busbw_GBps"] <= 300 * 0.8 + 1e-6


@pytest.mark.parametrize(
    "argv",
    [
        ["--topology", "dgx-a100", "--op", "allreduce"],
        ["--topology", "nope"],
        ["--topology", "dgx-a100", "-b", "lots"],
        ["--topology", "dgx-a100", "--proto", "LL256"],
        ["--topology", "dgx-a100", "--network-profile", "nope"],
        ["--topology", "dgx-a100", "-g", "8"],  # -g needs a device profile's launch cost
        ["--topology", "dgx-a100", "-g", "0", "--profile", "a100-80gb-sxm"],
    ],
)
def test_bad_input_exits_2(capsys, argv):
    try:
        code = main(["nccl-tests", *argv])
    except SystemExit as exc:  # argparse rejects a bad choice itself
        code = exc.code
    assert code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_gpus_per_thread_bound_small_sizes_by_launches(capsys):
    """nccl-tests -g 8: one thread launches on 8 GPUs per iteration, so small rows
    take 8 launches (the device profile's launch overhead); large rows do not move."""
    from simcluster.compute import load_profile

    args = ("--topology", "dgx1-v100", "--nodes", "1", "-b", "8", "-e", "1G", "-f", "1024")
    one = _json(capsys, *args)["rows"]
    eight = _json(capsys, *args, "-g", "8", "--profile", "v100-sxm2-32gb")["rows"]
    launch = load_profile("v100-sxm2-32gb").launch_overhead
    assert one[0]["time_us"] < 8 * launch * 1e6
    assert eight[0]["time_us"] == pytest.approx(8 * launch * 1e6)
    assert eight[-1]["time_us"] == pytest.approx(one[-1]["time_us"])


def test_sizes_beyond_device_memory_are_refused(capsys):
    from simcluster.cli import main

    args = ["nccl-tests", "--topology", "dgx-a100", "--nodes", "1", "-b", "8"]
    assert main([*args, "-e", "1000000T", "--profile", "a100-80gb-sxm-derived"]) == 2
    err = capsys.readouterr().err
    assert "-e" in err and "GiB per GPU" in err and "a100-80gb-sxm-derived" in err
    # allgather's send buffer is 1/n of -e: 64G fits 80 GiB one way but not two
    assert main([*args, "-e", "64G", "--profile", "a100-80gb-sxm-derived"]) == 2
    capsys.readouterr()
    assert (
        main([*args, "-e", "64G", "--op", "all_gather", "--profile", "a100-80gb-sxm-derived"]) == 0
    )


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
def test_broadcast_and_reduce_use_every_channel_across_nodes(capsys, op):
    # NCCL splits a broadcast / reduce over its channel rings (one per NIC rail between
    # DGX A100 nodes), so the large-size bus bandwidth is the eight rails' as for an
    # allgather, not one NIC's 25 GB/s (a single chain through one NIC).
    row = _json(capsys, "--topology", "dgx-a100", "--nodes", "2", "--op", op,
                "-b", "128M", "-e", "128M")["rows"][0]  # fmt: skip
    ag = _json(capsys, "--topology", "dgx-a100", "--nodes", "2", "--op", "all_gather",
               "-b", "128M", "-e", "128M")["rows"][0]  # fmt: skip
    assert row["busbw_GBps"] > 4 * 25.0
    assert row["busbw_GBps"] == pytest.approx(ag["busbw_GBps"], rel=0.25)

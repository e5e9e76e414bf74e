"""NCCL 2.4's kernel choice (simcluster/collectives/nccl24.py): closed forms from its
source (tag v2.4.8-1) and the choice the `nccl-2.4-spec` profile makes end to end."""

from __future__ import annotations

import json
import math

import pytest

from simcluster.cli import main
from simcluster.collectives import nccl24
from simcluster.collectives.protocols import parse_selection
from simcluster.errors import ConfigError


def test_ll_kernel_threads_and_channels_grow_with_size():
    # 8 ranks, ring pattern (nchunksPerLoop 8), 6 channels: 8 B per thread before more
    assert nccl24.ll_kernel(8, 8, 6, 64) == (64, 1)
    # threads double while ceil(n / (nt x 8)) > 8: 4096 B -> 64 threads (8 B each)
    assert nccl24.ll_kernel(4096, 8, 6, 64) == (64, 1)
    assert nccl24.ll_kernel(4097, 8, 6, 64) == (128, 1)
    # 256 threads at most; then channels ceil(n / (256 x 8 x 8)), at most the ring's 6
    assert nccl24.ll_kernel(32768, 8, 6, 64) == (256, 2)
    assert nccl24.ll_kernel(262144, 8, 6, 64) == (256, 6)


def test_ll_threshold_is_channels_threads_chunks_and_thread_threshold():
    # every channel: 6 x 256 x 8 x 64 = 786432 B (768 KiB)
    assert nccl24.ll_threshold(1 << 20, 8, 6, 64) == 6 * 256 * 8 * 64 == 786432
    # one process per GPU doubles the thread threshold (ncclCommInitRank path)
    assert nccl24.thread_threshold(True) == 64 and nccl24.thread_threshold(False) == 128
    assert nccl24.ll_threshold(1 << 20, 8, 6, 128) == 2 * 786432
    # trees: one chunk per loop and 4 x the per-thread threshold
    assert nccl24.ll_threshold(1 << 20, 1, 6, 64, tree=True) == 6 * 256 * 1 * 64 * 4


@pytest.mark.parametrize(
    ("nbytes", "proto"), [(524288, "LL"), (786432, "LL"), (786436, "Simple"), (1 << 20, "Simple")]
)
def test_allreduce_protocol_switches_at_the_threshold(nbytes, proto):
    assert nccl24.choose("allreduce", nbytes, 8, 1, 6, True, True) == ("ring", proto)


def test_allgather_counts_the_gathered_buffer():
    # per-rank 98304 B x 8 = 786432: LL; one float more per rank: Simple
    assert nccl24.choose("allgather", 98304, 8, 1, 6, True, True)[1] == "LL"
    assert nccl24.choose("allgather", 98308, 8, 1, 6, True, True)[1] == "Simple"


def test_tree_threshold():
    assert nccl24.tree_threshold(1, 8, 6, True) == 0.0  # one node: never the tree
    # 4 nodes x 8 over NVLink, 4 channels: ringbw 20000, treebw 15000 B/us,
    # ringlat 6 x 31 = 186, treelat 15 x 2 + 4 x 7 = 58 us
    assert nccl24.tree_threshold(4, 32, 4, True) == int(20000 * 15000 / 5000 * 128)
    # two nodes over NVLink: the tree's bandwidth doubles past the ring's: always
    assert nccl24.tree_threshold(2, 16, 4, True) == math.inf
    name, _ = nccl24.choose("allreduce", 1 << 20, 32, 4, 4, True, False)
    assert name == "tree"
    assert nccl24.choose("allreduce", 1 << 30, 32, 4, 4, True, False)[0] == "ring"


def test_explicit_algorithm_and_protocol_are_kept():
    assert nccl24.choose("allreduce", 8, 8, 1, 6, True, True, "ring", "Simple") == (
        "ring",
        "Simple",
    )
    assert nccl24.choose("broadcast", 8, 8, 1, 6, True, True) == (None, "LL")


def test_selection_parsing():
    assert parse_selection({}) == "tuner"
    assert parse_selection({"selection": "nccl-2.4", "LL": {}, "Simple": {}}) == "nccl-2.4"
    with pytest.raises(ConfigError, match="did you mean 'nccl-2.4'"):
        parse_selection({"selection": "nccl-24"})
    with pytest.raises(ConfigError, match="network.protocols.LL128"):
        parse_selection({"selection": "nccl-2.4", "LL128": {}})


def _rows(capsys, profile, *extra):
    argv = ["nccl-tests", "--topology", "dgx1-v100", "--nodes", "1", "-b", "256K", "-e", "2M"]
    assert main([*argv, "--network-profile", profile, *extra, "--json"]) == 0
    return {r["size"]: r for r in json.loads(capsys.readouterr().out)["rows"]}


def test_dgx1_one_process_switches_to_simple_past_768k(capsys):
    rows = _rows(capsys, "nccl-2.4-spec", "-g", "8", "--profile", "v100-sxm2-32gb")
    assert [rows[s]["algorithm"] for s in sorted(rows)] == [
        "ring/LL", "ring/LL", "ring/Simple", "ring/Simple",
    ]  # fmt: skip
    # the 2.5+ tuner keeps LL at 1 MiB and takes LL128 at 2 MiB on the same board
    tuned = _rows(capsys, "nccl-spec", "-g", "8", "--profile", "v100-sxm2-32gb")
    assert tuned[1 << 20]["algorithm"] == "ring/LL" and tuned[2 << 20]["algorithm"] == "ring/LL128"


def test_one_process_per_gpu_keeps_ll_to_twice_the_size(capsys):
    rows = _rows(capsys, "nccl-2.4-spec")  # -g 1: ncclCommInitRank, threshold x 2
    assert rows[1 << 20]["algorithm"] == "ring/LL" and rows[2 << 20]["algorithm"] == "ring/Simple"


def test_a_protocol_the_profile_lacks_is_refused(capsys):
    argv = ["nccl-tests", "--topology", "dgx1-v100", "--nodes", "1", "-b", "8", "-e", "8"]
    assert main([*argv, "--network-profile", "nccl-2.4-spec", "--proto", "LL128"]) == 2
    assert "LL128" in capsys.readouterr().err

"""NCCL's size correction of the tree allreduce's bandwidth (``treeCorrectionFactor``;
``network.protocols.tree_correction``): closed-form checks and bad input."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from simcluster.collectives import CollectiveCall, CommContext, lower
from simcluster.collectives import registry as reg
from simcluster.collectives.protocols import parse_tree_correction, tree_correction
from simcluster.compute import load_network_profile
from simcluster.errors import ConfigError
from simcluster.topology import load_topology

SIMPLE = (0.9,) * 7 + (
    0.8,
    0.7,
    0.6,
    0.6,
    0.5,
    0.5,
    0.5,
    0.5,
    0.6,
    0.7,
    0.8,
    0.7,
    0.7,
    0.8,
    0.9,
    0.9,
    0.9,
)


def _spec() -> dict:
    path = Path(__file__).parent.parent / "calibrate/profiles/network/nccl-spec.json"
    return json.loads(path.read_text())


def _ctx(nodes: int, table: bool = True) -> CommContext:
    ctx = CommContext.from_profile(
        load_topology("dgx-a100", num_nodes=nodes), load_network_profile("nccl-spec")
    )
    if not table:
        ctx.tree_correction = {}
    return ctx


def test_the_factor_is_indexed_by_log2_of_size_over_64_bytes():
    table = {"Simple": SIMPLE}
    assert tree_correction(table, "Simple", 64) == 0.9  # log2i(1) = 0
    assert tree_correction(table, "Simple", 127) == 0.9
    assert tree_correction(table, "Simple", 64 * 2**11) == 0.5  # 128 KiB
    assert tree_correction(table, "Simple", 64 * 2**22) == 0.9  # 256 MiB, the last covered
    assert tree_correction(table, "Simple", 64 * 2**23) == 1.0  # 512 MiB: past NCCL's < 23
    assert tree_correction(table, "Simple", 8) == 1.0  # below 64 B: log2i(0)
    assert tree_correction(table, "LL", 64 * 2**11) == 1.0  # a protocol without a row
    assert tree_correction({}, "Simple", 1e6) == 1.0


def test_the_shipped_table_is_nccls():
    data = _spec()
    table = parse_tree_correction(data["network"]["protocols"])
    assert set(table) == {"LL", "LL128", "Simple"}
    assert table["Simple"] == SIMPLE
    assert min(table["LL"]) == 0.4 and len(table["LL128"]) == 24


def test_a_corrected_tree_waits_the_tuners_extra_time_and_moves_the_same_bytes():
    """2 DGX A100 nodes, 4 MiB tree/LL128 (factor 0.6 at log2i(65536) = 16): the first
    phase starts (1 / 0.6 - 1) x the tuner's time to move the bytes later; every flow
    carries what it carried without the table."""
    n = 4 * 2**20
    call = CollectiveCall("allreduce", (tuple(range(16)),), float(n), "tree", 0, "LL128")
    with_t, without = _ctx(2), _ctx(2, table=False)
    f = tree_correction(with_t.tree_correction, "LL128", n)
    assert f == 0.8
    move = reg._estimate_at(without, call, "tree", "LL128", n)
    move -= reg._estimate_at(without, call, "tree", "LL128", 0.0)
    _, a = lower(with_t, call)
    _, b = lower(without, call)
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.nbytes, y.nbytes)
    first = next(k for k, x in enumerate(b) if x.num_flows)
    np.testing.assert_allclose(
        np.asarray(a[first].latency) - np.asarray(b[first].latency), move * (1 / f - 1)
    )
    for x, y in zip(a[first + 1 :], b[first + 1 :], strict=True):
        np.testing.assert_array_equal(x.latency, y.latency)
    assert reg._estimate_shape(with_t, call, "tree", "LL128") == pytest.approx(
        reg._estimate_shape(without, call, "tree", "LL128") + move * (1 / f - 1)
    )


def test_auto_moves_mid_sizes_to_the_ring_where_the_corrected_tree_loses():
    """2 DGX A100 nodes: the uncorrected tree wins at 256 KiB; corrected, the ring does."""
    call = CollectiveCall("allreduce", (tuple(range(16)),), 256 * 1024.0)
    assert lower(_ctx(2, table=False), call)[0].startswith("tree/")
    assert lower(_ctx(2), call)[0].startswith("ring/")


def test_a_ring_and_other_ops_are_untouched():
    for op, name in (("allreduce", "ring"), ("allgather", "ring")):
        call = CollectiveCall(op, (tuple(range(16)),), 1e6, name, 0, "Simple")
        a, b = lower(_ctx(2), call)[1], lower(_ctx(2, table=False), call)[1]
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x.latency, y.latency)


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"Simple": [0.9] * 5}, r"tree_correction\.Simple"),
        ({"Simple": [1.5] * 24}, r"tree_correction\.Simple\[0\]"),
        ({"Simple": ["fast"] * 24}, r"tree_correction\.Simple\[0\]"),
        ({"Simpel": [0.9] * 24}, r"tree_correction\.Simpel"),
        ("0.5", r"tree_correction"),
    ],
)
def test_bad_tables_are_one_line_errors(patch, where):
    data = copy.deepcopy(_spec())
    data["network"]["protocols"]["tree_correction"] = patch
    with pytest.raises(ConfigError, match=where):
        parse_tree_correction(data["network"]["protocols"], "p.json")

"""Partitions shipped as package data, and progress output in logs (issue 16)."""

from __future__ import annotations

import importlib
import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster.devtools.ship_partitions import write_shipped
from simcluster.partition import partition_network
from simcluster.partition.network import cache_key, find_cached
from simcluster.partition.shipped import MANIFEST, shipped_dir, shipped_path
from simcluster.report.progress import ProgressBar
from simcluster.scenario import load_scenario
from simcluster.schedules.spmv import SpMVOptions, network_for, prefetch_partitions

radixnet = importlib.import_module("simcluster.workload.radixnet")  # the module, not the function


def _manifest() -> dict:
    return json.loads((shipped_dir() / MANIFEST).read_text())


def test_manifest_matches_the_generator_and_the_keys():
    """Every shipped file is keyed by today's network: a generator change fails here."""
    man = _manifest()
    assert man["generator_version"] == radixnet.GENERATOR_VERSION
    assert man["entries"]
    for key, e in man["entries"].items():
        net = network_for(SpMVOptions(**e["options"]))
        assert net.fingerprint == e["fingerprint"], e["file"]
        got, _ = cache_key(net, e["parts"], e["backend"], e["epsilon"], e["seed"])
        assert got == key, e["file"]
        assert (shipped_dir() / e["file"]).is_file()


def test_shipped_scenarios_are_covered():
    """Every hypergraph job of the shipped scenario and the reference cases is shipped."""
    for path in (
        "scenarios/hsgd-graphchallenge.yaml",
        "scenarios/references/scenarios/spmv-haswell.yaml",
    ):
        sc = load_scenario(path)
        for spec in sc.schedules:
            o = SpMVOptions.model_validate(spec.options)
            if o.partitioner == "random":
                continue
            for p in sc.study.gpus:
                key = cache_key(network_for(o), p, o.partitioner, o.epsilon, sc.seed)[0]
                assert shipped_path(key) is not None, (path, spec.display, p)


def test_shipped_partition_is_used_from_an_empty_cache(tmp_path):
    o = SpMVOptions(neurons=1024, layers=120, partitioner="kahypar")
    net = network_for(o)
    assert find_cached(net, 32, "kahypar", 0.01, 0, tmp_path) is not None
    part = partition_network(net, 32, "kahypar", cache_dir=tmp_path, status=False)
    assert part.cached
    assert len(part.owners) == 121
    for w in part.owners[1:]:  # balance of the paper's constraint (2), eps = 1 %
        sizes = np.bincount(w, minlength=32)
        assert sizes.max() <= 1.01 * 1024 / 32 + 1
    assert not list(tmp_path.iterdir())  # nothing written to the user cache


def test_other_generator_version_is_never_served(monkeypatch):
    key = next(iter(_manifest()["entries"]))
    assert shipped_path(key) is not None
    monkeypatch.setattr(radixnet, "GENERATOR_VERSION", radixnet.GENERATOR_VERSION + 1)
    assert shipped_path(key) is None


def test_write_shipped_round_trip(tmp_path):
    """The maintenance writer makes files the lookup serves (a tiny scenario)."""
    sc = tmp_path / "tiny.yaml"
    sc.write_text(
        "name: tiny\ntopology: haswell-ib\nprofile: haswell-e5-2630v3-core\n"
        "network_profile: mpi-spec\nworkload: {dataset_size: 10, batch_per_gpu: 1}\n"
        "schedules:\n  - {name: spmv, options: {neurons: 64, layers: 3, radix: 2, "
        "connections: 32, partitioner: kahypar, vectors: 10}}\n"
        "study: {kind: strong, gpus: [1, 4]}\nseed: 0\n"
    )
    out = tmp_path / "shipped"
    lines: list[str] = []
    assert write_shipped([str(sc)], out, cache_dir=str(tmp_path / "c"), log=lines.append) == 1
    key = next(iter(json.loads((out / MANIFEST).read_text())["entries"]))
    assert shipped_path(key, out) is not None and len(lines) == 1


def test_prefetch_prints_lines_when_not_a_terminal(tmp_path, capsys):
    sc = load_scenario("scenarios/hsgd-graphchallenge.yaml")
    small = {"neurons": 64, "layers": 2, "cache_dir": str(tmp_path)}
    specs = [s.model_copy(update={"options": {**s.options, **small}}) for s in sc.schedules[:2]]
    sc = sc.model_copy(
        update={"schedules": specs, "study": sc.study.model_copy(update={"gpus": [4]})}
    )
    prefetch_partitions(sc, workers=1)
    err = capsys.readouterr().err
    assert "partitioning 1 (network, P) jobs not in the cache" in err
    assert "partitions 1/1: H-SGD 1024 P=4" in err
    prefetch_partitions(sc, workers=1)  # now cached: silent
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("tty", [False, True])
def test_progress_bar_logs_plain_lines_without_a_terminal(tty, monkeypatch):
    s = io.StringIO()
    monkeypatch.setattr(s, "isatty", lambda: tty, raising=False)
    bar = ProgressBar(s, interval_s=1e-9)
    bar(1, 2, "a")
    bar(2, 2, "b")
    text = s.getvalue()
    if tty:
        assert "\r[" in text
    else:
        assert text.splitlines()[0].startswith("simcluster: progress 1/2 ") and "\r" not in text
    quiet = io.StringIO()
    ProgressBar(quiet)(1, 2, "a")  # default: a line only after 5 s of work
    assert quiet.getvalue() == ""


@given(st.integers(2, 40), st.integers(1, 4), st.integers(0, 1000))
@settings(max_examples=25, deadline=None)
def test_compact_files_round_trip_any_owners(parts, layers, seed):
    """Owners stored in twin order come back exactly, whatever the partition."""
    import tempfile
    from pathlib import Path

    from simcluster.partition.shipped import _save_compact, load_shipped
    from simcluster.workload.sparse import random_k_per_row

    net = random_k_per_row(48, layers, 3, seed=seed)
    rng = np.random.default_rng(seed)
    owners = [rng.integers(0, parts, size=w) for w in net.widths]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.npz"
        _save_compact(path, net, owners, [0.5] * layers, [7] * layers, parts)
        got = load_shipped(path, net)
    assert got is not None
    assert all(np.array_equal(a, b) for a, b in zip(owners, got[0], strict=True))
    assert got[1] == [0.5] * layers and got[2] == [7] * layers


def test_partition_status_logs_plain_lines_without_a_terminal(capsys):
    from simcluster.partition.network import _StatusLine

    line = _StatusLine(True, log_every=0.0)
    line("partitioning x: layer 1/3")
    line("partitioning x: layer 2/3")
    line.clear()
    assert capsys.readouterr().err.splitlines() == [
        "partitioning x: layer 1/3",
        "partitioning x: layer 2/3",
    ]
    quiet = _StatusLine(False, log_every=0.0)
    quiet("nothing")
    assert capsys.readouterr().err == ""

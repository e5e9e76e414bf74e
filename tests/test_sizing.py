"""The up-front size estimate refuses work that would not fit, with the estimate."""

from __future__ import annotations

import pytest

from simcluster.cli import main
from simcluster.errors import ConfigError
from simcluster.scenario import parse_scenario
from simcluster.sizing import check_size, estimate_size
from simcluster.sweep.runner import make_grid, parse_axis

BASE = {
    "name": "x",
    "topology": "puhti-xl",
    "profile": "v100-sxm2-32gb",
    "workload": {"model": "resnet18-cifar", "dataset": "cifar10", "batch_per_gpu": 32},
    "schedules": [{"name": "ddp"}],
    "study": {"gpus": [64]},
}


def test_estimate_grows_with_ranks_and_jitter():
    small = estimate_size(parse_scenario(BASE, "s.yaml"))
    big = estimate_size(parse_scenario({**BASE, "study": {"gpus": [16384]}}, "s.yaml"))
    jit = estimate_size(
        parse_scenario({**BASE, "study": {"gpus": [16384]}, "heterogeneity": {"jitter": 0.1}})
    )
    assert small.ranks == 64 and small.nodes == 16
    assert small.memory_bytes < big.memory_bytes < jit.memory_bytes
    assert jit.programs == big.programs < 16384  # jitter keeps the classes folded


def test_over_the_limit_is_exit_2_with_the_estimate(tmp_path, capsys):
    sc = parse_scenario({**BASE, "study": {"gpus": [16384]}}, "s.yaml")
    with pytest.raises(ConfigError, match="would not fit in memory: 16,384 ranks"):
        check_size(sc, max_memory_gb=0.05)
    check_size(sc, max_memory_gb=1000)  # raised by the flag
    import yaml

    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({**BASE, "study": {"gpus": [16384]}}))
    rc = main(["run", str(p), "--no-plots", "--out", str(tmp_path / "o"), "--max-memory", "0.05"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GB" in err and "--max-memory" in err


def test_huge_grid_is_refused_before_validating():
    axes = [
        parse_axis(f"seed={','.join(str(i) for i in range(1000))}"),
        parse_axis(f"workload.batch_per_gpu={','.join(str(i) for i in range(1, 1001))}"),
    ]
    with pytest.raises(ConfigError, match="grid too large"):
        make_grid(axes)


@pytest.mark.parametrize("value", [-1.0, 0.0, float("nan"), float("inf")])
def test_max_memory_must_be_a_positive_number(value):
    sc = parse_scenario(BASE, "s.yaml")
    with pytest.raises(ConfigError, match="--max-memory"):
        check_size(sc, max_memory_gb=value)


def test_topo_refuses_a_huge_build(tmp_path, capsys):
    t = tmp_path / "big.yaml"
    t.write_text(
        "max_nodes: 10000000\nnode: {template: pcie, gpus: 4}\n"
        "fabric: {type: fat_tree, nodes_per_leaf: 20}\n"
    )
    assert main(["topo", str(t), "--no-png"]) == 2
    assert "too large to build" in capsys.readouterr().err
    assert main(["topo", str(t), "--no-png", "--nodes", "4"]) == 0

"""One registry type, names checked at load, errors that survive pickling."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simcluster.errors import (
    ConfigError,
    SimclusterError,
    UnknownNameError,
    UserError,
)
from simcluster.registry import Registered, Registry, check_registered
from simcluster.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[1]


def test_registry_lookup_and_did_you_mean() -> None:
    reg: Registry[int] = Registry("test widget")
    reg.add("alpha", 1)
    reg.add("beta", 2)
    assert reg.lookup("alpha") == 1
    assert sorted(reg) == ["alpha", "beta"] and "beta" in reg and len(reg) == 2
    with pytest.raises(UnknownNameError) as e:
        reg.lookup("alpah", file="f.yaml", path="x.widget")
    msg = str(e.value)
    assert msg.startswith("f.yaml: x.widget: unknown test widget (got 'alpah')")
    assert "allowed: alpha, beta" in msg and "did you mean 'alpha'?" in msg
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("alpha", 3)


def test_registry_loader_runs_once_before_first_read() -> None:
    calls = []
    reg: Registry[str] = Registry("lazy thing", loader=lambda: calls.append(reg.add("x", "y")))
    assert calls == []
    assert reg.names() == ["x"] and reg.names() == ["x"]
    assert len(calls) == 1


def test_registered_marker_needs_the_name_in_every_registry() -> None:
    from simcluster.collectives import ALGORITHMS

    assert "tree" in ALGORITHMS["allreduce"] and "tree" not in ALGORITHMS["allgather"]
    mark = Registered("allreduce algorithm", "allgather algorithm", also=("auto",))
    assert mark.allowed() == ["auto", "ring"]
    with pytest.raises(UnknownNameError, match=r"p\.q: unknown allreduce algorithm / allgather"):
        mark.check("tree", None, "p.q")


def _scenario(**options) -> dict:
    return {
        "name": "t",
        "topology": "puhti",
        "profile": "v100-sxm2-32gb",
        "workload": {"model": "resnet18", "dataset": "cifar10", "batch_per_gpu": 8},
        "schedules": [{"name": "ddp"}, {"name": "hsadmm", "options": options}],
        "study": {"gpus": [4, 8]},
    }


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"inter_algorithm": "rnig"}, "schedules[1].options.inter_algorithm"),
        ({"intra_algorithm": "tree"}, "schedules[1].options.intra_algorithm"),  # no tree bcast
    ],
)
def test_unknown_algorithm_option_fails_at_load(options: dict, field: str) -> None:
    with pytest.raises(UnknownNameError) as e:
        parse_scenario(_scenario(**options), "s.yaml")
    assert str(e.value).startswith(f"s.yaml: {field}: unknown allreduce algorithm")


@pytest.mark.parametrize(
    ("schedule", "key", "bad"),
    [
        ("ddp", "algorithm", "rign"),
        ("topk", "algorithm", "tree"),
        ("ssfusion", "algorithm", "hierarchical"),
        ("nodebased", "algorithm", "x"),
    ],
)
def test_every_algorithm_option_is_checked(schedule: str, key: str, bad: str) -> None:
    data = _scenario()
    data["schedules"] = [{"name": schedule, "options": {key: bad}}]
    with pytest.raises(UnknownNameError, match=rf"schedules\[0\]\.options\.{key}: unknown"):
        parse_scenario(data, "s.yaml")
    data["schedules"] = [{"name": schedule, "options": {key: "ring"}}]
    parse_scenario(data, "s.yaml")


def test_network_model_checked_against_registry() -> None:
    data = {**_scenario(), "network_model": "maxmn"}
    with pytest.raises(UnknownNameError, match="network_model: unknown network model.*'maxmin'"):
        parse_scenario(data, "s.yaml")


def test_check_registered_uses_defaults() -> None:
    from simcluster.schedules import get_schedule

    check_registered(get_schedule("hsadmm").Options, {}, None, "o")


def test_sweep_jobs_reports_the_same_line(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(_scenario(inter_algorithm="rnig")))
    cmd = [sys.executable, "-m", "simcluster.cli"]
    run = subprocess.run([*cmd, "run", str(f)], capture_output=True, text=True, cwd=ROOT)
    sweep = subprocess.run(
        [*cmd, "sweep", str(f), "--jobs", "2", "--set", "study.gpus=4,8"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 2 and sweep.returncode == 2
    line = run.stderr.strip().removeprefix("simcluster: error: ")
    assert "schedules[1].options.inter_algorithm: unknown allreduce algorithm" in line
    assert line in sweep.stderr
    assert "Traceback" not in run.stderr + sweep.stderr


def _errors() -> list[BaseException]:
    from simcluster.engine import SimulationError
    from simcluster.partition.backends import MissingBackendError
    from simcluster.program import ProgramError
    from simcluster.topology.units import UnitError
    from simcluster.validation.metrics import MetricError
    from simcluster.workload.model import ShapeError

    return [
        UserError("plain"),
        ConfigError("f.yaml", "a.b", [1, 2], "bad", ["x", "y"], ["x"]),
        UnknownNameError("schedule", "ddq", ["ddp", "topk"], file="f.yaml", path="s[0].name"),
        SimulationError("stuck"),
        MissingBackendError("kahypar", "kahypar"),
        ProgramError("cycle"),
        UnitError("not a bandwidth", "e.g. 100 Gb/s"),
        MetricError("no record"),
        ShapeError("empty"),
    ]


@pytest.mark.parametrize("err", _errors(), ids=lambda e: type(e).__name__)
def test_every_error_pickles_unchanged(err: BaseException) -> None:
    assert isinstance(err, SimclusterError)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err) and back.args == err.args
    assert back.__dict__ == err.__dict__
    if isinstance(err, UserError):
        assert back.exit_code == 2


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda n: n.nvlink_mesh_node(4, [(0, 9, 1)]), r"pairs\[0\]: GPU indices .*0\.\.3"),
        (lambda n: n.nvlink_mesh_node(4, [(0, 1, 1), (1, 0, 2)]), r"pairs\[1\]: pair listed twice"),
        (lambda n: n.nvlink_mesh_node(4, [(0, 1, 0)]), r"pairs\[0\]: links must be at least 1"),
        (lambda n: n.pcie_node(0), r"gpus: must be an integer >= 1"),
        (lambda n: n.nvswitch_node(2.5, 1e9), r"gpus: must be an integer >= 1"),
        (lambda n: n.cpu_core_node(0), r"cores_per_socket: must be an integer >= 1"),
    ],
)
def test_node_builders_check_their_own_arguments(call, match: str) -> None:
    from simcluster.topology import nodes

    with pytest.raises(ConfigError, match=match):
        call(nodes)


def test_topology_names_are_checked_against_the_registries() -> None:
    from simcluster.topology.builders import FABRICS, NODE_BUILDERS
    from simcluster.topology.spec import spec_from_dict

    assert {"nvlink_full", "nvswitch", "pcie", "cpu_cores"} <= set(NODE_BUILDERS)
    assert set(FABRICS) == {"single_switch", "fat_tree"}
    with pytest.raises(UnknownNameError, match=r"t\.yaml: node\.template: .*'nvlink_mesh'"):
        spec_from_dict({"max_nodes": 1, "node": {"template": "nvlink_mseh", "gpus": 2}}, "t.yaml")
    with pytest.raises(UnknownNameError, match=r"fabric\.type: unknown fabric .*'fat_tree'"):
        spec_from_dict(
            {
                "max_nodes": 1,
                "node": {"template": "pcie", "gpus": 2},
                "fabric": {"type": "fattree"},
            },
            "t.yaml",
        )


def test_a_bad_pair_in_a_file_names_the_field() -> None:
    from simcluster.topology import build_cluster

    data = {
        "max_nodes": 1,
        "node": {"template": "nvlink_mesh", "gpus": 4, "nvlink": {"pairs": [[0, 1, 1], [2, 7, 1]]}},
    }
    with pytest.raises(ConfigError, match=r"t\.yaml: node\.nvlink\.pairs\[1\]: GPU indices"):
        build_cluster(data, 1, file="t.yaml")


def _raise_unknown(name: str) -> None:
    from simcluster.collectives import ALGORITHMS

    ALGORITHMS["allreduce"].lookup(name, "w.yaml", "schedules[0].options.algorithm")


def test_an_error_in_a_worker_process_arrives_unchanged() -> None:
    from concurrent.futures import ProcessPoolExecutor

    with pytest.raises(UnknownNameError) as here:
        _raise_unknown("rnig")
    with ProcessPoolExecutor(max_workers=1) as pool:
        with pytest.raises(UnknownNameError) as there:
            pool.submit(_raise_unknown, "rnig").result()
    assert str(there.value) == str(here.value)
    assert there.value.suggestions == ["ring"] and there.value.path.endswith("algorithm")

"""The Python API: load_scenario, run_scenario, records."""

from __future__ import annotations

import json
import math

import pytest

import simcluster
from simcluster.errors import ConfigError, UnknownNameError


def test_load_with_overrides_and_run() -> None:
    sc = simcluster.load_scenario("puhti64", {"study.gpus": [4, 8], "schedules[0].name": "ddp"})
    assert sc.study.gpus == [4, 8]
    result = simcluster.run_scenario(sc)
    rows = simcluster.records(result)
    assert len(rows) == len(sc.schedules) * 2
    assert [(r["schedule"], r["gpus"]) for r in rows][:2] == [("ddp", 4), ("ddp", 8)]
    for r in rows:
        assert all(not isinstance(v, dict | list) for v in r.values())  # flat: one column each
        assert r["iteration_time_s"] > 0 and math.isfinite(r["speedup"])
        assert "segments" not in r and any(k.startswith("breakdown_s.") for k in r)
    json.dumps(rows)  # plain values


def test_api_matches_the_study() -> None:
    from simcluster.study import run_scenario as study

    sc = simcluster.load_scenario("nodebased-ceta", {"study.gpus": [4]})
    assert simcluster.run_scenario(sc).records == study(sc).records


def test_network_model_override_is_checked() -> None:
    sc = simcluster.load_scenario("puhti64", {"study.gpus": [4]})
    closed = simcluster.run_scenario(sc, network_model="closed-form")
    assert {r["network_model"] for r in closed.records} == {"closed-form"}
    with pytest.raises(UnknownNameError, match="network_model"):
        simcluster.run_scenario(sc, network_model="maxmn")


def test_bad_override_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"puhti64\.yaml: workload\.batch_per_gpu: out of range"):
        simcluster.load_scenario("puhti64", {"workload.batch_per_gpu": 0})

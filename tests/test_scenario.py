"""Scenario loading: every bad input is one ConfigError naming file and field."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcluster.errors import ConfigError, UserError
from simcluster.scenario import Scenario, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]
PUHTI = ROOT / "scenarios" / "puhti64.yaml"


def base() -> dict:
    return yaml.safe_load(PUHTI.read_text())


def error_for(data, file="s.yaml") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_scenario(data, file)
    return info.value


def test_shipped_scenarios_load():
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        sc = load_scenario(path)
        assert sc.source == str(path)


def test_misspelled_key_suggests_the_right_one():
    d = base()
    d["workload"]["batch_per_gpus"] = d["workload"].pop("batch_per_gpu")
    err = error_for(d)
    assert err.path == "workload.batch_per_gpus"
    msg = str(err)
    assert msg.startswith("s.yaml: workload.batch_per_gpus: unknown key")
    assert "did you mean 'batch_per_gpu'" in msg


def test_wrong_type_names_the_field_and_value():
    d = base()
    d["workload"]["batch_per_gpu"] = "lots"
    err = error_for(d)
    assert err.path == "workload.batch_per_gpu"
    assert "'lots'" in str(err)
    assert "integer" in str(err)


def test_out_of_range():
    d = base()
    d["workload"]["grad_accumulation"] = 0
    err = error_for(d)
    assert err.path == "workload.grad_accumulation"
    assert "out of range" in str(err) and ">= 1" in str(err)


def test_unknown_model_suggests():
    d = base()
    d["workload"]["model"] = "resnet125"
    err = error_for(d)
    assert err.path == "workload.model"
    assert "unknown model" in str(err)
    assert "resnet152" in str(err).split("did you mean")[1]


@pytest.mark.parametrize(
    "field, value, path, hint",
    [
        ("topology", "puhtii", "topology", "puhti"),
        ("profile", "v100-sxm2-32g", "profile", "v100-sxm2-32gb"),
        ("network_profile", "nccl-spc", "network_profile", "nccl-spec"),
    ],
)
def test_unknown_names(field, value, path, hint):
    d = base()
    d[field] = value
    err = error_for(d)
    assert err.path == path
    assert f"did you mean '{hint}'" in str(err)


def test_unknown_schedule_and_bad_option():
    d = base()
    d["schedules"][0]["name"] = "dpp"
    err = error_for(d)
    assert err.path == "schedules[0].name"
    assert "did you mean 'ddp'" in str(err)
    d = base()
    d["schedules"][0]["options"] = {"bucket_cap": 10}
    err = error_for(d)
    assert err.path == "schedules[0].options.bucket_cap"
    assert "did you mean 'bucket_cap_mb'" in str(err)
    d = base()
    d["schedules"][0]["options"] = {"algorithm": "rnig"}
    err = error_for(d)
    assert err.path == "schedules[0].options.algorithm"
    assert "did you mean 'ring'" in str(err)


def test_literal_choice_lists_allowed():
    d = base()
    d["workload"]["precision"] = "fp16"
    err = error_for(d)
    assert err.path == "workload.precision"
    assert "allowed: fp32, tf32, amp" in str(err)


def test_gpu_counts_must_fill_nodes_and_fit():
    d = base()
    d["study"]["gpus"] = [8, 10]
    err = error_for(d)
    assert err.path == "study.gpus[1]"
    assert "multiple of 4" in str(err)
    d["study"]["gpus"] = [8, 4096]
    err = error_for(d)
    assert err.path == "study.gpus[1]" and "at most" in str(err)


def test_missing_field():
    d = base()
    del d["topology"]
    err = error_for(d)
    assert err.path == "topology" and "missing" in str(err)


def test_model_is_needed_unless_every_schedule_brings_its_network():
    d = base()
    del d["workload"]["model"]
    err = error_for(d)
    assert err.path == "workload.model"
    assert "schedule 'ddp' trains a zoo model" in str(err)
    d["schedules"] = [{"name": "spmv", "options": {"neurons": 256, "layers": 2}}]
    assert parse_scenario(d, "s.yaml").workload.model is None


def test_yaml_syntax_error_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nworkload: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: <yaml>: not valid YAML"):
        load_scenario(bad)
    with pytest.raises(UserError, match="no such scenario file"):
        load_scenario(tmp_path / "nope.yaml")


def test_yaml_is_loaded_safely(tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text("name: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_scenario(evil)


# --- property tests ---------------------------------------------------------------------

_KEYS = [
    ("name",),
    ("topology",),
    ("profile",),
    ("workload", "model"),
    ("workload", "batch_per_gpu"),
    ("workload", "precision"),
    ("workload", "epochs"),
    ("study", "kind"),
    ("study", "gpus"),
    ("seed",),
    ("schedules",),
]
_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.lists(st.integers(-5, 100), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(_KEYS), value=_values)
def test_any_mutation_is_accepted_or_a_config_error(key, value):
    d = copy.deepcopy(base())
    target = d
    for k in key[:-1]:
        target = target[k]
    target[key[-1]] = value
    try:
        parse_scenario(d, "p.yaml")
    except ConfigError as err:
        assert str(err).startswith("p.yaml: ")
        assert err.path  # always names a field


@settings(max_examples=60, deadline=None)
@given(extra=st.text(min_size=1, max_size=15).filter(lambda s: s.isidentifier()))
def test_any_unknown_top_level_key_is_rejected(extra):
    d = base()
    if extra in d or extra in Scenario.model_fields:  # a real key, given or optional
        return
    d[extra] = 1
    err = error_for(d)
    assert err.path == extra and "unknown key" in str(err)


def test_a_schedule_may_be_its_bare_name():
    d = base()
    d["schedules"] = ["ddp", {"name": "topk", "options": {"density": 0.01}}]
    sc = parse_scenario(d, "s.yaml")
    assert [s.name for s in sc.schedules] == ["ddp", "topk"]
    assert sc.schedules[0].options == {}
    d["schedules"] = [3]
    err = error_for(d)
    assert err.path == "schedules[0]" and "its name or a mapping" in str(err)
    d["schedules"] = ["ddpp"]
    assert "did you mean 'ddp'" in str(error_for(d))

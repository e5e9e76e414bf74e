"""Every number in device and network profiles and topologies is checked like scenarios'."""

from __future__ import annotations

import json

import pytest

from simcluster.compute import load_network_profile, load_profile
from simcluster.errors import ConfigError
from simcluster.paths import network_profiles_dir, profiles_dir
from simcluster.scenario import parse_scenario
from simcluster.topology.spec import spec_from_dict


def _write(tmp_path, data, name="p.json"):
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return str(p)


def _spec():
    return json.loads((profiles_dir() / "v100-sxm2-32gb.json").read_text())


@pytest.mark.parametrize(
    "path, value, match",
    [
        (("memory_bandwidth",), 0, "out of range"),
        (("memory_bandwidth",), -1.0, "out of range"),
        (("memory_bandwidth",), 1e-300, "out of range"),
        (("memory_bandwidth",), "900 GB/s", "wrong type"),
        (("memory_bandwidth",), None, "wrong type"),
        (("memory_bandwidth",), [1e12], "wrong type"),
        (("memory_bandwidth",), True, "wrong type"),
        (("launch_overhead_s",), -1, "out of range"),
        (("peak_flops", "fp32"), 0.0, "out of range"),
        (("efficiency", "conv"), 1.5, "out of range"),
        (("host", "efficiency"), 0, "out of range"),
        (("memory_efficiency",), False, "wrong type"),
        (("memory_bytes",), "900 GB/s", "wrong type"),
        (("memory_bytes",), 0, "out of range"),
        (("sm_count",), 0, "out of range"),
        (("sm_count",), 80.5, "wrong type"),
        (("host", "ddp_hook_s"), -1e-6, "out of range"),
        (("host", "ddp_bucket_s"), "0.2 ms", "wrong type"),
    ],
)
def test_bad_spec_numbers_are_config_errors(tmp_path, path, value, match):
    data = _spec()
    section = data["device"]
    for key in path[:-1]:
        section = section[key]
    section[path[-1]] = value
    with pytest.raises(ConfigError, match=match) as err:
        load_profile(_write(tmp_path, data))
    assert "device." + ".".join(path) in str(err.value)


def test_spec_needs_fp32_peak(tmp_path):
    data = _spec()
    data["device"]["peak_flops"] = {"fp16_tensor": 1e14}
    with pytest.raises(ConfigError, match="device.peak_flops"):
        load_profile(_write(tmp_path, data))


@pytest.mark.parametrize(
    "key, value",
    [
        ("per_message_overhead_s", -1),
        ("per_message_overhead_s", "5 us"),
        ("per_message_overhead_s", None),
        ("link_efficiency", {"nvlink": 0}),
        ("link_efficiency", {"nvlink": True}),
        ("link_efficiency", {"nvlink": 2.0}),
        ("link_efficiency", [1]),
    ],
)
def test_bad_network_numbers_are_config_errors(tmp_path, key, value):
    data = json.loads((network_profiles_dir() / "nccl-spec.json").read_text())
    data["network"][key] = value
    with pytest.raises(ConfigError, match=f"network.{key}"):
        load_network_profile(_write(tmp_path, data))


def test_measured_coefficients_are_real_numbers(tmp_path):
    data = json.loads((profiles_dir() / "cpu-xeon-1core.json").read_text())
    fit = data["device"]["kernels"]["elementwise"]
    fit["coef"][0] = "1e-6"
    with pytest.raises(ConfigError, match=r"kernels.elementwise.coef\[0\]: not a number"):
        load_profile(_write(tmp_path, data))
    fit["coef"][0] = True
    with pytest.raises(ConfigError, match="not a number"):
        load_profile(_write(tmp_path, data))


def test_ddp_host_costs_read_from_a_profile(tmp_path):
    """``host.ddp_hook_s`` / ``roofline.host.ddp_bucket_s`` replace the measured defaults;
    a bad one is named by its field path."""
    data = _spec()
    data["device"]["host"]["ddp_hook_s"] = 5e-5
    assert load_profile(_write(tmp_path, data)).ddp_hook_s == 5e-5
    meas = json.loads((profiles_dir() / "cpu-xeon-1core.json").read_text())
    meas["device"]["roofline"].setdefault("host", {})["ddp_bucket_s"] = 1e-3
    assert load_profile(_write(tmp_path, meas, "m.json")).ddp_bucket_s == 1e-3
    meas["device"]["roofline"]["host"]["ddp_bucket_s"] = "1 ms"
    with pytest.raises(ConfigError, match=r"device.roofline.host.ddp_bucket_s: not a number"):
        load_profile(_write(tmp_path, meas, "m.json"))
    meas["device"]["roofline"]["host"]["ddp_bucket_s"] = 2.0
    with pytest.raises(ConfigError, match="ddp_bucket_s"):
        load_profile(_write(tmp_path, meas, "m.json"))


@pytest.mark.parametrize(
    "host, match",
    [
        ("fast", r"device.roofline.host: not a mapping \(got 'fast'\)"),
        (None, r"device.roofline.host: not a mapping \(got None\)"),
        ([1e-3], r"device.roofline.host: not a mapping"),
        ({"ddp_hooks_s": 1e-5}, r"host.ddp_hooks_s: unknown key .*did you mean 'ddp_hook_s'"),
    ],
)
def test_measured_roofline_host_is_a_mapping_of_known_keys(tmp_path, host, match):
    """A measured profile's ``device.roofline.host`` that is not a mapping, or a misspelt
    key in it, was ignored: the DDP defaults were used without a word."""
    meas = json.loads((profiles_dir() / "cpu-xeon-1core.json").read_text())
    meas["device"]["roofline"]["host"] = host
    with pytest.raises(ConfigError, match=match):
        load_profile(_write(tmp_path, meas, "m.json"))


def test_schema_version_true_is_not_1(tmp_path):
    data = _spec()
    data["schema_version"] = True
    with pytest.raises(ConfigError, match="schema_version"):
        load_profile(_write(tmp_path, data))


def test_shipped_profiles_all_load():
    from simcluster.compute import list_network_profiles, list_profiles

    for name in list_profiles():
        load_profile(name)
    for name in list_network_profiles():
        load_network_profile(name)


BASE = {
    "name": "x",
    "topology": "puhti",
    "profile": "v100-sxm2-32gb",
    "workload": {"model": "resnet18", "dataset": "cifar10", "batch_per_gpu": 32},
    "schedules": [{"name": "ddp"}],
    "study": {"gpus": [4]},
}


@pytest.mark.parametrize(
    "field, value",
    [
        ("batch_per_gpu", True),
        ("batch_per_gpu", "32"),
        ("batch_per_gpu", 32.0),
        ("epochs", float("nan")),
        ("epochs", float("inf")),
        ("epochs", "1"),
    ],
)
def test_scenario_numbers_are_not_coerced(field, value):
    data = json.loads(json.dumps(BASE))
    data["workload"][field] = value
    with pytest.raises(ConfigError, match=f"workload.{field}"):
        parse_scenario(data, "s.yaml")


@pytest.mark.parametrize("name", [".", "..", "...", "x" * 200])
def test_scenario_name_cannot_escape_results(name):
    with pytest.raises(ConfigError, match="name"):
        parse_scenario({**BASE, "name": name}, "s.yaml")


TOPO = {"max_nodes": 4, "node": {"template": "pcie", "gpus": 2}}


@pytest.mark.parametrize(
    "patch",
    [
        {"nics": {"count": 10**9}},
        {"nics": {"count": True}},
        {"nics": {"bandwidth": 5e-324}},
        {"nics": {"bandwidth": "1e-300 B/s"}},
        {"nics": {"latency": 1e9}},
        {"gpus": "4"},
    ],
)
def test_topology_numbers_are_bounded(patch):
    data = json.loads(json.dumps(TOPO))
    data["node"].update(patch)
    with pytest.raises(ConfigError, match="node."):
        spec_from_dict(data, "t.yaml")


def test_topology_oversubscription_inf():
    data = {**TOPO, "fabric": {"type": "fat_tree", "oversubscription": float("inf")}}
    with pytest.raises(ConfigError, match="fabric.oversubscription"):
        spec_from_dict(data, "t.yaml")


def _with_table(table, key="device.dgc"):
    data = _spec()
    data["device"]["sparsify_measured"] = {key: table}
    return data


_TABLE = {"numel": [1000, 10000], "seconds": [1e-3, 2e-3], "density": 0.01, "source": "test"}


@pytest.mark.parametrize(
    "table, key, match",
    [
        ({**_TABLE, "numel": [10000, 1000]}, "device.dgc", "strictly increasing"),
        ({**_TABLE, "seconds": [1e-3]}, "device.dgc", "seconds"),
        ({**_TABLE, "seconds": [1e-3, 2e-3, 3e-3]}, "device.dgc", "one time per size"),
        ({**_TABLE, "seconds": [1e-3, -2e-3]}, "device.dgc", "out of range"),
        ({**_TABLE, "density": 0}, "device.dgc", "out of range"),
        (_TABLE, "device.dcg", "allowed: device.exact"),
    ],
)
def test_bad_sparsify_tables_are_config_errors(tmp_path, table, key, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_profile(_write(tmp_path, _with_table(table, key)))
    assert "device.sparsify_measured" in str(err.value)


def test_sparsify_table_replaces_the_roofline_for_its_method_only(tmp_path):
    prof = load_profile(_write(tmp_path, _with_table(_TABLE)))
    plain = load_profile(_write(tmp_path, _spec(), "plain.json"))
    t = prof.kernel_time
    assert t("sparsify", numel=10, density=0.01, method="dgc") == 1e-3  # floor below
    assert t("sparsify", numel=5500, density=0.01, method="dgc") == pytest.approx(1.5e-3)
    assert t("sparsify", numel=19000, density=0.01, method="dgc") == pytest.approx(3e-3)
    for kw in ({"method": "exact"}, {"method": "dgc", "where": "host"}):
        assert t("sparsify", numel=5500, density=0.01, **kw) == plain.kernel_time(
            "sparsify", numel=5500, density=0.01, **kw
        )


def _measured_with_table(table, key="device.dgc"):
    data = json.loads((profiles_dir() / "cpu-xeon-1core.json").read_text())
    data["device"]["sparsify_measured"] = {key: table}
    return data


@pytest.mark.parametrize(
    "table, key, match",
    [
        ({**_TABLE, "numel": [10000, 1000]}, "device.dgc", "strictly increasing"),
        ({**_TABLE, "seconds": [1e-3, "2 ms"]}, "device.dgc", "wrong type"),
        (_TABLE, "host.dcg", "allowed: device.exact"),
        ([1e-3], None, "must be a mapping"),
    ],
)
def test_bad_sparsify_tables_in_a_measured_profile_are_config_errors(tmp_path, table, key, match):
    data = _measured_with_table(table, key or "device.dgc")
    if key is None:
        data["device"]["sparsify_measured"] = table
    with pytest.raises(ConfigError, match=match) as err:
        load_profile(_write(tmp_path, data, "m.json"))
    assert "device.sparsify_measured" in str(err.value)


def test_sparsify_table_replaces_a_measured_fit_for_its_method_only(tmp_path):
    """A measured or derived profile may carry a spec profile's sourced per-call table
    (``calibrate derive`` copies the target's); it replaces that side's and method's fit."""
    prof = load_profile(_write(tmp_path, _measured_with_table(_TABLE), "m.json"))
    plain = load_profile(str(profiles_dir() / "cpu-xeon-1core.json"))
    t = prof.kernel_time
    assert t("sparsify", numel=10, density=0.01, method="dgc") == 1e-3
    assert t("sparsify", numel=5500, density=0.01, method="dgc") == pytest.approx(1.5e-3)
    for kw in ({"method": "exact"}, {"method": "dgc", "where": "host"}):
        assert t("sparsify", numel=5500, density=0.01, **kw) == plain.kernel_time(
            "sparsify", numel=5500, density=0.01, **kw
        )

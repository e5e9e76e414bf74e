"""Fitting ONE network-profile constant of a cluster to ONE reference case
(``python -m simcluster.validation.fit``, VALIDATION.md)."""

from __future__ import annotations

import pytest


def test_bisect_log_finds_the_root_of_a_monotone_function():
    from simcluster.validation.fit import bisect_log

    x, v = bisect_log(lambda e: 0.5 / e, 0.001, 1.0, 13.4, rtol=1e-6, max_steps=80)
    assert v == pytest.approx(13.4, rel=1e-6)
    assert x == pytest.approx(0.5 / 13.4, rel=1e-6)


def test_bisect_log_refuses_a_bracket_that_misses_the_target():
    from simcluster.errors import UserError
    from simcluster.validation.fit import bisect_log

    with pytest.raises(UserError, match="does not straddle"):
        bisect_log(lambda e: 1 / e, 0.5, 1.0, 100.0)


def test_fit_case_names_an_unknown_case(tmp_path, capsys):
    from simcluster.validation.fit import main as fit_main

    code = fit_main(
        [
            "--case",
            "prunex-comm-ddp-46",
            "--network-profile",
            "nccl-spec",
            "--param",
            "network.link_efficiency.infiniband",
            "--name",
            "x",
            "--out",
            str(tmp_path / "x.json"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "prunex-comm-ddp-64" in err and "Traceback" not in err


def test_puhti_fitted_profile_names_its_case():
    """The Puhti network profile is fitted to exactly one case, which therefore leaves
    the validation summary (VALIDATION.md)."""
    from simcluster.compute import load_network_profile

    prof = load_network_profile("nccl-puhti-fitted")
    assert prof.kind == "fitted"
    assert prof.provenance["fitted_from"] == ["prunex-comm-ddp-64"]
    assert 0 < prof.link_efficiency["infiniband"] < 0.9


def _flat(x, path=""):
    if isinstance(x, dict):
        return {k2: v for k, v in x.items() for k2, v in _flat(v, f"{path}.{k}").items()}
    return {path: x}


def test_shipped_fitted_profiles_are_their_base_but_the_fitted_field():
    """A fitted profile is its base plus one constant: a base that gained fields since
    the fit (protocol caps, NVLS) must be refitted, not left behind in the copy."""
    import json

    from simcluster.paths import network_profiles_dir

    folder = network_profiles_dir()
    fitted = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    fitted = [d for d in fitted if d.get("kind") == "fitted"]
    assert fitted
    for d in fitted:
        fit = d["provenance"]["fit"]
        base = json.loads((folder / f"{fit['base_profile']}.json").read_text())
        field = "." + fit["parameter"].removeprefix("network.")
        mine, theirs = _flat(d["network"]), _flat(base["network"])
        differ = {k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k)}
        assert differ <= {field} | {k for k in differ if k.endswith(".source")}, (d["name"], differ)


def test_fit_says_its_field_is_fitted(tmp_path, capsys):
    import json

    from simcluster.validation.fit import main as fit_main

    out = tmp_path / "f.json"
    code = fit_main(
        [
            "--case", "ssfusion-fig9-allreduce-resnet152-64", "--network-profile", "nccl-spec",
            "--param", "network.link_efficiency.infiniband", "--lo", "0.005", "--hi", "0.9",
            "--name", "t", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    d = json.loads(out.read_text())
    assert "is fitted to ssfusion-fig9-allreduce-resnet152-64" in d["provenance"]["assumptions"][-1]

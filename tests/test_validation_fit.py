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

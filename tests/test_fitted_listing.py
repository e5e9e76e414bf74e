"""The run report lists every fitted constant with the case it comes from."""

from __future__ import annotations

from simcluster.compute import load_network_profile, load_profile


def test_fitted_constants_are_listed_with_their_case():
    from simcluster.report.table import fitted_constants

    puhti = load_network_profile("nccl-puhti-fitted")
    lines = fitted_constants([load_profile("v100-sxm2-32gb"), puhti])
    assert len(lines) == 1
    value = puhti.link_efficiency["infiniband"]
    assert f"network.link_efficiency.infiniband = {value:g}" in lines[0]
    assert "fitted to prunex-comm-ddp-64" in lines[0]
    assert fitted_constants([load_network_profile("nccl-spec")]) == []

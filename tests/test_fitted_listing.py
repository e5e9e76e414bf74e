"""The run report lists every fitted constant with the case it comes from."""

from __future__ import annotations

import pytest

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


def test_run_report_lists_the_fitted_constant_under_the_table(tmp_path, capsys):
    from pathlib import Path

    import yaml

    from simcluster.cli import main

    root = Path(__file__).resolve().parents[1]
    d = yaml.safe_load((root / "scenarios" / "puhti64.yaml").read_text())
    d["study"]["gpus"] = [8]
    d["schedules"] = [{"name": "ddp"}]
    d["workload"].update(model="resnet18-cifar", input_size=32, epochs=1)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(d))
    assert main(["run", str(path), "--no-plots", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    table, _, rest = out.partition("fitted constants")
    assert "speedup" in table  # the listing comes after the scaling table
    assert "nccl-puhti-fitted: network.link_efficiency.infiniband" in rest
    assert "fitted to prunex-comm-ddp-64" in rest


@pytest.mark.parametrize(
    ("edit", "field", "said"),
    [
        (lambda f: f.update(reference="0.5 s"), "provenance.fit.reference", "finite number"),
        (lambda f: f.update(value=float("nan")), "provenance.fit.value", "finite number"),
        (lambda f: f.pop("case"), "provenance.fit.case", "missing field"),
        (lambda f: f.update(parameter=3), "provenance.fit.parameter", "must be a string"),
    ],
)
def test_a_malformed_fit_record_is_refused_at_load(tmp_path, capsys, edit, field, said):
    """The run prints provenance.fit under its table: a record it cannot print is a
    load error naming the file and field (was: a traceback after the tables)."""
    import json
    from pathlib import Path

    from simcluster.cli import main

    root = Path(__file__).resolve().parents[1]
    data = json.loads((root / "calibrate/profiles/network/nccl-puhti-fitted.json").read_text())
    edit(data["provenance"]["fit"])
    prof = tmp_path / "bad-fit.json"
    prof.write_text(json.dumps(data))
    text = (root / "scenarios" / "puhti64.yaml").read_text()
    scen = tmp_path / "s.yaml"
    scen.write_text(text.replace("network_profile: nccl-puhti-fitted", f"network_profile: {prof}"))
    assert main(["run", str(scen), "--no-plots", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert str(prof) in err and field in err and said in err

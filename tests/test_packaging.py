"""The package carries its data; names find shipped files from any folder; layering."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from simcluster import __version__, paths
from simcluster.cli import main
from simcluster.devtools import layers
from simcluster.scenario import load_scenario

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
#: installed package -> folder of the checkout
HOMES = {"simcluster": "simcluster", **CONFIG["package-dir"]}


def _folder(package: str) -> Path:
    best = max((p for p in HOMES if package == p or package.startswith(p + ".")), key=len)
    rest = package[len(best) :].lstrip(".").split(".") if package != best else []
    return ROOT / HOMES[best] / Path(*rest) if rest else ROOT / HOMES[best]


def test_every_package_is_listed_in_pyproject() -> None:
    found = {
        ".".join(("simcluster", *p.parent.relative_to(ROOT / "simcluster").parts))
        for p in (ROOT / "simcluster").rglob("__init__.py")
    }
    found |= {
        ".".join(("simcluster", *p.parent.relative_to(ROOT).parts))
        for p in (ROOT / "calibrate").rglob("__init__.py")
    }
    listed = set(CONFIG["packages"])
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    for p in listed:
        assert _folder(p).is_dir(), p


def test_every_data_file_is_package_data() -> None:
    globs = {pkg: pats for pkg, pats in CONFIG["package-data"].items()}
    wanted = [
        *(ROOT / "topologies").glob("*"),
        *(f for f in (ROOT / "scenarios").rglob("*") if f.is_file()),
        *(f for f in (ROOT / "calibrate" / "profiles").rglob("*") if f.is_file()),
        *(ROOT / "calibrate" / "jobs").glob("*"),
    ]
    for f in wanted:
        ok = any(
            f.is_relative_to(_folder(pkg))
            and any(fnmatch.fnmatch(str(f.relative_to(_folder(pkg))), pat) for pat in pats)
            for pkg, pats in globs.items()
        )
        assert ok, f"{f.relative_to(ROOT)} is not package data"


@pytest.mark.slow
def test_wheel_holds_code_and_data(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("simcluster-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in [
        "simcluster/cli.py",
        "simcluster/calibrate/cli.py",
        "simcluster/calibrate/live/run.py",
        "simcluster/calibrate/profiles/v100-sxm2-32gb.json",
        "simcluster/calibrate/profiles/network/nccl-spec.json",
        "simcluster/calibrate/profiles/input/cifar10-autoaugment.json",
        "simcluster/topologies/puhti.yaml",
        "simcluster/scenarios/puhti64.yaml",
        "simcluster/scenarios/references/prunex.yaml",
        "simcluster/partition/data/kahypar_km1_direct_fast.ini",
    ]:
        assert must in names, must
    assert not any(n.startswith(("calibrate/", "tests/")) for n in names)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"simcluster {__version__}"


def test_shipped_scenario_by_name_from_any_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    sc = load_scenario("puhti64")
    assert sc.name == "puhti64" and Path(sc.source) == paths.scenarios_dir() / "puhti64.yaml"
    assert "puhti64" in paths.list_scenarios()
    with pytest.raises(Exception, match="no such scenario file"):
        load_scenario("puhti65")


def test_relative_paths_resolve_against_the_scenario_file(tmp_path, monkeypatch) -> None:
    d = tmp_path / "study"
    d.mkdir()
    topo = yaml.safe_load((paths.topologies_dir() / "puhti.yaml").read_text())
    (d / "mine.yaml").write_text(yaml.safe_dump(topo))
    data = yaml.safe_load((paths.scenarios_dir() / "puhti64.yaml").read_text())
    data["topology"] = "mine.yaml"
    (d / "s.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)  # not the scenario's folder
    sc = load_scenario("study/s.yaml")
    assert Path(sc.topology) == Path("study/mine.yaml")


def test_user_topology_folder_extends_the_search(tmp_path, monkeypatch, capsys) -> None:
    topo = yaml.safe_load((paths.topologies_dir() / "puhti.yaml").read_text())
    (tmp_path / "my-puhti.yaml").write_text(yaml.safe_dump(topo))
    from simcluster.topology import list_topologies, load_topology

    assert "my-puhti" not in list_topologies()
    monkeypatch.setenv(paths.TOPOLOGIES_ENV, str(tmp_path))
    assert "my-puhti" in list_topologies() and "puhti" in list_topologies()
    assert load_topology("my-puhti", 2).num_nodes == 2
    monkeypatch.delenv(paths.TOPOLOGIES_ENV)
    assert main(["--topologies", str(tmp_path), "topo", "my-puhti", "--no-png"]) == 0
    assert f"file: {tmp_path / 'my-puhti.yaml'}" in capsys.readouterr().out


def test_layering_of_architecture_md_holds() -> None:
    bad = layers.check(ROOT)
    assert not bad, "\n".join(map(str, bad))


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("schedules", "simcluster.engine"),  # upward
        ("topology", "simcluster.network"),
        ("network", "simcluster.schedules.base"),
        ("program", "simcluster.collectives.base"),  # foundation imports a layer
        ("workload", "simpy"),
        ("compute", "torch"),
        ("calibrate", "simcluster.study"),
        ("study", "calibrate.cli"),
    ],
)
def test_layering_check_catches_wrong_way_imports(importer: str, imported: str) -> None:
    assert layers._allowed(importer, imported) is not None


def test_layering_command_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "simcluster.devtools.layers"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "layers: ok" in out.stdout


def test_a_missing_references_folder_is_an_error(tmp_path, capsys) -> None:
    assert main(["validate", "--references", str(tmp_path / "none"), "--no-plot"]) == 2
    assert "--references: no such folder" in capsys.readouterr().err


def test_list_shows_data_and_registries(capsys) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for section, one in [
        ("topologies:", "puhti"),
        ("device profiles:", "v100-sxm2-32gb"),
        ("network profiles:", "nccl-spec"),
        ("scenarios:", "puhti64"),
        ("network models:", "closed-form"),
        ("node templates:", "nvswitch"),
        ("fabrics:", "fat_tree"),
    ]:
        after = out.split(section, 1)[1]
        assert one in after.splitlines()[1], section
    assert "halving-doubling" in out


def test_calibrate_imports_itself_relatively() -> None:
    """Installed, calibrate/ is ``simcluster.calibrate``: an absolute ``calibrate.``
    import inside it works only from the checkout's root (``simcluster calibrate gloo``
    run from another folder failed after its 36 s sweep, importing calibrate.live)."""
    import ast

    bad = []
    for f in sorted((ROOT / "calibrate").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            bad += [f"{f.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                    if n == "calibrate" or n.startswith("calibrate.")]  # fmt: skip
    assert not bad, "absolute imports of calibrate inside it:\n" + "\n".join(bad)


def test_calibrate_gloo_describes_the_machine_from_any_folder(tmp_path: Path) -> None:
    code = "from simcluster.calibrate.gloo import _machine; print(_machine()['cpus'])"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.strip()) >= 1

"""The import layering of ARCHITECTURE.md, checked on the source.

``python -m simcluster.devtools.layers`` parses every module of ``simcluster/``
and ``calibrate/`` (imports at any depth, lazy ones inside functions included)
and exits 1 listing each import that points the wrong way; 0 when there is none.

Rules: a unit may import what the "knows" column of ARCHITECTURE.md's layer
table says it knows (``KNOWS``, every entry a layer below it in ``LAYERS``), and
the foundation modules (errors, registry, paths, schema, inputs: the guarded file
reader, atomic: writes by temporary file and rename, workers: process pools that
die with their parent, program: the op vocabulary) from anywhere; the foundation
imports only itself. So a schedule never reaches the engine (SimPy) or a link,
and the network never knows what a schedule is. Calibration imports nothing of
the simulator but the profile format (compute), the model zoo's shapes
(workload), the progress bar and, to fit network profiles to nccl-tests logs,
the network side's own model (topology, collectives, network, the simulated
nccl-tests table), and only the ``calibrate`` command imports calibration.
SimPy is for the engine and the network; torch is for calibration only.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LAYERS", "KNOWS", "FOUNDATION", "Violation", "check", "main"]

#: top to bottom; a unit is ``simcluster.<unit>`` (a module or a subpackage)
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("interface", frozenset({"cli", "api", "report", "sweep", "validation", "devtools"})),
    ("set-up", frozenset({"study", "simulation", "sizing"})),
    ("scenario", frozenset({"scenario"})),
    ("schedules", frozenset({"schedules"})),
    ("partition", frozenset({"partition"})),
    ("workload", frozenset({"workload"})),
    ("compute", frozenset({"compute"})),
    ("engine", frozenset({"engine"})),
    ("collectives", frozenset({"collectives"})),
    ("network", frozenset({"network"})),
    ("topology", frozenset({"topology"})),
]
_BELOW_INTERFACE = frozenset(u for _, units in LAYERS[1:] for u in units)
#: unit -> the units it may import (ARCHITECTURE.md, column "knows")
KNOWS: dict[str, frozenset[str]] = {
    **{u: _BELOW_INTERFACE for u in LAYERS[0][1]},  # interface: everything below it
    "study": _BELOW_INTERFACE - {"study"},
    "simulation": _BELOW_INTERFACE - {"study", "simulation", "sizing"},
    "sizing": _BELOW_INTERFACE - {"study", "simulation", "sizing"},
    # names of topologies, profiles, models, schedules (and the registries it checks)
    "scenario": frozenset(
        {"topology", "compute", "workload", "schedules", "collectives", "network"}
    ),
    "schedules": frozenset({"workload", "partition", "compute"}),  # + op types (program)
    "partition": frozenset({"workload"}),
    "workload": frozenset(),
    "compute": frozenset(),
    "engine": frozenset({"collectives", "network"}),  # + ops (program)
    "collectives": frozenset({"network", "topology"}),
    "network": frozenset({"topology"}),
    "topology": frozenset(),
}
#: importable from every layer; imports nothing above itself
FOUNDATION = frozenset(
    {"", "errors", "registry", "paths", "schema", "program", "inputs", "workers", "atomic"}
)
#: what calibration may use of the simulator (besides the foundation)
#: (``calibrate nccl-tests`` fits a network profile with the simulator's own collective
#: model: topology, collectives, network and the simulated nccl-tests table)
CALIBRATE_MAY_USE = frozenset(
    {
        "compute",
        "workload",
        "report.progress",
        "topology",
        "collectives",
        "network",
        "report.nccl_tests",
    }
)
#: third-party packages confined to some units
CONFINED = {"simpy": frozenset({"engine", "network"}), "torch": frozenset({"calibrate"})}


@dataclass(frozen=True)
class Violation:
    file: str
    line: int
    importer: str
    imported: str
    rule: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.importer} imports {self.imported}: {self.rule}"


def _rank(unit: str) -> int | None:
    return next((i for i, (_, units) in enumerate(LAYERS) if unit in units), None)


def _unit(module: str) -> str | None:
    """``simcluster.schedules.ddp`` -> ``schedules``; ``calibrate.x`` -> ``calibrate``."""
    parts = module.split(".")
    if parts[0] == "calibrate" or parts[:2] == ["simcluster", "calibrate"]:
        return "calibrate"
    if parts[0] != "simcluster":
        return None
    return parts[1] if len(parts) > 1 else ""


def _imports(tree: ast.AST, module: str, is_pkg: bool) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            for a in node.names:  # ``from simcluster import paths`` names a module
                named = base == "simcluster" and not a.name.startswith("_")
                yield node.lineno, f"{base}.{a.name}" if named else base


def _allowed(src: str, dst_module: str) -> str | None:
    """None when ``src`` may import ``dst_module``, else the rule it breaks."""
    top = dst_module.split(".")[0]
    if top in CONFINED and src not in CONFINED[top]:
        return f"{top} is only for {', '.join(sorted(CONFINED[top]))}"
    dst = _unit(dst_module)
    if dst is None or dst == src:
        return None
    if src == "calibrate":
        sub = ".".join(dst_module.split(".")[1:3])
        if dst in FOUNDATION or dst in CALIBRATE_MAY_USE or sub in CALIBRATE_MAY_USE:
            return None
        return "calibration uses only the profile format, the zoo and the progress bar"
    if dst == "calibrate":
        return None if src == "cli" else "only the calibrate command imports calibration"
    if dst in FOUNDATION:
        return None
    if src == "" and dst == "api":  # ``simcluster.load_scenario``: loaded on first use
        return None
    if src in FOUNDATION:
        return "the foundation imports no layer"
    rs, rd = _rank(src), _rank(dst)
    if rs is None or rd is None:
        return f"{src if rs is None else dst} is in no layer of LAYERS"
    if dst in KNOWS.get(src, frozenset()) or rs == rd:  # same layer: siblings
        return None
    if rd < rs:
        return f"upward: {LAYERS[rs][0]} may not import {LAYERS[rd][0]}"
    return f"{src} does not know {dst} (ARCHITECTURE.md, column 'knows')"


def check(root: Path | None = None) -> list[Violation]:
    """Every wrong-way import under ``root`` (the checkout or the installed package)."""
    import simcluster

    pkg = Path(simcluster.__file__).resolve().parent
    root = root or pkg.parent
    trees = [(root / "simcluster", "simcluster"), (root / "calibrate", "calibrate")]
    if not trees[1][0].is_dir():  # installed: calibration is simcluster/calibrate
        trees[1] = (root / "simcluster" / "calibrate", "simcluster.calibrate")
    out: list[Violation] = []
    for folder, name in trees:
        for f in sorted(folder.rglob("*.py")):
            rel = f.relative_to(folder).with_suffix("").parts
            is_pkg = rel[-1] == "__init__"
            module = ".".join((name, *(rel[:-1] if is_pkg else rel)))
            src = _unit(module)
            if src is None or (name == "simcluster" and src == "calibrate"):
                continue
            tree = ast.parse(f.read_text(), str(f))
            for line, imported in sorted(set(_imports(tree, module, is_pkg))):
                rule = _allowed(src, imported)
                if rule:
                    out.append(Violation(str(f.relative_to(root)), line, module, imported, rule))
    return out


def main(argv: list[str] | None = None) -> int:
    bad = check(Path(argv[0]) if argv else None)
    for v in bad:
        print(v)
    print(f"layers: {len(bad)} wrong-way import(s)" if bad else "layers: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

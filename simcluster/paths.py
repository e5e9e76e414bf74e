"""Where the project's data folders are (topologies, profiles, scenarios, references).

In a checkout they are the top-level folders ``topologies/``, ``scenarios/`` and
``calibrate/profiles/``. Installed from a wheel, the same folders are package
data inside ``simcluster/`` (``simcluster/topologies``, ``simcluster/scenarios``,
``simcluster/calibrate/profiles``; see ``pyproject.toml``). :func:`project_root`
returns whichever of the two holds them, so every path below is the same
relative path in both.

User folders extend the topology and scenario search: ``SIMCLUSTER_TOPOLOGIES``
and ``SIMCLUSTER_SCENARIOS`` (folders separated by ``os.pathsep``; the CLI's
``--topologies DIR`` adds to the first) are searched before the shipped ones.
"""

from __future__ import annotations

import errno
import os
from functools import cache
from pathlib import Path

__all__ = [
    "project_root",
    "profiles_dir",
    "network_profiles_dir",
    "topologies_dir",
    "topology_dirs",
    "scenarios_dir",
    "scenario_dirs",
    "references_dir",
    "find_scenario",
    "list_scenarios",
    "TOPOLOGIES_ENV",
    "SCENARIOS_ENV",
    "check_user_dir",
    "exists",
    "is_file",
    "why_not_a_file",
    "is_entry",
    "not_found",
]

TOPOLOGIES_ENV = "SIMCLUSTER_TOPOLOGIES"
SCENARIOS_ENV = "SIMCLUSTER_SCENARIOS"


@cache
def project_root() -> Path:
    """The folder that holds ``topologies/``, ``scenarios/`` and ``calibrate/profiles``:
    the installed package itself, else the checkout around it. Found once per process
    (the package does not move; the look-up, through ``importlib.resources`` and the
    file system, cost about 0.1 ms a call, several calls a run). The package folder is
    this module's (what ``importlib.resources.files("simcluster")`` names for a package
    on the file system, at a third of its first call's cost)."""
    package = Path(__file__).parent
    if (package / "topologies").is_dir():
        return package
    return package.resolve().parent


def profiles_dir() -> Path:
    return project_root() / "calibrate" / "profiles"


def network_profiles_dir() -> Path:
    return profiles_dir() / "network"


def topologies_dir() -> Path:
    """The shipped topologies."""
    return project_root() / "topologies"


def scenarios_dir() -> Path:
    """The shipped scenarios."""
    return project_root() / "scenarios"


def references_dir() -> Path:
    """The shipped reference cases (``scenarios/references``)."""
    return scenarios_dir() / "references"


def exists(path: str | Path) -> bool:
    """``Path(path).exists()``, False for a name the file system refuses (too long)."""
    try:
        return Path(path).exists()
    except OSError:
        return False


def is_file(path: str | Path) -> bool:
    """``Path(path).is_file()``, False for a name the file system refuses (too long)."""
    try:
        return Path(path).is_file()
    except OSError:
        return False


def why_not_a_file(path: str | Path) -> str:
    """Why ``path`` cannot be read as a file, in a few words: "no such file", "is a
    folder, not a file", "is a link to 'x', which is not there", "is a link loop"
    (a name on a search path or a did-you-mean list must not be one of these)."""
    p = Path(path)
    try:
        if p.is_symlink():
            try:
                p.stat()
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    return "is a link loop (its links never reach a file)"
                return f"is a link to {os.readlink(p)!r}, which is not there"
        if p.is_dir():
            return "is a folder, not a file"
        if p.exists():
            return "is not a regular file" if not p.is_file() else "is a file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return "no such file"


def is_entry(path: Path) -> bool:
    """``path`` is there as a name in its folder (a file, a folder, a broken link)."""
    try:
        return os.path.lexists(path)
    except (OSError, ValueError):
        return False


def not_found(
    kind: str,
    value: str,
    known: list[str],
    suffixes: tuple[str, ...],
    folders: list[Path],
    file: str | None = None,
    field: str | None = None,
):
    """The ConfigError for a ``kind`` (profile, topology) named ``value`` that is not found
    (``field`` in ``file``): a path says why it is not a file (missing, a folder, a broken
    link, a link loop) with near files of its folder; a name whose ``<name><suffix>`` in
    ``folders`` is a folder or broken link names that entry; any other name is an
    UnknownNameError listing ``known``."""
    from simcluster.errors import ConfigError, UnknownNameError

    field = field or kind
    if Path(value).suffix in suffixes or "/" in value:
        allowed = f"a shipped name ({', '.join(known)}) or a {suffixes[0]} file"
        if is_file(Path(value)) and Path(value).suffix not in suffixes:
            why = f"is not a {' or '.join(suffixes)} file"
            return ConfigError(file, field, value, f"{kind} file {why}", allowed)
        if is_entry(Path(value)):
            return ConfigError(file, field, value, f"{kind} file {why_not_a_file(value)}")
        near = near_yaml_files(value, suffixes)
        return ConfigError(file, field, value, f"no such {kind} file", allowed, near)
    for entry in (d / f"{value}{s}" for d in folders for s in suffixes):
        if is_entry(entry):
            return ConfigError(file, field, value, f"{entry} {why_not_a_file(entry)}")
    return UnknownNameError(kind, value, known, file=file, path=field)


def _user_dirs(env: str) -> list[Path]:
    """The folders named in ``$env``; one that is missing or not a folder is a
    :class:`~simcluster.errors.ConfigError` (it was skipped without a word)."""
    dirs = [Path(d) for d in os.environ.get(env, "").split(os.pathsep) if d]
    for d in dirs:
        check_user_dir(d, f"${env}")
    return dirs


def check_user_dir(path: str | Path, what: str, allowed: str | None = None) -> None:
    """Refuse a folder the user named that is missing or a file, naming ``what`` (a flag
    or ``$VARIABLE``) and ``allowed`` (default: a folder, or a list of them for a
    variable)."""
    p = Path(path)
    if not p.is_dir():
        from simcluster.errors import ConfigError

        problem = "is a file, not a folder" if p.exists() else "no such folder"
        if allowed is None and what.startswith("$"):
            allowed = f"existing folders separated by {os.pathsep!r}"
        allowed = allowed or "a folder"
        raise ConfigError(None, what, str(p), problem, allowed)


def topology_dirs() -> list[Path]:
    """Folders searched for a topology by name: the user's first, then the shipped one."""
    return [*_user_dirs(TOPOLOGIES_ENV), topologies_dir()]


def scenario_dirs() -> list[Path]:
    """Folders searched for a scenario by name: the user's, ``./scenarios``, the shipped."""
    return [*_user_dirs(SCENARIOS_ENV), Path("scenarios"), scenarios_dir()]


def list_scenarios() -> list[str]:
    """Names of the scenarios found on the search path (shipped ones included)."""
    return sorted(
        {p.stem for d in scenario_dirs() if d.is_dir() for p in d.glob("*.yaml") if is_file(p)}
    )


def no_such_scenario(path: str | Path) -> str:
    """The one-line error for a scenario that is not there, with "did you mean" when a
    bare name is a near miss of a scenario on the search path."""
    from simcluster.errors import did_you_mean

    p = Path(path)
    if is_entry(p):  # a folder, a broken link, a link loop: say which, not "did you mean" it
        return f"{p}: {why_not_a_file(p)}, so not a scenario file"
    msg = f"{p}: no such scenario file"
    if len(p.parts) == 1 and p.suffix not in (".yaml", ".yml"):
        near = did_you_mean(p.name, list_scenarios())
        if near:
            msg += "; did you mean " + " or ".join(repr(n) for n in near) + "?"
    else:
        near = near_yaml_files(p)
        if near:
            msg += "; did you mean " + " or ".join(repr(n) for n in near) + "?"
    return msg


def near_yaml_files(path: str | Path, suffixes: tuple[str, ...] = (".yaml", ".yml")) -> list[str]:
    """For a YAML (or ``suffixes``) path that is not there: near misses among the files of
    its folder with those suffixes, as paths (empty when the folder does not exist or
    nothing is near). Folders and broken links are never offered."""
    from simcluster.errors import did_you_mean

    p = Path(path)
    if not p.parent.is_dir():
        return []
    files = sorted(
        f.name for f in p.parent.iterdir() if f.suffix in suffixes and is_file(f) and f != p
    )
    return [str(p.parent / n) for n in did_you_mean(p.name, files)]


def find_scenario(name_or_path: str | Path) -> Path:
    """A scenario file: the path as given when it exists, else ``<name>.yaml`` on the
    search path (so ``simcluster run puhti64`` works from any folder). Returns the
    given path unchanged when nothing matches (the loader then reports it)."""
    p = Path(name_or_path)
    if exists(p) or p.suffix in (".yaml", ".yml") or len(p.parts) != 1:
        return p
    for d in scenario_dirs():
        hit = d / f"{p.name}.yaml"
        if is_file(hit) or is_entry(hit):  # a folder or broken link: the reader names it
            return hit
    return p

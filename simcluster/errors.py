"""Typed errors: one root class for the package, bad user input below it.

Every error simcluster raises on purpose derives from :class:`SimclusterError`.
Every error a user can cause by what they wrote (a scenario, a topology file, a
profile, a command-line value) is a :class:`UserError`. The CLI catches it,
prints ``str(err)`` and exits with code 2; no traceback reaches the user.

Each of them pickles and unpickles unchanged (same type, message and
attributes), so a process pool or a Dask worker reports the same clean line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "SimclusterError",
    "UserError",
    "ConfigError",
    "UnknownNameError",
    "ResultError",
    "did_you_mean",
    "format_path",
]


#: longest value an error line shows as it was written (longer ones are cut)
MAX_SHOWN = 200


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Near misses of ``word`` among ``choices`` (case-insensitive), best first.

    When no choice is close as a whole, the choices that hold ``word`` as one of their
    ``-``/``_``/``.``-separated parts (``v100`` -> ``v100-sxm2-32gb``) are offered, the
    shortest first, if there are at most ``n`` of them.
    """
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    w = str(word).lower()
    hits = difflib.get_close_matches(w, list(lowered), n=n, cutoff=0.6)
    if hits or len(w) < 2:
        return [lowered[h] for h in hits]
    parts = sorted((c for c in lowered if w in re.split(r"[-_.]", c)), key=lambda c: (len(c), c))
    return [lowered[c] for c in parts] if len(parts) <= n else []


def format_path(loc: Sequence[Any]) -> str:
    """``("schedules", 0, "options", "keep")`` -> ``schedules[0].options.keep``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]):
    """Unpickle an error without calling its ``__init__`` (whose signature may differ)."""
    err = cls.__new__(cls, *args)
    BaseException.__init__(err, *args)
    err.__dict__.update(state)
    return err


class SimclusterError(Exception):
    """Root of every error simcluster raises on purpose.

    Pickling keeps the type, ``args`` and every attribute, whatever the
    subclass's ``__init__`` takes (exceptions pickle by re-calling the class
    with ``args`` otherwise, which breaks on keyword-only constructors).
    """

    def __reduce__(self):
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


class UserError(SimclusterError):
    """Bad input from the user: reported without a traceback, exit code 2."""

    exit_code = 2


class ResultError(UserError):
    """A simulated number that cannot be right (NaN, infinite, a negative time): a bug.

    Reported in one line like bad input, but with exit code 3: the input was
    valid, the model was not.
    """

    exit_code = 3


class ConfigError(UserError):
    """A bad value in a file the user wrote.

    Parameters
    ----------
    file: the file that holds the value (or ``None`` for command-line input).
    path: dotted field path inside the file, e.g. ``workload.model``.
    value: the offending value as written.
    problem: what is wrong, one sentence.
    allowed: what is allowed (a list of names, a range, a type).
    suggestions: near misses for "did you mean".
    """

    def __init__(
        self,
        file: str | None,
        path: str,
        value: Any,
        problem: str,
        allowed: str | Sequence[str] | None = None,
        suggestions: Sequence[str] = (),
    ) -> None:
        self.file = file
        self.path = path
        self.value = value
        self.problem = problem
        self.allowed = allowed
        self.suggestions = list(suggestions)
        super().__init__(self.render())

    def render(self) -> str:
        where = f"{self.file}: " if self.file else ""
        got = repr(self.value)
        if len(got) > MAX_SHOWN:  # one readable line, not a 10,000-character value
            got = f"{got[: MAX_SHOWN - 40]}... ({len(got)} characters)"
        msg = f"{where}{self.path}: {self.problem} (got {got})"
        if self.allowed is not None:
            allowed = self.allowed
            if not isinstance(allowed, str):
                allowed = ", ".join(str(a) for a in allowed)
            msg += f"; allowed: {allowed}"
        if self.suggestions:
            msg += "; did you mean " + " or ".join(repr(s) for s in self.suggestions) + "?"
        return msg


class UnknownNameError(ConfigError):
    """A name (model, topology, profile, schedule, algorithm) that is not registered."""

    def __init__(
        self,
        kind: str,
        name: str,
        known: Sequence[str],
        file: str | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(
            file=file,
            path=path or kind,
            value=name,
            problem=f"unknown {kind}",
            allowed=sorted(known),
            suggestions=did_you_mean(name, known),
        )
        self.kind = kind
        self.name = name

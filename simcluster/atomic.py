"""Atomic file writes: a temporary file beside the target, renamed over it.

A failed write (a full disk, a refused path) leaves the old file or nothing, never
half a file. Foundation: any layer may write its files through here (results,
plots, fitted profiles, topology drawings).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from simcluster.errors import UserError

__all__ = [
    "atomic_write",
    "write_text_atomic",
    "save_figure",
    "drawn_by_simcluster",
    "output_file_problem",
    "check_output_file",
    "note_created_dirs",
    "forget_created_dirs",
    "remove_created_dirs_if_empty",
]


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path``, then rename it to ``path``."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 -> what open() would have made
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise UserError(f"{p}: cannot write ({exc.strerror or exc}); nothing was written") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    data = text.encode("utf-8")
    atomic_write(path, lambda fh: fh.write(data))


#: the PNG ``Software`` text chunk of every picture simcluster draws: a later run may
#: replace a PNG that carries it, and refuses one that does not (the user's own)
PNG_SOFTWARE = "simcluster"


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> None:
    """``fig.savefig`` to ``path`` atomically (PNG unless the suffix says otherwise);
    a PNG is marked as simcluster's (:data:`PNG_SOFTWARE`)."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    meta = {"Software": PNG_SOFTWARE} if fmt == "png" else None
    atomic_write(path, lambda fh: fig.savefig(fh, dpi=dpi, format=fmt, metadata=meta))


def drawn_by_simcluster(path: str | Path) -> bool:
    """Whether ``path`` is a PNG that :func:`save_figure` wrote (its text chunks come
    before the image data, within the first few hundred bytes)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return b"tEXtSoftware\x00" + PNG_SOFTWARE.encode() in head


#: results folders created in this process for the command running (deepest first)
_CREATED: list[Path] = []


def note_created_dirs(folders: Iterable[Path]) -> None:
    """Folders a command just created for its outputs, deepest first (see below)."""
    _CREATED.extend(folders)


def forget_created_dirs() -> None:
    """The command succeeded: the folders it created are the user's now."""
    _CREATED.clear()


def remove_created_dirs_if_empty() -> None:
    """The command failed: remove the folders it created (:func:`note_created_dirs`)
    that are still empty, so that a run refused after its folder was checked leaves no
    empty ``results/<name>/`` behind; a folder holding anything is kept."""
    for d in _CREATED:
        with contextlib.suppress(OSError):
            d.rmdir()  # only an empty folder goes
    _CREATED.clear()


def output_file_problem(
    outputs: Iterable[tuple[str, str | Path | None]], force: bool
) -> str | None:
    """Why one of ``outputs`` (``(flag, path or None)`` pairs, the files a tool is about
    to write) may not be written, or None. Asked before any work starts, so that an
    hour of measuring does not end in a path that cannot be written:

    - ``"--out X: is a folder; give a file name"``;
    - a folder on the way that is a file (``--out notes.txt/p.json``) or that cannot be
      written in (missing folders are fine: the tools create them);
    - without ``force``, ``"--out X: file exists; pass --force to overwrite it"``
      (nothing the user wrote is replaced without asking)."""
    for flag, path in outputs:
        if path is None or str(path) == "":
            continue
        p = Path(path)
        if p.is_dir():
            return f"{flag} {path}: is a folder; give a file name"
        up = p.parent
        while not up.exists() and up != up.parent:  # the nearest folder that is there
            if up.is_symlink():
                return f"{flag} {path}: {up} is a broken link, not a folder"
            up = up.parent
        if not up.is_dir():
            return f"{flag} {path}: {up} is a file, not a folder"
        if not os.access(up, os.W_OK | os.X_OK):
            return f"{flag} {path}: cannot write in {up} (permission denied)"
        if p.exists() and not force:
            return f"{flag} {path}: file exists; pass --force to overwrite it"
    return None


def check_output_file(outputs: Iterable[tuple[str, str | Path | None]], force: bool) -> None:
    """:func:`output_file_problem` as a :class:`~simcluster.errors.UserError` (exit 2)."""
    problem = output_file_problem(outputs, force)
    if problem:
        raise UserError(problem)

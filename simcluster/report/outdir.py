"""Results folders: checked before simulating, written atomically, one run's outputs.

- :func:`prepare_output_dir` creates the folder and proves it writable (a probe
  file) before any simulation starts: a path that is a file, read-only, under
  ``/proc``, or too long is a one-line :class:`~simcluster.errors.UserError`.
- :func:`atomic_write` writes to a hidden temporary name beside the target and
  renames it over the target, so a failed write (a full disk) leaves the old
  file or nothing, never half a file.
- :class:`RunOutputs` records the files a run wrote in ``.simcluster-outputs``;
  the next run into the same folder removes the files the old run listed and
  this run did not write (stale plots), and never touches any other file. A
  folder written before manifests existed that holds an output file this run
  will not rewrite is refused instead (the user removes it or picks ``--out``).
  A folder with no manifest that already holds a file of the name this run would
  write (the user's own ``results.csv``) is refused too: nothing the user wrote
  is overwritten without asking.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from simcluster.atomic import atomic_write, note_created_dirs, save_figure, write_text_atomic
from simcluster.errors import UserError

__all__ = ["prepare_output_dir", "atomic_write", "write_text_atomic", "save_figure", "RunOutputs"]

MANIFEST = ".simcluster-outputs"
#: longest path accepted (Linux PATH_MAX is 4096, NAME_MAX 255)
PATH_MAX, NAME_MAX = 4000, 255


def refuse_empty_path(
    flag: str, value: str | Path | None, problem: str = "an empty name", allowed: str = "a path"
) -> None:
    """A path flag given an empty (or blank) value is a ConfigError, not its default:
    callers fall back to a default path only when the flag is absent (None)."""
    if value is not None and not str(value).strip():
        from simcluster.errors import ConfigError

        raise ConfigError(None, flag, value, problem, allowed)


def prepare_output_dir(path: str | Path, what: str = "--out") -> Path:
    """Create ``path`` (parents too) and check a file can be written in it."""
    p = Path(path)
    text = str(p)
    if not str(path).strip():
        raise UserError(f"{what} {str(path)!r}: a blank folder name; give a folder")
    if len(os.fsencode(text)) > PATH_MAX or any(
        len(os.fsencode(part)) > NAME_MAX for part in p.parts
    ):
        raise UserError(f"{what} {text[:60]}...: path too long (at most {NAME_MAX} bytes a name)")
    if p.exists() and not p.is_dir():
        raise UserError(f"{what} {p}: is a file, not a folder")
    missing = [a for a in (p, *p.parents) if not a.exists() and not a.is_symlink()]
    try:
        p.mkdir(parents=True, exist_ok=True)
        note_created_dirs(missing)  # removed again if the command fails and they stay empty
        with tempfile.NamedTemporaryFile(dir=p, prefix=".simcluster-probe-"):
            pass
    except OSError as exc:
        raise UserError(f"{what} {p}: cannot write there ({exc.strerror or exc})") from None
    return p


class RunOutputs:
    """The files one run writes into a results folder (see the module doc).

    ``known`` are every file name this command may write; ``planned`` those this
    run will write.
    """

    def __init__(
        self,
        folder: Path,
        known: Iterable[str],
        planned: Iterable[str],
        reused: Iterable[str] = (),
    ) -> None:
        self.folder = folder
        self.known = set(known)
        self.planned = set(planned)
        self.reused = set(reused)  # files this run reads back (sweep --resume's points)
        self.previous = self._read_manifest()

    def _read_manifest(self) -> set[str] | None:
        m = self.folder / MANIFEST
        try:
            names = json.loads(m.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(names, list):
            return None
        # only plain names inside the folder: a manifest cannot point elsewhere
        return {n for n in names if isinstance(n, str) and n == Path(n).name and n != MANIFEST}

    def check(self) -> None:
        """Refuse a folder from before manifests that holds outputs this run won't rewrite."""
        if self.previous is not None:
            return
        theirs = sorted(
            n for n in self.planned - self.reused if (self.folder / n).exists()
        )  # no manifest: no simcluster run wrote them
        if theirs:
            raise UserError(
                f"{self.folder}: already holds {', '.join(theirs)}, not written by a simcluster "
                "run into this folder (no .simcluster-outputs); this run would overwrite "
                "it: move it away or choose another --out"
            )
        stale = sorted(n for n in self.known - self.planned if (self.folder / n).exists())
        if stale:
            raise UserError(
                f"{self.folder}: holds {', '.join(stale)} from an earlier run that this run "
                "would not replace; remove them or choose another --out"
            )

    def finish(self) -> list[str]:
        """Remove the previous run's files this run did not write; write the manifest."""
        removed = []
        for name in sorted((self.previous or set()) - self.planned):
            with contextlib.suppress(FileNotFoundError):
                (self.folder / name).unlink()
                removed.append(name)
        write_text_atomic(self.folder / MANIFEST, json.dumps(sorted(self.planned)) + "\n")
        return removed

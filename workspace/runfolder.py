"""The run folder ``<root>/runs/<run_id>/``: evidence files, written atomically.

Names are relative paths inside the run's folder (``report.md``, ``traces/seed-3.json``);
one that would land outside it (absolute, ``..``, or through a symlink) is a ``UserError``.
A write goes to a temporary file in the same folder, is fsynced, and is moved into place
with ``os.replace``, so a reader sees the old file or the new one, never half of one.
The methods here are blocking; :class:`workspace.store.Workspace` runs them in a thread.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from pathlib import Path

from schemas.exceptions import UserError

__all__ = ["RunFolder", "check_run_id"]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def check_run_id(run_id: str) -> str:
    """``run_id`` if it is safe as a folder name, else a ``UserError``."""
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise UserError(
            f"invalid run id {run_id!r}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return run_id


class RunFolder:
    """Paths and atomic file I/O under ``<root>/runs``."""

    def __init__(self, root: Path) -> None:
        self.base = root / "runs"

    def path(self, run_id: str) -> Path:
        """The folder of ``run_id`` (not created)."""
        return self.base / check_run_id(run_id)

    def target(self, run_id: str, name: str) -> Path:
        """The file ``name`` inside the run's folder; refuses names that escape it."""
        folder = self.path(run_id)
        parts = Path(name).parts if isinstance(name, str) else ()
        if (
            not parts
            or "\x00" in name
            or Path(name).is_absolute()
            or any(part in ("..", ".") for part in parts)
            or name.endswith(("/", os.sep))
        ):
            raise UserError(
                f"invalid file name {name!r}: give a relative path inside the run folder"
            )
        target = folder / name
        resolved_folder = folder.resolve()
        if not target.resolve().is_relative_to(resolved_folder):
            raise UserError(f"file name {name!r} escapes the run folder {folder}")
        return target

    def write(self, run_id: str, name: str, content: str | bytes) -> Path:
        """Write ``content`` to ``name`` atomically (tmp + fsync + ``os.replace``)."""
        target = self.target(run_id, name)
        data = content.encode() if isinstance(content, str) else bytes(content)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Re-check after mkdir: a symlinked parent could only be seen once it exists.
        self.target(run_id, name)
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return target

    def read(self, run_id: str, name: str) -> bytes:
        """The bytes of ``name``; a missing file is a ``UserError``."""
        target = self.target(run_id, name)
        if not target.is_file():
            raise UserError(f"no file {name!r} in run folder {self.path(run_id)}")
        return target.read_bytes()

    def list(self, run_id: str) -> list[str]:
        """Relative names of the run's files, sorted (temporary files excluded)."""
        folder = self.path(run_id)
        if not folder.is_dir():
            return []
        return sorted(
            p.relative_to(folder).as_posix()
            for p in folder.rglob("*")
            if p.is_file() and not (p.name.startswith(".") and p.name.endswith(".tmp"))
        )

    def remove(self, run_id: str) -> None:
        """Delete the run's folder and everything in it (a symlinked folder: the link only)."""
        folder = self.path(run_id)
        if folder.is_symlink():
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder)

"""``--workspace``: the flag of every command that reads or writes runs, and opening it."""

from __future__ import annotations

import argparse
import os

from schemas import UserError
from workspace import DatabaseURL, Workspace, resolve_workspace

__all__ = ["add_workspace_flag", "open_workspace"]


def add_workspace_flag(parser: argparse.ArgumentParser) -> None:
    """``--workspace DIR|URL`` (env ``GEPA_WORKSPACE``, default ./.gepa)."""
    parser.add_argument(
        "--workspace",
        default=None,
        metavar="DIR|URL",
        help="workspace folder (SQLite) or postgresql://USER@HOST:PORT/DBNAME shared by several "
        "processes (env GEPA_WORKSPACE, default ./.gepa; see docs/postgres.md)",
    )


def open_workspace(args: argparse.Namespace) -> Workspace:
    """The ``--workspace`` of a command that reads runs, opened read-only when this process
    may not write it (a writable one is opened as a writer so that an older schema is
    migrated); a folder without a workspace is a ``UserError`` naming the fix."""
    root = resolve_workspace(args.workspace)
    if isinstance(root, DatabaseURL):  # a shared server: opened as a writer (it migrates)
        return Workspace(root)
    db = root / "workspace.sqlite"
    if not db.is_file():
        raise UserError(
            f"no workspace at {root} (no workspace.sqlite): pass --workspace DIR (or GEPA_WORKSPACE), "
            "or create a run with `gepa-runtime optimize create ...`"
        )
    writable = os.access(root, os.W_OK) and os.access(db, os.W_OK)
    return Workspace(root, readonly=not writable)

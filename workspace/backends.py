"""Which engine a workspace opens: SQLite in a folder, or PostgreSQL at a URL.

The two differ in where the database is, where a run's files live and what a message calls
the store; :class:`Backend` holds those, and :class:`workspace.store.Workspace` is the same
over either. psycopg is optional (the ``[postgres]`` extra): it is imported only here, and
only for a URL.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from schemas.exceptions import UserError
from workspace.db import Database
from workspace.files import DatabaseFiles, FolderFiles, RunFiles
from workspace.location import DEFAULT_WORKSPACE, DatabaseURL

if TYPE_CHECKING:
    from workspace.postgres.db import PostgresDatabase

__all__ = ["Backend", "backend_for"]


@dataclass(frozen=True)
class Backend:
    """One store's engine and files."""

    name: str  # "sqlite" | "postgres"
    db: Database | PostgresDatabase
    files: RunFiles
    root: Path  # SQLite: the workspace folder; PostgreSQL: the local run-files folder
    location: str  # what messages call the store: the folder, or the URL masked
    db_path: Path | None  # workspace.sqlite (None for PostgreSQL)


def backend_for(
    target: Path | DatabaseURL,
    *,
    readonly: bool,
    busy_timeout_s: float,
    run_files: str | os.PathLike[str] | None,
    pool_size: int,
    outage_limit_s: float | None = None,
) -> Backend:
    """The backend of a folder or a URL (see ``Workspace`` for the arguments)."""
    if isinstance(target, DatabaseURL):
        postgres = _postgres(
            target, readonly=readonly, pool_size=pool_size, outage_limit_s=outage_limit_s
        )
        chosen = run_files or os.environ.get("GEPA_RUN_FILES") or DEFAULT_WORKSPACE
        root = Path(chosen).expanduser()
        where = str(target)  # the password masked
        return Backend(
            "postgres", postgres, DatabaseFiles(root, postgres, where), root, where, None
        )
    db_path = target / "workspace.sqlite"
    db = Database(db_path, readonly=readonly, busy_timeout_s=busy_timeout_s)
    return Backend("sqlite", db, FolderFiles(target, db, str(target)), target, str(target), db_path)


def _postgres(
    url: DatabaseURL, *, readonly: bool, pool_size: int, outage_limit_s: float | None
) -> PostgresDatabase:
    try:
        from workspace.postgres.db import PostgresDatabase
        from workspace.postgres.retry import outage_limit
    except ImportError as exc:
        raise UserError(
            f"--workspace {url} is a PostgreSQL store, which needs psycopg: "
            f"pip install 'gepa-runtime[postgres]' ({exc})"
        ) from exc
    return PostgresDatabase(
        url.url,
        readonly=readonly,
        pool_size=pool_size,
        outage_limit_s=outage_limit(outage_limit_s),
    )

"""The PostgreSQL store: the same tables and guarantees as ``workspace.sqlite``, shared by
several processes on several hosts (see ``docs/postgres.md``).

Needs psycopg 3 and its pool (``pip install 'gepa-runtime[postgres]'``); nothing imports
this package unless a ``postgresql://`` workspace is opened.
"""

from __future__ import annotations

from workspace.postgres.db import PgConn, PostgresDatabase
from workspace.postgres.schema import PG_MIGRATIONS, PG_SCHEMA_VERSION

__all__ = ["PG_MIGRATIONS", "PG_SCHEMA_VERSION", "PgConn", "PostgresDatabase"]

"""Schema versions of the PostgreSQL store and the forward migrations between them.

The tables are those of ``workspace.sqlite`` (see :mod:`workspace.migrations`) in PostgreSQL
types, plus ``run_files`` (the run's files: evidence packet, copied inputs; see
:mod:`workspace.files`), an insertion-order ``seq`` where SQLite has a ``rowid``, and an
index of trials by rollout (deleting a run's rollouts checks who still uses them).

The version lives in the one-row table ``gepa_schema``. Versions are this store's own
(they do not follow SQLite's). As there, migrations only go forward, a released one is never
edited, and each runs in one transaction with its version bump. Every writer that opens the
store migrates it first, before anything else touches it, holding a session advisory lock,
so concurrent openers (several processes starting at once) migrate once and in turn. A
store whose version is newer than this code knows is refused, never changed.
"""

from __future__ import annotations

from typing import Any

import psycopg

from schemas.exceptions import WorkspaceError
from workspace.migrations import Migration

__all__ = [
    "MIGRATION_LOCK",
    "PG_MIGRATIONS",
    "PG_SCHEMA_VERSION",
    "TABLES",
    "check_version",
    "migrate",
    "needs_migration",
    "read_version",
]

# The advisory lock key held while migrating ("GEPAmigr" as a 64-bit number).
MIGRATION_LOCK = 0x4745_5041_6D69_6772
TABLES = (
    "runs", "candidates", "rollouts", "events", "frontier", "trials", "trial_counts", "leases",
    "run_files", "claims", "endpoint_limits", "endpoint_members",
)  # fmt: skip

_TIME = "DOUBLE PRECISION NOT NULL"
_V1 = Migration(
    1,
    "runs, candidates, rollouts (the cache), events, frontier, trials, leases, run files",
    (
        "CREATE TABLE gepa_schema (version INTEGER NOT NULL, store TEXT NOT NULL)",
        "INSERT INTO gepa_schema (version, store) VALUES (0, 'gepa-runtime')",
        f"""CREATE TABLE runs (
            run_id      TEXT PRIMARY KEY,
            config      TEXT NOT NULL,
            status      TEXT NOT NULL,
            phase       TEXT NOT NULL,
            program_id  TEXT,
            fingerprint TEXT,
            error       TEXT,
            state       TEXT NOT NULL DEFAULT '{{}}',
            created_at  {_TIME},
            updated_at  {_TIME},
            seq         BIGINT GENERATED ALWAYS AS IDENTITY
        )""",
        "CREATE INDEX runs_by_created ON runs (created_at)",
        f"""CREATE TABLE candidates (
            seq            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id         TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            candidate_id   TEXT NOT NULL,
            content_hash   TEXT NOT NULL,
            components     TEXT NOT NULL,
            parents        TEXT NOT NULL DEFAULT '[]',
            origin         TEXT NOT NULL CHECK (origin IN ('seed', 'mutation', 'merge', 'mipro')),
            rationale      TEXT NOT NULL DEFAULT '',
            diffs          TEXT NOT NULL DEFAULT '{{}}',
            proposer_usage TEXT NOT NULL DEFAULT '{{}}',
            created_at     {_TIME},
            UNIQUE (run_id, candidate_id)
        )""",
        # No foreign key on run_id: the cache outlives runs.
        f"""CREATE TABLE rollouts (
            id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            cache_key       TEXT NOT NULL,
            run_id          TEXT NOT NULL,
            candidate_id    TEXT NOT NULL,
            candidate_hash  TEXT NOT NULL,
            fingerprint     TEXT NOT NULL,
            seed            TEXT NOT NULL,
            policy          TEXT NOT NULL,
            status          TEXT NOT NULL CHECK (status IN ('ok', 'error')),
            reward          DOUBLE PRECISION,
            objectives      TEXT NOT NULL DEFAULT '{{}}',
            output          TEXT NOT NULL DEFAULT 'null',
            feedback        TEXT NOT NULL DEFAULT '',
            trace           BYTEA,
            trace_truncated SMALLINT NOT NULL DEFAULT 0,
            usage           TEXT NOT NULL DEFAULT '{{}}',
            latency_ms      DOUBLE PRECISION NOT NULL DEFAULT 0,
            attempts        INTEGER NOT NULL DEFAULT 1,
            error           TEXT,
            created_at      {_TIME},
            trace_id        TEXT
        )""",
        "CREATE UNIQUE INDEX rollouts_ok_by_key ON rollouts (cache_key) WHERE status = 'ok'",
        "CREATE INDEX rollouts_by_candidate ON rollouts (run_id, candidate_id)",
        f"""CREATE TABLE events (
            seq    BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            type   TEXT NOT NULL,
            data   TEXT NOT NULL DEFAULT '{{}}',
            ts     {_TIME}
        )""",
        "CREATE INDEX events_by_run ON events (run_id, seq)",
        """CREATE TABLE frontier (
            run_id     TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            seed       TEXT NOT NULL,
            candidates TEXT,
            score      DOUBLE PRECISION,
            seq        BIGINT GENERATED ALWAYS AS IDENTITY,
            PRIMARY KEY (run_id, seed)
        )""",
        f"""CREATE TABLE trials (
            seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            run_id       TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            candidate_id TEXT NOT NULL,
            seed         TEXT NOT NULL,
            cache_key    TEXT NOT NULL,
            cached       SMALLINT NOT NULL CHECK (cached IN (0, 1)),
            status       TEXT NOT NULL CHECK (status IN ('ok', 'error')),
            rollout_id   BIGINT REFERENCES rollouts (id),
            created_at   {_TIME},
            pos          BIGINT NOT NULL
        )""",
        """CREATE TABLE trial_counts (
            run_id TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
            trials BIGINT NOT NULL DEFAULT 0,
            paid   BIGINT NOT NULL DEFAULT 0,
            cached BIGINT NOT NULL DEFAULT 0,
            errors BIGINT NOT NULL DEFAULT 0
        )""",
        # pos: the trial's place in its run (workspace.trials), counted in trial_counts.
        "CREATE UNIQUE INDEX trials_by_pos ON trials (run_id, pos)",
        "CREATE INDEX trials_by_candidate ON trials (run_id, candidate_id)",
        "CREATE INDEX trials_by_rollout ON trials (rollout_id)",
        f"""CREATE TABLE leases (
            run_id       TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
            token        TEXT NOT NULL,
            host         TEXT NOT NULL,
            pid          INTEGER NOT NULL,
            acquired_at  {_TIME},
            heartbeat_at {_TIME},
            timeout_s    DOUBLE PRECISION
        )""",
        f"""CREATE TABLE run_files (
            run_id     TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            name       TEXT NOT NULL,
            content    BYTEA NOT NULL,
            updated_at {_TIME},
            PRIMARY KEY (run_id, name)
        )""",
    ),
)

# Claims and shared endpoint limits (see workspace.migrations' version 8): new tables only,
# so runners of the previous version keep working on a migrated store.
_V2 = Migration(
    2,
    "claims (rollouts being paid for) and endpoint limits shared by runners",
    (
        f"""CREATE TABLE claims (
            cache_key    TEXT PRIMARY KEY,
            token        TEXT NOT NULL,
            run_id       TEXT NOT NULL,
            host         TEXT NOT NULL,
            pid          INTEGER NOT NULL,
            claimed_at   {_TIME},
            heartbeat_at {_TIME},
            timeout_s    DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX claims_by_token ON claims (token)",
        f"""CREATE TABLE endpoint_limits (
            url        TEXT PRIMARY KEY,
            state      TEXT NOT NULL DEFAULT '{{}}',
            updated_at {_TIME}
        )""",
        f"""CREATE TABLE endpoint_members (
            url          TEXT NOT NULL,
            member       TEXT NOT NULL,
            host         TEXT NOT NULL,
            pid          INTEGER NOT NULL,
            ceiling      INTEGER NOT NULL,
            demand       INTEGER NOT NULL,
            heartbeat_at {_TIME},
            timeout_s    DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (url, member)
        )""",
    ),
)

PG_MIGRATIONS: tuple[Migration, ...] = (_V1, _V2)
PG_SCHEMA_VERSION = PG_MIGRATIONS[-1].version


async def read_version(conn: psycopg.AsyncConnection[Any], where: str) -> int | None:
    """The stored schema version; ``None`` when the database holds no gepa-runtime store."""
    cur = await conn.execute("SELECT to_regclass('gepa_schema') IS NOT NULL")
    row = await cur.fetchone()
    if not row or not row[0]:
        return None
    cur = await conn.execute("SELECT version, store FROM gepa_schema")
    rows = await cur.fetchall()
    if len(rows) != 1 or rows[0][1] != "gepa-runtime":
        raise _foreign(where, "gepa_schema")
    return int(rows[0][0])


async def check_version(conn: psycopg.AsyncConnection[Any], where: str) -> int:
    """The stored version (0 for none yet); refuses a newer store and foreign tables."""
    version = await read_version(conn, where)
    if version is None:
        cur = await conn.execute(
            "SELECT name FROM unnest(%s::text[]) AS name WHERE to_regclass(name) IS NOT NULL",
            (list(TABLES),),
        )
        clash = await cur.fetchall()
        if clash:
            raise _foreign(where, clash[0][0])
        return 0
    if version > PG_SCHEMA_VERSION:
        raise WorkspaceError(
            f"the store at {where} has schema version {version}, but this gepa-runtime knows "
            f"PostgreSQL store versions up to {PG_SCHEMA_VERSION}; upgrade gepa-runtime (pip "
            "install -U 'gepa-runtime[postgres]') or use another --workspace. Nothing was changed."
        )
    return version


def needs_migration(where: str, version: int) -> WorkspaceError:
    """The error of a read-only opener that finds an older (or no) schema it cannot migrate."""
    what = "no gepa-runtime store" if version == 0 else f"schema version {version}"
    return WorkspaceError(
        f"{where} has {what} and needs migrating to {PG_SCHEMA_VERSION}, which a read-only "
        "opener cannot do; run any writing gepa-runtime command on it first (e.g. "
        "gepa-runtime runs list --workspace URL)."
    )


async def migrate(conn: psycopg.AsyncConnection[Any], where: str) -> int:
    """Bring the store forward to the newest version under the migration lock; return it.

    ``conn`` is in autocommit mode. The version is re-read once the lock is held, so a
    second process that waited on the lock finds the work done.
    """
    await check_version(conn, where)  # a newer store is refused before waiting on anyone
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        while (version := await check_version(conn, where)) < PG_SCHEMA_VERSION:
            step = PG_MIGRATIONS[version]
            async with conn.transaction():
                for statement in step.statements:
                    await conn.execute(statement)  # type: ignore[arg-type]  # our own DDL
                await conn.execute("UPDATE gepa_schema SET version = %s", (step.version,))
        return version
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def _foreign(where: str, table: str) -> WorkspaceError:
    return WorkspaceError(
        f"{where} already has a table {table!r} that gepa-runtime did not create; give the "
        "workspace an empty database (or a schema of its own: add "
        "?options=-csearch_path%3DNAME to the URL). Nothing was changed."
    )

"""Schema versions of ``workspace.sqlite`` and the forward migrations between them.

The version lives in ``PRAGMA user_version`` and the file is tagged with
``PRAGMA application_id`` so a foreign SQLite file is never mistaken for a workspace.
Migrations only go forward and a released one is never edited: a change is a new entry
appended to ``MIGRATIONS``. Each migration runs in its own ``BEGIN IMMEDIATE`` transaction
together with the version bump, so a crash mid-upgrade leaves the previous version intact.
A file with a version newer than this code knows is refused, never rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from schemas.exceptions import WorkspaceError

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "check_version",
    "migrate",
    "needs_migration",
    "read_version",
]

APPLICATION_ID = 0x47455041  # "GEPA"


@dataclass(frozen=True)
class Migration:
    """One forward step: the statements that take the schema from ``version - 1`` to ``version``."""

    version: int
    summary: str
    statements: tuple[str, ...]


_V1 = Migration(
    1,
    "runs, candidates with lineage, rollouts (the cache), event log",
    (
        """CREATE TABLE runs (
            run_id      TEXT PRIMARY KEY,
            config      TEXT NOT NULL,
            status      TEXT NOT NULL,
            phase       TEXT NOT NULL,
            program_id  TEXT,
            fingerprint TEXT,
            error       TEXT,
            state       TEXT NOT NULL DEFAULT '{}',
            created_at  REAL NOT NULL,
            updated_at  REAL NOT NULL
        )""",
        "CREATE INDEX runs_by_created ON runs (created_at)",
        """CREATE TABLE candidates (
            seq            INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id         TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            candidate_id   TEXT NOT NULL,
            content_hash   TEXT NOT NULL,
            components     TEXT NOT NULL,
            parents        TEXT NOT NULL DEFAULT '[]',
            origin         TEXT NOT NULL CHECK (origin IN ('seed', 'mutation', 'merge')),
            rationale      TEXT NOT NULL DEFAULT '',
            diffs          TEXT NOT NULL DEFAULT '{}',
            proposer_usage TEXT NOT NULL DEFAULT '{}',
            created_at     REAL NOT NULL,
            UNIQUE (run_id, candidate_id)
        )""",
        # AUTOINCREMENT: ids only ever grow, which record_rollouts relies on to read back
        # the ids of the rows it inserted. No foreign key on run_id: the cache outlives runs.
        """CREATE TABLE rollouts (
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            cache_key       TEXT NOT NULL,
            run_id          TEXT NOT NULL,
            candidate_id    TEXT NOT NULL,
            candidate_hash  TEXT NOT NULL,
            fingerprint     TEXT NOT NULL,
            seed            TEXT NOT NULL,
            policy          TEXT NOT NULL,
            status          TEXT NOT NULL CHECK (status IN ('ok', 'error')),
            reward          REAL,
            objectives      TEXT NOT NULL DEFAULT '{}',
            output          TEXT NOT NULL DEFAULT 'null',
            feedback        TEXT NOT NULL DEFAULT '',
            trace           BLOB,
            trace_truncated INTEGER NOT NULL DEFAULT 0,
            usage           TEXT NOT NULL DEFAULT '{}',
            latency_ms      REAL NOT NULL DEFAULT 0,
            attempts        INTEGER NOT NULL DEFAULT 1,
            error           TEXT,
            created_at      REAL NOT NULL
        )""",
        # The cache: at most one successful row per key. Error rows are kept for the record
        # and are not in this index, so a lookup through it can never serve one.
        "CREATE UNIQUE INDEX rollouts_ok_by_key ON rollouts (cache_key) WHERE status = 'ok'",
        "CREATE INDEX rollouts_by_candidate ON rollouts (run_id, candidate_id)",
        """CREATE TABLE events (
            seq    INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            type   TEXT NOT NULL,
            data   TEXT NOT NULL DEFAULT '{}',
            ts     REAL NOT NULL
        )""",
        "CREATE INDEX events_by_run ON events (run_id, seq)",
    ),
)

_V2 = Migration(
    2,
    "per-seed frontier state and the trials feed (a run's use of each rollout)",
    (
        """CREATE TABLE frontier (
            run_id     TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            seed       TEXT NOT NULL,
            candidates TEXT,
            score      REAL,
            PRIMARY KEY (run_id, seed)
        )""",
        """CREATE TABLE trials (
            seq          INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id       TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            candidate_id TEXT NOT NULL,
            seed         TEXT NOT NULL,
            cache_key    TEXT NOT NULL,
            cached       INTEGER NOT NULL CHECK (cached IN (0, 1)),
            status       TEXT NOT NULL CHECK (status IN ('ok', 'error')),
            rollout_id   INTEGER REFERENCES rollouts (id),
            created_at   REAL NOT NULL
        )""",
        "CREATE INDEX trials_by_run ON trials (run_id, seq)",
        "CREATE INDEX trials_by_candidate ON trials (run_id, candidate_id)",
    ),
)

# SQLite cannot alter a CHECK constraint: the table is rebuilt with the same columns.
_V3 = Migration(
    3,
    "candidates may come from MIPRO (origin 'mipro')",
    (
        """CREATE TABLE candidates_v3 (
            seq            INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id         TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            candidate_id   TEXT NOT NULL,
            content_hash   TEXT NOT NULL,
            components     TEXT NOT NULL,
            parents        TEXT NOT NULL DEFAULT '[]',
            origin         TEXT NOT NULL CHECK (origin IN ('seed', 'mutation', 'merge', 'mipro')),
            rationale      TEXT NOT NULL DEFAULT '',
            diffs          TEXT NOT NULL DEFAULT '{}',
            proposer_usage TEXT NOT NULL DEFAULT '{}',
            created_at     REAL NOT NULL,
            UNIQUE (run_id, candidate_id)
        )""",
        """INSERT INTO candidates_v3 (seq, run_id, candidate_id, content_hash, components, parents,
            origin, rationale, diffs, proposer_usage, created_at)
           SELECT seq, run_id, candidate_id, content_hash, components, parents, origin,
            rationale, diffs, proposer_usage, created_at FROM candidates""",
        "DROP TABLE candidates",
        "ALTER TABLE candidates_v3 RENAME TO candidates",
    ),
)

# One row per run being executed: which process holds it and when it last said so.
_V4 = Migration(
    4,
    "run leases: the process executing a run (host, pid, heartbeat)",
    (
        """CREATE TABLE leases (
            run_id       TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
            token        TEXT NOT NULL,
            host         TEXT NOT NULL,
            pid          INTEGER NOT NULL,
            acquired_at  REAL NOT NULL,
            heartbeat_at REAL NOT NULL
        )""",
    ),
)

# The trace id a rollout's trace names (schemas.trace_ids), for the trials feed: it lives
# inside the compressed trace, which a feed page must not decompress row by row.
_V5 = Migration(
    5,
    "rollouts.trace_id: the OpenTelemetry (or agent) trace id of a rollout",
    ("ALTER TABLE rollouts ADD COLUMN trace_id TEXT",),
)

# The timeout a lease's holder promised to heartbeat within (NULL: the default, 60 s), so a
# store shared by processes with different settings judges each holder by its own promise.
_V6 = Migration(
    6,
    "leases.timeout_s: each holder's own lease timeout",
    ("ALTER TABLE leases ADD COLUMN timeout_s REAL",),
)

# A run's counts and any page of its trials without scanning the run (workspace.trials):
# the counts per run, and each trial's position in its run, numbered for the trials there.
_V7 = Migration(
    7,
    "trial_counts (a run's trials counted as they are appended) and trials.pos",
    (
        """CREATE TABLE trial_counts (
            run_id TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
            trials INTEGER NOT NULL DEFAULT 0,
            paid   INTEGER NOT NULL DEFAULT 0,
            cached INTEGER NOT NULL DEFAULT 0,
            errors INTEGER NOT NULL DEFAULT 0
        )""",
        """INSERT INTO trial_counts (run_id, trials, paid, cached, errors)
           SELECT run_id, COUNT(*), SUM(CASE WHEN status = 'ok' AND cached = 0 THEN 1 ELSE 0 END),
                  SUM(cached), SUM(CASE WHEN status = 'error' THEN 1 ELSE 0 END)
             FROM trials GROUP BY run_id""",
        "ALTER TABLE trials ADD COLUMN pos INTEGER",
        # The numbering is computed once (a window over the table), not per row.
        """UPDATE trials SET pos = (SELECT n FROM (SELECT seq AS s, ROW_NUMBER() OVER
            (PARTITION BY run_id ORDER BY seq) - 1 AS n FROM trials) WHERE s = trials.seq)""",
        "CREATE UNIQUE INDEX trials_by_pos ON trials (run_id, pos)",
    ),
)

# What runners that share a store coordinate through (workspace.claims,
# workspace.endpoint_limits): a claim on each rollout being paid for, and one adaptive limit
# per container endpoint with the runners that call it. New tables only, so runners of the
# previous version keep working on a migrated file (docs/team.md).
_V8 = Migration(
    8,
    "claims (rollouts being paid for) and endpoint limits shared by runners",
    (
        """CREATE TABLE claims (
            cache_key    TEXT PRIMARY KEY,
            token        TEXT NOT NULL,
            run_id       TEXT NOT NULL,
            host         TEXT NOT NULL,
            pid          INTEGER NOT NULL,
            claimed_at   REAL NOT NULL,
            heartbeat_at REAL NOT NULL,
            timeout_s    REAL NOT NULL
        )""",
        "CREATE INDEX claims_by_token ON claims (token)",
        """CREATE TABLE endpoint_limits (
            url        TEXT PRIMARY KEY,
            state      TEXT NOT NULL DEFAULT '{}',
            updated_at REAL NOT NULL
        )""",
        """CREATE TABLE endpoint_members (
            url          TEXT NOT NULL,
            member       TEXT NOT NULL,
            host         TEXT NOT NULL,
            pid          INTEGER NOT NULL,
            ceiling      INTEGER NOT NULL,
            demand       INTEGER NOT NULL,
            heartbeat_at REAL NOT NULL,
            timeout_s    REAL NOT NULL,
            PRIMARY KEY (url, member)
        )""",
    ),
)

MIGRATIONS: tuple[Migration, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8)
SCHEMA_VERSION = MIGRATIONS[-1].version


async def read_version(conn: aiosqlite.Connection) -> int:
    """The schema version stored in the file (0 for a new, empty file)."""
    rows = list(await conn.execute_fetchall("PRAGMA user_version"))
    return int(rows[0][0])


async def check_version(conn: aiosqlite.Connection, db_path: Path) -> int:
    """Refuse files this code must not touch; return the stored version.

    A newer version or a foreign SQLite file is a ``WorkspaceError`` that says what to do.
    """
    # One read transaction: the version and the table list must come from the same snapshot,
    # or a concurrent first migration makes a fresh file look foreign.
    await conn.execute("BEGIN")
    try:
        version = await read_version(conn)
        app_id = int(list(await conn.execute_fetchall("PRAGMA application_id"))[0][0])
        tables = list(
            await conn.execute_fetchall(
                "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
            )
        )[0][0]
    finally:
        if conn.in_transaction:  # SQLite ends the transaction itself on some errors
            await conn.execute("COMMIT")
    if version > SCHEMA_VERSION:
        raise WorkspaceError(
            f"{db_path} has schema version {version}, but this gepa-runtime knows versions up to "
            f"{SCHEMA_VERSION}; upgrade gepa-runtime (pip install -U gepa-runtime) or use "
            "another --workspace. The file was not modified."
        )
    if app_id not in (0, APPLICATION_ID) or (version == 0 and tables):
        raise WorkspaceError(
            f"{db_path} is an SQLite file but not a gepa-runtime workspace; "
            "pass another folder with --workspace DIR (or GEPA_WORKSPACE)."
        )
    return version


def needs_migration(db_path: Path, version: int) -> WorkspaceError:
    """The error of a read-only opener that finds an older schema it cannot migrate."""
    return WorkspaceError(
        f"{db_path} has schema version {version} and needs migrating to {SCHEMA_VERSION}, "
        "which a read-only opener cannot do; run any writing gepa-runtime command on this "
        "workspace first (e.g. gepa-runtime runs list --workspace DIR)."
    )


async def migrate(
    conn: aiosqlite.Connection, db_path: Path, *, target: int = SCHEMA_VERSION
) -> int:
    """Bring the file forward to ``target`` (default: the newest version); return it.

    The connection must be in autocommit mode (``isolation_level=None``). Safe against a
    second process migrating at the same time: the version is re-read under the write lock.
    """
    await check_version(conn, db_path)
    while True:
        await conn.execute("BEGIN IMMEDIATE")
        try:
            version = await read_version(conn)
            if version >= target:
                await conn.execute("COMMIT")
                return version
            step = MIGRATIONS[version]
            for statement in step.statements:
                await conn.execute(statement)
            await conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            await conn.execute(f"PRAGMA user_version = {step.version}")
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")

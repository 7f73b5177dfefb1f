"""SQL of the ``rollouts`` table, which is also the rollout cache.

Every finished rollout attempt is a row; error rows are kept for the record. The partial
unique index ``rollouts_ok_by_key`` holds at most one ``ok`` row per cache key (the first
one wins) and every cache read filters on ``status = 'ok'``, so an error is never a hit. Processes that
share a PostgreSQL store may pay for the same key at once: the first ``ok`` row committed
wins there too (``ON CONFLICT DO NOTHING`` on that index), and the others get its id.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from schemas.exceptions import UserError, WorkspaceError
from schemas.protocol import Usage
from schemas.records import RolloutRecord
from schemas.trace_ids import trace_id_of
from workspace.codec import EncodedTrace, decode_trace, dumps, encode_trace, loads
from workspace.conn import Conn, Row
from workspace.redact import Scrubber

__all__ = [
    "MAX_PARAMS",
    "chunks",
    "encode_rollouts",
    "fetch_rollout",
    "fetch_run_rollout",
    "insert_rollouts",
    "lookup_many",
    "rollouts_for_candidate",
    "to_row",
]

# SQLite builds before 3.32 cap bound parameters at 999; stay under it everywhere.
MAX_PARAMS = 900
_FIELDS = (
    "cache_key", "run_id", "candidate_id", "candidate_hash", "fingerprint", "seed", "policy",
    "status", "reward", "objectives", "output", "feedback", "trace", "trace_truncated",
    "usage", "latency_ms", "attempts", "error", "created_at", "trace_id",
)  # fmt: skip
_COLUMNS = ", ".join(_FIELDS)
_INSERT = f"INSERT INTO rollouts ({_COLUMNS}) VALUES ({', '.join('?' * len(_FIELDS))})"
_INSERT_FIRST_OK = f"{_INSERT} ON CONFLICT (cache_key) WHERE status = 'ok' DO NOTHING RETURNING id"
_SELECT = f"SELECT id, {_COLUMNS} FROM rollouts"


def chunks(items: Sequence[str], size: int = MAX_PARAMS) -> Iterator[Sequence[str]]:
    """``items`` in slices of at most ``size`` (one SQL parameter each)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def to_row(record: RolloutRecord, trace: EncodedTrace) -> tuple[object, ...]:
    """The column values of ``record`` (already scrubbed) with its encoded trace."""
    return (
        record.cache_key,
        record.run_id,
        record.candidate_id,
        record.candidate_hash,
        record.fingerprint,
        record.seed,
        record.policy,
        record.status,
        record.reward,
        dumps(record.objectives, what="objectives"),
        dumps(record.output, what="rollout output"),
        record.feedback,
        trace.blob,
        int(record.trace_truncated or trace.truncated),
        record.usage.model_dump_json(),
        record.latency_ms,
        record.attempts,
        record.error,
        record.created_at,
        trace_id_of(record.trace),
    )


def encode_rollouts(
    records: Sequence[RolloutRecord], scrubber: Scrubber, cap_bytes: int
) -> list[tuple[object, ...]]:
    """The rows of ``records``: feedback, errors and traces scrubbed, traces compressed and
    capped at ``cap_bytes``. A trace is walked for secrets only when its text may hold one."""
    encoded = []
    for record in records:
        feedback = scrubber.text(record.feedback)
        error = scrubber.text(record.error) if record.error is not None else None
        clean = record
        if feedback is not record.feedback or error is not record.error:  # masked: a copy
            clean = record.model_copy(update={"feedback": feedback, "error": error})
        trace, text = record.trace, dumps(record.trace, what="trace")
        if scrubber.may_hold_secret(text):
            trace = scrubber.value(trace)
            text = dumps(trace, what="trace")
        encoded.append(to_row(clean, encode_trace(trace, cap_bytes, text=text)))
    return encoded


def _to_record(row: Row) -> RolloutRecord:
    return RolloutRecord(
        rollout_id=row["id"],
        cache_key=row["cache_key"],
        run_id=row["run_id"],
        candidate_id=row["candidate_id"],
        candidate_hash=row["candidate_hash"],
        fingerprint=row["fingerprint"],
        seed=row["seed"],
        policy=row["policy"],
        status=row["status"],
        reward=row["reward"],
        objectives=loads(row["objectives"], {}),
        output=loads(row["output"]),
        feedback=row["feedback"],
        trace=decode_trace(row["trace"]),
        trace_truncated=bool(row["trace_truncated"]),
        usage=Usage.model_validate_json(row["usage"]),
        latency_ms=row["latency_ms"],
        attempts=row["attempts"],
        error=row["error"],
        created_at=row["created_at"],
    )


async def lookup_many(conn: Conn, keys: Sequence[str]) -> dict[str, RolloutRecord]:
    """The ``ok`` rollout of each key that has one; one query per 900 keys."""
    found: dict[str, RolloutRecord] = {}
    unique = list(dict.fromkeys(keys))
    for part in chunks(unique):
        marks = ",".join("?" * len(part))
        rows = await conn.fetchall(
            f"{_SELECT} WHERE status = 'ok' AND cache_key IN ({marks})", part
        )
        for row in rows:
            found[row["cache_key"]] = _to_record(row)
    return found


async def ok_ids(conn: Conn, keys: Sequence[str]) -> dict[str, int]:
    """The row id of each key's ``ok`` rollout (missing keys are absent), nothing decoded."""
    ids: dict[str, int] = {}
    for part in chunks(list(dict.fromkeys(keys))):
        marks = ",".join("?" * len(part))
        rows = await conn.fetchall(
            f"SELECT cache_key, id FROM rollouts WHERE status = 'ok' AND cache_key IN ({marks})",
            part,
        )
        ids.update((row[0], row[1]) for row in rows)
    return ids


async def insert_rollouts(
    conn: Conn, records: Sequence[RolloutRecord], rows: Sequence[tuple[object, ...]]
) -> list[int]:
    """Insert ``rows`` (from :func:`to_row`, parallel to ``records``); their ids in order.

    Must run inside a write transaction. An ``ok`` row whose key already has an ``ok`` row
    (stored before, or earlier in this batch) is not inserted; its id is the existing one.
    """
    existing = await ok_ids(conn, [r.cache_key for r in records if r.status == "ok"])
    slots: list[tuple[bool, int]] = []  # (is_new, existing id | index into fresh)
    fresh: list[tuple[object, ...]] = []
    fresh_keys: list[str | None] = []  # the cache key of each fresh ok row
    batch_ok: dict[str, int] = {}
    for record, row in zip(records, rows, strict=True):
        if record.status == "ok":
            if record.cache_key in existing:
                slots.append((False, existing[record.cache_key]))
                continue
            if record.cache_key in batch_ok:
                slots.append((True, batch_ok[record.cache_key]))
                continue
            batch_ok[record.cache_key] = len(fresh)
        slots.append((True, len(fresh)))
        fresh.append(row)
        fresh_keys.append(record.cache_key if record.status == "ok" else None)
    new_ids: list[int] = []
    if fresh:
        insert = _insert_concurrent if conn.dialect.postgres else _insert_sole_writer
        new_ids = await insert(conn, fresh, fresh_keys)
    return [new_ids[value] if is_new else value for is_new, value in slots]


async def _insert_sole_writer(
    conn: Conn, fresh: list[tuple[object, ...]], keys: list[str | None]
) -> list[int]:
    """SQLite: one ``executemany``. AUTOINCREMENT gives each new row one more than the largest
    id the table ever held, and we hold the write lock (no other connection inserts
    meanwhile), so the batch's ids are consecutive and end at ``last_insert_rowid()``: two
    round trips to the connection's thread, where reading the maximum before and the new ids
    after took three."""
    await conn.executemany(_INSERT, fresh)
    rows = await conn.fetchall("SELECT last_insert_rowid()")
    last = int(rows[0][0])
    return list(range(last - len(fresh) + 1, last + 1))


async def _insert_concurrent(
    conn: Conn, fresh: list[tuple[object, ...]], keys: list[str | None]
) -> list[int]:
    """PostgreSQL: each row ``RETURNING id``; an ok row another process committed first
    (after our lookup) returns nothing, and takes the id of that process's row."""
    returned = await conn.fetch_each(_INSERT_FIRST_OK, fresh)
    lost = [key for key, rows in zip(keys, returned, strict=True) if not rows and key]
    winners = await ok_ids(conn, lost) if lost else {}
    ids = []
    for key, rows in zip(keys, returned, strict=True):
        if rows:
            ids.append(int(rows[0][0]))
        elif key is not None and key in winners:
            ids.append(winners[key])
        else:
            raise WorkspaceError(f"a rollout of cache key {key!r} was neither stored nor found")
    return ids


async def fetch_rollout(conn: Conn, rollout_id: int) -> RolloutRecord:
    """The rollout row ``rollout_id`` with its trace; unknown is a ``UserError``."""
    rows = await conn.fetchall(f"{_SELECT} WHERE id = ?", (rollout_id,))
    if not rows:
        raise UserError(f"unknown rollout id {rollout_id}")
    return _to_record(rows[0])


async def rollouts_for_candidate(conn: Conn, run_id: str, candidate_id: str) -> list[RolloutRecord]:
    """Every rollout a run used for a candidate: paid by the run or served from the cache
    (linked as trials), errors included, oldest first."""
    rows = await conn.fetchall(
        f"{_SELECT} WHERE (run_id = ? AND candidate_id = ?) OR id IN "
        "(SELECT rollout_id FROM trials WHERE run_id = ? AND candidate_id = ?) ORDER BY id",
        (run_id, candidate_id, run_id, candidate_id),
    )
    return [_to_record(row) for row in rows]


async def fetch_run_rollout(conn: Conn, run_id: str, rollout_id: int) -> RolloutRecord:
    """Rollout ``rollout_id`` if run ``run_id`` used it (paid it, or reused it from the cache:
    a cached trial names the key of the ``ok`` row it was served); else a ``UserError``."""
    rows = await conn.fetchall(
        f"{_SELECT} AS r WHERE r.id = ? AND (r.run_id = ? OR EXISTS (SELECT 1 FROM trials AS t"
        " WHERE t.run_id = ? AND (t.rollout_id = r.id OR (t.rollout_id IS NULL"
        " AND t.cache_key = r.cache_key AND r.status = 'ok'))))",
        (rollout_id, run_id, run_id),
    )
    if not rows:
        raise UserError(f"run {run_id!r} has no rollout {rollout_id}")
    return _to_record(rows[0])

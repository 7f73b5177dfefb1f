"""Schema versions: fresh files, forward upgrades of old files, and refusals."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import time
import zlib
from pathlib import Path

import pytest

from schemas import CandidateRecord, Trial, WorkspaceError
from workspace import MIGRATIONS, SCHEMA_VERSION, Workspace
from workspace.migrations import APPLICATION_ID


def _pragma(db: Path, name: str) -> object:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]


def _old_file(root: Path, version: int) -> Path:
    """A workspace file as a release at ``version`` left it, holding a run, a rollout, an event."""
    root.mkdir(parents=True)
    db = root / "workspace.sqlite"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for step in MIGRATIONS[:version]:
        for statement in step.statements:
            conn.execute(statement)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {step.version}")
    now = time.time()
    conn.execute(
        "INSERT INTO runs (run_id, config, status, phase, state, created_at, updated_at)"
        " VALUES ('run-old', '{\"seed\": 7}', 'completed', 'completed', '{}', ?, ?)",
        (now, now),
    )
    trace = zlib.compress(json.dumps({"messages": [{"role": "user", "content": "q"}]}).encode())
    conn.execute(
        "INSERT INTO rollouts (cache_key, run_id, candidate_id, candidate_hash, fingerprint,"
        " seed, policy, status, reward, trace, usage, created_at)"
        " VALUES ('k-old', 'run-old', 'c1', 'h1', 'fp', 's1', '{}', 'ok', 0.75, ?, '{}', ?)",
        (trace, now),
    )
    conn.execute(
        "INSERT INTO events (run_id, type, data, ts) VALUES ('run-old', 'done', '{\"n\": 1}', ?)",
        (now,),
    )
    conn.execute(
        "INSERT INTO candidates (run_id, candidate_id, content_hash, components, origin,"
        " rationale, created_at) VALUES ('run-old', 'c1', 'h1', '{\"p\": \"x\"}', 'mutation',"
        " 'old', ?)",
        (now,),
    )
    conn.close()
    return db


def test_migrations_are_numbered_one_to_n() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert SCHEMA_VERSION == len(MIGRATIONS) >= 2


async def test_new_workspace_is_latest_version_in_wal_mode(tmp_path: Path) -> None:
    async with Workspace(tmp_path / "nested" / "ws") as ws:
        assert ws.db_path == tmp_path / "nested" / "ws" / "workspace.sqlite"
        async with ws._db.read() as conn:
            (fk,) = (await conn.fetchall("PRAGMA foreign_keys"))[0]
            (sync,) = (await conn.fetchall("PRAGMA synchronous"))[0]
        assert fk == 1
        assert sync == 1  # NORMAL
    db = tmp_path / "nested" / "ws" / "workspace.sqlite"
    assert _pragma(db, "user_version") == SCHEMA_VERSION
    assert _pragma(db, "journal_mode") == "wal"
    assert _pragma(db, "application_id") == APPLICATION_ID


@pytest.mark.parametrize("start", range(1, SCHEMA_VERSION))
async def test_old_file_is_upgraded_with_its_data(tmp_path: Path, start: int) -> None:
    db = _old_file(tmp_path / "ws", start)
    assert _pragma(db, "user_version") == start
    async with Workspace(tmp_path / "ws") as ws:
        run = await ws.get_run("run-old")
        assert (run.status, run.config) == ("completed", {"seed": 7})
        hit = await ws.lookup("k-old")
        assert hit is not None and hit.reward == 0.75
        assert hit.trace == {"messages": [{"role": "user", "content": "q"}]}
        assert [e.type for e in await ws.events_since("run-old")] == ["done"]
        # Tables of the later versions work on the upgraded file.
        await ws.save_frontier("run-old", {"s1": ["c1"]}, {"s1": 0.75})
        assert await ws.load_frontier("run-old") == ({"s1": ["c1"]}, {"s1": 0.75})
        trial = Trial(
            run_id="run-old", candidate_id="c1", seed="s1", cache_key="k-old", cached=True,
            status="ok", rollout_id=hit.rollout_id,
        )  # fmt: skip
        await ws.link_trials("run-old", [trial])
        assert await ws.count_trials("run-old") == {"paid": 0, "cached": 1, "errors": 0}
        old = await ws.get_candidate("run-old", "c1")
        assert (old.components, old.origin, old.rationale) == ({"p": "x"}, "mutation", "old")
        await ws.add_candidate(
            CandidateRecord(
                run_id="run-old", candidate_id="c2", content_hash="h2", components={"p": "y"},
                parents=["c1"], origin="mipro",
            )
        )  # fmt: skip
        assert [c.origin for c in await ws.list_candidates("run-old")] == ["mutation", "mipro"]
    assert _pragma(db, "user_version") == SCHEMA_VERSION
    assert _pragma(db, "integrity_check") == "ok"


async def test_v7_numbers_and_counts_the_trials_a_file_already_holds(tmp_path: Path) -> None:
    db = _old_file(tmp_path / "ws", 6)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO runs (run_id, config, status, phase, state, created_at, updated_at)"
            " VALUES ('run-two', '{}', 'completed', 'completed', '{}', 0, 0)"
        )
        rid = conn.execute("SELECT id FROM rollouts").fetchone()[0]
        feed = [("run-old", 0, "ok"), ("run-two", 1, "ok"), ("run-old", 1, "ok"),
                ("run-old", 0, "error"), ("run-two", 0, "ok"), ("run-old", 0, "ok")]  # fmt: skip
        for i, (run_id, cached, status) in enumerate(feed):
            conn.execute(
                "INSERT INTO trials (run_id, candidate_id, seed, cache_key, cached, status,"
                " rollout_id, created_at) VALUES (?, 'c1', ?, 'k-old', ?, ?, ?, 0)",
                (run_id, f"s{i}", cached, status, rid),
            )
    async with Workspace(tmp_path / "ws") as ws:
        assert [t.seed for t in await ws.list_trials("run-old")] == ["s0", "s2", "s3", "s5"]
        assert [t.seed for t in await ws.list_trials("run-old", offset=2, limit=1)] == ["s3"]
        assert [t.seed for t in await ws.list_trials("run-two", offset=1)] == ["s4"]
        assert await ws.count_trials("run-old") == {"paid": 2, "cached": 1, "errors": 1}
        assert await ws.count_trials("run-two") == {"paid": 1, "cached": 1, "errors": 0}
        trial = Trial(run_id="run-two", candidate_id="c1", seed="s6", cache_key="k-old",
                      cached=True, status="ok", rollout_id=rid)  # fmt: skip
        await ws.link_trials("run-two", [trial])  # numbered after the old ones
        assert [t.seed for t in await ws.list_trials("run-two", offset=2)] == ["s6"]
        assert await ws.count_trials("run-two") == {"paid": 1, "cached": 2, "errors": 0}


async def test_newer_schema_is_refused_and_file_left_untouched(tmp_path: Path) -> None:
    async with Workspace(tmp_path / "ws") as ws:
        await ws.append_event((await ws.create_run(_config())).run_id, "created")
    db = tmp_path / "ws" / "workspace.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    for readonly in (False, True):
        with pytest.raises(WorkspaceError, match=rf"schema version {SCHEMA_VERSION + 1}.*up to"):
            await Workspace(tmp_path / "ws", readonly=readonly).open()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert _pragma(db, "user_version") == SCHEMA_VERSION + 1


async def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    with sqlite3.connect(tmp_path / "ws" / "workspace.sqlite") as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(WorkspaceError, match="not a gepa-runtime workspace"):
        await Workspace(tmp_path / "ws").open()


async def test_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "workspace.sqlite").write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(WorkspaceError, match="workspace.sqlite: file is not a database"):
        await Workspace(tmp_path / "ws").open()


async def test_readonly_opener_needs_an_existing_up_to_date_file(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="no workspace database"):
        await Workspace(tmp_path / "missing", readonly=True).open()
    assert not (tmp_path / "missing").exists()
    _old_file(tmp_path / "ws", 1)
    with pytest.raises(WorkspaceError, match="needs migrating"):
        await Workspace(tmp_path / "ws", readonly=True, busy_timeout_s=0.2).open()
    assert _pragma(tmp_path / "ws" / "workspace.sqlite", "user_version") == 1


async def test_readonly_opener_waits_for_a_writer_that_is_creating_the_file(
    tmp_path: Path,
) -> None:
    # The console may open the file between the writer creating it and migrating it.
    (tmp_path / "ws").mkdir()
    sqlite3.connect(tmp_path / "ws" / "workspace.sqlite").close()  # created, version 0

    async def writer_arrives() -> None:
        await asyncio.sleep(0.3)
        async with Workspace(tmp_path / "ws") as ws:
            await ws.create_run(_config(), run_id="r1")

    writer = asyncio.create_task(writer_arrives())
    async with Workspace(tmp_path / "ws", readonly=True) as reader:
        await writer
        assert [r.run_id for r in await reader.list_runs()] == ["r1"]


async def test_openers_migrating_a_new_file_at_once_agree(tmp_path: Path) -> None:
    openers = [Workspace(tmp_path / "ws") for _ in range(4)]
    results = await asyncio.gather(*(w.open() for w in openers), return_exceptions=True)
    try:
        assert [r for r in results if isinstance(r, BaseException)] == []
        run = await openers[0].create_run(_config())
        for other in openers[1:]:
            assert (await other.get_run(run.run_id)).run_id == run.run_id
    finally:
        for opener in openers:
            await opener.close()
    assert _pragma(tmp_path / "ws" / "workspace.sqlite", "user_version") == SCHEMA_VERSION


def _config():
    from schemas import RunConfig

    return RunConfig(containers=["http://127.0.0.1:9"])

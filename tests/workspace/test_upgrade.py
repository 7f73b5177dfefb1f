"""Upgrading a store from this release's schema while runners of this release still use it.

A store as this release leaves it (SQLite version 7, PostgreSQL version 1: built from the
released migrations, which are never edited) holds a run and its rollouts; a runner of this
release keeps writing rollouts and events over its own open connection, with this release's
SQL, while a runner of the next version opens the store and migrates it (claims and shared
endpoint limits: new tables only). The old runner's writes before, during and after the
migration all land, nothing stored is lost, and the new runner uses the new tables at once.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from schemas import RunConfig
from workspace import MIGRATIONS, SCHEMA_VERSION, Workspace
from workspace.claims import new_claimant
from workspace.migrations import APPLICATION_ID

RELEASED_SQLITE = 7  # the schema version of workspace.sqlite in this release
RELEASED_POSTGRES = 1  # and of the PostgreSQL store

_RUN = (
    "INSERT INTO runs (run_id, config, status, phase, state, created_at, updated_at)"
    " VALUES ('run-old', '{}', 'running', 'searching', '{}', 0, 0)"
)
_ROLLOUT = (
    "INSERT INTO rollouts (cache_key, run_id, candidate_id, candidate_hash, fingerprint, seed,"
    " policy, status, reward, trace, usage, created_at) VALUES"
    " (?, 'run-old', 'c1', 'h1', 'fp', ?, '{}', 'ok', 0.5, ?, '{}', 0)"
)
_EVENT = "INSERT INTO events (run_id, type, data, ts) VALUES ('run-old', 'trials', '{}', 0)"


class OldRunner(threading.Thread):
    """This release's runner: one open connection, a rollout and an event per transaction."""

    def __init__(self, write: Callable[[int], None], close: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.write, self.close = write, close
        self.written = 0
        self.failures: list[BaseException] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.write(self.written)
                self.written += 1
                time.sleep(0.005)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            self.failures.append(exc)
        finally:
            self.close()

    def finish(self, at_least: int) -> int:
        """Let it write ``at_least`` more rows, stop it, and return how many it wrote."""
        target = self.written + at_least
        deadline = time.monotonic() + 30
        while self.written < target and not self.failures and time.monotonic() < deadline:
            time.sleep(0.01)
        self.stop.set()
        self.join(timeout=30)
        assert not self.failures, self.failures
        return self.written


def _sqlite_store(folder: Path) -> tuple[str, Callable[[], OldRunner]]:
    folder.mkdir()
    db = folder / "workspace.sqlite"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for step in MIGRATIONS[:RELEASED_SQLITE]:
        for statement in step.statements:
            conn.execute(statement)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {RELEASED_SQLITE}")
    conn.execute(_RUN)
    conn.close()

    def runner() -> OldRunner:
        old = sqlite3.connect(db, isolation_level=None, timeout=10, check_same_thread=False)

        def write(i: int) -> None:
            old.execute("BEGIN IMMEDIATE")
            old.execute(_ROLLOUT, (f"k-old-{i}", f"s{i}", zlib.compress(b"{}")))
            old.execute(_EVENT)
            old.execute("COMMIT")

        return OldRunner(write, old.close)

    return str(folder), runner


def _postgres_store(url: str) -> tuple[str, Callable[[], OldRunner]]:
    import psycopg

    from workspace.postgres import PG_MIGRATIONS

    with psycopg.connect(url, autocommit=True) as conn:
        for step in PG_MIGRATIONS[:RELEASED_POSTGRES]:
            for statement in step.statements:
                conn.execute(statement)  # type: ignore[arg-type]
        conn.execute("UPDATE gepa_schema SET version = %s", (RELEASED_POSTGRES,))
        conn.execute(_RUN)

    def runner() -> OldRunner:
        old = psycopg.connect(url, autocommit=True)

        def write(i: int) -> None:
            with old.transaction():
                old.execute(
                    _ROLLOUT.replace("?", "%s"),  # type: ignore[arg-type]
                    (f"k-old-{i}", f"s{i}", zlib.compress(b"{}")),
                )
                old.execute(_EVENT)  # type: ignore[arg-type]

        return OldRunner(write, old.close)

    return url, runner


@pytest.fixture(params=["sqlite", "postgres"])
def released(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Callable[[], OldRunner]]:
    if request.param == "postgres":
        return _postgres_store(request.getfixturevalue("postgres_store_url"))
    return _sqlite_store(tmp_path / "ws")


async def test_a_store_of_this_release_is_upgraded_under_its_live_runners(
    released: tuple[str, Callable[[], OldRunner]], tmp_path: Path
) -> None:
    target, make_runner = released
    old = make_runner()
    old.start()
    while old.written < 20 and not old.failures:
        time.sleep(0.01)
    async with Workspace(target, run_files=tmp_path / "files") as ws:  # migrates
        version = await _version(ws)
        # The new runner uses the new tables at once, beside the old one.
        run = await ws.create_run(RunConfig(containers=["http://127.0.0.1:9"]))
        split = await ws.claims.take(new_claimant(run.run_id, 60.0), ["k-new", "k-old-0"])
        assert (split.mine, split.stored) == (["k-new"], ["k-old-0"])
        written = old.finish(at_least=20)  # and the old runner goes on writing after it
        hits = await ws.lookup_many([f"k-old-{i}" for i in range(written)])
        events = await ws.events_since("run-old", 0, 100_000)
        assert (await ws.get_run("run-old")).status == "running"
    assert version == (SCHEMA_VERSION if "://" not in target else _pg_version())
    assert len(hits) == written and len(events) == written >= 40


async def _version(ws: Workspace) -> int:
    async with ws._db.read() as conn:
        if ws.backend == "sqlite":
            return int((await conn.fetchall("PRAGMA user_version"))[0][0])
        return int((await conn.fetchall("SELECT version FROM gepa_schema"))[0][0])


def _pg_version() -> int:
    from workspace.postgres import PG_SCHEMA_VERSION

    return PG_SCHEMA_VERSION

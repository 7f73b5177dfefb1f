"""The PostgreSQL store under a restart: cut-off work runs again once, a commit cut off on its
way is settled by the server, and a server out of reach past the limit is said clearly.

The restarts happen on a server of the test's own (:func:`optimizer.testing.postgres.
private_server`), never on the one other tests share.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from optimizer.testing.postgres import PrivateServer, fresh_schema, private_server_missing
from optimizer.testing.postgres import private_server as start_private_server
from schemas import RunConfig, StoreUnreachable
from tests.postgres import unavailable
from tests.workspace.conftest import make_rollout
from workspace import Workspace
from workspace.postgres import PostgresDatabase

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[PrivateServer]:
    missing = private_server_missing()
    if missing is not None:
        unavailable(missing)
    with start_private_server() as started:
        yield started


@pytest.fixture
def store(server: PrivateServer) -> Iterator[str]:
    with fresh_schema(server.url) as url:
        yield url


def _restart_when(server: PrivateServer, ready: threading.Event, times: int) -> threading.Thread:
    def restart() -> None:
        ready.wait(60)
        for _ in range(times):
            server.restart()
            time.sleep(0.3)

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    return thread


async def test_writes_and_reads_cut_off_by_restarts_run_again_once(
    server: PrivateServer, store: str, tmp_path: Any
) -> None:
    ready = threading.Event()
    restarts = _restart_when(server, ready, times=2)
    async with Workspace(store, run_files=tmp_path) as ws:
        run_id = (await ws.create_run(RunConfig(containers=["http://127.0.0.1:9"]))).run_id
        batches = 0
        started = time.monotonic()
        while restarts.is_alive() or batches < 40:
            records = [make_rollout(f"b{batches}-s{i}", run_id=run_id) for i in range(5)]
            await ws.record_paid_trials(run_id, records)
            await ws.append_event(run_id, "trials", {"batch": batches})
            assert len(await ws.lookup_many([r.cache_key for r in records])) == 5
            batches += 1
            if batches == 10:
                ready.set()
            assert time.monotonic() - started < 60
        counts = await ws.count_trials(run_id)
        events = await ws.events_since(run_id, 0, 100_000)
    assert counts == {"paid": 5 * batches, "cached": 0, "errors": 0}
    assert [e.data["batch"] for e in events] == list(range(batches))


async def test_a_commit_cut_off_on_its_way_is_asked_of_the_server(
    postgres_store_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection drops once ``COMMIT`` was sent: the server did commit, and the body is
    not run again; it drops before ``COMMIT`` ran: nothing happened, and the body runs again."""
    original = PostgresDatabase._end
    drop: list[str] = []  # "after" / "before": the next COMMIT's connection drops then

    async def dropping(pool: Any, conn: Any, sql: str) -> None:
        if sql != "COMMIT" or not drop:
            return await original(pool, conn, sql)
        when = drop.pop()
        try:
            if when == "after":
                await conn.execute("COMMIT")
            await conn.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        finally:
            await pool.putconn(conn)

    monkeypatch.setattr(PostgresDatabase, "_end", staticmethod(dropping))
    async with Workspace(postgres_store_url, run_files=tmp_path) as ws:
        runs: list[str] = []

        async def body(conn: Any) -> str:
            runs.append("ran")
            await conn.execute(
                "INSERT INTO runs (run_id, config, status, phase, state, created_at, updated_at)"
                f" VALUES ('run-{len(runs)}', '{{}}', 'created', 'created', '{{}}', 0, 0)"
            )
            return f"run-{len(runs)}"

        drop.append("after")
        assert await ws._db.at_once(body) == "run-1"
        assert runs == ["ran"]
        drop.append("before")
        assert await ws._db.at_once(body) == "run-3"  # run-2 was rolled back with its COMMIT
        assert runs == ["ran", "ran", "ran"]
        assert sorted(r.run_id for r in await ws.list_runs()) == ["run-1", "run-3"]


async def test_a_server_out_of_reach_past_the_limit_is_said_and_then_used_again(
    server: PrivateServer, store: str, tmp_path: Any
) -> None:
    async with Workspace(store, run_files=tmp_path, outage_limit_s=2) as ws:
        run_id = (await ws.create_run(RunConfig(containers=["http://127.0.0.1:9"]))).run_id
        await asyncio.to_thread(server.stop)
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnreachable) as unreachable:
                await ws.append_event(run_id, "trials", {})
            waited = time.monotonic() - started
            with pytest.raises(StoreUnreachable):  # the limit is spent: said at once
                await ws.get_run(run_id)
            again = time.monotonic() - started - waited
        finally:
            await asyncio.to_thread(server.start)
        message = str(unreachable.value)
        assert "out of reach for" in message and "past the limit of 2 s" in message
        assert "GEPA_DB_OUTAGE_LIMIT" in message and "gepa-runtime optimize run RUN_ID" in message
        assert 2 <= waited < 10 and again < 3
        await ws.append_event(run_id, "trials", {"back": True})  # the same store, back
        assert [e.data for e in await ws.events_since(run_id)] == [{"back": True}]

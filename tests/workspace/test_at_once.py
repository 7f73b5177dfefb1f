"""Writes run whole on SQLite's connection thread (``Database.at_once``): one round trip each."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from schemas import RunConfig, WorkspaceError
from tests.workspace.conftest import count_round_trips, make_rollout
from workspace import Workspace
from workspace.conn import Conn

CONFIG = RunConfig(containers=["http://127.0.0.1:9"])


async def test_a_batch_of_paid_rollouts_is_one_round_trip_and_committed(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollout queue's hot path: encoding, the rollouts, their trials and the run's counts
    in one call on the connection's thread (it was seven statements and a worker thread), and
    committed when it returns: another connection reads all of it."""
    async with Workspace(tmp_path / "ws") as ws:
        run_id = (await ws.create_run(CONFIG)).run_id
        records = [make_rollout(f"seed-{i}", run_id=run_id) for i in range(3)]
        queued = count_round_trips(ws, monkeypatch)
        ids = await ws.record_paid_trials(run_id, records)
        assert queued == ["_whole"]
        with sqlite3.connect(tmp_path / "ws" / "workspace.sqlite") as other:
            stored = other.execute("SELECT id, seed FROM rollouts ORDER BY id").fetchall()
            assert stored == [(i, f"seed-{k}") for k, i in enumerate(ids)]
            trials = other.execute("SELECT rollout_id, pos FROM trials ORDER BY pos").fetchall()
            assert trials == [(i, k) for k, i in enumerate(ids)]
            counts = other.execute("SELECT trials, paid FROM trial_counts").fetchall()
            assert counts == [(3, 3)]


async def test_a_body_that_raises_is_rolled_back_and_its_error_raised(tmp_path) -> None:
    async with Workspace(tmp_path / "ws") as ws:
        run_id = (await ws.create_run(CONFIG)).run_id

        async def half(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO events (run_id, type, data, ts) VALUES (?, 'x', '{}', 0)", (run_id,)
            )
            raise ValueError("the second half failed")

        with pytest.raises(ValueError, match="second half"):
            await ws._db.at_once(half)
        with pytest.raises(WorkspaceError, match="no such table"):
            await ws._db.at_once(lambda conn: conn.execute("INSERT INTO nowhere VALUES (1)"))
        assert await ws.events_since(run_id, 0) == []
        await ws.append_event(run_id, "after")  # the connection is usable again
        assert [e.type for e in await ws.events_since(run_id, 0)] == ["after"]


async def test_a_body_that_awaits_something_else_is_refused_and_rolled_back(tmp_path) -> None:
    """A body run on the connection's thread cannot wait for the event loop: it is stopped at
    its first such await with an error that says what to use, and what it wrote is undone."""
    async with Workspace(tmp_path / "ws") as ws:
        run_id = (await ws.create_run(CONFIG)).run_id

        async def sleepy(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO events (run_id, type, data, ts) VALUES (?, 'x', '{}', 0)", (run_id,)
            )
            await asyncio.sleep(0)

        with pytest.raises(WorkspaceError, match=r"awaited something besides .*Database.write"):
            await ws._db.at_once(sleepy)
        assert await ws.events_since(run_id, 0) == []

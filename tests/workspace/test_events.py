"""The append-only event log: ordering, resumption, and readers in another connection."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from schemas import RunConfig, UserError, WorkspaceError
from tests.workspace.conftest import Store, count_round_trips
from workspace import Workspace

CONFIG = RunConfig(containers=["http://127.0.0.1:9"])


async def test_seq_is_monotonic_across_runs_and_resumable(ws: Workspace) -> None:
    a = (await ws.create_run(CONFIG)).run_id
    b = (await ws.create_run(CONFIG)).run_id
    appended = []
    for i in range(30):
        appended.append(await ws.append_event(a if i % 3 else b, "tick", {"i": i}))
    seqs = [e.seq for e in appended]
    assert seqs == sorted(seqs) and len(set(seqs)) == 30

    of_a = await ws.events_since(a)
    assert [e.data["i"] for e in of_a] == [i for i in range(30) if i % 3]
    assert of_a == [e for e in appended if e.run_id == a]
    # An SSE client that saw the 5th event of run a resumes right after it.
    resumed = await ws.events_since(a, after_seq=of_a[4].seq)
    assert resumed == of_a[5:]
    assert await ws.events_since(a, after_seq=of_a[4].seq, limit=3) == of_a[5:8]
    assert await ws.events_since(a, after_seq=appended[-1].seq) == []
    # None follows every run of the workspace.
    assert await ws.events_since(None) == appended


async def test_events_of_given_types_only(ws: Workspace) -> None:
    """``types`` keeps the events of those types (what a run reads its actions with), on
    either engine; ``limit`` counts the kept ones."""
    a = (await ws.create_run(CONFIG)).run_id
    b = (await ws.create_run(CONFIG)).run_id
    for i in range(12):
        await ws.append_event(a if i % 2 else b, "action" if i % 3 == 0 else "tick", {"i": i})
    actions = await ws.events_since(a, types=("action",))
    assert [e.data["i"] for e in actions] == [3, 9]
    assert [e.data["i"] for e in await ws.events_since(a, actions[0].seq, types=["action"])] == [9]
    both = await ws.events_since(None, types=("action", "tick"), limit=4)
    assert [e.data["i"] for e in both] == [0, 1, 2, 3]
    assert [e.data["i"] for e in await ws.events_since(None, types=("action",))] == [0, 3, 6, 9]
    assert await ws.events_since(a, types=()) == []
    assert await ws.events_since(a, types=("nothing",)) == []


async def test_concurrent_appends_get_distinct_ordered_seqs(ws: Workspace, run_id) -> None:
    events = await asyncio.gather(*(ws.append_event(run_id, "e", {"i": i}) for i in range(50)))
    stored = await ws.events_since(run_id)
    assert sorted(e.seq for e in events) == [e.seq for e in stored]
    assert {e.data["i"] for e in stored} == set(range(50))


async def test_seq_is_never_reused_after_reopen(store: Store) -> None:
    async with store.open() as ws:
        run_id = (await ws.create_run(CONFIG)).run_id
        last = await ws.append_event(run_id, "a")
    async with store.open() as ws:
        nxt = await ws.append_event(run_id, "b")
    assert nxt.seq > last.seq


async def test_a_follower_never_skips_an_event_of_concurrent_writers(store: Store) -> None:
    """Writers in several processes append at once while a follower (the console's stream)
    reads ``after_seq`` its last seen: it must see every event, in order, none skipped."""
    async with store.open() as w1, store.open() as w2, store.open(readonly=True) as reader:
        runs = [(await w1.create_run(CONFIG)).run_id for _ in range(2)]
        done = asyncio.Event()

        async def write(ws: Workspace, run_id: str) -> None:
            for i in range(150):
                await ws.append_event(run_id, "tick", {"i": i})

        async def follow() -> list[int]:
            seen: list[int] = []
            while True:
                finished = done.is_set()
                seen += [e.seq for e in await reader.events_since(None, seen[-1] if seen else 0)]
                if finished:
                    return seen
                await asyncio.sleep(0)

        follower = asyncio.create_task(follow())
        writers = [write(ws, run_id) for ws in (w1, w2) for run_id in runs]
        await asyncio.gather(*writers)
        done.set()
        seen = await follower
        every = [e.seq for e in await reader.events_since(None, 0, limit=10_000)]
    assert len(every) == 600
    assert seen == every


async def test_a_reader_in_another_connection_sees_committed_events(store: Store) -> None:
    async with store.open() as writer:
        run_id = (await writer.create_run(CONFIG)).run_id
        async with store.open(readonly=True) as reader:
            assert await reader.events_since(run_id) == []
            event = await writer.append_event(run_id, "phase", {"phase": "searching"})
            assert await reader.events_since(run_id) == [event]
            with pytest.raises(WorkspaceError, match="read-only"):
                await reader.append_event(run_id, "nope")


async def test_event_data_must_be_json(ws: Workspace, run_id) -> None:
    with pytest.raises(WorkspaceError, match="not JSON"):
        await ws.append_event(run_id, "bad", {"when": object()})
    assert await ws.events_since(run_id) == []


async def test_on_sqlite_an_event_is_one_round_trip_committed_at_once(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event log's append is the run's most frequent write: on SQLite it is one call on
    the connection's thread (no look-up of the run first, no separate BEGIN and COMMIT,
    each a round trip), and it is committed when it returns: another connection reads it."""
    async with Workspace(tmp_path / "ws") as ws:
        run_id = (await ws.create_run(CONFIG)).run_id
        queued = count_round_trips(ws, monkeypatch)
        event = await ws.append_event(run_id, "tick", {"i": 1})
        assert len(queued) == 1, queued
        with sqlite3.connect(tmp_path / "ws" / "workspace.sqlite") as other:
            rows = other.execute("SELECT seq, type FROM events WHERE run_id = ?", (run_id,))
            assert list(rows) == [(event.seq, "tick")]
        with pytest.raises(UserError, match="unknown run 'nope'"):
            await ws.append_event("nope", "tick")

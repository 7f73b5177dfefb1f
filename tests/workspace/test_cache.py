"""The rollout cache: hits, misses, invalidation, error rows, first-wins, durability."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path

import pytest

from schemas import RunConfig, Usage, UserError, WorkspaceError
from tests.workspace.conftest import Store
from workspace import Workspace


async def test_miss_then_hit_with_every_field_round_tripped(ws: Workspace, rollout) -> None:
    record = rollout(
        "seed-7",
        reward=0.5,
        objectives={"reward": 0.5, "latency": 0.9},
        output={"label": "card_arrival", "scores": [0.1, 0.9]},
        feedback="predicted card_arrival, expected card_delivery_estimate",
        usage=Usage(input_tokens=120, output_tokens=7, cost_usd=0.0003, latency_ms=812.0),
        latency_ms=812.5,
        attempts=3,
        trace={"messages": [{"role": "system", "content": "é ✓"}], "events": [{"t": 1}]},
    )
    assert await ws.lookup(record.cache_key) is None
    [rollout_id] = await ws.record_rollouts([record])
    hit = await ws.lookup(record.cache_key)
    assert hit is not None
    assert hit.rollout_id == rollout_id
    assert hit.model_dump(exclude={"rollout_id"}) == record.model_dump(exclude={"rollout_id"})
    assert (await ws.get_rollout(rollout_id)).model_dump() == hit.model_dump()


async def test_a_changed_fingerprint_policy_or_prompt_misses(ws: Workspace, rollout) -> None:
    stored = rollout("seed-1", fingerprint="fp-1")
    await ws.record_rollouts([stored])
    assert await ws.lookup(stored.cache_key) is not None
    variants = [
        rollout("seed-1", fingerprint="fp-2"),  # the container changed: code, data, verifier
        rollout("seed-1", model="gpt-4o-mini"),  # another student model
        rollout("seed-1", prompt="You are a careful classifier."),  # another candidate
        rollout("seed-2"),  # another seed
    ]
    keys = [v.cache_key for v in variants]
    assert len(set(keys) | {stored.cache_key}) == 5
    assert await ws.lookup_many(keys) == {}
    assert set(await ws.lookup_many([*keys, stored.cache_key])) == {stored.cache_key}
    assert await ws.stored_ok([*keys, stored.cache_key]) == {stored.cache_key}


async def test_error_rows_are_stored_but_never_served(ws: Workspace, rollout, run_id) -> None:
    error = rollout("seed-1", status="error", run_id=run_id)
    [error_id] = await ws.record_rollouts([error])
    assert await ws.lookup(error.cache_key) is None
    assert await ws.lookup_many([error.cache_key]) == {}
    assert await ws.stored_ok([error.cache_key]) == set()
    stored = await ws.get_rollout(error_id)
    assert (stored.status, stored.error, stored.reward) == ("error", error.error, None)

    ok = rollout("seed-1", reward=0.25, run_id=run_id)
    assert ok.cache_key == error.cache_key
    [ok_id] = await ws.record_rollouts([ok])
    await ws.record_rollouts([rollout("seed-1", status="error", run_id=run_id)])
    hit = await ws.lookup(ok.cache_key)
    assert hit is not None and (hit.rollout_id, hit.status, hit.reward) == (ok_id, "ok", 0.25)
    rows = await ws.rollouts_for_candidate(run_id, ok.candidate_id)
    assert [r.status for r in rows] == ["error", "ok", "error"]


async def test_first_ok_row_wins(ws: Workspace, rollout) -> None:
    first, second = rollout("s", reward=1.0), rollout("s", reward=0.0)
    [first_id] = await ws.record_rollouts([first])
    assert await ws.record_rollouts([second]) == [first_id]
    hit = await ws.lookup(first.cache_key)
    assert hit is not None and hit.reward == 1.0
    assert len(await ws.rollouts_for_candidate("run-a", first.candidate_id)) == 1


async def test_ids_come_back_in_order_with_duplicates_in_one_batch(ws: Workspace, rollout) -> None:
    a, b = rollout("a"), rollout("b")
    err = rollout("c", status="error")
    ids = await ws.record_rollouts([a, err, b, rollout("a", reward=0.0), err])
    assert ids[0] == ids[3]
    assert len(set(ids)) == 4  # a, err, b, and the second err row (errors are all kept)
    for record, rollout_id in zip([a, err, b, err], [ids[0], ids[1], ids[2], ids[4]], strict=True):
        got = await ws.get_rollout(rollout_id)
        assert (got.cache_key, got.status) == (record.cache_key, record.status)
    assert (await ws.get_rollout(ids[0])).reward == 1.0
    assert await ws.record_rollouts([]) == []


async def test_new_ids_are_right_after_the_newest_rollouts_were_deleted(
    ws: Workspace, rollout
) -> None:
    """A deleted run takes its rollouts with it, the newest ids included: the next batch's ids
    must still be the rows it stored (ids are never reused)."""
    gone = (await ws.create_run(RunConfig())).run_id
    kept = (await ws.create_run(RunConfig())).run_id
    old = await ws.record_paid_trials(gone, [rollout(f"g{i}", run_id=gone) for i in range(3)])
    await ws.delete_run(gone)
    batch = [rollout(f"k{i}", run_id=kept) for i in range(4)]
    ids = await ws.record_paid_trials(kept, batch)
    assert min(ids) > max(old) and len(set(ids)) == 4
    for record, rollout_id in zip(batch, ids, strict=True):
        assert (await ws.get_rollout(rollout_id)).seed == record.seed


async def test_lookup_many_spans_more_keys_than_one_query_binds(ws: Workspace, rollout) -> None:
    records = [rollout(f"seed-{i}", reward=i / 2000) for i in range(2000)]
    await ws.record_rollouts(records[::2])
    wanted = [r.cache_key for r in records]
    found = await ws.lookup_many(wanted + wanted[:5])  # repeated keys are fine
    assert set(found) == {r.cache_key for r in records[::2]}
    assert found[records[1000].cache_key].reward == 0.5
    assert await ws.stored_ok(wanted + wanted[:5]) == set(found)


async def test_committed_rollouts_survive_reopening(store: Store, rollout) -> None:
    record = rollout("seed-1")
    async with store.open() as ws:
        await ws.record_rollouts([record])
    async with store.open() as ws:
        assert (await ws.lookup(record.cache_key)) is not None


async def test_two_processes_paying_for_the_same_keys_keep_one_ok_row_each(
    store: Store, rollout
) -> None:
    """Runs in two processes (two connections) that store the same rollouts at once: every
    key keeps one ok row, the first committed, and both are told its id."""
    async with store.open() as a, store.open() as b:
        runs = [(await a.create_run(RunConfig())).run_id for _ in range(2)]
        for round_ in range(10):
            batches = [
                [rollout(f"r{round_}-s{i}", run_id=run_id, reward=n / 2) for i in range(20)]
                for n, run_id in enumerate(runs)
            ]
            ids_a, ids_b = await asyncio.gather(
                a.record_paid_trials(runs[0], batches[0]),
                b.record_paid_trials(runs[1], batches[1]),
            )
            assert ids_a == ids_b  # both runs point at the same rows
            stored = await a.lookup_many([r.cache_key for r in batches[0]])
            assert [stored[r.cache_key].rollout_id for r in batches[0]] == ids_a
            # The winner's reward is on every row: one run's rows, never a mix of duplicates.
            assert len({stored[r.cache_key].reward for r in batches[0]}) == 1
        rows = store.sql("SELECT COUNT(*), COUNT(DISTINCT cache_key) FROM rollouts")
        assert rows == [(200, 200)]
        for run_id in runs:
            assert await a.count_trials(run_id) == {"paid": 200, "cached": 0, "errors": 0}


async def test_large_trace_is_truncated_under_the_cap(store: Store, rollout) -> None:
    noise = os.urandom(200_000).hex()  # incompressible
    trace = {
        "messages": [{"role": "user", "content": noise}] + [{"i": i} for i in range(5000)],
        "tool_calls": [],
        "events": [{"name": "done"}],
    }
    record = rollout("seed-1", trace=trace)
    async with store.open(trace_cap_bytes=8192) as ws:
        rollout_id, _ = await ws.record_rollouts([record, rollout("seed-2")])
        got = await ws.get_rollout(rollout_id)
        small = await ws.lookup(rollout("seed-2").cache_key)
    assert got.trace_truncated is True
    assert got.trace["_truncated"] == {"original_bytes": len(_json(trace)), "cap_bytes": 8192}
    assert set(got.trace) == {"messages", "tool_calls", "events", "_truncated"}
    assert got.trace["events"] == [{"name": "done"}]
    assert got.trace["messages"][0]["content"].startswith(noise[:16])
    assert small is not None and small.trace_truncated is False
    sizes = [row[0] for row in store.sql("SELECT length(trace) FROM rollouts")]
    assert max(sizes) <= 8192


async def test_trace_cap_below_the_minimum_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="trace_cap_bytes"):
        Workspace(tmp_path, trace_cap_bytes=100)


async def test_unknown_rollout_id(ws: Workspace) -> None:
    with pytest.raises(UserError, match="unknown rollout id 42"):
        await ws.get_rollout(42)


async def test_a_cancelled_write_is_all_or_nothing_and_leaves_no_open_transaction(
    ws: Workspace, rollout
) -> None:
    def batch(tag: str) -> list:
        return [rollout(f"{tag}-{i}", trace={"t": os.urandom(600).hex()}) for i in range(50)]

    async def cancelled_after(delay: float | None) -> list:
        """A batch whose write is cancelled ``delay`` s after it was started (None: at once,
        before it ran); the write after it must work, and it orders the check after a
        shielded COMMIT that may still have been finishing."""
        records = batch(f"t{delay}")
        task = asyncio.create_task(ws.record_rollouts(records))
        if delay is not None:
            await asyncio.sleep(delay)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        [rollout_id] = await ws.record_rollouts([rollout(f"after-{delay}")])
        assert (await ws.get_rollout(rollout_id)).seed == f"after-{delay}"
        return records

    started = time.perf_counter()
    await ws.record_rollouts(batch("timing"))
    duration = time.perf_counter() - started
    # Cancel at points spread over a whole call: where each lands (before, inside or after the
    # transaction) is the machine's business; each batch is wholly stored or wholly absent.
    for step in range(30):
        records = await cancelled_after(duration * step / 25)
        found = await ws.lookup_many([r.cache_key for r in records])
        assert len(found) in (0, len(records)), f"partial batch at step {step}"
    # Both ends, for certain: a write cancelled before it ran stored nothing; one that
    # returned stored everything, and cancelling its finished task changes nothing.
    never = await cancelled_after(None)
    assert await ws.lookup_many([r.cache_key for r in never]) == {}
    done = batch("done")
    task = asyncio.create_task(ws.record_rollouts(done))
    await task
    task.cancel()
    assert len(await ws.lookup_many([r.cache_key for r in done])) == len(done)


async def test_closed_workspace_says_how_to_open_it(store: Store) -> None:
    ws = store.open()
    with pytest.raises(WorkspaceError, match="not open"):
        await ws.lookup("k")


def _json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()

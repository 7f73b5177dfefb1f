"""Runs, candidates, frontier state and the trials feed."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pydantic
import pytest

from schemas import CandidateRecord, ModelUsage, RunConfig, Trial, UserError, WorkspaceError
from tests.workspace.conftest import Store, make_rollout
from workspace import Workspace, resolve_workspace

CONFIG = RunConfig(containers=["http://127.0.0.1:9"], max_metric_calls=50, seed=3)


def _candidate(run_id: str, cid: str, **fields) -> CandidateRecord:
    return CandidateRecord(
        run_id=run_id, candidate_id=cid, content_hash=cid * 4, components={"p": cid}, **fields
    )


async def test_create_get_list_update(ws: Workspace) -> None:
    first = await ws.create_run(CONFIG)
    assert re.fullmatch(r"run-[0-9a-f]{10}", first.run_id)
    second = await ws.create_run(CONFIG, run_id="my-run_2.b")
    assert first.config == CONFIG.redacted()
    assert [r.run_id for r in await ws.list_runs()] == ["my-run_2.b", first.run_id]

    updated = await ws.update_run(
        first.run_id, status="running", phase="searching", program_id="banking77-intent",
        fingerprint="fp-9", state={"iteration": 4, "budget": {"used": 12}},
    )  # fmt: skip
    again = await ws.get_run(first.run_id)
    assert again == updated
    assert (again.status, again.phase, again.program_id, again.fingerprint) == (
        "running", "searching", "banking77-intent", "fp-9",
    )  # fmt: skip
    assert again.state == {"iteration": 4, "budget": {"used": 12}}
    assert again.updated_at >= first.updated_at and again.created_at == first.created_at
    failed = await ws.update_run(first.run_id, status="failed", error="container went away")
    assert (failed.status, failed.phase, failed.error) == (
        "failed",
        "searching",
        "container went away",
    )
    assert failed.state == again.state  # None keeps a field
    assert (await ws.get_run(second.run_id)).status == "created"


async def test_unknown_run_says_how_to_list_runs(ws: Workspace) -> None:
    expected = (
        f"unknown run 'nope' in {ws.location}; list runs with: "
        f"gepa-runtime runs list --workspace {ws.location}"
    )
    for call in (
        ws.get_run("nope"),
        ws.update_run("nope", status="running"),
        ws.append_event("nope", "x"),
        ws.add_candidate(_candidate("nope", "c1")),
        ws.link_trials(
            "nope",
            [
                Trial(
                    run_id="nope",
                    candidate_id="c",
                    seed="s",
                    cache_key="k",
                    cached=True,
                    status="ok",
                )
            ],
        ),
        ws.save_frontier("nope", {}, {}),
        ws.record_paid_trials("nope", [make_rollout(run_id="nope")]),
        ws.write_file("nope", "report.md", "x"),
    ):
        with pytest.raises(UserError) as info:
            await call
        assert str(info.value) == expected


async def test_bad_or_duplicate_run_ids_and_bad_updates(ws: Workspace) -> None:
    await ws.create_run(CONFIG, run_id="r1")
    with pytest.raises(UserError, match="already exists"):
        await ws.create_run(CONFIG, run_id="r1")
    for bad in ("../evil", "", "a/b", ".hidden", "x" * 200):
        with pytest.raises(UserError, match="invalid run id"):
            await ws.create_run(CONFIG, run_id=bad)
    with pytest.raises(pydantic.ValidationError):
        await ws.update_run("r1", status="exploded")
    assert (await ws.get_run("r1")).status == "created"


async def test_candidates_are_idempotent_and_in_creation_order(ws: Workspace, run_id) -> None:
    other = (await ws.create_run(CONFIG)).run_id
    seed = _candidate(run_id, "c-seed")
    child = _candidate(
        run_id, "c-child", parents=["c-seed"], origin="mutation", rationale="be terse",
        diffs={"c-seed": "-a\n+b"}, proposer_usage=ModelUsage(calls=1, input_tokens=900),
    )  # fmt: skip
    merged = _candidate(run_id, "c-merge", parents=["c-seed", "c-child"], origin="merge")
    assert await ws.add_candidate(seed) is True
    assert await ws.add_candidate(child) is True
    assert await ws.add_candidate(_candidate(other, "c-seed")) is True  # same id, other run
    assert await ws.add_candidate(merged) is True
    assert await ws.add_candidate(seed.model_copy(update={"rationale": "again"})) is False
    listed = await ws.list_candidates(run_id)
    assert [c.candidate_id for c in listed] == ["c-seed", "c-child", "c-merge"]
    assert listed[0].rationale == ""  # the first write is kept
    got = await ws.get_candidate(run_id, "c-child")
    assert got == child
    with pytest.raises(UserError, match="unknown candidate 'zzz' in run"):
        await ws.get_candidate(run_id, "zzz")
    assert [c.candidate_id for c in await ws.list_candidates(other)] == ["c-seed"]


async def test_frontier_is_replaced_as_a_whole(ws: Workspace, run_id) -> None:
    assert await ws.load_frontier(run_id) == ({}, {})
    await ws.save_frontier(run_id, {"s2": ["a", "b"], "s1": ["a"]}, {"s2": 0.5, "s1": 1.0})
    assert await ws.load_frontier(run_id) == (
        {"s2": ["a", "b"], "s1": ["a"]},
        {"s2": 0.5, "s1": 1.0},
    )
    frontier, scores = await ws.load_frontier(run_id)
    assert list(frontier) == ["s2", "s1"]
    await ws.save_frontier(run_id, {"s1": ["c"]}, {"s1": 1.0, "s3": 0.0})
    assert await ws.load_frontier(run_id) == ({"s1": ["c"]}, {"s1": 1.0, "s3": 0.0})


async def test_trials_feed_joins_rollouts_and_counts(ws: Workspace, run_id, rollout) -> None:
    ok = rollout("s1", run_id=run_id, reward=0.5, feedback="close", output="card_arrival")
    err = rollout("s2", run_id=run_id, status="error")
    cached = rollout("s3", run_id="run-earlier", reward=1.0)
    ok_id, err_id, cached_id = await ws.record_rollouts([ok, err, cached])
    trials = [
        Trial(run_id=run_id, candidate_id=ok.candidate_id, seed="s1", cache_key=ok.cache_key,
              cached=False, status="ok", rollout_id=ok_id),
        Trial(run_id=run_id, candidate_id=err.candidate_id, seed="s2", cache_key=err.cache_key,
              cached=False, status="error", rollout_id=err_id),
        Trial(run_id=run_id, candidate_id=cached.candidate_id, seed="s3",
              cache_key=cached.cache_key, cached=True, status="ok", rollout_id=cached_id),
    ]  # fmt: skip
    await ws.link_trials(run_id, trials)
    views = await ws.list_trials(run_id)
    assert [(v.seed, v.cached, v.status, v.reward) for v in views] == [
        ("s1", False, "ok", 0.5), ("s2", False, "error", None), ("s3", True, "ok", 1.0),
    ]  # fmt: skip
    assert (views[0].feedback, views[0].output) == ("close", "card_arrival")
    assert views[1].error == err.error
    assert views[0].seq < views[1].seq < views[2].seq
    assert [v.seed for v in await ws.list_trials(run_id, offset=1, limit=1)] == ["s2"]
    assert await ws.count_trials(run_id) == {"paid": 1, "cached": 1, "errors": 1}
    # The cached rollout counts as this run's use of the candidate.
    used = await ws.rollouts_for_candidate(run_id, cached.candidate_id)
    assert {r.rollout_id for r in used} == {ok_id, err_id, cached_id}
    with pytest.raises(WorkspaceError, match="got a trial of run"):
        await ws.link_trials("another", trials[:1])


async def test_a_trial_must_point_at_a_stored_rollout(ws: Workspace, run_id) -> None:
    trial = Trial(run_id=run_id, candidate_id="c", seed="s", cache_key="k", cached=False,
                  status="ok", rollout_id=999)  # fmt: skip
    with pytest.raises(WorkspaceError, match="(?i)foreign key"):
        await ws.link_trials(run_id, [trial])
    assert await ws.count_trials(run_id) == {"paid": 0, "cached": 0, "errors": 0}


def test_resolve_workspace_prefers_explicit_then_env_then_default(tmp_path: Path) -> None:
    env = {"GEPA_WORKSPACE": str(tmp_path / "from-env")}
    assert resolve_workspace(str(tmp_path / "given"), env) == tmp_path / "given"
    assert resolve_workspace(None, env) == tmp_path / "from-env"
    assert resolve_workspace(None, {}) == Path(".gepa")
    assert resolve_workspace("", {}) == Path(".gepa")
    assert resolve_workspace("~/ws", {}) == Path(os.path.expanduser("~/ws"))


async def test_paid_rollouts_and_their_trials_commit_together(
    ws: Workspace, run_id, rollout
) -> None:
    ok = rollout("s1", run_id=run_id, reward=1.0)
    err = rollout("s2", run_id=run_id, status="error")
    ids = await ws.record_paid_trials(run_id, [ok, err])
    views = await ws.list_trials(run_id)
    assert [(v.seed, v.cached, v.status, v.rollout_id) for v in views] == [
        ("s1", False, "ok", ids[0]), ("s2", False, "error", ids[1]),
    ]  # fmt: skip
    assert await ws.count_trials(run_id) == {"paid": 1, "cached": 0, "errors": 1}
    assert (await ws.lookup(ok.cache_key)) is not None and (await ws.lookup(err.cache_key)) is None
    with pytest.raises(UserError, match="unknown run"):
        await ws.record_paid_trials("run-nope", [rollout("s3", run_id="run-nope")])
    assert (
        await ws.lookup(rollout("s3", run_id="run-nope").cache_key) is None
    )  # nothing half-stored


async def test_trials_appended_by_two_processes_to_one_run_stay_numbered_in_order(
    store: Store,
) -> None:
    """The feed's pages are positions in the run: appends from two connections at once must
    leave them dense and in the order the trials were stored, and the counts exact."""
    async with store.open() as a, store.open() as b:
        run_id = (await a.create_run(CONFIG)).run_id

        def trial(i: int) -> Trial:
            return Trial(run_id=run_id, candidate_id="c", seed=f"s{i}", cache_key=f"k{i}",
                         cached=i % 3 == 0, status="error" if i % 5 == 0 else "ok")  # fmt: skip

        await asyncio.gather(
            *(ws.link_trials(run_id, [trial(2 * i), trial(2 * i + 1)])
              for i, ws in enumerate([a, b] * 30))
        )  # fmt: skip
        views = await b.list_trials(run_id, limit=1000)
        assert len(views) == 120 and [v.seq for v in views] == sorted(v.seq for v in views)
        assert await a.list_trials(run_id, offset=77, limit=5) == views[77:82]
        assert await a.list_trials(run_id, offset=118) == views[118:]
        assert await a.list_trials(run_id, offset=500) == []
        cached = sum(1 for i in range(120) if i % 3 == 0)
        errors = sum(1 for i in range(120) if i % 5 == 0)
        paid = sum(1 for i in range(120) if i % 3 and i % 5)
        assert await a.count_trials(run_id) == {"paid": paid, "cached": cached, "errors": errors}

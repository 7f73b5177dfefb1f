"""A branch: a new run whose baseline is a candidate of another run (``runtime.lifecycle.branch``).

The rule container counts its rollouts per (candidate text, seed): a branch's baseline
rollouts its origin stored are cache hits and never reach it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from optimizer.runtime.lifecycle.branch import (
    branch_config,
    branched_program,
    branches_of,
    create_branch,
    find_candidate,
)
from optimizer.runtime.lifecycle.run import RunResult
from optimizer.searches import run_optimization
from schemas import BranchOf, Program, UserError
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.runs import LABELS, whole_run
from workspace import Workspace


async def _origin(tmp_path: Path, container: RuleContainer) -> tuple[RunResult, str]:
    """A finished run, and a candidate of it scored on train that is neither the baseline
    nor the winner (so its holdout seeds were never scored)."""
    result = await whole_run(tmp_path, container, ScriptedProposer(), proposals_in_flight=1)
    scored = [
        c["candidate_id"]
        for c in result.evidence["candidates"]
        if c["train"] is not None
        and c["candidate_id"] not in (result.best_candidate_id, result.baseline_candidate_id)
    ]
    assert scored, "the run scored no intermediate candidate"
    return result, scored[0]


async def test_a_branch_starts_from_the_candidate_and_pays_nothing_for_its_stored_rollouts(
    tmp_path: Path,
) -> None:
    container = RuleContainer(program(LABELS))
    origin, mid = await _origin(tmp_path, container)
    root = tmp_path / "ws"
    async with Workspace(root) as ws:
        record = await create_branch(ws, origin.run_id, mid[:6], {"max_metric_calls": 300})
        candidate = await ws.get_candidate(origin.run_id, mid)
        origin_trials = await ws.count_trials(origin.run_id)
    assert record.config["branch_of"] == {"run_id": origin.run_id, "candidate_id": mid}
    assert record.config["max_metric_calls"] == 300  # the override; the rest is the origin's
    assert record.config["seed"] == 0 and record.config["containers"] == ["http://rules"]
    before = Counter(container.calls)
    async with container.client() as http:
        branch = await run_optimization(
            workspace=root, run_id=record.run_id, proposer=ScriptedProposer(), http=http
        )
    assert branch.baseline_candidate_id == mid
    assert branch.evidence["baseline"]["components"] == candidate.components
    seeds = program(LABELS)["seeds"]
    paid = {s: container.calls[(candidate.content_hash, s)] - before[(candidate.content_hash, s)]
            for s in seeds["train"] + seeds["holdout"]}  # fmt: skip
    assert all(paid[s] == 0 for s in seeds["train"]), paid  # stored by the origin: free
    assert all(paid[s] == 1 for s in seeds["holdout"]), paid  # never scored there: paid once
    base_why = branch.evidence["decisions"][0]
    assert base_why["candidate_id"] == mid
    assert base_why["created"]["text"] == (
        f"the baseline of this branch: candidate {mid} of run {origin.run_id}"
    )
    async with Workspace(root) as ws:
        assert branches_of(await ws.list_runs(), origin.run_id) == [
            {"run_id": record.run_id, "candidate_id": mid}
        ]
        assert branches_of(await ws.list_runs(), record.run_id) == []
        assert await ws.count_trials(origin.run_id) == origin_trials  # the origin is untouched
        # Once it has run, the branch keeps its baseline: its origin may go.
        await ws.delete_run(origin.run_id)
        own = [c for c in await ws.list_candidates(record.run_id) if c.origin == "seed"]
        assert own[0].components == candidate.components


async def test_a_candidate_is_named_by_its_id_or_a_unique_prefix(tmp_path: Path) -> None:
    origin, mid = await _origin(tmp_path, RuleContainer(program(LABELS)))
    async with Workspace(tmp_path / "ws") as ws:
        assert (await find_candidate(ws, origin.run_id, mid)).candidate_id == mid
        assert (await find_candidate(ws, origin.run_id, mid[:5])).candidate_id == mid
        with pytest.raises(
            UserError, match=r"has no candidate 'nope' \(its candidates: .*runs show"
        ):
            await find_candidate(ws, origin.run_id, "nope")
        with pytest.raises(UserError, match="has no candidate"):
            await find_candidate(ws, origin.run_id, mid[:3])  # too short to be a prefix
        with pytest.raises(UserError, match="unknown run"):
            await create_branch(ws, "run-missing", mid, {})
        with pytest.raises(UserError, match="branch_of is set by the branch itself"):
            await create_branch(ws, origin.run_id, mid, {"branch_of": None})
        with pytest.raises(UserError, match="invalid branch config: concurrency"):
            await create_branch(ws, origin.run_id, mid, {"concurrency": 0})
        assert [r.run_id for r in await ws.list_runs()] == [origin.run_id]  # nothing stored


async def test_the_overrides_replace_the_origins_source_and_budget(tmp_path: Path) -> None:
    origin, mid = await _origin(tmp_path, RuleContainer(program(LABELS)))
    async with Workspace(tmp_path / "ws") as ws:
        record = await ws.get_run(origin.run_id)
    config = branch_config(record, mid, {"auto": "light", "seed": 7})
    assert (config.auto, config.max_metric_calls, config.seed) == ("light", None, 7)
    moved = branch_config(record, mid, {"containers": ["http://other"]})
    assert moved.containers == ["http://other"] and moved.branch_of == BranchOf(
        run_id=origin.run_id, candidate_id=mid
    )


def test_a_program_with_other_components_is_refused() -> None:
    served = Program.model_validate(program(LABELS))
    branch = BranchOf(run_id="run-a", candidate_id="c1")
    mine = branched_program(served, {"system_prompt": "- ant"}, branch)
    assert mine.baseline() == {"system_prompt": "- ant"} and mine.fingerprint == served.fingerprint
    with pytest.raises(UserError, match="has the components other, but the container serves"):
        branched_program(served, {"other": "- ant"}, branch)

"""Two candidates of a finished run side by side, from stored rollouts only
(``optimizer.runtime.results.compare``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from optimizer.runtime.results.compare import compare, compare_lines
from optimizer.runtime.results.why import read_events
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.runs import LABELS, whole_run
from workspace import Workspace


async def test_the_baseline_and_the_winner_side_by_side_cost_nothing(tmp_path: Path) -> None:
    container = RuleContainer(program(LABELS))
    result = await whole_run(tmp_path, container, ScriptedProposer(), proposals_in_flight=1)
    before = Counter(container.calls)
    async with Workspace(tmp_path / "ws") as ws:
        record = await ws.get_run(result.run_id)
        base = await ws.get_candidate(result.run_id, result.baseline_candidate_id)
        best = await ws.get_candidate(result.run_id, result.best_candidate_id)
        events = await read_events(ws, result.run_id)
        view = await compare(ws, record, base, best, events)
        # A run that did not log its splits: every seed either was scored on, unsplit.
        unsplit = await compare(ws, record, base, best, [e for e in events if e.type != "program"])
    assert container.calls == before  # no rollout was paid
    assert list(view["diff"]) == ["system_prompt"]
    assert "+- ant" in view["diff"]["system_prompt"]
    seeds = program(LABELS)["seeds"]
    train, holdout = view["splits"]["train"], view["splits"]["holdout"]
    assert [row["seed"] for row in train["seeds"]] == seeds["train"]
    assert [row["seed"] for row in holdout["seeds"]] == seeds["holdout"]
    assert (train["a_mean"], train["b_mean"]) == (0.0, 1.0)
    assert (train["b_better"], train["a_better"], train["same"]) == (12, 0, 0)
    assert view["differing_total"] == 24 and len(view["differing"]) == 12  # traces capped
    first = view["differing"][0]
    assert first["split"] == "train" and first["a"]["reward"] == 0.0 and first["b"]["reward"] == 1.0
    assert "expected" in first["a"]["feedback"] and first["b"]["trace"]["messages"]
    assert first["a"]["rollout_id"] is not None
    assert set(unsplit["splits"]) == {"seeds"}
    assert len(unsplit["splits"]["seeds"]["seeds"]) == len(seeds["train"]) + len(seeds["holdout"])
    text = "\n".join(compare_lines(view))
    assert f"A = {base.candidate_id} (seed), B = {best.candidate_id}" in text
    assert "## train: A 0, B 1 on 12 seeds both were scored on (A better on 0, B on 12" in text
    assert "A feedback: " in text and "and 12 more seeds where they differ" in text


async def test_seeds_only_one_of_them_was_scored_on_are_shown_unpaired(tmp_path: Path) -> None:
    # An intermediate candidate was scored on train only; the winner on holdout too.
    result = await whole_run(
        tmp_path, RuleContainer(program(LABELS)), ScriptedProposer(), proposals_in_flight=1
    )
    mid = next(
        c["candidate_id"]
        for c in result.evidence["candidates"]
        if c["train"] is not None and c["holdout"] is None and c["origin"] != "seed"
    )
    async with Workspace(tmp_path / "ws") as ws:
        record = await ws.get_run(result.run_id)
        a = await ws.get_candidate(result.run_id, mid)
        b = await ws.get_candidate(result.run_id, result.best_candidate_id)
        view = await compare(ws, record, a, b, await read_events(ws, result.run_id))
    holdout = view["splits"]["holdout"]
    assert holdout["seeds"] and all(r["a"] is None and r["b"] == 1.0 for r in holdout["seeds"])
    assert (holdout["n"], holdout["a_mean"], holdout["b_mean"]) == (0, None, None)
    assert view["splits"]["train"]["n"] == len(program(LABELS)["seeds"]["train"])
    assert all(d["split"] == "train" for d in view["differing"])  # only where both were scored
    text = "\n".join(compare_lines(view))
    assert f"{program(LABELS)['seeds']['holdout'][0]:<28}      -      1" in text

"""Whole runs with the parts chosen by name (the config) or given as objects (the Python API).

The rule container and the scripted proposer of ``tests/fakes/scripted.py`` make each run
deterministic; everything else is the real runtime.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from optimizer.gepa import GepaMethod, SearchProgress, SelectionView
from optimizer.runtime.lifecycle.run import RunResult
from optimizer.searches import run_optimization
from schemas import Event, RunConfig
from tests.fakes.scripted import SEARCH_SETTINGS, RuleContainer, ScriptedProposer, program

LABELS = ["ant", "bee", "cat", "cow", "dog", "eel"]


async def _run(
    tmp_path: Path, events: list[Event], method: GepaMethod | None = None, **config: Any
) -> RunResult:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    async with container.client() as http:
        return await run_optimization(
            RunConfig(**{**SEARCH_SETTINGS, "seed": 0, "proposals_in_flight": 1, **config}),
            workspace=tmp_path / "ws",
            proposer=proposer,
            http=http,
            on_event=events.append,
            method=method,
        )


def _parents(events: list[Event]) -> list[str]:
    return [e.data["parent"] for e in events if e.type == "iteration" and "parent" in e.data]


class FirstCandidate:
    """A user's own selector: always the oldest fully evaluated candidate (the baseline)."""

    def select(self, view: SelectionView, rng: random.Random) -> str:
        return view.ranked[-1][0] if len(view.ranked) > 1 else view.ranked[0][0]


async def test_a_users_own_candidate_selector_chooses_every_parent(tmp_path: Path) -> None:
    events: list[Event] = []
    result = await _run(tmp_path, events, GepaMethod(candidate_selector=FirstCandidate()))
    parents = _parents(events)
    assert len(parents) >= 2 and set(parents) == {result.baseline_candidate_id}
    (chosen,) = [e.data for e in events if e.type == "strategies"]
    assert chosen["candidate_selector"] == "FirstCandidate"


@pytest.mark.parametrize("name", ["current_best", "epsilon_greedy", "top_k_pareto"])
async def test_each_named_candidate_selector_runs_to_a_verdict(tmp_path: Path, name: str) -> None:
    events: list[Event] = []
    result = await _run(tmp_path, events, candidate_selection=name)
    assert result.status == "completed" and result.promoted
    (chosen,) = [e.data for e in events if e.type == "strategies"]
    expected = {
        "current_best": "CurrentBestCandidateSelector",
        "epsilon_greedy": "EpsilonGreedyCandidateSelector",
        "top_k_pareto": "TopKParetoCandidateSelector",
    }
    assert chosen["candidate_selector"] == expected[name]


async def test_current_best_always_builds_on_the_best_so_far(tmp_path: Path) -> None:
    events: list[Event] = []
    await _run(tmp_path, events, candidate_selection="current_best")
    best: tuple[float, str] | None = None
    parents = 0
    for e in events:
        scored = e.type == "scored" and e.data.get("split") == "train"
        if scored and (best is None or e.data["mean"] > best[0]):
            best = (e.data["mean"], e.data["candidate_id"])
        if e.type == "iteration" and "parent" in e.data:
            assert best is not None and e.data["parent"] == best[1]
            parents += 1
    assert parents >= 2


async def test_the_score_threshold_stops_the_search_and_promotes(tmp_path: Path) -> None:
    events: list[Event] = []
    result = await _run(tmp_path, events, score_threshold=0.5)
    reason = result.evidence["stop_reason"]
    assert "reached --score-threshold 0.5" in reason and result.promoted


async def test_a_users_stop_condition_is_added_to_the_built_in_ones(tmp_path: Path) -> None:
    class AfterTwoProposals:
        def reason_to_stop(self, progress: SearchProgress) -> str | None:
            return "two proposals are enough" if progress.proposals >= 2 else None

    events: list[Event] = []
    result = await _run(tmp_path, events, GepaMethod(stop_conditions=[AfterTwoProposals()]))
    assert result.evidence["stop_reason"] == "two proposals are enough"
    assert len(_parents(events)) == 2


async def test_all_components_are_offered_to_every_proposal(tmp_path: Path) -> None:
    events: list[Event] = []
    result = await _run(
        tmp_path, events, component_selection="all", acceptance="improvement_or_equal"
    )
    assert result.status == "completed"
    (chosen,) = [e.data for e in events if e.type == "strategies"]
    assert chosen["component_selector"] == "AllComponentSelector"
    assert chosen["acceptance"] == "ImprovementOrEqualAcceptance"

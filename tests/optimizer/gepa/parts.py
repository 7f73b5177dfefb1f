"""What the tests of GEPA's parts share: a state built by hand, and the search's parts over it.

Nothing here sends a rollout: the parts are driven directly on states whose scores the test
writes (``lineage_state``), with no queue or workspace behind them; what they announce is
kept in memory (``Announced``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from optimizer.gepa.search import GepaSearch
from optimizer.gepa.strategies import strategies_for
from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.search.deps import SearchDeps
from optimizer.runtime.search.state import SearchState
from proposer import ComponentSpec
from schemas import CandidateRecord, RunConfig, candidate_id_for, content_hash
from tests.fakes.scripted import ScriptedProposer

TRADE = {  # a lateral child: it traded ant's seeds for bee's
    "parent": {"ant-0": 0.0, "ant-1": 0.0, "bee-0": 1.0, "bee-1": 1.0},
    "child": {"ant-0": 1.0, "ant-1": 1.0, "bee-0": 0.0, "bee-1": 0.0},
}


def lineage_state(
    scores: dict[str, dict[str, float]],
    parents: dict[str, list[str]],
    texts: dict[str, str] | None = None,
) -> tuple[SearchState, dict[str, str]]:
    """A state with one candidate per name of ``scores`` (text: ``texts`` or the name), in
    that order, each with its parents (by name) and its train scores; returns it and the
    ids by name."""
    seeds = tuple(next(iter(scores.values())))
    state, ids = SearchState(train_seeds=seeds), {}
    for name, row in scores.items():
        text = (texts or {}).get(name, f"- {name}")
        ids[name] = add_candidate(state, text, [ids[p] for p in parents.get(name, [])])
        state.set_train(ids[name], row)
    return state, ids


def add_candidate(state: SearchState, text: str, parents: list[str]) -> str:
    """Add a candidate whose prompt is ``text`` to ``state``; returns its id."""
    comps = {"system_prompt": text}
    record = CandidateRecord(
        run_id="r",
        candidate_id=candidate_id_for(comps),
        content_hash=content_hash(comps),
        components=comps,
        parents=parents,
        origin="mutation" if parents else "seed",
    )
    state.add(record)
    return record.candidate_id


@dataclass
class Announced:
    """An event sink that keeps what it is told: (type, data) in order."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def emit(self, type: str, data: dict[str, Any] | None = None) -> None:
        self.events.append((type, data or {}))


def deps_for(state: SearchState, **config: Any) -> SearchDeps:
    """Search dependencies around ``state`` for tests that send no rollout."""

    async def checkpoint() -> None:
        return None

    return SearchDeps(
        config=RunConfig(containers=["http://rules"], **config),
        run_id="r",
        workspace=None,  # type: ignore[arg-type]  # nothing is stored
        queue=None,  # type: ignore[arg-type]  # nothing is sent
        proposer=ScriptedProposer(),
        budget=Budget(),
        events=Announced(),  # type: ignore[arg-type]  # kept in memory
        rng=random.Random(0),
        state=state,
        components=(ComponentSpec("system_prompt", "prompt"),),
        description="",
        checkpoint=checkpoint,
        proposer_cost=lambda: 0.0,
    )


def search_for(state: SearchState, **config: Any) -> GepaSearch:
    """A search over ``state`` with the parts ``config`` names."""
    deps = deps_for(state, **config)
    return GepaSearch(deps, strategies_for(deps))

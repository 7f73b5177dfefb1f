"""What the tests of GEPA's parts share: a state built by hand, and the search's parts over it.

The parts are driven directly, not through a whole run: on states whose scores the test
writes (``lineage_state``), with no queue or workspace behind them; or, for the
parts that send rollouts and store candidates, over the recording fakes of
``tests.optimizer.gepa.fakes`` (``wired``), the rollouts scored by a function.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from optimizer.gepa.candidates import Candidates
from optimizer.gepa.context import SearchContext
from optimizer.gepa.edits import adds_words
from optimizer.gepa.followups import LateralFollowUps
from optimizer.gepa.gate import MinibatchGate
from optimizer.gepa.ledger import FailureLedger
from optimizer.gepa.merging import Merging
from optimizer.gepa.pipeline import AcceptancePipeline
from optimizer.gepa.rebase import Rebaser
from optimizer.gepa.search import GepaSearch
from optimizer.gepa.stacking import Stacking
from optimizer.gepa.strategies import strategies_for
from optimizer.gepa.train_stage import TrainStage
from optimizer.gepa.waiting import Waiting, WaitingRoom
from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.search.deps import SearchDeps
from optimizer.runtime.search.state import SearchState
from proposer import ComponentSpec
from schemas import CandidateRecord, RunConfig, candidate_id_for, content_hash
from tests.fakes.scripted import ScriptedProposer
from tests.optimizer.gepa.fakes import FakeQueue, FakeWorkspace, RecordingEvents, Score, rule_score

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
    state, ids = SearchState(train_seeds=seeds), dict[str, str]()
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


def deps_for(
    state: SearchState,
    *,
    queue: FakeQueue | None = None,
    events: RecordingEvents | None = None,
    workspace: FakeWorkspace | None = None,
    budget: Budget | None = None,
    **config: Any,
) -> SearchDeps:
    """Search dependencies around ``state``; without fakes, for tests that send no rollout
    and store nothing (what they announce is recorded all the same)."""

    async def checkpoint() -> None:
        return None

    return SearchDeps(
        config=RunConfig(containers=["http://rules"], **config),
        run_id="r",
        workspace=workspace,  # type: ignore[arg-type]  # what the parts call of it
        queue=queue,  # type: ignore[arg-type]
        proposer=ScriptedProposer(),
        budget=budget or Budget(),
        events=events or RecordingEvents(),  # type: ignore[arg-type]
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


# Eight train seeds, two per label: ``rule_score`` passes a seed when the prompt lists its label.
SEEDS = tuple(f"{label}-{i}" for label in ("ant", "bee", "cat", "cow") for i in (0, 1))


@dataclass
class Wired:
    """A search over a state built by hand, its rollouts scored by the fake queue, and its
    parts as the search wires them: the tests drive one part at a time."""

    search: GepaSearch
    queue: FakeQueue
    events: RecordingEvents
    workspace: FakeWorkspace
    proposer: ScriptedProposer  # it records every request
    state: SearchState
    ctx: SearchContext
    ledger: FailureLedger
    candidates: Candidates
    train: TrainStage
    followups: LateralFollowUps
    merging: Merging
    pipeline: AcceptancePipeline
    room: WaitingRoom
    gate: MinibatchGate
    stacking: Stacking
    rebaser: Rebaser

    def child(self, text: str, parent: str) -> CandidateRecord:
        """A new candidate whose prompt is ``text``, written on ``parent``, not scored yet."""
        return self.state.candidates[add_candidate(self.state, text, [parent])]

    def waiting(
        self,
        iteration: int,
        text: str,
        parent: str,
        minibatch: Sequence[str] = (),
        context: Sequence[str] = (),
    ) -> Waiting:
        """A child whose prompt is ``text``, written in ``iteration`` on ``parent`` (the best
        when it was asked), shown ``minibatch`` and ``context``, queued to be accepted."""
        child = self.child(text, parent)
        adds = adds_words(self.state.candidates[parent], child)
        entry = Waiting(iteration, child, parent, parent, list(minibatch), list(context), adds=adds)
        self.pipeline.queue(entry)
        return entry

    async def scored(self, text: str, parents: Sequence[str] = ()) -> str:
        """A candidate whose prompt is ``text``, scored on every train seed through the queue
        (its rollouts are cached, as a fully evaluated candidate's are); returns its id."""
        cid = add_candidate(self.state, text, list(parents))
        comps = self.state.candidates[cid].components
        results = await self.queue.evaluate(cid, comps, self.state.train_seeds)
        self.state.set_train(cid, {s: r.reward for s, r in results.items()})
        return cid


def wired(score: Score = rule_score, *, idle: int = 4, **config: Any) -> Wired:
    """A search over an empty state on ``SEEDS``, its rollouts scored by ``score``, with the
    parts ``config`` names; the queue says ``idle`` slots are free."""
    state, budget = SearchState(train_seeds=SEEDS), Budget()
    queue = FakeQueue(budget, score, idle=idle)
    events, workspace = RecordingEvents(), FakeWorkspace()
    deps = deps_for(state, queue=queue, events=events, workspace=workspace, budget=budget, **config)
    proposer = deps.proposer
    assert isinstance(proposer, ScriptedProposer)
    search = GepaSearch(deps, strategies_for(deps))
    pipeline = search._pipeline
    return Wired(
        search,
        queue,
        events,
        workspace,
        proposer,
        state,
        search._ctx,
        search._ledger,
        search._candidates,
        search._train,
        search._followups,
        search.merging,
        pipeline,
        pipeline._room,
        pipeline._gate,
        pipeline._stacking,
        pipeline._rebaser,
    )

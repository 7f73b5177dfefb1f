"""A person steering a whole GEPA run in-process: actions recorded in its workspace while it
searches, read by the run as a separate process's would be.

The rule container and the scripted proposer (``tests/fakes/scripted.py``) make each run
deterministic; a proposal is held until the run has taken the actions in, so they land at
the same point of the search every time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optimizer.runtime.lifecycle.run import RunResult
from optimizer.runtime.steering import record_action
from optimizer.searches import run_optimization
from schemas import Action, Event, RunConfig
from tests.fakes.scripted import SEARCH_SETTINGS, RuleContainer, ScriptedProposer, program
from workspace import Workspace

LABELS = ["ant", "bee", "cat", "cow", "dog", "eel"]


@dataclass
class Steered:
    """One run and what happened in it."""

    result: RunResult
    proposer: ScriptedProposer
    container: RuleContainer
    events: list[Event] = field(default_factory=list)

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.type == kind]

    def after_applied(self, kind: str) -> list[Event]:
        """Events of ``kind`` logged after the run took the last action in."""
        last = self.of("action_applied")[-1].seq
        return [e for e in self.of(kind) if e.seq > last]


Actions = Callable[[list[Event]], list[Action]]


async def _run(
    tmp_path: Path,
    *,
    at: int | None = None,
    actions: Actions = lambda events: [],
    then: Callable[[Steered], Any] | None = None,
    **config: Any,
) -> Steered:
    """A run whose ``at``-th proposal (1-based) is held until the run took in ``actions``
    (built from the events so far), recorded as the REST API would; ``then(steered)`` runs
    once they are in, before the proposal is released."""
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    settings = {**SEARCH_SETTINGS, "seed": 0, "proposals_in_flight": 1, **config}
    events: list[Event] = []
    held = proposer.hold(at) if at is not None else None
    steered: Steered | None = None

    async with Workspace(tmp_path / "ws") as ws:

        async def steer() -> None:
            assert held is not None
            while len(proposer.seen) < (at or 0):
                await asyncio.sleep(0.01)
            recorded = actions(list(events))
            for action in recorded:
                await record_action(ws, events[0].run_id, action)
            while len([e for e in events if e.type == "action_applied"]) < len(recorded):
                await asyncio.sleep(0.01)
            if then is not None:
                await then(Steered(None, proposer, container, events))  # type: ignore[arg-type]
            held.set()

        task = asyncio.create_task(steer()) if held is not None else None
        async with container.client() as http:
            result = await run_optimization(
                RunConfig(**settings),
                workspace=ws,
                proposer=proposer,
                http=http,
                on_event=events.append,
            )
        if task is not None:
            await task
    steered = Steered(result, proposer, container, events)
    return steered


def _best(events: list[Event]) -> str:
    return str([e for e in events if e.type == "frontier"][-1].data["best"]["candidate_id"])


def _baseline(events: list[Event]) -> str:
    return str(next(e for e in events if e.type == "scored").data["candidate_id"])


async def test_a_rejected_candidate_is_never_a_parent_again_nor_promoted(tmp_path: Path) -> None:
    rejected: list[str] = []

    def reject(events: list[Event]) -> list[Action]:
        rejected.append(_best(events))
        assert rejected[0] != _baseline(events)
        return [Action(action="reject", candidate_id=rejected[0], reason="games the verifier")]

    run = await _run(tmp_path, at=3, actions=reject)
    (cid,) = rejected
    later = run.proposer.seen[3:]
    assert later, "the search went on after the rejection"
    assert all(r.parent.candidate_id != cid for r in later)
    assert all(cid not in e.data["coverage"] for e in run.after_applied("frontier"))
    assert run.result.best_candidate_id != cid


async def test_a_rejected_best_is_not_promoted_though_still_the_best_on_train(
    tmp_path: Path,
) -> None:
    rejected: list[str] = []

    def reject_and_stop(events: list[Event]) -> list[Action]:
        rejected.append(_best(events))
        return [
            Action(action="reject", candidate_id=rejected[0], reason="against policy"),
            Action(action="stop", reason="enough"),
        ]

    run = await _run(tmp_path, at=3, actions=reject_and_stop)
    (cid,) = rejected
    packet = run.result.evidence
    means = {c["candidate_id"]: c["train"] for c in packet["candidates"] if c["train"] is not None}
    assert means[cid] == max(means.values())  # still the best on train...
    assert run.result.best_candidate_id != cid  # ...and not promoted
    assert packet["stop_reason"] == "stopped by a person (rest): enough"


async def test_a_pin_makes_the_next_proposals_start_from_the_pinned_candidate(
    tmp_path: Path,
) -> None:
    pinned: list[str] = []

    def pin(events: list[Event]) -> list[Action]:
        pinned.append(_baseline(events))
        assert _best(events) != pinned[0]  # the selector's rule would not choose it
        return [Action(action="pin", candidate_id=pinned[0], source="console")]

    run = await _run(tmp_path, at=3, actions=pin)
    later = run.proposer.seen[3:]
    assert later and all(r.parent.candidate_id == pinned[0] for r in later)
    assert all(e.data.get("parent") == pinned[0] for e in run.after_applied("iteration"))


async def test_a_note_reaches_the_next_proposals_until_one_written_with_it_is_accepted(
    tmp_path: Path,
) -> None:
    def note(events: list[Event]) -> list[Action]:
        return [
            Action(action="note", text="look at the refund cases"),
            Action(action="note", text="keep the labels", keep=True),
        ]

    run = await _run(tmp_path, at=2, actions=note)
    shown = [[n.text for n in r.notes] for r in run.proposer.seen]
    assert shown[:2] == [[], []]  # asked before the notes were given (the 2nd was held)
    assert shown[2] == ["look at the refund cases", "keep the labels"]
    # The third proposal's child was accepted on train: the note was taken in; the kept one
    # is shown to every later proposal.
    assert all(s == ["keep the labels"] for s in shown[3:]) and shown[3:]
    accepted = {e.data["candidate_id"] for e in run.of("scored")}
    third = next(e.data["candidate_id"] for e in run.of("candidate") if e.data["iteration"] == 3)
    assert third in accepted


async def test_stop_ends_the_search_at_once_and_promotes_the_best_so_far(tmp_path: Path) -> None:
    best: list[str] = []

    def stop(events: list[Event]) -> list[Action]:
        best.append(_best(events))
        return [Action(action="stop", reason="good enough", source="cli")]

    run = await _run(tmp_path, at=3, actions=stop)
    assert len(run.proposer.seen) == 3  # the held proposal was the last one asked
    assert run.of("search_stopped")[0].data["reason"] == "stopped by a person (cli): good enough"
    assert run.result.status == "completed" and run.result.best_candidate_id == best[0]
    assert run.result.evidence["stop_reason"] == "stopped by a person (cli): good enough"
    assert (tmp_path / "ws" / "runs" / run.result.run_id / "report.md").exists()


async def test_a_paused_run_sends_nothing_and_resumes_to_the_unpaused_result(
    tmp_path: Path,
) -> None:
    quiet: list[int] = []

    async def hold_paused(steered: Steered) -> None:
        # The held proposal is answered while paused: its child's gate waits, nothing is sent.
        steered.proposer.holds[3].set()
        calls = sum(steered.container.calls.values())
        asked = len(steered.proposer.seen)
        await asyncio.sleep(1.0)
        quiet.append(sum(steered.container.calls.values()) - calls)
        quiet.append(len(steered.proposer.seen) - asked)
        run_id = steered.events[0].run_id
        async with Workspace(tmp_path / "paused" / "ws") as ws:
            await record_action(ws, run_id, Action(action="resume"))

    paused = await _run(
        tmp_path / "paused",
        at=3,
        actions=lambda events: [Action(action="pause")],
        then=hold_paused,
    )
    assert quiet == [0, 0]
    plain = await _run(tmp_path / "plain")
    assert paused.result.best_candidate_id == plain.result.best_candidate_id
    assert [r.parent.candidate_id for r in paused.proposer.seen] == [
        r.parent.candidate_id for r in plain.proposer.seen
    ]
    same = ("best", "promotion", "candidates")
    assert json.dumps({k: paused.result.evidence[k] for k in same}, sort_keys=True) == (
        json.dumps({k: plain.result.evidence[k] for k in same}, sort_keys=True)
    )
    assert paused.container.calls == plain.container.calls  # nothing paid twice, nothing more

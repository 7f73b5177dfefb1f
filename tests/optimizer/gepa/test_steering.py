"""How each of GEPA's parts reads a person's actions: rejections, the pin, notes, the stop,
the time paused."""

from __future__ import annotations

import random
import time
from typing import Any

from optimizer.gepa.ledger import Shown
from optimizer.gepa.notes import PersonNotes
from optimizer.gepa.search import GepaSearch
from optimizer.gepa.state import GepaState
from optimizer.gepa.strategies.candidate_selector import (
    CurrentBestCandidateSelector,
    SelectionView,
    select_parent,
)
from optimizer.gepa.strategies.merge import MergeView
from optimizer.gepa.strategies.stop_condition import SearchProgress, Timeout
from optimizer.gepa.waiting import Waiting
from optimizer.runtime.results.promotion import choose_on_train
from optimizer.runtime.search.state import SearchState
from optimizer.runtime.steering import RunSteering
from schemas import Event
from tests.optimizer.gepa.parts import TRADE, add_candidate, lineage_state, search_for

SEEDS = ("a", "b", "c", "d")
SCORES = {
    "base": dict.fromkeys(SEEDS, 0.0),
    "best": {"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.0},
    "other": {"a": 1.0, "b": 0.0, "c": 0.0, "d": 1.0},
}


def _state() -> tuple[SearchState, dict[str, str]]:
    return lineage_state(SCORES, {"best": ["base"], "other": ["base"]})


def steer(search: GepaSearch, *actions: dict[str, Any]) -> RunSteering:
    """Fold ``actions`` into the search's steering as the running run would read them."""
    steering = search._d.steering
    for data in actions:
        seq = steering.state.seq + 1
        steering.take(Event(seq=seq, run_id="r", type="action", data={"source": "cli", **data}))
    return steering


def test_a_rejected_candidate_leaves_the_frontier_the_ranking_and_promotion() -> None:
    state, ids = _state()
    assert state.best() == (ids["best"], 0.75)
    state.reject(ids["best"], "games the verifier")
    assert ids["best"] not in state.frontier.members()
    assert [cid for cid, _ in state.ranked()] == [ids["other"], ids["base"]]
    assert state.best() == (ids["other"], 0.5)
    assert choose_on_train(state, ids["base"]) == ids["other"]
    # Scored on part of train only, a rejected candidate is not chosen either.
    partial = add_candidate(state, "- partial", [ids["other"]])
    state.partial[partial] = dict.fromkeys(SEEDS, 1.0)
    assert choose_on_train(state, ids["base"]) == partial
    state.reject(partial, "no")
    assert choose_on_train(state, ids["base"]) == ids["other"]
    # Its scores stay (they are evidence), and scoring another candidate keeps it out.
    assert state.train[ids["best"]] == SCORES["best"]
    state.set_train(add_candidate(state, "- late", [ids["base"]]), dict.fromkeys(SEEDS, 0.0))
    assert ids["best"] not in state.frontier.members()


def test_select_parent_takes_the_pin_first_and_never_a_rejected_candidate() -> None:
    state, ids = _state()
    view = SelectionView(frontier=state.frontier, ranked=tuple(state.ranked()))
    rng = random.Random(0)
    selector = CurrentBestCandidateSelector()
    assert select_parent(selector, view, rng) == ids["best"]
    pinned = SelectionView(state.frontier, tuple(state.ranked()), pinned=ids["base"])
    assert select_parent(selector, pinned, rng) == ids["base"]

    class Stubborn:  # a selector of one's own that ignores the rejections
        def select(self, view: SelectionView, rng: random.Random) -> str:
            return ids["best"]

    state.reject(ids["best"], "no")
    view = SelectionView(
        state.frontier, tuple(state.ranked()), rejected=frozenset({ids["best"]}), pinned=None
    )
    assert select_parent(Stubborn(), view, rng) == ids["other"]


async def test_the_search_starts_from_the_pin_before_merges_and_follow_ups() -> None:
    state, ids = lineage_state(
        {**TRADE, "third": {"ant-0": 0.0, "ant-1": 1.0, "bee-0": 0.0, "bee-1": 1.0}},
        {"child": ["parent"], "third": ["parent"]},
    )
    search = search_for(state, use_merge=True)
    search._train.accepted_since_merge = True  # a merge would be due
    search._followups.offer(ids["child"], ids["parent"])  # and a follow-up is queued
    parents: list[str] = []

    async def mutate(iteration: int, parent_id: str, *rest: Any) -> bool:
        parents.append(parent_id)
        return True

    search._mutate = mutate  # type: ignore[method-assign]
    steer(search, {"action": "pin", "candidate_id": ids["third"]})
    for _ in range(3):
        assert await search._step() is True
    assert parents == [ids["third"]] * 3
    assert search._followups.next() is not None  # the follow-up was not taken
    assert search._train.accepted_since_merge  # nor was the merge
    steer(search, {"action": "reject", "candidate_id": ids["third"], "reason": "x"})
    state.reject(ids["third"], "x")
    assert search._pinned() is None  # rejected since: the pin no longer holds
    steer(search, {"action": "pin", "candidate_id": "not-a-candidate"})
    assert search._pinned() is None


def test_a_merge_never_pairs_a_rejected_candidate() -> None:
    state, ids = _state()
    view = MergeView(state.frontier, {}, True, 0, rejected=frozenset({ids["best"]}))
    assert view.allows((ids["other"], ids["base"]))
    assert not view.allows((ids["best"], ids["other"])) and not view.allows(None)

    class Always:  # a strategy of one's own that pairs whatever it likes
        def pair(self, view: MergeView, rng: random.Random) -> tuple[str, str]:
            return (ids["best"], ids["other"])

    search = search_for(state)
    search.merging._strategy = Always()
    assert search.merging.due(random.Random(0)) == (ids["best"], ids["other"])
    state.reject(ids["best"], "no")
    assert search.merging.due(random.Random(0)) is None


def _waiting(iteration: int, child: str, parent: str, best_at_start: str | None) -> Waiting:
    return Waiting(iteration, _record(child), parent, best_at_start, [], [])


def _record(cid: str) -> Any:
    class Record:
        candidate_id = cid

    return Record()


def test_the_waiting_room_judges_children_without_what_a_person_rejected() -> None:
    state, ids = _state()
    search = search_for(state)
    room = search._pipeline._room
    on_other = _waiting(1, "c1", ids["other"], ids["best"])
    on_best = _waiting(2, "c2", ids["best"], ids["best"])
    rejected_child = _waiting(3, ids["other"], ids["base"], ids["best"])
    room.children += [on_other, on_best, rejected_child]
    assert room.base_of(on_other) == ids["other"]  # not the best at the start: its own parent
    state.reject(ids["other"], "no")
    # Its parent rejected: replayed on the best instead, so judged without the parent's edit.
    assert room.base_of(on_other) == ids["best"]
    assert room.is_rejected(rejected_child) and not room.is_rejected(on_other)
    assert rejected_child not in room.stackable_on(ids["best"], on_best)
    state.reject(ids["best"], "no")  # the best at the start rejected: onto the new best
    assert room.base_of(on_best) == ids["base"] == room.base_of(on_other)


def test_follow_ups_on_a_rejected_child_are_dropped() -> None:
    state, ids = lineage_state(TRADE, {"child": ["parent"]})
    followups = search_for(state)._followups
    followups.offer(ids["child"], ids["parent"])
    state.reject(ids["child"], "no")
    assert followups.next() is None


def test_a_persons_stop_stops_the_search_with_its_reason() -> None:
    state, _ = _state()
    search = search_for(state)
    assert not search._stopping.check()
    steer(search, {"action": "stop", "reason": "good enough", "source": "console"})
    assert search._stopping.check()
    assert search.stop_reason == "stopped by a person (console): good enough"


def test_time_paused_does_not_count_toward_the_timeout() -> None:
    progress = SearchProgress(started=time.monotonic() - 100, paused_s=60)
    assert 39 < progress.elapsed_s < 41
    assert Timeout(60).reason_to_stop(progress) is None
    state, _ = _state()
    search = search_for(state, search_timeout_s=60)
    clock = [0.0]
    search._d.steering = RunSteering(clock=lambda: clock[0])
    steer(search, {"action": "pause"})
    clock[0] = 10.0  # paused 10 s before the search started: not its time
    search._stopping.start()
    search._stopping.progress.started -= 70  # the search has run 70 s...
    clock[0] = 25.0  # ...of which 15 s paused
    assert not search._stopping.check()
    assert 54 < search._stopping.progress.elapsed_s < 56
    steer(search, {"action": "resume"})
    search._stopping.progress.started -= 10
    assert search._stopping.check() and "--timeout 60s reached" in (search.stop_reason or "")


def test_notes_reach_proposals_on_their_lineage_until_one_written_with_them_is_accepted() -> None:
    state, ids = _state()
    search = search_for(state)
    notes = PersonNotes(search._ctx)
    steer(
        search,
        {"action": "note", "text": "look at refunds"},
        {"action": "note", "text": "about best", "candidate_id": ids["best"]},
        {"action": "note", "text": "always", "keep": True},
    )
    on_best = [n.text for n in notes.for_parents((ids["best"],))]
    assert on_best == ["look at refunds", "about best", "always"]
    assert [n.text for n in notes.for_parents((ids["other"],))] == ["look at refunds", "always"]
    child = add_candidate(state, "- child of best", [ids["best"]])
    assert "about best" in [n.text for n in notes.for_parents((child,))]  # a descendant
    assert "about best" in [n.text for n in notes.for_parents((ids["other"], child))]  # a merge

    shown = notes.for_parents((ids["other"],))
    written = add_candidate(state, "- written with the notes", [ids["other"]])
    notes.written(shown, written)
    assert len(notes.for_parents((ids["other"],))) == 2  # written, not yet accepted
    stack = add_candidate(state, "- stacked", [ids["base"], written])
    state.set_train(stack, dict.fromkeys(SEEDS, 1.0))  # built on it, accepted on train
    assert [n.text for n in notes.for_parents((ids["other"],))] == ["always"]
    # A resumed run knows which notes were taken in (GEPA's checkpointed state).
    extra = {"gepa": {"proposals": {}, "notes": search._ctx.gepa.notes}}
    assert GepaState.within(extra).notes == {"1": [written], "3": [written]}


async def test_the_request_carries_the_notes_as_the_proposer_takes_them() -> None:
    state, ids = _state()
    search = search_for(state)
    steer(search, {"action": "note", "text": "say why", "candidate_id": ids["best"]})
    notes = search._notes.for_parents((ids["best"],))
    request = await search._request(1, Shown(ids["best"], [], []), {}, notes)
    assert [(n.text, n.candidate_id) for n in request.notes] == [("say why", ids["best"])]
    plain = await search._request(2, Shown(ids["other"], [], []), {})
    assert plain.notes == ()

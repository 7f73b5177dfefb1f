"""The fold of a run's actions into its steering state."""

from __future__ import annotations

from typing import Any

from optimizer.runtime.steering import Steering, fold_actions
from schemas import Action, Event


def actions(*items: dict[str, Any]) -> list[Event]:
    """``action`` events of run ``r`` with seqs 1, 2, ... and times 100, 101, ..."""
    return [
        Event(seq=i, run_id="r", type="action", data={"source": "cli", **data}, ts=99.0 + i)
        for i, data in enumerate(items, start=1)
    ]


def test_nothing_folded_is_a_run_nobody_steered() -> None:
    steering = fold_actions([])
    assert steering == Steering()
    assert steering.as_dict() == {
        "paused": False,
        "rejected": {},
        "pinned": None,
        "notes": [],
        "stop": None,
        "seq": 0,
    }
    assert steering.stop_reason is None


def test_each_action_changes_its_part_of_the_state() -> None:
    steering = fold_actions(
        actions(
            {"action": "pause"},
            {"action": "pin", "candidate_id": "c1"},
            {"action": "reject", "candidate_id": "c2", "reason": "games the verifier"},
            {"action": "note", "text": "look at refunds", "candidate_id": None, "keep": False},
            {"action": "note", "text": "keep it short", "candidate_id": "c1", "keep": True},
        )
    )
    assert steering.paused and steering.pinned == "c1" and steering.seq == 5
    assert steering.rejected == {"c2": "games the verifier"}
    assert [(n.text, n.candidate_id, n.keep, n.seq, n.ts) for n in steering.notes] == [
        ("look at refunds", None, False, 4, 103.0),
        ("keep it short", "c1", True, 5, 104.0),
    ]
    later = fold_actions(actions({"action": "resume"}, {"action": "unpin"}), Steering(seq=0))
    assert not later.paused and later.pinned is None


def test_a_rejection_unpins_its_candidate_and_a_rejected_one_cannot_be_pinned() -> None:
    steering = fold_actions(
        actions(
            {"action": "pin", "candidate_id": "c1"},
            {"action": "reject", "candidate_id": "c1", "reason": "against policy"},
            {"action": "pin", "candidate_id": "c1"},
        )
    )
    assert steering.pinned is None and steering.rejected == {"c1": "against policy"}


def test_a_stop_is_kept_once_with_its_source_and_resumes_a_paused_run() -> None:
    events = actions(
        {"action": "pause"},
        {"action": "stop", "reason": "good enough"},
        {"action": "stop", "reason": "again", "source": "console"},
    )
    steering = fold_actions(events)
    assert not steering.paused
    assert steering.stop_reason == "stopped by a person (cli): good enough"
    assert steering.as_dict()["stop"] == {"reason": "good enough", "source": "cli", "ts": 101.0}
    no_reason = fold_actions(actions({"action": "stop", "reason": None}))
    assert no_reason.stop_reason == "stopped by a person (cli)"


def test_the_fold_is_total_idempotent_and_skips_other_events() -> None:
    events = actions(
        {"action": "pause"},
        {"action": "pause"},
        {"action": "resume"},
        {"action": "resume"},
        {"action": "unpin"},
        {"action": "dance"},
        {"action": "note", "text": ""},
    )
    other = Event(seq=20, run_id="r", type="frontier", data={"action": "pause"})
    steering = fold_actions([*events, other])
    assert not steering.paused and steering.notes == () and steering.seq == 7
    # Folding the same events again (a reader that polls overlapping pages) changes nothing.
    assert fold_actions(events, steering) == steering


def test_an_action_event_is_what_the_action_uses() -> None:
    assert Action(action="pause", candidate_id="x", text="t").event_data() == {
        "action": "pause",
        "source": "rest",
    }
    assert Action(action="reject", candidate_id="c", reason="r", source="console").event_data() == {
        "action": "reject",
        "source": "console",
        "candidate_id": "c",
        "reason": "r",
    }
    assert Action(action="note", text="t").event_data() == {
        "action": "note",
        "source": "rest",
        "text": "t",
        "candidate_id": None,
        "keep": False,
    }

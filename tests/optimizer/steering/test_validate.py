"""Whether an action may be recorded: its body, its candidate and the run's state."""

from __future__ import annotations

from typing import Any

import pytest

from optimizer.runtime.steering import Steering, StopRequest, check_action, parse_action
from schemas import Action, ActionRefused, CandidateRecord, RunRecord

BASE, CHILD, OTHER = "aaaa000000000001", "bbbb000000000002", "bbbb000000000003"


def _candidate(cid: str, origin: str = "mutation") -> CandidateRecord:
    return CandidateRecord(
        run_id="run-1",
        candidate_id=cid,
        content_hash=cid * 4,
        components={"p": cid},
        origin=origin,  # type: ignore[arg-type]
    )


CANDIDATES = [_candidate(BASE, "seed"), _candidate(CHILD), _candidate(OTHER)]


def _run(status: str = "running", phase: str = "searching") -> RunRecord:
    return RunRecord(run_id="run-1", config={}, status=status, phase=phase)  # type: ignore[arg-type]


def _refusal(action: Action, steering: Steering | None = None, run: RunRecord | None = None) -> Any:
    with pytest.raises(ActionRefused) as caught:
        check_action(action, steering or Steering(), run or _run(), CANDIDATES)
    return caught.value


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"action": "dance"}, "action"),
        ({}, "action"),
        ({"action": "pause", "colour": "red"}, "colour"),
        ({"action": "pause", "source": "cli?"}, "source"),
        ({"action": "reject", "candidate_id": CHILD}, "reason"),
        ({"action": "reject", "reason": "bad"}, "candidate_id"),
        ({"action": "pin", "candidate_id": " "}, "candidate_id"),
        ({"action": "note", "text": ""}, "text"),
        ({"action": "note", "keep": "maybe", "text": "x"}, "keep"),
    ],
)
def test_a_body_that_is_not_an_action_is_invalid_naming_the_field(
    body: dict[str, Any], field: str
) -> None:
    with pytest.raises(ActionRefused) as caught:
        parse_action(body)
    assert caught.value.kind == "invalid"
    assert field in str(caught.value)


def test_a_body_that_is_not_an_object_is_invalid() -> None:
    for body in (None, [], "pause"):
        with pytest.raises(ActionRefused, match="JSON object") as caught:
            parse_action(body)
        assert caught.value.kind == "invalid"


def test_a_candidate_is_named_by_its_id_or_a_unique_prefix() -> None:
    pin = parse_action({"action": "pin", "candidate_id": "aaaa"})
    assert check_action(pin, Steering(), _run(), CANDIDATES).candidate_id == BASE
    unknown = _refusal(Action(action="pin", candidate_id="ffff"))
    assert unknown.kind == "unknown"
    assert "run run-1 has no candidate 'ffff'" in str(unknown)
    assert "gepa-runtime runs show run-1" in str(unknown)
    assert "GET /api/runs/run-1/candidates" in str(unknown)
    ambiguous = _refusal(Action(action="pin", candidate_id="bbbb"))
    assert ambiguous.kind == "unknown" and "ambiguous" in str(ambiguous)
    assert CHILD in str(ambiguous) and OTHER in str(ambiguous)
    short = _refusal(Action(action="pin", candidate_id="a"))  # too short to be a prefix
    assert short.kind == "unknown"


def test_a_completed_run_takes_no_action_and_a_finished_search_only_pause_and_resume() -> None:
    done = _refusal(Action(action="pause"), run=_run("completed", "completed"))
    assert done.kind == "conflict" and "run run-1 has completed" in str(done)
    assert "gepa-runtime runs show run-1" in str(done)
    late = _run("running", "evaluating_best")
    for action in (
        Action(action="stop"),
        Action(action="note", text="x"),
        Action(action="reject", candidate_id=CHILD, reason="r"),
    ):
        refused = _refusal(action, run=late)
        assert refused.kind == "conflict" and "search of run run-1 is over" in str(refused)
    assert check_action(Action(action="pause"), Steering(), late, CANDIDATES).action == "pause"
    # A cancelled or failed run may be steered before it is resumed.
    cancelled = _run("cancelled", "searching")
    assert check_action(Action(action="stop"), Steering(), cancelled, CANDIDATES)


@pytest.mark.parametrize(
    ("action", "steering", "says"),
    [
        (Action(action="pause"), Steering(paused=True), "is paused already; resume it"),
        (Action(action="resume"), Steering(), "is not paused: nothing to resume"),
        (Action(action="unpin"), Steering(), "no pinned candidate: nothing to unpin"),
        (Action(action="stop"), None, "was stopped already"),
        (Action(action="reject", candidate_id=BASE, reason="r"), Steering(), "is the baseline"),
        (
            Action(action="reject", candidate_id=CHILD, reason="r"),
            Steering(rejected={CHILD: "bad"}),
            "is rejected already (bad)",
        ),
        (
            Action(action="pin", candidate_id=CHILD),
            Steering(rejected={CHILD: "bad"}),
            "pin another candidate",
        ),
        (Action(action="pin", candidate_id=CHILD), Steering(pinned=CHILD), "is pinned already"),
    ],
)
def test_an_action_that_does_not_fit_the_run_is_a_conflict_naming_the_fix(
    action: Action, steering: Steering | None, says: str
) -> None:
    state = steering or Steering(stop=StopRequest("enough", "cli", 1.0))
    refused = _refusal(action, state)
    assert refused.kind == "conflict"
    assert says in str(refused)


def test_actions_that_fit_are_accepted_as_recorded() -> None:
    steering = Steering(pinned=OTHER)
    for action in (
        Action(action="pause"),
        Action(action="reject", candidate_id=OTHER, reason="rejecting the pinned one unpins it"),
        Action(action="pin", candidate_id=CHILD),
        Action(action="unpin"),
        Action(action="note", text="about the baseline's line", candidate_id=BASE),
        Action(action="stop"),
    ):
        assert check_action(action, steering, _run(), CANDIDATES) == action

"""GEPA's reading of its events: why each candidate was kept or dropped (``gepa_decisions``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from optimizer.gepa.decisions import gepa_decisions
from schemas import Event
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.runs import LABELS, whole_run


def _log(*entries: tuple[str, dict[str, Any]]) -> list[Event]:
    return [
        Event(seq=n, run_id="r", type=kind, data=data, ts=1000.0 + n)
        for n, (kind, data) in enumerate(entries, 1)
    ]


def _outcomes(decisions: list[dict[str, Any]]) -> list[str]:
    return [d["outcome"] for d in decisions if "outcome" in d]


def test_a_child_is_shown_its_minibatch_rejected_on_named_seeds_then_held_back() -> None:
    events = _log(
        ("iteration", {"iteration": 3, "parent": "p", "minibatch": ["a-0", "b-0"],
                       "context": ["c-0"]}),
        ("candidate", {"candidate_id": "c", "parents": ["p"], "origin": "mutation",
                       "iteration": 3, "rationale": "drop the rule", "mode": "text"}),
        ("gate", {"iteration": 3, "candidate_id": "c", "parent": "p", "parent_score": 1.0,
                  "child_score": 1.0, "minibatch": ["a-0", "b-0"], "accepted": False,
                  "better": ["a-0"], "worse": ["b-0"]}),
        ("regate", {"iteration": 5, "candidate_id": "c", "parent": "p"}),
        ("gate", {"iteration": 5, "candidate_id": "c", "parent": "p", "parent_score": 0.0,
                  "child_score": 2.0, "minibatch": ["a-1", "d-0"], "accepted": True,
                  "better": ["a-1", "d-0"], "worse": []}),
        ("train_verdict", {"candidate_id": "c", "against": ["p"], "mean": 0.5,
                           "against_means": [0.45], "held_back": True, "lateral": False,
                           "perfect": False}),
    )  # fmt: skip
    (created, rejected, regate, passed, verdict) = gepa_decisions(events)["c"]
    assert created["kind"] == "created" and created["seq"] == 2
    assert (created["minibatch"], created["context"]) == (["a-0", "b-0"], ["c-0"])
    assert "iteration 3 on p" in created["text"] and "1 other failures" in created["text"]
    assert rejected["outcome"] == "rejected by the gate" and rejected["worse"] == ["b-0"]
    assert "1 -> 1 on 2 seeds; worse on b-0" in rejected["text"]
    assert regate["kind"] == "regate" and "outcome" not in regate
    assert passed["outcome"] == "passed the gate" and "better on a-1, d-0" in passed["text"]
    assert verdict["outcome"] == "held back (unproven deletion)"
    assert "train 0.5 against p's 0.45" in verdict["text"]


def test_stacking_names_the_stack_of_each_child_and_the_child_to_blame() -> None:
    events = _log(
        ("candidate", {"candidate_id": "s", "parents": ["p", "a", "b"], "origin": "merge",
                       "iteration": 1, "rationale": "stacked: the edits of a, b replayed on "
                       "p. fix a | fix b", "mode": "text-merge"}),
        ("stack", {"iteration": 1, "candidate_id": "s", "children": ["a", "b"], "onto": "p"}),
        ("blame", {"iteration": 1, "candidate_id": "s", "onto": "p", "broken": ["x-0", "x-1"],
                   "suspects": ["a", "b"], "culprits": ["b"], "early": True,
                   "edit_broke": {"a": ["x-0"], "b": ["x-1"]},
                   "added_broke": {"a": ["x-0"], "b": []}}),
        ("stack", {"iteration": 1, "candidate_id": "a", "children": ["a"], "onto": "p"}),
    )  # fmt: skip
    found = gepa_decisions(events)
    assert found["s"][0]["text"] == "stacked: the edits of a, b replayed on p"
    assert _outcomes(found["s"])[-1] == "dropped by stacking"
    assert "broke x-0, x-1 that p solved; to blame: b" in found["s"][-1]["text"]
    assert _outcomes(found["b"]) == ["stacked into s", "dropped by stacking"]
    assert found["b"][-1]["broke"] == ["x-1"] and "broke x-1" in found["b"][-1]["text"]
    # Cleared: what it added alone broke the same seed, a trade, not damage.
    assert _outcomes(found["a"]) == ["stacked into s"]
    assert "cleared" in found["a"][1]["text"] and "(a trade)" in found["a"][1]["text"]
    assert [d["kind"] for d in found["a"]] == ["stacked", "blame", "stack"]


def test_a_stale_child_is_rebased_or_dropped_and_a_lateral_one_built_on() -> None:
    events = _log(
        ("rebase", {"iteration": 2, "candidate_id": "c1", "onto": "best", "applied": False,
                    "reason": "conflict", "dropped": True}),
        ("rebase", {"iteration": 3, "candidate_id": "c2", "onto": "best", "applied": True,
                    "rebased": "r2"}),
        ("train_verdict", {"candidate_id": "r2", "against": ["best"], "mean": 0.5,
                           "against_means": [0.5], "held_back": False, "lateral": True,
                           "perfect": False}),
        ("skipped", {"iteration": 4, "candidate_id": "c3", "reason": "its edit adds nothing"}),
    )  # fmt: skip
    found = gepa_decisions(events)
    assert found["c1"][0]["outcome"] == "dropped at rebase"
    assert "conflicts with the new best best" in found["c1"][0]["text"]
    assert found["c2"][0]["outcome"] == "rebased as r2"
    assert found["r2"][0]["outcome"] == "accepted (lateral: built on next)"
    assert found["c3"][0] == {
        "kind": "skipped",
        "seq": 4,
        "ts": 1004.0,
        "text": "not gated: its edit adds nothing",
        "outcome": "not gated",
    }


async def test_every_candidate_of_a_whole_run_has_its_gate_and_train_numbers(
    tmp_path: Path,
) -> None:
    events: list[Event] = []
    result = await whole_run(
        tmp_path, RuleContainer(program(LABELS)), ScriptedProposer(), events, proposals_in_flight=1
    )
    found = gepa_decisions(events)
    gates = {e.data["candidate_id"]: e.data for e in events if e.type == "gate"}
    made = [e.data["candidate_id"] for e in events if e.type == "candidate"]
    assert made and set(made) <= set(found)
    for cid in made:
        kinds = [d["kind"] for d in found[cid]]
        assert kinds[0] == "created" and "gate" in kinds, (cid, kinds)
        gate = next(d for d in reversed(found[cid]) if d["kind"] == "gate")
        assert (gate["parent_score"], gate["child_score"]) == (
            gates[cid]["parent_score"],
            gates[cid]["child_score"],
        )
    verdicts = [e.data["candidate_id"] for e in events if e.type == "train_verdict"]
    assert result.best_candidate_id in verdicts  # every child scored on train is judged
    assert _outcomes(found[result.best_candidate_id])[-1] == "accepted"

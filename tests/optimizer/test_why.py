"""The runtime's part of why each candidate was kept or dropped (``optimizer.runtime.results.why``):
scores, the winner and a person's actions, around whatever the method says."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from optimizer.runtime.results.why import explain, why_lines, why_table
from schemas import CandidateRecord, Event


def _record(cid: str, origin: str = "mutation", parents: tuple[str, ...] = ()) -> CandidateRecord:
    return CandidateRecord(
        run_id="r",
        candidate_id=cid,
        content_hash=cid * 4,
        components={"p": cid},
        parents=list(parents),
        origin=origin,  # type: ignore[arg-type]
        rationale=f"why {cid}",
    )


def _log(*entries: tuple[str, dict[str, Any]]) -> list[Event]:
    return [
        Event(seq=n, run_id="r", type=kind, data=data, ts=2000.0 + n)
        for n, (kind, data) in enumerate(entries, 1)
    ]


class _Method:
    """A method whose events say one thing of one candidate."""

    def __init__(self) -> None:
        self.read: list[list[Event]] = []

    def decisions(self, events: Sequence[Event]) -> dict[str, list[dict[str, Any]]]:
        self.read.append(list(events))
        return {"b": [{"kind": "gate", "seq": 3, "text": "passed 1 -> 2", "outcome": "passed"}]}


BASE, A, B, C = _record("base", "seed"), _record("a", parents=("base",)), _record("b"), _record("c")


def _explain(*entries: tuple[str, dict[str, Any]], **kw: Any) -> dict[str, dict[str, Any]]:
    method = _Method()
    why = explain(_log(*entries), [BASE, A, B, C], method, **kw)  # type: ignore[arg-type]
    assert method.read and [c["candidate_id"] for c in why] == ["base", "a", "b", "c"]
    return {c["candidate_id"]: c for c in why}


def test_scores_a_persons_actions_and_the_winner_decide_in_the_order_they_were_logged() -> None:
    why = _explain(
        ("scored", {"candidate_id": "base", "split": "train", "mean": 0.25, "best_seed": 1.0}),
        ("scored", {"candidate_id": "a", "split": "train", "mean": 0.5, "best_seed": 1.0}),
        ("gate", {}),  # the method's (seq 3)
        ("action", {"action": "pin", "source": "console", "candidate_id": "a"}),
        ("action", {"action": "unpin", "source": "cli"}),
        ("action", {"action": "reject", "source": "rest", "candidate_id": "a",
                    "reason": "games the verifier"}),
        ("action", {"action": "note", "source": "console", "candidate_id": "c",
                    "text": "look at refunds"}),
        ("scored", {"candidate_id": "b", "split": "train", "mean": 0.75, "best_seed": 1.0}),
        ("frontier", {"winners": {"s1": ["b"], "s2": ["b", "a"]}}),
        ("promotion", {"best_id": "b", "baseline_id": "base", "selection_split": "train",
                       "n": 4, "measured_on": "holdout", "best_holdout": 0.7,
                       "baseline_holdout": 0.2, "lift": 0.5, "ci_low": 0.1, "ci_high": 0.9,
                       "min_improvement": 0.0, "promoted": True, "considered": ["b", "base"]}),
    )  # fmt: skip
    assert why["base"]["decision"] == "baseline"
    assert why["base"]["created"]["text"] == "the baseline: the program's own texts"
    assert why["base"]["scores"]["holdout"] == 0.2
    a = why["a"]
    assert a["decision"] == "rejected by a person"
    assert a["because"] == "rejected by a person (rest): games the verifier"
    assert [d["text"] for d in a["decisions"] if d["kind"] == "person"] == [
        "pinned by a person (console): proposals start from it",
        "unpinned by a person (cli)",  # the candidate pinned then
        "rejected by a person (rest): games the verifier",
    ]
    assert a["scores"] == {"train": 0.5, "train_partial": None, "seeds_won": 1, "holdout": None}
    b = why["b"]
    assert [d["kind"] for d in b["decisions"]] == ["created", "gate", "scored", "winner"]
    assert b["decision"] == "winner, promoted" and "lift +0.500" in b["because"]
    assert b["scores"]["seeds_won"] == 2 and b["scores"]["holdout"] == 0.7
    late = _explain(
        ("action", {"action": "reject", "source": "cli", "candidate_id": "b", "reason": "no"}),
        ("gate", {}),  # judged after it was rejected (a proposal in flight): it stays rejected
    )["b"]
    assert late["decision"] == "rejected by a person" and late["decisions"][-1]["kind"] == "gate"
    c = why["c"]
    assert c["decision"] == "not evaluated" and "look at refunds" in c["decisions"][-1]["text"]


def test_a_branchs_baseline_names_where_it_was_branched_from() -> None:
    why = _explain(branch_of={"run_id": "run-origin", "candidate_id": "9f3e"})
    assert why["base"]["because"] == "the baseline of this branch: candidate 9f3e of run run-origin"


def test_the_text_and_the_table_name_every_candidates_decision_and_numbers() -> None:
    why = explain(
        _log(
            ("scored", {"candidate_id": "a", "split": "train", "mean": 0.5, "best_seed": 1.0}),
            ("scored", {"candidate_id": "c", "split": "train_partial", "seeds": 3, "of": 8}),
        ),
        [A, C],
        _Method(),  # type: ignore[arg-type]
    )
    text = "\n".join(why_lines(why))
    assert "a  mutation  -> scored on train\n  train 0.5" in text
    assert "c  mutation  -> partly scored on train" in text
    table = why_table(why)
    assert table[0] == "## Decisions"
    assert (
        "| `a` | scored on train | scored on every train seed: mean 0.5, best seed 1 | 0.5 | - |"
        in table
    )

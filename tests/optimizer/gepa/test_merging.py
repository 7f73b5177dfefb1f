"""Merging: a text merge or the proposer's, gated against both parents, then scored.

The unit tests drive ``Merging`` over the recording fakes (``parts.wired``): a seed
``<label>-<i>`` passes when the prompt lists the label. The whole run after them checks
merges inside the search.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from schemas import Event
from tests.fakes.scripted import RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.fakes import Score, look_alike_score, rule_score
from tests.optimizer.gepa.parts import Wired, wired
from tests.optimizer.gepa.runs import LABELS, whole_run


async def _branches(score: Score = rule_score, **config: object) -> tuple[Wired, str, str]:
    """Two branches of ``Label it.``, scored on train: one adds ant and cat, one bee."""
    w = wired(score, **config)  # type: ignore[arg-type]
    base = await w.scored("Label it.")
    return (
        w,
        await w.scored("Label it.\n- ant\n- cat", [base]),
        await w.scored("Label it.\n- bee", [base]),
    )


async def test_a_clean_text_merge_on_the_common_ancestor_needs_no_reflection_call() -> None:
    w = wired()
    base = await w.scored("Answer with the label.")
    a = w.child("Answer with the label.\n- ant", base)
    b = w.child("Answer with the label.\n- bee", base)
    merged = await w.merging.text_merge(1, a, b)
    assert merged is not None and w.proposer.merges == [] and w.proposer.seen == []
    assert merged.components["system_prompt"] == "Answer with the label.\n- ant\n- bee"
    assert merged.parents == [a.candidate_id, b.candidate_id]
    assert merged.origin == "merge" and "no reflection call" in merged.rationale


@pytest.mark.parametrize(("score", "accepted"), [(rule_score, True), (look_alike_score, False)])
async def test_a_merge_is_gated_against_its_best_parent_on_the_seeds_where_they_differ(
    score: Score, accepted: bool
) -> None:
    # Their text merge has every line. Where ant and bee are look-alikes it loses ant's
    # seeds: on the seeds where its parents differ it only ties the better one, and a merge
    # that adds nothing to its best parent is not scored on train.
    w, a, b = await _branches(score)
    assert await w.merging.merge(1, (b, a), [])
    (gate,) = w.events.of("gate")
    assert gate["parent"] == [a, b] and gate["parent_score"] == 4.0
    assert sorted(gate["minibatch"]) == ["ant-0", "ant-1", "bee-0", "bee-1", "cat-0", "cat-1"]
    assert gate["accepted"] == accepted
    assert (gate["candidate_id"] in w.state.train) == accepted
    assert w.proposer.merges == []


async def test_without_a_common_ancestor_the_proposer_writes_the_merge_shown_both() -> None:
    w = wired()
    a, b = await w.scored("- ant"), await w.scored("- bee")
    assert await w.merging.merge(1, (a, b), [])
    (request,) = w.proposer.merges
    assert [e.seed for e in request.evaluations_a] == ["ant-0", "ant-1", "bee-0", "bee-1"]
    assert [e.seed for e in request.evaluations_b] == ["ant-0", "ant-1", "bee-0", "bee-1"]
    (gate,) = w.events.of("gate")
    assert gate["parent"] == [a, b] and gate["accepted"]


async def test_a_merge_is_due_once_per_child_accepted_since_the_last() -> None:
    w, a, b = await _branches()
    rng = random.Random(0)
    assert w.merging.due(rng) is None  # nothing accepted since the start
    w.train.accepted_since_merge = True
    assert set(w.merging.due(rng) or ()) == {a, b}
    assert w.merging.due(rng) is None  # not again until another child is accepted
    w.train.accepted_since_merge = True
    assert set(w.merging.due(rng) or ()) == {a, b}


async def test_no_merge_is_due_past_the_cap() -> None:
    w, _, _ = await _branches(max_merges=1)
    rng = random.Random(0)
    w.train.accepted_since_merge = True
    assert w.merging.due(rng) is not None
    w.train.accepted_since_merge = True
    assert w.merging.due(rng) is None  # --max-merges 1


async def test_merges_pair_branches_only_and_a_tie_is_not_accepted(tmp_path: Path) -> None:
    # Parallel children rewrite the same first line, so rebasing them conflicts and sibling
    # branches stay on the frontier; merges then combine branches, never a line with itself.
    container = RuleContainer(program(LABELS))
    proposer = ScriptedProposer(
        pick=lambda labels, n: labels[(n - 1) % len(labels)], conflicting=True
    )
    events: list[Event] = []
    await whole_run(
        tmp_path,
        container,
        proposer,
        events,
        proposals_in_flight=3,
        minibatch_size=2 * len(LABELS),
        use_merge=True,
        max_idle_iterations=3,
    )
    rebases = [e.data for e in events if e.type == "rebase"]
    assert any(r.get("reason") == "conflict" for r in rebases)
    merges = [e.data["merge"] for e in events if e.type == "iteration" and "merge" in e.data]
    assert merges and proposer.merges
    parents = {e.data["candidate_id"]: e.data["parents"] for e in events if e.type == "candidate"}

    def ancestors(cid: str) -> set[str]:
        out, todo = set(), list(parents.get(cid, []))
        while todo:
            p = todo.pop()
            if p not in out:
                out.add(p)
                todo += parents.get(p, [])
        return out

    for a, b in merges:
        assert a not in ancestors(b) and b not in ancestors(a)
    merged = {cid for cid, ps in parents.items() if len(ps) == 2}
    gates = [e.data for e in events if e.type == "gate" and e.data["candidate_id"] in merged]
    assert gates
    for gate in gates:
        # A merge must beat its best parent strictly to be scored on train.
        assert gate["accepted"] == (gate["child_score"] > gate["parent_score"])

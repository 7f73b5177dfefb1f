"""The minibatch gate: the criterion applied on a minibatch, extended while undecided.

The unit tests drive a ``MinibatchGate`` over the recording fakes (``parts.wired``): a seed
``<label>-<i>`` passes when the prompt lists the label. The whole runs after them check the
gate inside the search.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from optimizer.gepa.gate import MAX_REGATES, MinibatchGate
from optimizer.gepa.strategies.acceptance import (
    AcceptanceCriterion,
    ImprovementOrEqualAcceptance,
    StrictImprovementAcceptance,
)
from schemas import Event
from tests.fakes.scripted import BASELINE, RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.fakes import rule_score
from tests.optimizer.gepa.parts import SEEDS, Wired, wired
from tests.optimizer.gepa.runs import LABELS, release_when_both_asked, whole_run


async def _gate(
    text: str = "- ant",
    *,
    judges_ahead: bool = False,
    criterion: AcceptanceCriterion | None = None,
    idle: int = 2,
    **config: object,
) -> tuple[Wired, MinibatchGate, str]:
    """A gate over a parent ``text`` scored on train; with two idle slots nothing is scored
    ahead of a minibatch of two unless the gate judges ahead."""
    w = wired(idle=idle, **config)  # type: ignore[arg-type]
    parent = await w.scored(text)
    strict = StrictImprovementAcceptance()
    return w, MinibatchGate(w.ctx, criterion or strict, judges_ahead=judges_ahead), parent


async def test_the_criterion_passes_a_child_that_beats_its_parent_and_the_verdict_is_kept() -> None:
    w, gate, parent = await _gate()
    better, worse = w.child("- ant\n- bee", parent), w.child("- cat", parent)
    assert await gate.gate(1, better, parent, ["ant-0", "bee-0"], extension=["cat-0", "cat-1"])
    assert not await gate.gate(2, worse, parent, ["ant-0", "bee-0"])
    first, second = w.events.of("gate")
    assert first == {
        "iteration": 1,
        "candidate_id": better.candidate_id,
        "parent": parent,
        "parent_score": 1.0,
        "child_score": 2.0,
        "minibatch": ["ant-0", "bee-0"],
        "accepted": True,
        "better": ["bee-0"],  # the seeds the verdict rests on (``runs why`` names them)
        "worse": [],
    }
    assert (second["candidate_id"], second["child_score"]) == (worse.candidate_id, 0.0)
    assert not second["accepted"] and second["worse"] == ["ant-0"] and not second["better"]
    assert w.queue.seeds_sent(better.candidate_id) == ["ant-0", "bee-0"]  # decided: not extended
    assert w.state.contenders == {better.candidate_id}  # it earns its train evaluation
    assert w.state.minibatch[better.candidate_id] == {"ant-0": 1.0, "bee-0": 1.0}
    assert w.state.minibatch[worse.candidate_id] == {"ant-0": 0.0, "bee-0": 0.0}


@pytest.mark.parametrize(
    ("criterion", "accepted"),
    [(StrictImprovementAcceptance(), False), (ImprovementOrEqualAcceptance(), True)],
)
async def test_a_tie_is_judged_by_the_runs_criterion(
    criterion: AcceptanceCriterion, accepted: bool
) -> None:
    w, gate, parent = await _gate(criterion=criterion)
    tie = w.child("- ant\n- zzz", parent)
    assert await gate.gate(1, tie, parent, ["ant-0", "bee-0"]) == accepted
    assert (tie.candidate_id in w.state.contenders) == accepted


@pytest.mark.parametrize(
    ("text", "accepted", "rounds"),
    [
        ("- ant\n- cat", True, [["ant-0", "bee-0"], ["bee-1", "cat-0"]]),  # decided by one step
        ("- ant\n- zzz", False, [["ant-0", "bee-0"], ["bee-1", "cat-0"], ["cat-1"]]),  # by none
    ],
)
async def test_while_undecided_the_gate_extends_onto_the_failures_shown_a_minibatch_at_a_time(
    text: str, accepted: bool, rounds: list[list[str]]
) -> None:
    # The child ties its parent on its minibatch; both are scored on the other failures its
    # proposal was shown, two at a time, until the criterion decides or none is left.
    w, gate, parent = await _gate()
    child = w.child(text, parent)
    extension = ["bee-1", "cat-0", "cat-1"]
    assert await gate.gate(1, child, parent, ["ant-0", "bee-0"], extension=extension) == accepted
    (event,) = w.events.of("gate")
    assert event["minibatch"] == [s for step in rounds for s in step]
    assert w.queue.rounds_of(child.candidate_id) == rounds


@pytest.mark.parametrize(
    ("judges_ahead", "accepted", "judged"), [(True, True, 8), (False, False, 2)]
)
async def test_the_seeds_that_fill_the_gates_round_are_judged_only_with_one_proposal_at_a_time(
    judges_ahead: bool, accepted: bool, judged: int
) -> None:
    # The child ties its parent on its minibatch and fixes bee elsewhere. The gate fills its
    # round of eight rollouts with other train seeds either way; with one proposal at a time
    # it judges on them too (and passes the child), with several in flight it only scores
    # them ahead and judges on its minibatch.
    w, gate, parent = await _gate(judges_ahead=judges_ahead, idle=8, concurrency=8)
    child = w.child("- ant\n- bee", parent)
    assert await gate.gate(1, child, parent, ["cat-0", "cow-0"]) == accepted
    (event,) = w.events.of("gate")
    assert len(event["minibatch"]) == judged
    ahead = ["ant-0", "ant-1", "bee-0", "bee-1", "cat-1", "cow-1"]
    assert w.queue.rounds_of(child.candidate_id) == [["cat-0", "cow-0", *ahead]]


@pytest.mark.parametrize(
    ("judges_ahead", "idle", "room", "sent"),
    [
        (True, 2, None, 8),  # one at a time: the round is filled whatever else waits
        (False, 2, None, 2),  # in flight: only slots nobody holds or waits for are filled
        (False, 5, None, 5),
        (False, 8, None, 8),
        (False, 8, 3, 3),  # never past the budget left to the search
    ],
)
async def test_seeds_are_scored_ahead_on_idle_slots_in_flight_and_within_the_budget(
    judges_ahead: bool, idle: int, room: int | None, sent: int
) -> None:
    w, gate, parent = await _gate(judges_ahead=judges_ahead, idle=idle, concurrency=8)
    if room is not None:
        w.queue.budget.max_calls = w.queue.budget.paid + room
    child = w.child("- ant\n- zzz", parent)  # a tie wherever it is scored: nothing more is sent
    await gate.gate(1, child, parent, ["cat-0", "cow-0"])
    assert len(w.queue.seeds_sent(child.candidate_id)) == sent


async def test_a_child_whose_parent_solves_its_minibatch_is_not_scored_and_may_be_gated_again() -> (
    None
):
    w, gate, parent = await _gate()
    child = w.child("- ant\n- bee", parent)
    assert not await gate.gate(1, child, parent, ["ant-0", "ant-1"])
    (skipped,) = w.events.of("skipped")
    assert skipped["candidate_id"] == child.candidate_id
    assert w.queue.seeds_sent(child.candidate_id) == [] and w.events.of("gate") == []
    assert gate.is_regatable(child.candidate_id)


async def test_a_child_that_failed_its_gate_is_gated_again_a_bounded_number_of_times() -> None:
    w, gate, parent = await _gate()
    child = w.child("- cat", parent)  # worse than its parent on every minibatch here
    assert not gate.is_regatable(child.candidate_id)  # never gated yet
    for gates in range(1, MAX_REGATES + 2):
        assert not await gate.gate(gates, child, parent, ["ant-0", "bee-0"])
        assert gate.is_regatable(child.candidate_id) == (gates <= MAX_REGATES)


async def test_a_child_being_gated_passed_or_scored_on_train_is_not_gated_again() -> None:
    # A text written again while its regate runs is a duplicate, not a third gate.
    while_regated: list[bool] = []

    def score(components: Mapping[str, str], seed: str) -> float:
        if components["system_prompt"] == "- cat" and seed.endswith("-1"):  # its second gate
            while_regated.append(gate.is_regatable(failed.candidate_id))
        return rule_score(components, seed)

    w = wired(score, idle=2)
    parent = await w.scored("- ant")
    gate = MinibatchGate(w.ctx, StrictImprovementAcceptance(), judges_ahead=False)
    passed, failed = w.child("- ant\n- bee", parent), w.child("- cat", parent)
    assert await gate.gate(1, passed, parent, ["ant-0", "bee-0"])
    assert not gate.is_regatable(passed.candidate_id)  # it passed
    assert not await gate.gate(2, failed, parent, ["ant-0", "bee-0"])
    assert gate.is_regatable(failed.candidate_id)
    assert not await gate.gate(3, failed, parent, ["ant-1", "bee-1"])
    assert while_regated == [False, False]  # its two rollouts of the second gate
    assert gate.is_regatable(failed.candidate_id)
    w.state.partial[failed.candidate_id] = {"ant-0": 0.0}
    assert not gate.is_regatable(failed.candidate_id)  # scored on part of train
    del w.state.partial[failed.candidate_id]
    w.state.set_train(failed.candidate_id, dict.fromkeys(SEEDS, 0.0))
    assert not gate.is_regatable(failed.candidate_id)


@pytest.mark.parametrize(
    ("text", "concurrency", "room", "broken", "rounds"),
    [
        ("- bee\n- cat", 2, None, ["ant-0", "ant-1"], [["ant-0", "ant-1"]]),
        ("- ant\n- cat", 2, None, ["bee-0", "bee-1"], [["ant-0", "ant-1"], ["bee-0", "bee-1"]]),
        ("- ant\n- bee\n- cat", 2, None, [], [["ant-0", "ant-1"], ["bee-0", "bee-1"]]),
        # a round is ``concurrency`` seeds, filled up with other train seeds
        (
            "- ant\n- bee\n- cat",
            3,
            None,
            [],
            [["ant-0", "ant-1", "bee-0"], ["bee-1", "cat-0", "cat-1"]],
        ),
        ("- bee\n- cat", 2, 1, [], []),  # the budget left cannot pay for a round
    ],
)
async def test_a_stack_is_scored_a_round_at_a_time_where_its_base_scores_until_one_breaks(
    text: str, concurrency: int, room: int | None, broken: list[str], rounds: list[list[str]]
) -> None:
    # The base solves ant's and bee's seeds, the only ones a stack can break.
    w, gate, base = await _gate("- ant\n- bee", concurrency=concurrency)
    if room is not None:
        w.queue.budget.max_calls = w.queue.budget.paid + room
    stack = w.child(text, base)
    assert await gate.breaks(stack, base) == broken
    assert w.queue.rounds_of(stack.candidate_id) == rounds


@pytest.mark.parametrize(
    ("text", "criterion", "accepted"),
    [
        ("- ant\n- bee", StrictImprovementAcceptance(), True),
        ("- zzz", StrictImprovementAcceptance(), False),
        ("- bee", StrictImprovementAcceptance(), False),  # traded ant's seeds for bee's: a tie
        ("- bee", ImprovementOrEqualAcceptance(), True),
    ],
)
async def test_a_stack_is_judged_on_every_train_seed_against_its_base_by_the_criterion(
    text: str, criterion: AcceptanceCriterion, accepted: bool
) -> None:
    w, gate, base = await _gate(criterion=criterion)
    stack = w.child(text, base)
    assert await gate.on_train(1, stack, base) == accepted
    assert set(w.state.train[stack.candidate_id]) == set(SEEDS)
    (event,) = w.events.of("gate")
    assert (event["candidate_id"], event["parent"]) == (stack.candidate_id, base)
    assert event["minibatch"] == list(SEEDS)
    assert (stack.candidate_id in w.state.contenders) == accepted


async def test_a_fix_of_a_failure_shown_outside_the_minibatch_passes_on_the_extended_gate(
    tmp_path: Path,
) -> None:
    # The proposer fixes a label it saw only among the other train failures: the child ties
    # its parent on the minibatch, so the gate scores both on those failures too.
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer(from_context=True)
    events: list[Event] = []
    result = await whole_run(tmp_path, container, proposer, events, proposals_in_flight=1)
    first = next(e.data for e in events if e.type == "gate")
    assert first["accepted"] and len(first["minibatch"]) > 2
    assert first["child_score"] > first["parent_score"]
    assert result.promoted
    assert max(container.calls.values()) == 1  # the gate's rollouts were reused on train


async def test_a_fix_that_slips_on_a_seed_its_parent_passed_is_scored_on_the_extension(
    tmp_path: Path,
) -> None:
    # The baseline knows ant and bee. The first child adds the label of the failure it was
    # shown and fixes it, but its noisy student slips on the seed the parent passed in the
    # same minibatch: one seed gained, one lost, the totals level. That is no sign of worse:
    # both are scored on the other failures it was shown, where the fix shows.
    prog = program(LABELS)
    prog["components"][0]["text"] = "\n".join([BASELINE, "- ant", "- bee"])
    slipped: set[str] = set()

    def slips(prompt: str, seed: str) -> bool:
        if prompt.count("\n- ") < 3 or slipped or not seed.startswith(("ant", "bee")):
            return False
        slipped.add(seed)  # the first child's first passed seed, once
        return True

    container, proposer = RuleContainer(prog, slips=slips), ScriptedProposer()
    events: list[Event] = []
    await whole_run(tmp_path, container, proposer, events, proposals_in_flight=1, concurrency=2)
    first = next(e.data for e in events if e.type == "gate")
    assert slipped and slipped <= set(first["minibatch"][:2])  # it slipped in the minibatch
    assert len(first["minibatch"]) > 2  # levelled there, so it was extended
    assert first["accepted"] and first["child_score"] > first["parent_score"]


async def test_a_child_that_fixes_nothing_is_rejected_after_every_seed_it_was_shown(
    tmp_path: Path,
) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer(fixed_label="zzz")
    events: list[Event] = []
    await whole_run(tmp_path, container, proposer, events, proposals_in_flight=1)
    gates = [e.data for e in events if e.type == "gate"]
    assert gates and not any(g["accepted"] for g in gates)
    shown = {e.seed for e in proposer.seen[0].evaluations + proposer.seen[0].train_evaluations}
    assert set(gates[0]["minibatch"]) == shown  # extended onto every failure it was shown
    child = gates[0]["candidate_id"]
    # The same text written again is gated again (a new minibatch) a bounded number of times,
    # then refused as a duplicate; the seeds it already ran on are never paid for twice.
    regates = [e.data for e in events if e.type == "regate"]
    assert len(regates) == MAX_REGATES and all(r["candidate_id"] == child for r in regates)
    rejected = [e.data["reason"] for e in events if e.type == "proposal_rejected"]
    assert rejected and set(rejected) == {"duplicate"}
    assert max(container.calls.values()) == 1


def _sent_at_gate(
    container: RuleContainer,
) -> tuple[dict[str, tuple[int, int]], Callable[[Event], None]]:
    """For each child gated against one parent: the rollouts of it sent by its first gate
    event and the seeds that gate judged on; and the event listener that records them."""
    sent_at_gate: dict[str, tuple[int, int]] = {}

    def listen(event: Event) -> None:
        if event.type == "gate" and isinstance(event.data["parent"], str):
            cid = event.data["candidate_id"]
            sent = sum(n for (h, _), n in container.calls.items() if h.startswith(cid))
            sent_at_gate.setdefault(cid, (sent, len(event.data["minibatch"])))

    return sent_at_gate, listen


async def test_one_writer_scores_the_child_on_spare_seeds_in_the_gates_round(
    tmp_path: Path,
) -> None:
    # With one proposal in flight the gate's minibatch (2 seeds) leaves 6 of 8 slots idle:
    # the gate adds 6 more train seeds to that round and judges on all 8, and a child that
    # passes needs fewer rounds for its full train evaluation.
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    sent_at_gate, listen = _sent_at_gate(container)
    await whole_run(
        tmp_path,
        container,
        proposer,
        on_event=listen,
        proposals_in_flight=1,
        concurrency=8,
        minibatch_size=2,
    )
    assert sent_at_gate
    for scored, judged in sent_at_gate.values():
        assert judged == 8 and scored == 8  # the minibatch of 2 and 6 more, in one round
    assert max(container.calls.values()) == 1  # and none of them paid for twice


async def test_a_waves_one_child_is_scored_on_idle_slots_in_its_gates_round(
    tmp_path: Path,
) -> None:
    # Two writers answer together with the same text: the wave has one child, and the other
    # writer waits for its judgement. Nothing else holds a rollout slot (no holdout is
    # scored behind it), so its gate's round is filled: the minibatch and more train seeds,
    # 8 rollouts at concurrency 8, and a child that passes needs a round fewer for its full
    # train evaluation. The gate still judges on its minibatch alone.
    container = RuleContainer(program(LABELS, holdout=0))
    proposer = ScriptedProposer(fixed_label="ant")
    release = release_when_both_asked(proposer)
    sent_at_gate, listen = _sent_at_gate(container)
    events: list[Event] = []
    await whole_run(
        tmp_path,
        container,
        proposer,
        events,
        on_event=listen,
        proposals_in_flight=2,
        concurrency=8,
        minibatch_size=2,
        lift_without_holdout=True,
    )
    await release
    wave = {
        e.data["candidate_id"]
        for e in events
        if e.type == "candidate" and e.data["iteration"] in (1, 2)
    }
    assert len(wave) == 1  # one text from both writers
    assert not any(e.type == "stack" for e in events)  # gated alone, not stacked
    (child,) = wave
    sent, judged = sent_at_gate[child]
    assert sent == 8 and judged < 8  # the round filled; judged on its minibatch (and extension)
    assert max(container.calls.values()) == 1  # none of them paid for twice

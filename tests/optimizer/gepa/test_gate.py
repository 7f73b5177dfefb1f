"""The minibatch gate: the criterion applied on a minibatch, extended while undecided."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from optimizer.gepa.gate import MAX_REGATES
from schemas import Event
from tests.fakes.scripted import BASELINE, RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.runs import LABELS, release_when_both_asked, whole_run


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
    # train evaluation. The gate still judges on its minibatch alone. Before, with several
    # in flight the gate sent its minibatch alone.
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

"""The GEPA search loop end to end in-process: budget use, waiting writers, honest promotion.

The tests of one part of the search live in that part's test file; these are the loop's own
(when a new iteration may start, what a writer does while others write, how the run ends).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from optimizer.gepa.strategies.stop_condition import NOTHING_TO_FIX
from optimizer.runtime.lifecycle.run import RunResult
from schemas import Event, content_hash
from tests.fakes.scripted import FEEDBACK, RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.runs import LABELS, junk_child, on_the_baseline, whole_run


@pytest.mark.parametrize("in_flight", [1, 4])
@pytest.mark.parametrize("budget", [55, 66, 78, 90])
async def test_a_run_stopped_by_its_budget_spends_it(
    tmp_path: Path, budget: int, in_flight: int
) -> None:
    # Eight labels: no budget here lets the search fix them all and stop on full marks.
    labels = [*LABELS, "fox", "gnu"]
    container, proposer = RuleContainer(program(labels)), ScriptedProposer()
    result = await whole_run(
        tmp_path, container, proposer, max_metric_calls=budget, proposals_in_flight=in_flight
    )
    packet = result.evidence
    assert "budget" in packet["stop_reason"]
    assert 0.95 * budget <= packet["rollouts"]["paid"] <= budget
    assert sum(container.calls.values()) == packet["rollouts"]["paid"]


async def test_the_last_candidate_is_scored_on_the_train_seeds_the_budget_has_left(
    tmp_path: Path,
) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    events: list[Event] = []
    result = await whole_run(
        tmp_path, container, proposer, events, max_metric_calls=55, proposals_in_flight=1
    )
    partial = [e.data for e in events if e.type == "scored" and e.data["split"] == "train_partial"]
    assert partial and partial[0]["seeds"] < partial[0]["of"]
    assert "scored on" in result.evidence["stop_reason"]
    assert result.evidence["rollouts"]["paid"] == 55
    assert result.promoted


async def test_no_reflection_is_asked_when_the_budget_left_is_only_a_gate(tmp_path: Path) -> None:
    # With 82 calls and eight labels, two children are scored on every train seed and the
    # search has 2 calls left: a third child's minibatch of 2 would take them all, leaving
    # nothing to score it on train. Its reflection is not asked.
    labels = [*LABELS, "fox", "gnu"]
    container, proposer = RuleContainer(program(labels)), ScriptedProposer()
    events: list[Event] = []
    result = await whole_run(
        tmp_path, container, proposer, events, max_metric_calls=82, proposals_in_flight=1
    )
    assert (
        "2 left for search, no more than a new child's gate of 2"
        in (result.evidence["stop_reason"])
    )
    children = [e.data["candidate_id"] for e in events if e.type == "candidate"]
    trained = {e.data["candidate_id"] for e in events if e.type == "scored"}
    assert len(proposer.seen) == len(children) == 2
    assert set(children) <= trained
    assert result.evidence["rollouts"]["paid"] == 80


async def test_the_search_stops_when_the_winner_is_settled_and_no_hopeless_child_is_written(
    tmp_path: Path,
) -> None:
    # At 78 calls the last child could be scored on 6 of 12 train seeds: even with full marks
    # there and nothing elsewhere it could not beat the best's mean, so the winner is settled.
    # Its holdout rollouts start at once, and the search stops: that child is never written
    # (its reflection and its rollouts could not change the winner).
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    events: list[Event] = []
    result = await whole_run(
        tmp_path, container, proposer, events, max_metric_calls=78, proposals_in_flight=1
    )
    settled = [e.data["candidate_id"] for e in events if e.type == "settled"]
    assert settled == [result.best_candidate_id] != [result.baseline_candidate_id]
    at = next(i for i, e in enumerate(events) if e.type == "settled")
    assert not [e for e in events[at:] if e.type in ("iteration", "candidate")]
    assert not [e for e in events if e.type == "scored" and e.data["split"] == "train_partial"]
    assert "too few to beat" in result.evidence["stop_reason"]
    holdout = set(program(LABELS)["seeds"]["holdout"])
    measured = {
        t["seed"]
        for e in events
        if e.type == "trials"
        for t in e.data["trials"]
        if t["candidate_id"] == result.best_candidate_id
    }
    assert holdout <= measured
    assert result.evidence["rollouts"]["paid"] < 78 and result.promoted
    assert result.evidence["promotion"]["measured_seeds"] == len(holdout)


async def test_a_budget_of_two_completes_and_says_what_it_skipped(tmp_path: Path) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    result = await whole_run(tmp_path, container, proposer, max_metric_calls=2)
    packet = result.evidence
    assert packet["rollouts"]["paid"] == 2 and sum(container.calls.values()) == 2
    skipped = " ".join(packet["plan"]["skipped"])
    assert "no search" in skipped and "1 of 12 train seeds" in skipped
    assert "1 of 12 holdout seeds" in skipped
    assert not result.promoted
    # The reflection model was still asked once (a smoke test reaches every part).
    assert len(proposer.seen) == 1
    assert "smoke proposal" in packet["stop_reason"]
    report = (result.evidence_dir / "report.md").read_text()
    assert "What this budget skipped" in report and "no search" in report


@pytest.mark.parametrize("val", [0, 1])
async def test_the_seeds_that_choose_the_winner_never_measure_its_lift(
    tmp_path: Path, val: int
) -> None:
    container = RuleContainer(program(LABELS, val=val))
    result = await whole_run(tmp_path, container, ScriptedProposer(), holdout_top_k=2)
    promotion = result.evidence["promotion"]
    assert promotion["selection_split"] == ("val" if val else "train")
    assert promotion["measured_on"] == "holdout"
    holdout = {s for s in program(LABELS, val=val)["seeds"]["holdout"]}
    measured = {h for h, seed in container.calls if seed in holdout}
    # Only the winner and the baseline ever ran on holdout seeds.
    assert measured == {
        _hash(result, result.best_candidate_id),
        _hash(result, result.baseline_candidate_id),
    }
    assert promotion["holdout_seeds"] == len(holdout) == promotion["n"]
    report = (result.evidence_dir / "report.md").read_text()
    assert "chose the winner" in report and "never used to choose" in report


def _hash(result: RunResult, candidate_id: str) -> str:
    for c in result.evidence["candidates"]:
        if c["candidate_id"] == candidate_id:
            break
    packet = json.loads((result.evidence_dir / "evidence.json").read_text())
    components = (
        packet["best"]["components"]
        if candidate_id == packet["best"]["candidate_id"]
        else packet["baseline"]["components"]
    )
    return content_hash(components)


async def test_no_proposal_starts_on_a_member_below_a_best_with_nothing_to_fix(
    tmp_path: Path,
) -> None:
    # Three proposals on the baseline (``junk_child``; its student slips on cat-1) written
    # at once: the first finds nothing to change, then the second adds the junk line, and
    # the third is held until the junk child is on the frontier (below the baseline, with
    # cat-1). Nothing is left to fix in the best, so the two free writers wait for the third
    # instead of starting on the junk child (nobody was shown its failures), and the search
    # stops when it is answered.
    async def release(proposer: ScriptedProposer, events: list[Event]) -> None:
        first, second, third = proposer.hold(1), proposer.hold(2), proposer.hold(3)
        while len(proposer.seen) < 3:
            await asyncio.sleep(0.01)
        first.set()
        while not any(e.type == "proposal_rejected" for e in events):
            await asyncio.sleep(0.01)
        second.set()
        while sum(e.type == "scored" for e in events) < 2:  # the baseline, then the junk child
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # time for the free writers to start on it, if they would
        third.set()

    result, proposer, baseline, _ = await junk_child(
        tmp_path, ["ant", "bee", "cat"], {"cat-1"}, 2, release, proposals_in_flight=3
    )
    assert result.evidence["stop_reason"] == NOTHING_TO_FIX.format(best=baseline)
    assert [r.parent.candidate_id for r in proposer.seen] == [baseline] * 3


async def test_a_writer_back_with_nothing_waits_a_moment_for_those_asked_with_it(
    tmp_path: Path,
) -> None:
    # Three proposals on the baseline (``junk_child``; its student slips on bee-1 and
    # cat-1, two kinds) are written at once. The third adds the junk line at once, and its
    # writer starts on the junk child (held), shown some of its many failures. The first two
    # find nothing to change and answer a moment apart. The first back waits for the second
    # before choosing: with both answers in, nothing is left to fix in the best, and it does
    # not start on the junk child too.
    async def release(proposer: ScriptedProposer, events: list[Event]) -> None:
        first, second, on_junk = proposer.hold(1), proposer.hold(2), proposer.hold(4)
        while len(proposer.seen) < 4:  # the junk child's writer started on it
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        first.set()
        await asyncio.sleep(0.005)  # a moment apart, as a hosted model's answers come
        second.set()
        await asyncio.sleep(0.3)  # time to start on the junk child, if a writer would
        on_junk.set()

    labels = ["ant", "bee", "cat", "cow", "dog", "eel"]
    result, proposer, baseline, junk = await junk_child(
        tmp_path, labels, {"bee-1", "cat-1"}, 3, release, proposals_in_flight=3, minibatch_size=2
    )
    shown = [
        {m.group(1) for e in r.evaluations if (m := FEEDBACK.search(e.feedback))}
        for r in proposer.seen[:2]
    ]
    assert shown[0] | shown[1] == {"bee", "cat"} and shown[0] != shown[1]  # one kind each
    assert result.evidence["stop_reason"] == NOTHING_TO_FIX.format(best=baseline)
    assert [r.parent.candidate_id for r in proposer.seen] == [baseline] * 3 + [junk]


async def test_children_still_waiting_are_dropped_once_the_best_has_full_marks(
    tmp_path: Path,
) -> None:
    # Two proposals on the baseline answer together, each adding the one missing label and
    # rewording the first line (so they do not stack). The first is gated, accepted and
    # scores full marks on every train seed: nothing can beat it, so the second, waiting
    # its turn, is neither rebased nor gated.
    events = await on_the_baseline(
        tmp_path,
        RuleContainer(program(LABELS[:1])),
        delays=(0.0, 0.0),
        conflicting=True,
    )
    first, second = [e.data["candidate_id"] for e in events if e.type == "candidate"][:2]
    stopped = next(e.data for e in events if e.type == "search_stopped")
    assert stopped["reason"] == f"{first} scores full marks on every train seed"
    later = [e for e in events if e.type in ("gate", "rebase", "stack")]
    assert [e.data["candidate_id"] for e in later] == [first]


async def test_a_writer_that_only_waits_takes_no_iteration_and_no_minibatch(
    tmp_path: Path,
) -> None:
    # Four writers, two kinds of failure: two writers take them and two wait for the news,
    # waking each time a proposal ends or a child is settled. How often that is depends on
    # timing; a wait that took an iteration number and a minibatch from the rotation made
    # every later minibatch depend on it too, and a run with several in flight unrepeatable.
    proposer = ScriptedProposer()
    first, second = proposer.hold(1), proposer.hold(2)

    async def answer_one_by_one() -> None:  # the waiting writers wake at each answer
        while len(proposer.seen) < 2:
            await asyncio.sleep(0.01)
        for held in (first, second):
            await asyncio.sleep(0.1)
            held.set()

    answering = asyncio.create_task(answer_one_by_one())
    events: list[Event] = []
    result = await whole_run(
        tmp_path, RuleContainer(program(LABELS[:2])), proposer, events, proposals_in_flight=4
    )
    await asyncio.wait_for(answering, 5)
    assert result.promoted
    numbers = [e.data["iteration"] for e in events if e.type == "iteration"]
    assert len(numbers) >= 2
    assert sorted(numbers) == list(range(1, len(numbers) + 1))  # one per proposal, no gaps

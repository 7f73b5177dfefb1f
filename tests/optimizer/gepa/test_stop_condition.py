"""The stop conditions, composed, and the search's progress they read."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from optimizer.gepa.stopping import Stopping
from optimizer.gepa.strategies import stop_conditions_of
from optimizer.gepa.strategies.stop_condition import (
    CONVERGED,
    NOTHING_TO_FIX,
    CompositeStopper,
    Converged,
    FullMarks,
    IdleIterations,
    MetricCallBudget,
    NoImprovement,
    NothingToFix,
    Patience,
    Perfect,
    ScoreThreshold,
    SearchProgress,
    SignalStopper,
    StopCondition,
    StopFile,
    Timeout,
)
from proposer import ProposalRequest
from schemas import Event, ProposalRejected, RunConfig
from tests.fakes.scripted import BASELINE, FEEDBACK, RuleContainer, ScriptedProposer, program
from tests.optimizer.gepa.parts import add_candidate, lineage_state, search_for
from tests.optimizer.gepa.runs import LABELS, junk_child, release_when_both_asked, whole_run


def test_each_condition_reads_its_own_observation() -> None:
    p = SearchProgress()
    conditions: list[StopCondition] = [
        MetricCallBudget(),
        FullMarks(),
        Patience(3),
        NoImprovement(2),
        IdleIterations(4),
        Converged(),
        NothingToFix(),
        ScoreThreshold(0.9),
    ]
    assert [c.reason_to_stop(p) for c in conditions] == [None] * len(conditions)
    p.budget = "metric-call budget reached (10 paid of 10)"
    p.perfect = Perfect("c1")
    p.proposals_since_improvement, p.proposals_best_mean = 3, 0.5
    p.candidates_since_improvement, p.idle_iterations = 2, 4
    p.converged, p.nothing_to_fix_in, p.best_mean = True, "c0", 0.95
    assert [c.reason_to_stop(p) for c in conditions] == [
        "metric-call budget reached (10 paid of 10)",
        "c1 scores full marks on every train seed",
        "no better candidate in the last 3 proposals (--patience 3; the best train mean stayed 0.500)",
        "no new best in the last 2 candidates (--stop-after-no-improvement 2; the best train mean "
        "stayed 0.950)",
        "no new candidate in 4 iterations in a row (proposals rejected, duplicates, or parents "
        "already perfect)",
        CONVERGED,
        NOTHING_TO_FIX.format(best="c0"),
        "the best train mean 0.950 reached --score-threshold 0.9",
    ]
    assert Patience(0).reason_to_stop(p) is None  # --patience 0: never
    p.perfect = Perfect("c1", best="c0")
    assert FullMarks().reason_to_stop(p) == (
        "c1 scores full marks on every train seed (it only dropped text and did not prove it: "
        "c0 stays the best)"
    )


def test_the_first_condition_with_a_reason_wins() -> None:
    p = SearchProgress(idle_iterations=5, converged=True)
    assert CompositeStopper(Converged(), IdleIterations(5)).reason_to_stop(p) == CONVERGED
    assert CompositeStopper(IdleIterations(9), Converged()).reason_to_stop(p) == CONVERGED
    assert CompositeStopper().reason_to_stop(p) is None


def test_timeout_and_stop_file_read_the_clock_and_the_disk(tmp_path: Path) -> None:
    p = SearchProgress()
    assert Timeout(60).reason_to_stop(p) is None
    p.started -= 61
    assert Timeout(60).reason_to_stop(p) == "--timeout 60s reached: the search ran 61s"
    stop = tmp_path / "stop"
    assert StopFile(stop).reason_to_stop(p) is None
    stop.touch()
    assert StopFile(stop).reason_to_stop(p) == f"stop file {stop} found"


def test_a_signal_stops_the_search_and_the_handler_is_given_back() -> None:
    stopper = SignalStopper(signal.SIGUSR2)
    before = signal.getsignal(signal.SIGUSR2)
    assert stopper.install()
    try:
        assert stopper.reason_to_stop(SearchProgress()) is None
        os.kill(os.getpid(), signal.SIGUSR2)
        assert stopper.reason_to_stop(SearchProgress()) == "signal SIGUSR2 received"
    finally:
        stopper.uninstall()
    assert signal.getsignal(signal.SIGUSR2) == before


def test_the_config_chooses_the_conditions_beside_the_built_in_ones() -> None:
    built_in = stop_conditions_of(RunConfig())
    assert [type(c).__name__ for c in built_in.conditions] == [
        "MetricCallBudget",
        "FullMarks",
        "Patience",
        "IdleIterations",
        "Converged",
        "NothingToFix",
    ]
    chosen = stop_conditions_of(
        RunConfig(
            search_timeout_s=30,
            stop_after_no_improvement=4,
            score_threshold=0.8,
            stop_file="/tmp/x",
            stop_signal="SIGUSR1",
        ),
        [Converged()],
    )
    assert [type(c).__name__ for c in chosen.conditions][6:] == [
        "Timeout",
        "NoImprovement",
        "ScoreThreshold",
        "StopFile",
        "SignalStopper",
        "Converged",
    ]


def test_patience_counts_proposals_since_the_best_rose_as_they_saw_it() -> None:
    # The best rises while proposals are written (a child accepted in the background): the
    # next proposal counted sees the rise and starts the count again.
    state, ids = lineage_state({"base": {"a": 0.0, "b": 0.0}}, {})
    search = search_for(state, patience=2)
    stopping = search._stopping
    stopping.baseline_in()
    stopping.proposal_written()
    assert stopping.progress.proposals_since_improvement == 1 and search._ctx.stop is None
    better = add_candidate(state, "- better", [ids["base"]])
    state.set_train(better, {"a": 1.0, "b": 0.0})
    stopping.scored()
    assert stopping.progress.best_mean == 0.5
    stopping.proposal_written()
    assert stopping.progress.proposals_since_improvement == 0
    stopping.proposal_written()
    stopping.proposal_written()
    assert search._ctx.stop == (
        "no better candidate in the last 2 proposals (--patience 2; the best train mean stayed "
        "0.500)"
    )


def test_idle_iterations_and_candidates_without_a_new_best_are_counted() -> None:
    state, _ = lineage_state({"base": {"a": 0.0, "b": 0.0}}, {})
    search = search_for(state, max_idle_iterations=2, stop_after_no_improvement=3)
    stopping = search._stopping
    stopping.iteration_ended(False)
    stopping.iteration_ended(True)
    stopping.iteration_ended(False)
    assert search._ctx.stop is None
    for _ in range(3):
        stopping.candidate_made()
    assert search._ctx.stop is not None and "3 candidates" in search._ctx.stop


async def test_polling_stops_a_search_on_a_stop_file(tmp_path: Path) -> None:
    state, _ = lineage_state({"base": {"a": 0.0, "b": 0.0}}, {})
    search = search_for(state, stop_file=str(tmp_path / "stop"))
    polling = asyncio.create_task(search._stopping.poll())
    await asyncio.sleep(0.05)
    assert not polling.done()
    (tmp_path / "stop").touch()
    await asyncio.wait_for(polling, 2)
    assert search._ctx.stop == f"stop file {tmp_path / 'stop'} found"


def test_a_stopped_search_keeps_its_first_reason() -> None:
    state, _ = lineage_state({"base": {"a": 0.0, "b": 0.0}}, {})
    search = search_for(state, max_idle_iterations=1)
    stopping: Stopping = search._stopping
    stopping.budget_spent("metric-call budget reached")
    stopping.iteration_ended(False)
    assert search._ctx.stop == "metric-call budget reached"


@pytest.mark.parametrize("field", ["search_timeout_s", "stop_after_no_improvement"])
def test_the_config_refuses_a_nonpositive_limit(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RunConfig(**{field: 0})


async def test_the_search_stops_once_a_candidate_is_perfect_on_train(tmp_path: Path) -> None:
    container, proposer = RuleContainer(program(LABELS)), ScriptedProposer()
    result = await whole_run(
        tmp_path, container, proposer, proposals_in_flight=1, max_idle_iterations=50
    )
    assert "full marks on every train seed" in result.evidence["stop_reason"]
    assert result.evidence["best"]["train"] == 1.0
    assert result.evidence["rollouts"]["paid"] < 400  # budget left: nothing to improve


async def test_the_search_stops_when_proposals_stop_improving_the_best(tmp_path: Path) -> None:
    # Every proposal adds a new line that fixes nothing: new candidates, never a better one.
    container = RuleContainer(program(LABELS))
    proposer = ScriptedProposer(pick=lambda labels, n: f"zzz{n}")
    events: list[Event] = []
    result = await whole_run(
        tmp_path,
        container,
        proposer,
        events,
        proposals_in_flight=1,
        patience=4,
        max_idle_iterations=50,
    )
    reason = result.evidence["stop_reason"]
    assert "no better candidate in the last 4 proposals" in reason and "--patience 4" in reason
    assert len(proposer.seen) == 4
    # Off (0), the same run goes on until the idle rule or the budget ends it.
    other = tmp_path / "off"
    other.mkdir()
    container2 = RuleContainer(program(LABELS))
    proposer2 = ScriptedProposer(pick=lambda labels, n: f"zzz{n}")
    result2 = await whole_run(
        other,
        container2,
        proposer2,
        proposals_in_flight=1,
        patience=0,
        max_idle_iterations=50,
        max_metric_calls=120,
    )
    assert "patience" not in result2.evidence["stop_reason"] and len(proposer2.seen) > 4


@pytest.mark.parametrize("in_flight", [1, 4])
async def test_the_search_stops_once_every_failure_was_shown_and_nothing_new_came_of_it(
    tmp_path: Path, in_flight: int
) -> None:
    # The reflection model keeps the text as it is, whatever it is shown.
    def keep(labels: list[str], n: int) -> str:
        raise ProposalRejected("unchanged", "the text already says what it should")

    container = RuleContainer(program(LABELS))
    proposer = ScriptedProposer(pick=keep)
    result = await whole_run(
        tmp_path,
        container,
        proposer,
        proposals_in_flight=in_flight,
        patience=0,
        max_idle_iterations=50,
    )
    assert result.evidence["stop_reason"] == CONVERGED
    shown = {
        m.group(1)
        for request in proposer.seen
        for e in (*request.evaluations, *request.train_evaluations)
        if (e.reward or 0.0) < 1.0 and (m := FEEDBACK.search(e.feedback))
    }
    assert shown == set(LABELS)  # every failure of the baseline, before it stopped
    # Far fewer calls than the idle rule would have let it make; with four in flight, no
    # writer was sent to repeat a failure while the others were still being written.
    assert len(proposer.seen) <= len(LABELS)


async def test_the_search_stops_when_nothing_is_left_to_fix_in_the_best(tmp_path: Path) -> None:
    # The baseline has every label, but its student slips on cat-1 (a noisy student). Two
    # proposals on it are written at once: one finds nothing to change, the other adds a
    # junk line (``junk_child``): the junk child scores below the baseline on train and
    # joins the frontier with cat-1. Proposals on it would chase what the baseline lost by
    # noise.
    async def release(proposer: ScriptedProposer, events: list[Event]) -> None:
        await release_when_both_asked(proposer)

    result, proposer, baseline, _ = await junk_child(
        tmp_path, ["ant", "bee", "cat"], {"cat-1"}, 2, release, proposals_in_flight=2
    )
    assert result.evidence["stop_reason"] == NOTHING_TO_FIX.format(best=baseline)
    # Nothing was asked on the junk child, though its failures were never shown.
    assert len(proposer.seen) == 2
    assert {r.parent.candidate_id for r in proposer.seen} == {baseline}


@pytest.mark.parametrize(
    "dog_slips",
    [
        {"ant-0", "ant-1", "bee-0"},  # the dog child ties the baseline
        {"ant-0", "ant-1", "bee-0", "bee-1"},  # it scores below
    ],
)
async def test_the_search_stops_when_the_fix_of_the_best_only_tied_it_and_found_nothing_more(
    tmp_path: Path, dog_slips: set[str]
) -> None:
    # The baseline lacks dog, and its noisy student slips on cat-1. Two proposals on it are
    # written at once: the one shown dog adds it (its student then slips on three seeds the
    # baseline passed: a tie, by noise; or on four: below it); the other, shown cat-1 and
    # held back, adds a junk line. The dog child is built on next and its failures are
    # answered with nothing new. The junk child then arrives: it slips on every seed but
    # those of its own gate (cat-1 and ant-1), so it passes the gate, scores below the
    # baseline on train and joins the frontier (cat-1 beats the baseline).
    # The best's failures were answered by the dog child, in which nothing more was found to
    # fix: the search stops there, with no proposal on the junk child.
    labels = ["ant", "bee", "cat", "dog"]
    prog = program(labels)
    prog["components"][0]["text"] = "\n".join([BASELINE, *(f"- {x}" for x in labels[:3])])
    proposer = ScriptedProposer()

    def slips(prompt: str, seed: str) -> bool:
        if "- zzz" in prompt:
            return seed not in {e.seed for e in proposer.seen[1].evaluations}
        if "- dog" in prompt:
            return seed in dog_slips
        return seed == "cat-1"

    def answer(request: ProposalRequest, n: int) -> str | None:
        text = request.parent.components["system_prompt"]
        shown = {m.group(1) for e in request.evaluations if (m := FEEDBACK.search(e.feedback))}
        if "- dog" in text:
            return None  # the tie's failures are slips: nothing to fix
        if n == 2:
            return f"{text}\n- zzz"
        return f"{text}\n- dog" if "dog" in shown else None

    proposer.script = answer
    held = proposer.hold(2)

    events: list[Event] = []

    async def release() -> None:  # once the dog child's failures were answered
        while not any(e.type == "proposal_rejected" for e in events):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        held.set()

    releaser = asyncio.create_task(release())
    result = await whole_run(
        tmp_path,
        RuleContainer(prog, slips=slips),
        proposer,
        events,
        proposals_in_flight=2,
        patience=0,
        max_idle_iterations=50,
    )
    await asyncio.wait_for(releaser, 5)
    assert {e.seed for e in proposer.seen[1].evaluations} == {"cat-1", "ant-1"}
    train = {e.data["candidate_id"]: e.data["mean"] for e in events if e.type == "scored"}
    added = {e.data["candidate_id"]: e.data["diff"] for e in events if e.type == "candidate"}
    baseline = next(iter(train))
    tie = next(c for c, diff in added.items() if "\n+- dog" in diff)
    junk = next(c for c, diff in added.items() if "\n+- zzz" in diff)
    assert train[tie] == train[baseline] - (len(dog_slips) - 3) / len(prog["seeds"]["train"])
    assert train[junk] < train[baseline]
    assert result.evidence["stop_reason"] == NOTHING_TO_FIX.format(best=baseline)
    assert {r.parent.candidate_id for r in proposer.seen} == {baseline, tie}

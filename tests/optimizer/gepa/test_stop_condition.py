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
from schemas import RunConfig
from tests.optimizer.gepa.parts import add_candidate, lineage_state, search_for


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
        "StoppedByPerson",
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
    assert [type(c).__name__ for c in chosen.conditions][7:] == [
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

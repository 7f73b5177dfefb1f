"""Folding a run's events into its summary."""

from __future__ import annotations

from optimizer.service import RunDigest
from schemas import Event


def _event(seq: int, type_: str, **data: object) -> Event:
    return Event(seq=seq, run_id="r", type=type_, data=data, ts=100.0 + seq)


def test_digest_tracks_phase_budget_best_and_verdict() -> None:
    events = [
        _event(1, "program", program_id="p", seeds={"train": 2}, budget={"max_metric_calls": 50}),
        _event(2, "phase", phase="evaluating_baseline"),
        _event(3, "trials", budget={"paid": 4, "cached": 1, "limit": 50, "cost_usd": 0.5}),
        _event(4, "scored", candidate_id="base", split="train", mean=0.25),
        _event(5, "iteration", iteration=1),
        _event(6, "candidate", candidate_id="c1", parents=["base"]),
        _event(7, "proposal_rejected", iteration=2),
        _event(8, "scored", candidate_id="c1", split="train", mean=0.75),
        _event(
            9,
            "frontier",
            winners={"s1": ["c1"], "s2": ["c1", "base"]},
            coverage={"c1": 1.0, "base": 0.5},
            covered=2,
            seeds=2,
            best={"candidate_id": "c1", "mean": 0.75},
        ),
        _event(10, "search_stopped", reason="budget"),
        _event(11, "promotion", promoted=True, lift=0.5),
        _event(12, "phase", phase="completed", evidence_dir="/x"),
        _event(
            13, "seed_set_aside", seed="s9", candidates=["base", "c1"], kind="status", error="x"
        ),
    ]
    digest = RunDigest()
    for event in events:
        digest.fold(event)
    assert digest.phase == "completed" and digest.seq == 13 and digest.last_event_at == 113.0
    assert (
        digest.budget["paid"] == 4 and digest.budget["limit"] == 50 and digest.budget["cached"] == 1
    )
    assert digest.baseline == {"candidate_id": "base", "mean": 0.25}
    assert digest.best == {"candidate_id": "c1", "mean": 0.75}
    assert digest.candidates == 2 and digest.iterations == 1 and digest.rejected == 1
    assert digest.means == {"base": 0.25, "c1": 0.75}
    assert digest.seeds_won() == {"c1": 2, "base": 1}
    assert digest.covered == {"covered": 2, "seeds": 2}
    assert [n["seed"] for n in digest.set_aside] == ["s9"]
    assert digest.stop_reason == "budget" and digest.promotion == {"promoted": True, "lift": 0.5}
    assert digest.evidence_dir == "/x"
    assert "means" not in digest.as_dict()


def test_folding_is_idempotent() -> None:
    digest = RunDigest()
    event = _event(1, "candidate", candidate_id="c1")
    digest.fold(event)
    digest.fold(event)
    assert digest.candidates == 1


def test_best_before_any_frontier_is_the_baseline_and_failure_is_kept() -> None:
    digest = RunDigest()
    digest.fold(_event(1, "scored", candidate_id="base", split="train", mean=0.5))
    digest.fold(_event(2, "phase", phase="failed", error="container gone"))
    assert digest.best == {"candidate_id": "base", "mean": 0.5}
    assert digest.phase == "failed" and digest.error == "container gone"

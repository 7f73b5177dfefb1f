"""JSON views of runs, candidates and trials, as the API serves them and the CLI prints them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from optimizer.service.digest import RunDigest
from schemas import CandidateRecord, RunRecord, TrialView
from schemas.trace_ids import trace_id_of
from workspace import Workspace

__all__ = ["candidate_views", "run_view", "trial_views"]


def run_view(
    record: RunRecord,
    digest: RunDigest,
    counts: dict[str, int],
    *,
    active: bool,
    branches: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """One run: its stored (secret-free) config, status and phase, budget used, best so far,
    the run it branches from and the runs that branch from it (``branches``)."""
    budget = digest.budget
    limit = budget.get("limit", record.config.get("max_metric_calls"))
    return {
        "run_id": record.run_id,
        "status": record.status,
        "phase": record.phase,
        "error": record.error or None,
        "active": active,
        "program_id": record.program_id,
        "fingerprint": record.fingerprint,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "config": record.config,
        "budget": {
            "paid": counts.get("paid", 0),
            "cached": counts.get("cached", 0),
            "errors": counts.get("errors", 0),
            "limit": limit,
            "retries": budget.get("retries", 0),
            "cost_usd": budget.get("cost_usd", 0.0),
            "max_cost_usd": budget.get("max_cost_usd", record.config.get("max_cost_usd")),
        },
        "best": digest.best,
        "baseline": digest.baseline,
        "candidates": digest.candidates,
        "iterations": digest.iterations,
        "proposals_rejected": digest.rejected,
        "coverage": digest.coverage,
        "covered": digest.covered,
        "set_aside": digest.set_aside,
        "stop_reason": digest.stop_reason,
        "concurrency": digest.concurrency,
        "rate_limit": digest.rate_limit,
        "promotion": digest.promotion,
        "program": digest.program,
        "last_event_at": digest.last_event_at,
        "last_seq": digest.seq,
        "branch_of": record.config.get("branch_of"),
        "branches": [dict(b) for b in branches],
        "links": {
            "self": f"/api/runs/{record.run_id}",
            "console": f"/runs/{record.run_id}",
            "events": f"/api/runs/{record.run_id}/events",
            "candidates": f"/api/runs/{record.run_id}/candidates",
            "rollouts": f"/api/runs/{record.run_id}/rollouts",
            "evidence": f"/api/runs/{record.run_id}/evidence",
        },
    }


def candidate_views(records: list[CandidateRecord], digest: RunDigest) -> list[dict[str, Any]]:
    """The run's candidates with their train mean, best seed reward and frontier wins, best
    first."""
    won = digest.seeds_won()
    order = {r.candidate_id: i for i, r in enumerate(records)}
    views = [
        {
            **r.model_dump(mode="json"),
            "train_mean": digest.means.get(r.candidate_id),
            "train_best": digest.bests.get(r.candidate_id),
            "seeds_won": won.get(r.candidate_id, 0),
            "on_frontier": r.candidate_id in won,
            "is_best": bool(digest.best and digest.best.get("candidate_id") == r.candidate_id),
        }
        for r in records
    ]
    views.sort(
        key=lambda v: (
            -(v["train_mean"] if v["train_mean"] is not None else -1.0),
            -v["seeds_won"],
            order[v["candidate_id"]],
        )
    )
    return views


async def trial_views(workspace: Workspace, trials: list[TrialView]) -> list[dict[str, Any]]:
    """Trials as JSON; a cached trial gets the results and id of the rollout it reused."""
    keys = [t.cache_key for t in trials if t.rollout_id is None and t.status == "ok"]
    reused = await workspace.lookup_many(keys) if keys else {}
    out = []
    for trial in trials:
        view = trial.model_dump(mode="json")
        source = reused.get(trial.cache_key) if trial.rollout_id is None else None
        if source is not None:
            view.update(
                rollout_id=source.rollout_id,
                reward=source.reward,
                objectives=source.objectives,
                output=source.output,
                feedback=source.feedback,
                error=source.error,
                latency_ms=source.latency_ms,
                trace_id=trace_id_of(source.trace),
            )
        out.append(view)
    return out

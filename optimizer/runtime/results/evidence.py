"""The evidence packet: ``evidence.json`` for machines and ``report.md`` for people.

Both are built from the search state, the promotion verdict and cached rollouts (read from
the workspace, never re-run) and the run's events (why each candidate was kept or dropped),
and written through the workspace, which owns the run folder.
The method adds its own part under its name (``SearchMethod.evidence_section``) and renders
it in the report (``SearchMethod.report_lines``); the runtime names no method.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.objectives import directions_of
from optimizer.runtime.accounts.plan import RunPlan
from optimizer.runtime.results.forecast_check import actual_figures, forecast_section
from optimizer.runtime.results.frontier_chart import frontier_svg
from optimizer.runtime.results.objectives import CHART_FILE, objectives_section
from optimizer.runtime.results.promotion import Promotion
from optimizer.runtime.results.report import render_report
from optimizer.runtime.results.why import explain, read_events
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.runtime.search.frontier import frontier_view, mean_score
from optimizer.runtime.search.state import SearchState
from optimizer.runtime.search.strategy import SearchMethod
from schemas import ModelUsage, Program, RolloutRecord
from workspace import Workspace

__all__ = ["EvidenceInputs", "build_evidence", "prompt_diff", "write_evidence"]

MAX_TRACES = 4


@dataclass(frozen=True)
class EvidenceInputs:
    """What the packet is made of."""

    run_id: str
    status: str
    config: Mapping[str, Any]
    method: SearchMethod  # the method ``config["method"]`` names
    program: Program
    state: SearchState
    baseline_id: str
    promotion: Promotion
    budget: Budget
    proposer_usage: ModelUsage
    stop_reason: str | None
    started_at: float
    plan: RunPlan | None = None
    warnings: tuple[str, ...] = ()


def prompt_diff(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """Unified diff of every component, baseline -> best."""
    chunks: list[str] = []
    for name in sorted(set(before) | set(after)):
        chunks.extend(
            difflib.unified_diff(
                before.get(name, "").splitlines(),
                after.get(name, "").splitlines(),
                fromfile=f"baseline/{name}",
                tofile=f"best/{name}",
                lineterm="",
            )
        )
    return "\n".join(chunks)


def _lineage(state: SearchState, candidate_id: str) -> list[str]:
    chain, seen = [candidate_id], {candidate_id}
    while True:
        parents = state.candidates[chain[-1]].parents
        nxt = next((p for p in parents if p not in seen and p in state.candidates), None)
        if nxt is None:
            return list(reversed(chain))
        chain.append(nxt)
        seen.add(nxt)


def _split_mean(
    table: Mapping[str, Mapping[str, float]], cid: str, seeds: Sequence[str]
) -> float | None:
    return mean_score(table[cid], seeds) if cid in table else None


async def _traces(
    workspace: Workspace,
    queue: RolloutQueue,
    state: SearchState,
    best: str,
    baseline: str,
    seeds: Sequence[str],
) -> list[dict[str, Any]]:
    """A few holdout seeds: where the best fixed the baseline, and where it still fails."""
    best_scores, base_scores = state.holdout.get(best, {}), state.holdout.get(baseline, {})
    fixed = [s for s in seeds if best_scores.get(s, 0) > base_scores.get(s, 0)]
    failing = [s for s in seeds if s in best_scores and best_scores[s] < 1.0]
    chosen = list(dict.fromkeys(fixed[: MAX_TRACES // 2] + failing[: MAX_TRACES // 2]))
    components = state.candidates[best].components
    keys = {queue.key_for(components, s): s for s in chosen}
    records: dict[str, RolloutRecord] = await workspace.lookup_many(list(keys))
    out = []
    for key, seed in keys.items():
        record = records.get(key)
        if record is None:
            continue
        out.append(
            {
                "seed": seed,
                "why": "fixed by best" if seed in fixed else "still failing",
                "reward": record.reward,
                "baseline_reward": base_scores.get(seed),
                "output": record.output,
                "feedback": record.feedback,
                "trace": record.trace,
            }
        )
    return out


async def build_evidence(
    inputs: EvidenceInputs, workspace: Workspace, queue: RolloutQueue
) -> dict[str, Any]:
    """The machine-readable packet (``evidence.json``)."""
    s, promo, seeds = inputs.state, inputs.promotion, inputs.program.seeds
    best, base = promo.best_id, inputs.baseline_id
    name = inputs.config.get("method", "gepa")
    own = inputs.method.evidence_section(s, best)
    return {
        "run_id": inputs.run_id,
        "version": version("gepa-runtime"),  # the release that produced this packet
        "method": name,
        "status": inputs.status,
        "started_at": inputs.started_at,
        "finished_at": time.time(),
        "stop_reason": inputs.stop_reason,
        "config": dict(inputs.config),
        "program": _program_section(inputs.program),
        "baseline": {
            "candidate_id": base,
            "components": s.candidates[base].components,
            **_scores(s, seeds, base),
        },
        "best": {
            "candidate_id": best,
            "components": s.candidates[best].components,
            **_scores(s, seeds, best),
            "origin": s.candidates[best].origin,
            "parents": s.candidates[best].parents,
            "lineage": _lineage(s, best),
        },
        "promotion": _promotion_section(promo),
        "plan": _plan_section(inputs.plan, seeds),
        **_usage_sections(inputs.budget, inputs.proposer_usage),
        "frontier": _frontier_section(s),
        "objectives": objectives_section(
            s, list(seeds.holdout), directions_of(inputs.program), promo, base
        ),
        "forecast": await forecast_section(
            workspace,
            inputs.run_id,
            actual_figures(inputs.budget, inputs.proposer_usage, time.time() - inputs.started_at),
        ),
        "set_aside": [note.as_dict() for note in s.set_aside.values()],
        "per_seed": _per_seed_section(s, seeds, base, best),
        "candidates": _candidates_section(s, seeds),
        "diff": prompt_diff(s.candidates[base].components, s.candidates[best].components),
        "traces": await _traces(workspace, queue, s, best, base, seeds.holdout),
        "warnings": list(inputs.warnings),
        "decisions": await _decisions(inputs, workspace),
        **({name: own} if own is not None else {}),
    }


async def _decisions(inputs: EvidenceInputs, workspace: Workspace) -> list[dict[str, Any]]:
    """Why each candidate was kept or dropped, from the run's events (gepa-ai #381's manifest:
    :mod:`optimizer.runtime.results.why`)."""
    events = await read_events(workspace, inputs.run_id)
    candidates = list(inputs.state.candidates.values())
    return explain(events, candidates, inputs.method, branch_of=inputs.config.get("branch_of"))


def _frontier_section(s: SearchState) -> dict[str, Any]:
    """Who wins each train seed; a seed nobody solved is won by nobody (``covered`` of ``seeds``)."""
    view = frontier_view(s.frontier)
    return {
        "coverage": view["coverage"],
        "covered": view["covered"],
        "seeds": view["seeds"],
        "train_seeds": view["winners"],
        "best_scores": dict(s.frontier.best),
    }


def _scores(s: SearchState, seeds: Any, cid: str) -> dict[str, float | None]:
    """A candidate's mean per split (None where it was not scored)."""
    return {
        "train": _split_mean(s.train, cid, seeds.train),
        "val": _split_mean(s.val, cid, seeds.val),
        "holdout": _split_mean(s.holdout, cid, seeds.holdout),
    }


def _program_section(p: Program) -> dict[str, Any]:
    """The program as served, without the component texts (the candidates carry those)."""
    return {
        "program_id": p.program_id,
        "fingerprint": p.fingerprint,
        "description": p.description,
        "components": [c.model_dump(mode="json", exclude={"text"}) for c in p.components],
        "seeds": {
            "train": len(p.seeds.train),
            "val": len(p.seeds.val),
            "holdout": len(p.seeds.holdout),
        },
    }


def _promotion_section(promo: Promotion) -> dict[str, Any]:
    """The verdict: the paired holdout lift, its interval, and which seeds chose and measured."""
    return {
        "lift": promo.lift,
        "ci_low": promo.ci_low,
        "ci_high": promo.ci_high,
        "n": promo.n,
        "confidence": 0.95,
        "min_improvement": promo.min_improvement,
        "promoted": promo.promoted,
        "significant": promo.significant,
        "selection_split": promo.selection_split,
        "selection_seeds": promo.selection_seeds,
        "measured_on": promo.measured_on,
        "measured_seeds": promo.measured_seeds,
        "holdout_seeds": promo.holdout_seeds,
        "considered": list(promo.considered),
        "skipped": list(promo.skipped),
        "select": promo.select,
        "objective": promo.objective.as_dict() if promo.objective else None,
        "tradeoff": promo.tradeoff.as_dict() if promo.tradeoff else None,
    }


def _usage_sections(b: Budget, proposer_usage: ModelUsage) -> dict[str, Any]:
    """Rollout counts and usage, student and proposer apart."""
    return {
        "rollouts": {"paid": b.paid, "cached": b.cached, "errors": b.errors, "retries": b.retries},
        "usage": {
            "student": {
                "input_tokens": b.student_input_tokens,
                "output_tokens": b.student_output_tokens,
                "cost_usd": round(b.student_cost_usd, 6),
                "cost_unknown": b.student_cost_unknown,
                "rollouts": b.paid,
            },
            "proposer": proposer_usage.model_dump(mode="json"),
            "total_cost_usd": round(b.student_cost_usd + proposer_usage.cost_usd, 6),
        },
    }


def _per_seed_section(s: SearchState, seeds: Any, base: str, best: str) -> dict[str, Any]:
    """Baseline and best side by side on every train and holdout seed."""

    def pairs(table: dict[str, dict[str, float]], names: Sequence[str]) -> dict[str, Any]:
        return {
            sd: {"baseline": table.get(base, {}).get(sd), "best": table.get(best, {}).get(sd)}
            for sd in names
        }

    return {"train": pairs(s.train, seeds.train), "holdout": pairs(s.holdout, seeds.holdout)}


def _candidates_section(s: SearchState, seeds: Any) -> list[dict[str, Any]]:
    """Every candidate: lineage, scores per split, its gate and its rationale."""
    return [
        {
            "candidate_id": cid,
            "parents": r.parents,
            "origin": r.origin,
            **_scores(s, seeds, cid),
            "minibatch": s.minibatch.get(cid),
            "train_partial": (
                {"mean": mean_score(s.partial[cid]), "seeds": len(s.partial[cid])}
                if cid in s.partial
                else None
            ),
            "rationale": r.rationale,
            "proposer_usage": r.proposer_usage.model_dump(mode="json"),
        }
        for cid, r in s.candidates.items()
    ]


def _plan_section(plan: RunPlan | None, seeds: Any) -> dict[str, Any]:
    """What the budget let the run do: seeds used per split, search or not, what was skipped."""
    if plan is None:
        return {"skipped": []}
    return {
        "train_seeds": len(plan.train),
        "holdout_seeds": len(plan.holdout),
        "val_seeds": len(plan.val),
        "of": {"train": len(seeds.train), "holdout": len(seeds.holdout), "val": len(seeds.val)},
        "selection": plan.selection_split,
        "search": plan.search,
        "skipped": list(plan.skipped),
    }


async def write_evidence(
    inputs: EvidenceInputs, workspace: Workspace, queue: RolloutQueue
) -> tuple[Path, dict[str, Any]]:
    """Write ``evidence.json`` and ``report.md``; returns the run folder and the packet."""
    packet = await build_evidence(inputs, workspace, queue)
    await workspace.write_json(inputs.run_id, "evidence.json", packet)  # never bare NaN
    await workspace.write_file(inputs.run_id, CHART_FILE, frontier_svg(packet["objectives"]))
    report = render_report(packet, inputs.method)
    await workspace.write_file(inputs.run_id, "report.md", report)
    return workspace.run_dir(inputs.run_id), packet

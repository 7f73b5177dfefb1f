"""``--select`` end to end: longer prompts score a little higher and cost more per call.

The container (``tests/fakes/priced.py``) reports ``gpt-4o-mini`` tokens, priced by the table;
the scripted proposer climbs from the bare baseline to the longest, best-scoring prompt, so
the rules have real candidates to choose between: the best reward, the cheapest within two
points of it, and the best under a length.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from optimizer.runtime.accounts.objectives import prompt_tokens
from optimizer.runtime.lifecycle.run import RunResult
from optimizer.searches import run_optimization
from schemas import RunConfig
from tests.fakes.priced import LABELS, PricedContainer, detail_proposer, details

SETTINGS: dict[str, Any] = {
    "containers": ["http://priced"],
    "reflection_model": "scripted",
    "max_metric_calls": 400,
    "minibatch_size": 3,
    "max_idle_iterations": 4,
    "use_merge": False,
    "proposals_in_flight": 1,
    "seed": 0,
}


async def _run(tmp_path: Path, select: str, **config: Any) -> RunResult:
    async with PricedContainer().client() as http:
        return await run_optimization(
            RunConfig(**{**SETTINGS, "select": select, **config}),
            workspace=tmp_path / select.replace(":", "_").replace("=", "_"),
            proposer=detail_proposer(),
            http=http,
        )


def _winner(result: RunResult) -> str:
    return str(result.evidence["best"]["components"]["system_prompt"])


async def test_cheapest_within_promotes_a_shorter_prompt_than_best(tmp_path: Path) -> None:
    best = await _run(tmp_path, "best")
    cheap = await _run(tmp_path, "cheapest-within:0.02")
    assert best.promoted and cheap.promoted
    # best: every detail line (0.95); within 0.02 of it, the cheapest has three (0.93)
    assert details(_winner(best)) == 5 and details(_winner(cheap)) == 3
    assert len(_winner(cheap)) < len(_winner(best))
    promo = cheap.evidence["promotion"]
    assert promo["select"] == "cheapest-within:0.02"
    # both intervals: the reward lift and the cost difference, paired on the holdout seeds
    assert promo["n"] == 3 * len(LABELS) and promo["ci_low"] <= promo["lift"] <= promo["ci_high"]
    cost = promo["objective"]
    assert cost["name"] == "cost_usd" and cost["n"] == promo["n"]
    assert cost["ci_low"] <= cost["diff"] <= cost["ci_high"]
    assert cost["diff"] > 0  # longer than the bare baseline, so dearer per call
    tradeoff = promo["tradeoff"]
    assert tradeoff["reward_given_up"] == pytest.approx(0.02)
    assert tradeoff["chosen_value"] < tradeoff["top_value"]
    report = (cheap.evidence_dir / "report.md").read_text()
    assert "select:   cheapest-within:0.02; cost_usd +$0.00000735 against" in report
    assert "gives up 0.020 of reward" in report
    assert "select:" not in (best.evidence_dir / "report.md").read_text().split("## Seeds")[0]


async def test_best_under_tokens_never_promotes_a_longer_prompt(tmp_path: Path) -> None:
    labelled = "Answer with the label.\n" + "\n".join(f"- {label}" for label in LABELS)
    one_detail = f"{labelled}\n- detail 1: answer in lower case, one word, no punctuation"
    bound = prompt_tokens({"system_prompt": one_detail})
    result = await _run(tmp_path, f"best-under:tokens={bound}")
    winner = _winner(result)
    assert result.promoted and prompt_tokens({"system_prompt": winner}) <= bound
    assert details(winner) == 1  # the best reward that fits
    # The search wrote a longer, better child and did not explore it (the gate weighed it):
    # no candidate scored on train is over the bound.
    over = [c for c in result.evidence["decisions"] if "over the bound" in c["because"]]
    assert over and all(c["decision"] == "rejected by the gate" for c in over)
    candidates = result.evidence["objectives"]["candidates"]
    assert all(c["prompt_tokens"] <= bound for c in candidates)
    # a bound under the baseline's length: nothing fits, nothing is promoted
    tight = await _run(tmp_path, "best-under:tokens=2")
    assert not tight.promoted and tight.best_candidate_id == tight.baseline_candidate_id
    assert tight.evidence["promotion"]["tradeoff"]["eligible"] == []
    assert (
        "No candidate met `best-under:tokens=2`" in (tight.evidence_dir / "report.md").read_text()
    )


async def test_the_evidence_has_every_candidates_objectives_and_a_chart(tmp_path: Path) -> None:
    result = await _run(tmp_path, "best")
    section = result.evidence["objectives"]
    assert section["directions"]["words"] == "minimize"
    assert section["directions"]["cost_usd"] == "minimize"
    by_id = {c["candidate_id"]: c for c in section["candidates"]}
    base = by_id[result.baseline_candidate_id]
    # the baseline: 22 characters -> 5 + 10 prompt tokens and 2 completion tokens a call
    assert base["cost_usd"] == pytest.approx((15 * 0.15 + 2 * 0.60) / 1e6)
    assert base["prompt_tokens"] == 6 and base["words"] == 4.0 and base["cost_unknown"] == 0
    assert base["latency_ms"] is not None and base["latency_ms"] >= 0
    # the winner has the best reward, so it is on every frontier; the baseline is the
    # cheapest, so it is on the cost frontier too
    win = by_id[result.best_candidate_id]
    assert all(win["on_frontier"].values()) and base["on_frontier"]["cost_usd"]
    assert set(section["frontier"]["cost_usd"]) >= {base["candidate_id"], win["candidate_id"]}
    svg = (result.evidence_dir / "frontier.svg").read_text()
    assert svg.startswith("<svg") and 'data-objective="cost_usd"' in svg
    assert f'data-candidate="{win["candidate_id"]}" data-frontier="true"' in svg
    assert "](frontier.svg)" in (result.evidence_dir / "report.md").read_text()
    stored = json.loads((result.evidence_dir / "evidence.json").read_text())
    assert stored["usage"]["student"]["cost_usd"] > 0  # priced from its tokens
    assert stored["usage"]["student"]["cost_unknown"] == 0


async def test_max_cost_usd_caps_the_student_and_the_reflection_model_together(
    tmp_path: Path,
) -> None:
    """The student's dollars come from its tokens (the container reports no cost); each
    proposal costs $0.0001. Apart, neither reaches the cap; together they do."""
    from dataclasses import replace

    from proposer import ProposalRequest

    proposer = detail_proposer()
    plain = proposer.propose

    async def priced(request: ProposalRequest):  # type: ignore[no-untyped-def]
        proposal = await plain(request)
        usage = proposal.usage.model_copy(update={"cost_usd": 0.0001})
        proposer.total_usage = proposer.total_usage.model_copy(
            update={"cost_usd": proposer.total_usage.cost_usd + 0.0001}
        )
        return replace(proposal, usage=usage)

    proposer.propose = priced  # type: ignore[method-assign]
    cap = 0.0004
    async with PricedContainer().client() as http:
        result = await run_optimization(
            RunConfig(**{**SETTINGS, "max_cost_usd": cap}),
            workspace=tmp_path / "capped",
            proposer=proposer,
            http=http,
        )
    usage = result.evidence["usage"]
    student, reflection = usage["student"]["cost_usd"], usage["proposer"]["cost_usd"]
    assert "cost budget reached" in (result.evidence["stop_reason"] or "")
    assert student < cap and reflection < cap and student + reflection >= cap
    assert usage["total_cost_usd"] == pytest.approx(student + reflection)

"""``optimize plan``: the forecast (pure), the plan measured in-process, and the evidence's
comparison of a stored run's plan with what the run spent."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.checks.plan import make_plan, render_plan
from optimizer.runtime.accounts.forecast import Run, Samples, forecast, parallel_slots, pass_share
from optimizer.runtime.accounts.plan import RunPlan
from optimizer.runtime.results.forecast_check import FORECAST_FILE
from optimizer.searches import run_optimization
from schemas import RunConfig
from tests.fakes.priced import PricedContainer, detail_proposer
from tests.optimizer.test_select_rules import SETTINGS
from workspace import Workspace

TRAIN = tuple(f"t{i}" for i in range(24))
HOLDOUT = tuple(f"h{i}" for i in range(36))


def _samples(**changes: Any) -> Samples:
    base = Samples(
        rollouts=5,
        latency_s=0.3,
        together=4,
        parallel=4.0,
        student_input_tokens=100.0,
        student_output_tokens=10.0,
        student_cost_usd=0.001,
        proposals=4,
        proposal_s=4.0,
        reflection_calls=1.0,
        reflection_input_tokens=1000.0,
        reflection_output_tokens=200.0,
        reflection_cost_usd=0.01,
        children=4,
        passed=4,
        startup_s=1.5,
    )
    return replace(base, **changes)


def test_the_forecast_spends_the_budget_on_proposals_judged_k_at_a_time() -> None:
    plan = RunPlan(TRAIN, HOLDOUT)
    f = forecast(_samples(), plan, Run(limit=372, minibatch=4, in_flight=4, concurrency=8))
    assert f.container_calls.value == 372 and f.limited_by == "metric calls"
    # 372 - 24 - 2 * 36 = 276 search calls; 4 written at once are stacked and scored on the 24
    # train seeds once: 6 rollouts a proposal
    proposals = 276 / 6
    assert f.proposals.value == pytest.approx(round(proposals, 1))
    assert f.reflection_calls.value == round(proposals)
    assert f.reflection_tokens.value == round(proposals * 1200)
    assert f.student_tokens.value == 372 * 110
    assert f.student_usd.value == pytest.approx(0.372)
    assert f.reflection_usd.value == pytest.approx(proposals * 0.01)
    # the reflection model is the slower: 4 written at once, stacks judged meanwhile
    wall = 1.5 + 0.5 + 3 * 0.3 + proposals / 4 * 4.0 + 3 * 0.3 + 5 * 0.3
    assert f.wall_s.value == pytest.approx(round(wall, 1))
    assert "4 written at once" in f.wall_s.assumption
    one = forecast(_samples(), plan, Run(limit=372, minibatch=4, in_flight=1, concurrency=8))
    # one at a time: a gate of 4 and, 5/6 of the time (4 of 4 sample children passed), 20 more
    share = pass_share(_samples())
    assert share == pytest.approx(5 / 6)
    sequential = 276 / (4 + share * 20)
    assert one.proposals.value == pytest.approx(round(sequential, 1))
    judging = 0.3 + share * 3 * 0.3
    assert one.wall_s.value == pytest.approx(
        round(1.5 + 0.5 + 0.9 + sequential * (4.0 + judging) + 1.5, 1)
    )


def test_the_cost_cap_stops_the_run_first_for_both_models_together() -> None:
    plan = RunPlan(TRAIN, HOLDOUT)
    free = forecast(_samples(), plan, Run(372, 4, 4, 8))
    capped = forecast(_samples(), plan, Run(372, 4, 4, 8, max_cost_usd=0.2))
    assert capped.limited_by == "cost" and "--max-cost-usd 0.2" in capped.container_calls.assumption
    assert capped.total_usd.value == pytest.approx(0.2, rel=0.01)
    assert capped.container_calls.value < free.container_calls.value
    unknown = forecast(_samples(student_cost_usd=None), plan, Run(372, 4, 4, 8))
    assert unknown.student_usd.value is None and unknown.total_usd.value is None
    assert "--prices" in unknown.student_usd.assumption


def test_a_one_at_a_time_container_and_a_budget_too_small_to_search() -> None:
    assert parallel_slots(_samples(parallel=1.1), 8) == 1.1
    assert parallel_slots(_samples(parallel=3.6), 8) == 8.0
    small = RunPlan(TRAIN[:4], HOLDOUT[:4], search=False)
    f = forecast(_samples(), small, Run(8, 4, 4, 8))
    assert f.limited_by == "no search" and f.container_calls.value == 8
    assert "the baseline alone" in f.container_calls.assumption
    assert f.proposals.value == 1.0
    assert pass_share(_samples(children=0)) == 0.5


async def test_a_plan_measures_the_container_and_the_proposer(tmp_path: Path) -> None:
    config = RunConfig(**SETTINGS)  # one proposal at a time: its children are scored
    async with PricedContainer().client() as http:
        report = await make_plan(config, http=http, proposer=detail_proposer(), together=3)
    s, f = report.samples, report.forecast
    assert s.together == 3 and s.proposals == 2 and s.children >= 1 and s.passed == s.children
    # the baseline: 22 characters / 4 + 10 prompt tokens, 2 completion tokens, gpt-4o-mini
    assert s.student_input_tokens == 15 and s.student_output_tokens == 2
    assert s.student_cost_usd == pytest.approx((15 * 0.15 + 2 * 0.60) / 1e6)
    assert f.container_calls.value == 400 and f.student_usd.value == pytest.approx(
        400 * s.student_cost_usd
    )
    text = render_plan(report)
    for figure in ("container calls", "reflection calls", "student dollars", "wall time"):
        assert figure in text
    assert json.loads(json.dumps(report.as_dict()))["forecast"]["wall_s"]["assumption"]


class ColdSerialContainer(PricedContainer):
    """One rollout at a time, ``warm_s`` each; the first also pays a ``cold_s`` start (a model
    server's first prompt), as a local one-at-a-time model server answers."""

    def __init__(self, warm_s: float = 0.05, cold_s: float = 0.6) -> None:
        super().__init__()
        self.warm_s, self.cold_s, self.started = warm_s, cold_s, False
        self.line = asyncio.Lock()

    async def __call__(self, request: httpx.Request) -> httpx.Response:  # type: ignore[override]
        if request.url.path == "/rollout":
            async with self.line:
                await asyncio.sleep(self.warm_s + (0.0 if self.started else self.cold_s))
                self.started = True
        return super().__call__(request)


async def test_a_plan_measures_latency_after_the_cold_start_and_sees_a_serial_container() -> None:
    container = ColdSerialContainer()
    async with httpx.AsyncClient(transport=httpx.MockTransport(container)) as http:
        report = await make_plan(
            RunConfig(**SETTINGS), http=http, proposer=detail_proposer(), together=4
        )
    s = report.samples
    # the lone first rollout paid the cold start; the wave's first answer is a warm rollout
    assert s.latency_s < container.cold_s / 2
    assert parallel_slots(s, 4) < 2  # answered one at a time, not four at once
    assert f"a rollout takes {s.latency_s:.2f} s" in report.forecast.wall_s.assumption


async def test_the_evidence_sets_a_stored_runs_plan_beside_what_it_spent(tmp_path: Path) -> None:
    config = RunConfig(**SETTINGS)
    async with PricedContainer().client() as http, Workspace(tmp_path / "ws") as ws:
        run_id = (await ws.create_run(config)).run_id
        report = await make_plan(config, http=http, proposer=detail_proposer())
        await ws.write_json(run_id, FORECAST_FILE, report.as_dict())
        result = await run_optimization(
            config, workspace=ws, run_id=run_id, proposer=detail_proposer(), http=http
        )
    section = result.evidence["forecast"]
    calls = section["figures"]["container_calls"]
    assert calls["predicted"] == 400 and calls["actual"] == result.evidence["rollouts"]["paid"]
    assert calls["ratio"] == pytest.approx(calls["actual"] / 400, abs=1e-3)
    assert section["figures"]["wall_s"]["actual"] > 0
    assert "## Plan against the run" in (result.evidence_dir / "report.md").read_text()
    async with PricedContainer().client() as http:
        unplanned = await run_optimization(
            config, workspace=tmp_path / "other", proposer=detail_proposer(), http=http
        )
    assert unplanned.evidence["forecast"] is None

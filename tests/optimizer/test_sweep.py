"""A sweep over student models against a real container whose models differ in skill and price."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from optimizer.sweep import parse_models, run_sweep
from optimizer.sweep.compare import ModelRow, cheapest_meeting, compare, mean_interval
from optimizer.testing import thread_server
from schemas import RunConfig, UserError
from tests.fakes.model_container import LABELS, MODELS, ModelContainer
from tests.fakes.scripted import ScriptedProposer

pytestmark = pytest.mark.e2e


def _config(url: str) -> RunConfig:
    return RunConfig(
        containers=[url],
        reflection_model="scripted",
        max_metric_calls=120,
        proposals_in_flight=1,
        retry_base_delay_s=0,
    )


async def test_three_models_compared_winner_right_baselines_paid_once(tmp_path: Path) -> None:
    box = ModelContainer()
    with thread_server(box.app()) as url:
        result = await run_sweep(
            _config(url),
            "gpt-4.1-nano,gpt-4.1-mini,gpt-4.1",
            workspace=tmp_path / "ws",
            target_score=0.8,
            proposer=ScriptedProposer(),
        )
    rows = {row.model: row for row in result.comparison.rows}
    assert list(rows) == list(MODELS) and all(r.status == "completed" for r in rows.values())
    # what each model can do once its prompt names every label
    assert rows["gpt-4.1-nano"].best_holdout == pytest.approx(2 / 5)
    assert rows["gpt-4.1-mini"].best_holdout == pytest.approx(4 / 5)
    assert rows["gpt-4.1"].best_holdout == pytest.approx(1.0)
    # mini meets 0.8 and costs less per rollout than gpt-4.1
    assert result.comparison.winner == "gpt-4.1-mini"
    for model, (_, price, latency) in MODELS.items():
        assert rows[model].cost_per_rollout_usd == pytest.approx(price)
        assert rows[model].latency_ms == pytest.approx(latency)
        assert rows[model].baseline_holdout == 0.0 and rows[model].baseline_ci == (0.0, 0.0)
    assert not result.comparison.ignored_policy
    # each model's baseline was paid exactly once per seed, and under its own model
    baseline = json.loads((result.folder / "comparison.json").read_text())["models"]
    assert [m["model"] for m in baseline] == list(MODELS)
    seeds = [f"{label}-{i}" for label in LABELS for i in range(4)]
    for model in MODELS:
        run = result.runs[model]
        assert run is not None
        base_hash = run.evidence["baseline"]["candidate_id"]
        served = {
            s: n for (h, s, m), n in box.calls.items() if m == model and h.startswith(base_hash)
        }
        assert sorted(served) == sorted(seeds) and set(served.values()) == {1}, model
    md = (result.folder / "comparison.md").read_text()
    assert "cheapest model meeting 0.8 on holdout: gpt-4.1-mini" in md
    assert json.loads((result.folder / "sweep.json").read_text())["runs"].keys() == MODELS.keys()


async def test_a_container_that_ignores_the_policy_is_reported(tmp_path: Path) -> None:
    box = ModelContainer(ignore_policy=True)
    with thread_server(box.app()) as url:
        result = await run_sweep(
            _config(url).model_copy(update={"max_metric_calls": 40}),
            ["gpt-4.1-nano", "gpt-4.1"],
            workspace=tmp_path / "ws",
            proposer=ScriptedProposer(),
        )
    assert result.comparison.ignored_policy == (("gpt-4.1-nano", "gpt-4.1"),)
    assert any("ignore policy.model" in w for w in result.comparison.warnings)
    assert result.comparison.winner is None  # no target given


def test_model_lists_are_checked() -> None:
    assert parse_models(" a, b ,c") == ["a", "b", "c"]
    with pytest.raises(UserError, match="at least one"):
        parse_models(" , ")
    with pytest.raises(UserError, match="a more than once"):
        parse_models("a,b,a")


def test_the_cheapest_model_meeting_the_target_wins() -> None:
    def row(model: str, best: float, cost: float) -> ModelRow:
        return ModelRow(
            model, f"run-{model}", "completed", best_holdout=best, cost_per_rollout_usd=cost
        )

    rows = [row("big", 0.95, 0.01), row("mid", 0.85, 0.002), row("small", 0.5, 0.0001)]
    assert cheapest_meeting(rows, 0.8) == "mid"
    assert cheapest_meeting(rows, 0.9) == "big"
    assert cheapest_meeting(rows, 0.99) is None
    assert cheapest_meeting(rows, None) is None
    comparison = compare(rows, {}, 0.99)
    assert comparison.winner is None and any("no model reached" in w for w in comparison.warnings)


def test_mean_interval_brackets_the_mean() -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    low, high = mean_interval(values, random.Random(0)) or (0, 0)
    assert low <= sum(values) / len(values) <= high and 0.0 <= low < high <= 1.0
    assert mean_interval([], random.Random(0)) is None
    assert mean_interval([1.0, 1.0], random.Random(0)) == (1.0, 1.0)

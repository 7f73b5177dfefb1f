"""The spec API's pieces: rows and labels, Score/Metric, template aliases, the config mapping."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from optimizer import (
    Endpoint,
    FewShotExample,
    GEPAConfig,
    Metric,
    MIPROConfig,
    PromptTemplate,
    Score,
    evaluate_template,
    format_prompt,
    run_gepa,
)
from optimizer.api.spec.config import run_config
from optimizer.api.spec.rows import find_label_column, spec_rows
from optimizer.checks.preflight import preflight
from optimizer.runtime.lifecycle.program_check import check_splits
from optimizer.testing import thread_server
from schemas import Program, RunConfig, TemplateError, UserError
from tests.fakes import spec_models
from tests.fakes.scripted import RuleContainer
from tests.fakes.scripted import program as rules_program

TEMPLATE = PromptTemplate(
    system="Classify the customer query.", user_template="Query: {query}\nIntents: {intents}"
)


@pytest.fixture
def models() -> Iterator[tuple[str, Any]]:
    app = spec_models.create_app()
    with thread_server(app) as url:
        yield f"{url}/v1", app


def correct(trajectory: Any, sample: Any) -> Score:
    right = trajectory.messages[-1]["content"] == sample.ground_truth
    return Score(metrics=(Metric("correct", float(right), weight=1.0),))


async def test_a_row_the_template_cannot_render_is_refused_before_any_call(
    models: tuple[str, Any], tmp_path: Path
) -> None:
    base, app = models
    rows = spec_models.intent_rows(6)
    rows[4] = {"query": "lost card", "intent": "card_lost"}  # no "intents" field
    with pytest.raises(TemplateError) as caught:
        await run_gepa(
            initial_template=TEMPLATE,
            config=GEPAConfig(label_column="intent"),
            dataset=rows,
            endpoint=Endpoint(model="student", api_base=base),
            mutation_endpoint=Endpoint(model="reflection", api_base=base),
            score_fn=correct,
            workspace=tmp_path / "ws",
        )
    message = str(caught.value)
    assert message.startswith("dataset row 4: user_template")
    assert "needs field(s) intents but the row has: query" in message
    assert "add the field(s) to every row or change the template's placeholders" in message
    assert app.state.requests == {} and not (tmp_path / "ws").exists()


def test_the_label_column_by_config_then_convention_then_the_unused_field() -> None:
    flat = [{"query": "q", "intent": "i", "intents": "a, b"}]
    assert find_label_column(flat, TEMPLATE, None) == "intent"
    assert find_label_column([{**flat[0], "label": "x"}], TEMPLATE, None) == "label"
    assert find_label_column([{**flat[0], "answer": "x"}], TEMPLATE, "intent") == "intent"
    with pytest.raises(UserError, match=r"label_column='gold' is not a field of row 0"):
        find_label_column(flat, TEMPLATE, "gold")
    with pytest.raises(UserError, match="several fields unused .*intent, source.*label_column="):
        find_label_column([{**flat[0], "source": "web"}], TEMPLATE, None)
    (row,) = spec_rows(flat, TEMPLATE, "intent")
    assert row == {"name": "row-00000", "input": {"query": "q", "intents": "a, b"}, "expected": "i"}


def test_score_from_weighted_metrics_and_its_objectives() -> None:
    score = Score(metrics=(Metric("correct", 1.0, weight=0.75), Metric("brief", 0.0, weight=0.25)))
    assert score.score == score.reward == 0.75
    assert score.objectives() == {"reward": 0.75, "correct": 1.0, "brief": 0.0}
    tracked = Score(metrics=(Metric("correct", 1.0, weight=1.0), Metric("tokens", 57.0)))
    assert tracked.reward == 1.0 and tracked.objectives()["tokens"] == 57.0
    assert Score(score=0.5, feedback="half").objectives() == {"reward": 0.5}
    for metrics, fix in [
        ((Metric("a", 1.0),), "no metric has a weight"),
        ((Metric("a", 1.0, weight=1.0), Metric("b", 1.0, weight=1.0)), "weights that sum to at most 1"),
        ((Metric("reward", 1.0, weight=1.0),), "may not be named 'reward'"),
        ((Metric("a", 1.0, weight=0.5), Metric("a", 0.0, weight=0.5)), "repeated: a"),
    ]:  # fmt: skip
        with pytest.raises(ValidationError, match=fix):
            Score(metrics=metrics)
    with pytest.raises(ValidationError, match="differs from the weighted sum"):
        Score(score=0.2, metrics=(Metric("a", 1.0, weight=1.0),))


def test_template_spec_names_are_the_same_fields(tmp_path: Path) -> None:
    template = PromptTemplate(
        system="Be brief.", user_template="{q}", few_shot_examples=(FewShotExample("1+1", "2"),)
    )
    assert template.system_prompt == template.system == "Be brief."
    assert (
        template.demos == template.few_shot_examples == (FewShotExample(input="1+1", output="2"),)
    )
    assert template.to_components()["system_prompt"] == "Be brief."
    loaded = PromptTemplate.load(template.save(tmp_path / "t.json"))
    assert loaded == template and len(loaded.id) == 8 and loaded.generation == 0
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(
        json.dumps({"system": "S", "user_template": "{x}", "few_shot_examples": []})
    )
    assert PromptTemplate.load(spec_file).system_prompt == "S"
    with pytest.raises(ValidationError, match="give system_prompt= or system="):
        PromptTemplate(system="a", system_prompt="b")


def test_the_configs_map_onto_the_runtime_knobs() -> None:
    gepa = run_config(
        GEPAConfig(population_size=5, generations=4, crossover_rate=0.25, elite_size=2,
                   max_concurrent=7, train_seeds=tuple(range(10)), val_seeds=(10, 11)),
        20,
    )  # fmt: skip
    # T=10, H=8, V=2, m=4, P=20: T + H + P * (m + ceil(T/2)) + H + (k + 1) * V
    assert gepa.max_metric_calls == 10 + 8 + 20 * (4 + 5) + 8 + 3 * 2
    assert (gepa.method, gepa.use_merge, gepa.max_merges) == ("gepa", True, 5)
    assert (gepa.holdout_top_k, gepa.concurrency) == (2, 7)
    assert run_config(GEPAConfig(crossover_rate=0.0), 20).use_merge is False
    mipro = run_config(MIPROConfig(num_candidates=9, num_trials=10, max_bootstrapped_demos=2,
                                   max_labeled_demos=3, minibatch_size=5), 20)  # fmt: skip
    assert (mipro.method, mipro.num_instructions, mipro.max_demos) == ("mipro", 9, 5)
    # default 60/20/20 split: T=12, H=V=4; 10 trials of 5, 2 full evaluations
    assert mipro.max_metric_calls == 12 + 4 + 10 * 5 + 2 * 12 + 4 + 2 * 4
    with pytest.raises(UserError, match=r"val_seeds has 30, not a row index .*0\.\.19"):
        run_config(GEPAConfig(train_seeds=(0, 1), val_seeds=(30,)), 20)
    with pytest.raises(UserError, match="row 1 is in both train_seeds and val_seeds"):
        run_config(GEPAConfig(train_seeds=(0, 1), val_seeds=(1,)), 20)


async def test_evaluate_template_and_format_prompt(models: tuple[str, Any]) -> None:
    base, app = models
    rows = spec_models.intent_rows(10)
    assert format_prompt(TEMPLATE, rows[0]) == [
        {"role": "system", "content": TEMPLATE.system},
        {"role": "user", "content": f"Query: {rows[0]['query']}\nIntents: {rows[0]['intents']}"},
    ]
    endpoint = Endpoint(model="student", api_base=base)
    zero = await evaluate_template(TEMPLATE, range(4), rows, endpoint, correct)
    named = TEMPLATE.model_copy(update={"system_prompt": "Intents: pin_reset, card_lost."})
    some = await evaluate_template(named, [0, 1, 2, 3, 4], rows, endpoint, correct)
    knows = {"pin_reset", "card_lost"}
    assert zero.score == 0.0 and zero.id == TEMPLATE.id
    assert some.score == sum(rows[i]["intent"] in knows for i in range(5)) / 5 > 0
    assert len(app.state.requests["student"]) == 9
    with pytest.raises(UserError, match=r"seed 12 is not a row index"):
        await evaluate_template(TEMPLATE, [12], rows, endpoint, correct)


async def _spec_run(base: str, rows: list[dict[str, str]], config: GEPAConfig, ws: Path) -> Any:
    return await run_gepa(
        initial_template=TEMPLATE.model_copy(update={"system": "Classify the customer query."}),
        config=config,
        dataset=rows,
        endpoint=Endpoint(model="student", api_base=base),
        mutation_endpoint=Endpoint(model="reflection", api_base=base),
        score_fn=correct,
        workspace=ws,
    )


async def test_the_specs_flow_without_a_holdout_chooses_and_reports_on_val(
    models: tuple[str, Any], tmp_path: Path
) -> None:
    # The spec has train_seeds and val_seeds only, and validates on val_seeds: every row is in
    # one of the two. Such a run was refused ("program 'python-api' has no holdout seeds").
    base, _ = models
    rows = spec_models.intent_rows(20)
    config = GEPAConfig(
        population_size=2, generations=3, train_seeds=tuple(range(12)),
        val_seeds=tuple(range(12, 20)), label_column="intent",
    )  # fmt: skip
    result = await _spec_run(base, rows, config, tmp_path / "ws")
    packet = json.loads((result.evidence_dir / "evidence.json").read_text())
    promotion = packet["promotion"]
    assert result.measured_on == "val" and promotion["measured_on"] == "val"
    assert promotion["selection_split"] == "val" and promotion["holdout_seeds"] == 0
    assert promotion["measured_seeds"] == 8 and promotion["n"] == 8
    # The lift is the best's val mean against the baseline's, on the val seeds that chose it.
    assert result.lift == pytest.approx(packet["best"]["val"] - packet["baseline"]["val"])
    assert result.promoted and result.lift > 0
    report = (result.evidence_dir / "report.md").read_text()
    assert "on 8 val seeds" in report
    assert "the lift is measured on the seeds the winner was chosen on" in report
    # All rows in train: chosen on train, measured there, and said so.
    only_train = GEPAConfig(
        population_size=2, generations=3, train_seeds=tuple(range(20)), label_column="intent"
    )
    trained = await _spec_run(base, rows, only_train, tmp_path / "ws2")
    assert trained.measured_on == "train"
    assert (
        "measured on the seeds the winner was chosen on"
        in (trained.evidence_dir / "report.md").read_text()
    )


def test_outside_the_spec_api_a_program_without_holdout_is_still_refused() -> None:
    program = Program.model_validate(
        {
            "program_id": "python-api",
            "fingerprint": "f",
            "components": [{"name": "system_prompt", "text": "x"}],
            "seeds": {"train": ["a"], "val": ["b"], "holdout": []},
        }
    )
    with pytest.raises(UserError, match="program 'python-api' has no holdout seeds"):
        check_splits(program, RunConfig())
    check_splits(program, RunConfig(lift_without_holdout=True))  # the spec API's runs
    assert run_config(GEPAConfig(train_seeds=(0,), val_seeds=(1,)), 2).lift_without_holdout


async def test_dry_run_passes_a_program_without_holdout_only_for_a_run_that_allows_it() -> None:
    container = RuleContainer(rules_program(["ant", "bee"], train=2, val=1, holdout=0))
    base = RunConfig(containers=["http://rules"], reflection_model="gpt-4.1", max_metric_calls=50)
    async with httpx.AsyncClient(transport=httpx.MockTransport(container)) as http:
        refused = {f.check: f for f in await preflight(base, http=http, sample_rollouts=0)}
        spec = base.model_copy(update={"lift_without_holdout": True})
        allowed = {f.check: f for f in await preflight(spec, http=http, sample_rollouts=0)}
    assert not refused["holdout seeds"].ok  # the CLI's runs: as before
    assert allowed["holdout seeds"].ok and allowed["holdout seeds"].warning
    assert "the lift is measured on the seeds that choose the winner" in (
        allowed["holdout seeds"].message
    )

"""The prompt-optimization spec's examples (``04-prompt-optimization-spec.md``), run as written.

Each block between ``# --- doc`` and ``# --- end doc`` is the doc's snippet verbatim except
its import lines (``rollouts.prompt_optimization`` / ``rollouts.dtypes`` ->
``optimizer``, ``rollouts.environments.calculator`` -> ``examples.calculator``) and the
endpoints' model names and ``api_base`` pointed at a scripted OpenAI-compatible server on
127.0.0.1 (``tests/fakes/spec_models.py``). What the doc leaves to the reader
(``extract_intent``, the rows behind ``# ...``, the tool example's own rows) is defined
outside those blocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optimizer.testing import thread_server
from tests.fakes import spec_models
from tests.fakes.servers import ROOT

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def models() -> Iterator[tuple[str, Any]]:
    app = spec_models.create_app()
    with thread_server(app) as url:
        yield f"{url}/v1", app


@pytest.fixture(autouse=True)
def _workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the runs' default workspace (.gepa) goes to a temp folder


def extract_intent(trajectory: Any) -> str:
    """The doc's 'task-specific extraction': the model's last message, read as the spec's type."""
    return str(trajectory.messages[-1].content).strip()


async def test_usage_snippet_runs_as_written(
    models: tuple[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    base, app = models
    # --- doc: Usage
    from optimizer import (  # noqa: I001 (the doc's import lines, only the module renamed)
        PromptTemplate,
        GEPAConfig,
        run_gepa,
    )
    from optimizer import Endpoint, Score, Metric

    # 1. Define what you're optimizing
    template = PromptTemplate(
        system="Classify the customer query into one of the banking intents.",
        user_template="Query: {query}\nIntents: {intents}\n\nClassify this query.",
    )

    # 2. Load dataset
    dataset = [
        {"query": "How do I reset my PIN?", "intent": "pin_reset", "intents": "..."},
        {"query": "What's my balance?", "intent": "balance_inquiry", "intents": "..."},
        # ...
    ]

    # 3. Define scoring
    def score_fn(trajectory, sample) -> Score:
        predicted = extract_intent(trajectory)  # task-specific extraction
        correct = predicted.lower() == sample.ground_truth.lower()
        return Score(metrics=(Metric("correct", 1.0 if correct else 0.0, weight=1.0),))

    # 4. Configure optimization
    config = GEPAConfig(
        population_size=20,
        generations=10,
        mutation_rate=0.3,
        train_seeds=tuple(range(100)),
        val_seeds=tuple(range(100, 150)),
    )
    # --- end doc (the rows behind "# ...": 198 more, so the seeds above exist)
    dataset.extend(spec_models.intent_rows(198))
    # --- doc: Usage (continued)

    # 5. Run optimization
    result = await run_gepa(
        initial_template=template,
        config=config,
        dataset=dataset,
        endpoint=Endpoint(provider="openai", model="student", api_base=base),
        mutation_endpoint=Endpoint(provider="openai", model="reflection", api_base=base),
        score_fn=score_fn,
    )

    print(f"Best score: {result.best_template.score}")
    print(f"Optimized prompt:\n{result.best_template.system}")
    # --- end doc

    printed = capsys.readouterr().out
    best = result.best_template
    assert best is not None and best.score == 1.0 and f"Best score: {best.score}" in printed
    assert best.system != template.system  # a changed best, scored through ``.content``
    assert best.system.startswith("Classify the customer query") and "Known intents:" in best.system
    assert set(spec_models.INTENTS) <= set(best.system.replace(",", " ").replace(".", " ").split())
    # The flat row's own fields filled the template (the label column "intent" is never shown).
    first = app.state.requests["student"][0]["messages"]
    assert first[0] == {"role": "system", "content": template.system}
    asked = {body["messages"][-1]["content"] for body in app.state.requests["student"]}
    assert "Query: How do I reset my PIN?\nIntents: ...\n\nClassify this query." in asked
    baseline = next(t for t in result.final_population if t.generation == 0)
    assert baseline.system == template.system and baseline.score == 0.0
    assert all(t.id and t.user_template == template.user_template for t in result.final_population)
    assert result.history and result.history[-1].best_score == 1.0
    assert [h.generation for h in result.history] == sorted(h.generation for h in result.history)
    assert result.promoted and result.lift > 0.5
    evidence = json.loads((result.evidence_dir / "evidence.json").read_text())
    assert evidence["plan"]["of"] == {"train": 100, "val": 50, "holdout": 50}
    # Each metric is an objective of its own next to the reward.
    records = [r for m in result.members for r in await _rollouts(result, m.candidate_id)]
    assert records and all(set(r.objectives) == {"reward", "correct"} for r in records)
    assert {r.objectives["correct"] for r in records} == {0.0, 1.0}


async def _rollouts(result: Any, candidate_id: str) -> list[Any]:
    from workspace import Workspace

    async with Workspace(".gepa") as ws:
        return await ws.rollouts_for_candidate(result.run.run_id, candidate_id)


async def test_tool_using_variant_with_the_calculator_environment(
    models: tuple[str, Any],
) -> None:
    base, app = models
    from optimizer import Endpoint, GEPAConfig, Metric, PromptTemplate, Score, run_gepa

    template = PromptTemplate(system="Solve the problem.", user_template="Problem: {question}")
    dataset = spec_models.calculator_rows(24)
    config = GEPAConfig(population_size=2, generations=3, train_seeds=tuple(range(12)))
    endpoint = Endpoint(provider="openai", model="student", api_base=base)
    mutation_endpoint = Endpoint(provider="openai", model="reflection", api_base=base)

    def score_fn(trajectory: Any, sample: Any) -> Score:
        answer = str(trajectory.messages[-1]["content"]).strip()
        right = answer == str(sample.ground_truth)  # the label column by convention: "answer"
        return Score(metrics=(Metric("correct", float(right), weight=1.0),))

    # --- doc: With Tool-Using Agents
    from examples.calculator import CalculatorEnvironment

    # Same as above, but with environment
    result = await run_gepa(
        initial_template=template,
        config=config,
        dataset=dataset,
        endpoint=endpoint,
        mutation_endpoint=mutation_endpoint,
        score_fn=score_fn,
        environment_factory=lambda sample: CalculatorEnvironment(),  # Fresh env per sample
    )
    # --- end doc

    best = result.best_template
    assert best is not None and "calculator" in best.system and best.score == 1.0
    assert result.promoted and result.lift == 1.0
    tool_turns = [
        body["messages"]
        for body in app.state.requests["student"]
        if body["messages"][-1]["role"] == "tool"
    ]
    assert tool_turns and all(body_tools(b) for b in app.state.requests["student"])
    last = tool_turns[-1]
    assert last[-2]["tool_calls"][0]["function"]["name"] == "calculator"
    question = last[1]["content"].removeprefix("Problem: ")
    assert last[-1]["content"] == str(spec_models.PROBLEMS[question][1])


def body_tools(body: dict[str, Any]) -> bool:
    """The calculator was offered as an OpenAI tool."""
    return [t["function"]["name"] for t in body.get("tools", [])] == ["calculator"]


async def test_mipro_snippet_runs_as_written(models: tuple[str, Any]) -> None:
    base, app = models
    from optimizer import Endpoint, Metric, PromptTemplate, Score

    template = PromptTemplate(
        system="Classify the customer query into one of the banking intents.",
        user_template="Query: {query}\nIntents: {intents}\n\nClassify this query.",
    )
    dataset = spec_models.intent_rows(30)
    endpoint = Endpoint(provider="openai", model="student", api_base=base)
    proposer_endpoint = Endpoint(provider="openai", model="reflection", api_base=base)

    def score_fn(trajectory: Any, sample: Any) -> Score:
        correct = extract_intent(trajectory) == sample.ground_truth
        return Score(metrics=(Metric("correct", 1.0 if correct else 0.0, weight=1.0),))

    # --- doc: MIPRO (joint instruction + few-shot optimization)
    from optimizer import MIPROConfig, run_mipro

    config = MIPROConfig(
        num_candidates=50,
        num_trials=100,
        max_bootstrapped_demos=4,
        max_labeled_demos=4,
    )

    result = await run_mipro(
        initial_template=template,
        config=config,
        dataset=dataset,
        endpoint=endpoint,
        proposer_endpoint=proposer_endpoint,
        score_fn=score_fn,
    )

    # MIPRO also optimizes few-shot examples
    print(f"Optimized demos: {len(result.best_template.few_shot_examples)}")
    # --- end doc

    best = result.best_template
    assert best is not None and best.score is not None and best.score > 0.5
    assert result.promoted and result.history
    assert all(h.num_evaluated == 1 for h in result.history)
    demos = best.few_shot_examples
    assert all(set(d.input) == {"query", "intents"} for d in demos)  # the template's fields
    assert len(app.state.requests["reflection"]) >= 2


SPEC = ROOT.parent / "shared" / "product-docs" / "04-prompt-optimization-spec.md"
# What the spec imports from ``rollouts.prompt_optimization`` and ``rollouts.dtypes``.
SPEC_NAMES = {
    "PromptTemplate", "GEPAConfig", "MIPROConfig", "run_gepa", "run_mipro", "Endpoint",
    "Message", "Trajectory", "Score", "Metric", "Sample", "ScoreFn", "Environment",
}  # fmt: skip


def test_every_name_the_spec_imports_is_importable_from_optimizer() -> None:
    import optimizer

    missing = [name for name in sorted(SPEC_NAMES) if not hasattr(optimizer, name)]
    assert not missing, f"the spec imports {missing}, which optimizer does not export"
    if SPEC.exists():  # the product docs sit beside the repository, where they are laid out
        text = SPEC.read_text(encoding="utf-8")
        pattern = r"from rollouts\.(?:prompt_optimization|dtypes) import (\([^)]*\)|[^\n]*)"
        groups = re.findall(pattern, text)
        named = {w.strip(" ()\n") for group in groups for w in group.split(",")} - {""}
        assert "Message" in named and named <= SPEC_NAMES, named - SPEC_NAMES

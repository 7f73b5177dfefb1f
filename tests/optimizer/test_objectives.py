"""What a rollout measures besides reward: the student's dollars, latency, prompt length.

The student's usage as containers report it for each provider family is priced by the one
table; an unknown model's cost is unknown (``None``), and the budget counts those apart.
"""

from __future__ import annotations

import pytest

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.objectives import (
    StudentPricing,
    directions_of,
    estimate_tokens,
    prompt_tokens,
)
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.objectives import ObjectiveTable
from schemas import ModelPrice, Program, RolloutRecord, Usage
from transport.pricing import PriceTable

MILLION = 1_000_000


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4.1-mini", 0.5 * 0.40 + 0.5 * 0.10 + 1 * 1.60),  # OpenAI
        ("anthropic/claude-3-5-haiku-20241022", 0.5 * 0.80 + 0.5 * 0.08 + 1 * 4.00),  # Anthropic
        ("gemini/gemini-2.0-flash", 0.5 * 0.10 + 0.5 * 0.025 + 1 * 0.40),  # Google
        ("openrouter/openai/gpt-4.1-mini", 0.5 * 0.40 + 0.5 * 0.10 + 1 * 1.60),  # OpenRouter
    ],
)
def test_the_students_usage_is_priced_per_provider_family(model: str, expected: float) -> None:
    usage = Usage(
        input_tokens=MILLION, output_tokens=MILLION, cached_input_tokens=MILLION // 2, model=model
    )
    assert StudentPricing().cost(usage) == pytest.approx(expected)


def test_the_model_is_the_containers_else_the_task_model() -> None:
    usage = Usage(input_tokens=MILLION, output_tokens=0)
    assert StudentPricing().cost(usage) is None  # no model named anywhere: unknown
    assert StudentPricing(task_model="gpt-4o-mini").cost(usage) == pytest.approx(0.15)
    named = usage.model_copy(update={"model": "gpt-4o"})
    assert StudentPricing(task_model="gpt-4o-mini").cost(named) == pytest.approx(2.50)
    assert StudentPricing().cost(Usage(input_tokens=10, model="student")) is None  # local alias


def test_the_users_price_then_the_containers_cost_then_the_table() -> None:
    usage = Usage(input_tokens=MILLION, output_tokens=0, cost_usd=0.2, model="gpt-4o-mini")
    assert StudentPricing().cost(usage) == pytest.approx(0.2)  # it measured its own cost
    user = StudentPricing(PriceTable({"gpt-4o-mini": ModelPrice(input=1.0, output=1.0)}))
    assert user.cost(usage) == pytest.approx(1.0)  # the user's price is the last word
    free = StudentPricing(PriceTable({"student": ModelPrice(input=0, output=0)}))
    assert free.cost(Usage(input_tokens=10, model="student")) == 0.0  # known, free


def test_the_budget_counts_unknown_costs_apart() -> None:
    budget = Budget(max_cost_usd=1.0)
    budget.settle(cost_usd=None, error=False, retries=0)
    budget.settle(cost_usd=0.25, error=False, retries=0)
    snap = budget.snapshot()
    assert snap["student_cost_usd"] == 0.25 and snap["student_cost_unknown"] == 1


def test_prompt_tokens_are_estimated_at_four_characters_each() -> None:
    assert (
        estimate_tokens("") == 0 and estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    )
    assert prompt_tokens({"a": "x" * 40, "b": "y" * 41}) == 10 + 11


def test_directions_join_the_containers_and_the_measured() -> None:
    program = Program.model_validate(
        {
            "program_id": "p",
            "fingerprint": "f",
            "components": [{"name": "s", "text": "t"}],
            "seeds": {"train": ["a"]},
            "objectives": ["reward", "exact", {"name": "toxicity", "direction": "minimize"}],
        }
    )
    assert directions_of(program) == {
        "reward": "maximize",
        "exact": "maximize",
        "toxicity": "minimize",
        "cost_usd": "minimize",
        "latency_ms": "minimize",
        "prompt_tokens": "minimize",
    }


def _result(seed: str, reward: float | None, tokens: int, latency: float) -> SeedResult:
    record = RolloutRecord(
        cache_key=seed,
        run_id="r",
        candidate_id="c",
        candidate_hash="h",
        fingerprint="f",
        seed=seed,
        policy="{}",
        status="ok" if reward is not None else "error",
        reward=reward,
        objectives={"reward": reward or 0.0, "toxicity": 0.5},
        usage=Usage(input_tokens=tokens, model="gpt-4o-mini" if tokens else None),
        latency_ms=latency,
    )
    return SeedResult(seed=seed, record=record, cached=False)


def test_the_table_keeps_means_over_the_seeds_it_counts() -> None:
    table = ObjectiveTable(seeds=frozenset({"t1", "t2", "h1"}))
    results = {
        "t1": _result("t1", 1.0, MILLION, 100.0),
        "t2": _result("t2", 0.0, 0, 300.0),  # no model named: its cost is unknown
        "h1": _result("h1", None, MILLION, 900.0),  # errored: in no mean
        "v1": _result("v1", 1.0, MILLION, 5000.0),  # not a counted seed
    }
    table.observe("c", {"system": "x" * 8}, results)
    means = table.means("c")
    assert means["reward"] == 0.5 and means["latency_ms"] == 200.0
    assert means["cost_usd"] == pytest.approx(0.15) and table.unknown_cost("c") == 1
    assert means["toxicity"] == 0.5 and means["prompt_tokens"] == 2.0
    assert table.per_seed("c", "prompt_tokens") == {"t1": 2.0, "t2": 2.0}
    assert table.means("c", {"t2"})["cost_usd"] is None
    table.drop_seed("t1")
    assert table.means("c")["latency_ms"] == 300.0
    assert table.means("nobody") == {"prompt_tokens": None}

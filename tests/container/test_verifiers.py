"""Built-in verifiers, user verifiers, and the verifier loader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from container import AgentResult, Score, Task, load_verifier, normalize_text
from schemas import UserError


def _task(expected: Any, name: str = "seed-1") -> Task:
    return Task(name=name, input="question", expected=expected)


async def _score(spec: Any, output: Any, expected: Any) -> Score:
    return await load_verifier(spec).score(_task(expected), AgentResult(output=output))


async def test_exact() -> None:
    hit = await _score({"type": "exact"}, "card_arrival", "card_arrival")
    assert (hit.score, hit.feedback) == (1.0, "correct: predicted card_arrival")
    miss = await _score({"type": "exact"}, "Card_Arrival", "card_arrival")
    assert (miss.score, miss.feedback) == (0.0, "predicted Card_Arrival, expected card_arrival")
    assert (await _score("exact", 42, "42")).score == 1.0  # compared as text


async def test_normalized_is_the_default() -> None:
    assert load_verifier(None).name == "normalized"
    hit = await _score(None, "  Card-Arrival!\n", "card arrival")
    assert hit.score == 1.0 and hit.feedback.startswith("correct: predicted")
    miss = await _score(None, "lost card", "card arrival")
    assert miss.feedback == "predicted lost card, expected card arrival"
    assert normalize_text("Hello,   World_x") == "hello world x"


async def test_contains() -> None:
    assert (await _score("contains", "The answer is PARIS.", "Paris")).score == 1.0
    miss = await _score({"type": "contains"}, "London", "Paris")
    assert miss.feedback == "predicted London, expected it to contain Paris"
    strict = {"type": "contains", "case_sensitive": True}
    assert (await _score(strict, "The answer is PARIS.", "Paris")).score == 0.0


async def test_regex() -> None:
    spec = {"type": "regex", "pattern": r"^\d{3}-\d{4}$"}
    assert (await _score(spec, "555-1234", None)).score == 1.0
    miss = await _score(spec, "5551234", None)
    assert miss.score == 0.0 and r"expected a match for /^\d{3}-\d{4}$/" in miss.feedback
    assert (await _score({**spec, "pattern": "yes", "ignore_case": True}, "YES", None)).score == 1.0
    with pytest.raises(UserError, match="pattern: .*invalid regular expression"):
        load_verifier({"type": "regex", "pattern": "("})
    with pytest.raises(UserError, match="pattern: Field required"):
        load_verifier({"type": "regex"})


async def test_json_field() -> None:
    spec = {"type": "json_field", "field": "result.intents.0"}
    out = json.dumps({"result": {"intents": ["Lost Card", "x"]}})
    assert (await _score(spec, out, "lost_card")).score == 1.0
    assert (await _score(spec, {"result": {"intents": [3]}}, 3)).score == 1.0  # dict output
    wrong = await _score(spec, out, "card_arrival")
    assert (
        wrong.feedback
        == "predicted result.intents.0=Lost Card, expected result.intents.0=card_arrival"
    )
    not_json = await _score(spec, "lost card", "lost_card")
    assert not_json.score == 0.0 and "not valid JSON" in not_json.feedback
    missing = await _score(spec, '{"result": {}}', "lost_card")
    assert missing.score == 0.0 and "no field result.intents.0" in missing.feedback


async def test_numeric() -> None:
    spec = {"type": "numeric", "abs_tol": 0.01}
    assert (await _score(spec, "The total is 1,234.005 dollars", "1234")).score == 1.0
    assert (await _score(spec, 3.0, 3)).score == 1.0
    miss = await _score(spec, "about 12.5", "12")
    assert miss.score == 0.0 and miss.feedback.startswith(
        "predicted 12.5, expected 12 (tolerance abs 0.01"
    )
    assert (await _score({"type": "numeric", "rel_tol": 0.1}, "105", "100")).score == 1.0
    none = await _score(spec, "no idea", "7")
    assert none.score == 0.0 and "no number in the output" in none.feedback
    with pytest.raises(UserError, match="is not a number"):
        await _score(spec, "7", "seven")


async def test_builtin_without_expected_value_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="seed 'seed-1' has no expected value"):
        await _score("exact", "x", None)


def test_spec_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown verifier type 'fuzzy'.*exact, normalized"):
        load_verifier({"type": "fuzzy"})
    with pytest.raises(UserError, match="colour: Extra inputs are not permitted"):
        load_verifier({"type": "exact", "colour": "red"})
    with pytest.raises(UserError, match="is not a JSON file, a built-in type"):
        load_verifier("nonsense")
    with pytest.raises(UserError, match="cannot read verifier file"):
        load_verifier(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(UserError, match="not valid JSON"):
        load_verifier(bad)


async def test_verifier_json_file(tmp_path: Path) -> None:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps({"type": "numeric", "abs_tol": 0.5}))
    verifier = load_verifier(str(path))
    assert verifier.name == "numeric"
    assert (await verifier.score(_task("10"), AgentResult(output="10.4"))).score == 1.0


async def test_module_function_verifiers() -> None:
    half = load_verifier("tests.container.fixtures.scorers:half_credit")
    score = await half.score(_task("x"), AgentResult(output="abc"))
    assert (score.score, score.feedback) == (0.5, "half credit for abc")
    ratio = load_verifier("tests.container.fixtures.scorers:length_ratio")
    score = await ratio.score(_task("abcd"), AgentResult(output="ab"))
    assert (score.score, score.feedback) == (0.5, "lengths 2 vs 4")
    with pytest.raises(UserError, match="has no attribute 'nope'"):
        load_verifier("tests.container.fixtures.scorers:nope")
    with pytest.raises(UserError, match="cannot import module 'no_such_module_xyz'"):
        load_verifier("no_such_module_xyz:fn")


@pytest.mark.parametrize(
    ("returned", "score", "feedback"),
    [
        (Score(score=0.25, feedback="f"), 0.25, "f"),
        ((0.75, "three quarters"), 0.75, "three quarters"),
        (1, 1.0, ""),
        (0.5, 0.5, ""),
        (True, 1.0, ""),
        ({"score": 0.1, "feedback": "d"}, 0.1, "d"),
    ],
)
async def test_callable_return_shapes(returned: Any, score: float, feedback: str) -> None:
    verifier = load_verifier(lambda task, result: returned)
    got = await verifier.score(_task("x"), AgentResult(output="y"))
    assert (got.score, got.feedback) == (score, feedback)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (1.5, "less than or equal to 1"),
        (-0.1, "greater than or equal to 0"),
        (float("nan"), "finite number"),
        ("good", "returned str"),
        (("a", "b"), "must be a number"),
        (None, "returned NoneType"),
    ],
)
async def test_callable_bad_returns(returned: Any, message: str) -> None:
    verifier = load_verifier(lambda task, result: returned)
    with pytest.raises(UserError, match=message):
        await verifier.score(_task("x"), AgentResult(output="y"))


async def test_async_callable_and_callable_object() -> None:
    async def judge(task: Task, result: AgentResult) -> float:
        return 0.3

    class Scorer:
        async def __call__(self, task: Task, result: AgentResult) -> float:
            return 0.6

    assert (await load_verifier(judge).score(_task("x"), AgentResult(output="y"))).score == 0.3
    scorer = load_verifier(Scorer())
    assert not scorer.in_thread
    assert (await scorer.score(_task("x"), AgentResult(output="y"))).score == 0.6

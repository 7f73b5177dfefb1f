"""The calculator example's pure parts: the evaluator, the tool env, the parser, the verifier."""

from __future__ import annotations

import json

import pytest

from container import AgentResult, Task, load_dataset, load_splits
from examples.calculator import (
    DATASET,
    SPLITS_FILE,
    AgentSettings,
    Calculator,
    CalculatorEnv,
    CalculatorError,
    CalculatorVerifier,
    Reply,
    format_number,
    last_number,
    parse_reply,
)
from schemas import Trace, UserError


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("347 * 12.85", "4458.95"),
        ("1284*36", "46224"),
        ("(61110 - 48500) / 48500 * 100", "26"),
        ("-3 + +4", "1"),
        ("17 // 5 + 17 % 5", "5"),
        ("2 ** 10", "1024"),
        ("2^10", "1024"),  # what models type for a power
        ("$189.60 × 0.65", "123.24"),
        ("round(2 / 3, 3)", "0.667"),
        ("abs(-7) + min(4, 2) + max(1, 9) + sqrt(16)", "22"),
        ("`9360 / 3600`", "2.6"),
        ("0.1 + 0.2", "0.3"),  # no float noise in what the model reads
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, value: str) -> None:
    assert format_number(Calculator().evaluate(expression)) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("price * 3", "unknown name 'price'"),
        ("(1).real", "attributes (x.y) are not allowed"),
        ("__import__('os').system('true')", "only these functions are allowed"),
        ("open('x')", "only these functions are allowed"),
        ("round(x=1)", "only these functions are allowed"),
        ("9 ** 9 ** 9", "is too large"),
        ("10 ** 99 * 100", "more than 100 digits"),
        ("1" * 101, "more than 100 digits"),
        ("1e308 * 10", "too large"),
        ("(61,110 - 48,500) / 48,500", "write 61110, not 61,110"),  # its own number
        ("(1, 2)", "commas are only allowed between the arguments"),
        ("'a' * 3", "is not a number"),
        ("[1, 2]", "List is not allowed"),
        ("1 / 0", "division by zero"),
        ("(-8) ** 0.5", "not a real number"),
        ("sqrt(-1)", "cannot compute"),
        ("1 +", "cannot parse"),
        ("", "empty expression"),
        ("1+" * 100 + "1", "over the limit of 200"),
    ],
)
def test_calculator_refuses_with_a_message_for_the_model(expression: str, message: str) -> None:
    with pytest.raises(CalculatorError) as caught:
        Calculator().evaluate(expression)
    assert message in str(caught.value)


def test_env_logs_calls_turns_errors_into_observations_and_caps_calls() -> None:
    env = CalculatorEnv(max_calls=2)
    ok = env.call("6 * 7")
    bad = env.call("x + 1")
    over = env.call("1 + 1")
    assert (ok.result, ok.error, ok.observation) == ("42", None, "42")
    assert bad.result is None and bad.observation.startswith("Error: unknown name 'x'")
    assert over.error == "call limit of 2 reached; give your Answer now"
    assert [c.expression for c in env.calls] == ["6 * 7", "x + 1", "1 + 1"]
    assert ok.as_trace() == {
        "name": "calculator",
        "arguments": {"expression": "6 * 7"},
        "result": "42",
        "error": None,
    }
    assert CalculatorEnv().calls == []  # a new env starts empty


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Action: calculator[347 * 12.85]", Reply("action", expression="347 * 12.85")),
        ("Thought: multiply.\nAction: calculator(3 * (4 + 5))", Reply("action", "3 * (4 + 5)")),
        ("Action: `calculator[2 + 2]`", Reply("action", expression="2 + 2")),
        ("**Action:** calculator[(1 + 2) * 3]", Reply("action", expression="(1 + 2) * 3")),
        ("calculator[10 / 4]", Reply("action", expression="10 / 4")),
        ("Action: calculator[2 + 2] to add them", Reply("action", expression="2 + 2")),
        ("calculator((1 + 2) * (3 + 4)) first.", Reply("action", "(1 + 2) * (3 + 4)")),
        ("Action: calculator[(2 + 2]", Reply("action", expression="(2 + 2")),  # never closed
        ("Action: calculator\nAction Input: 12 * 12", Reply("action", expression="12 * 12")),
        ("Answer: 4458.95", Reply("answer", answer="4458.95")),
        ("Final Answer: $4,458.950 dollars", Reply("answer", answer="4458.95")),
        ("answer: -12", Reply("answer", answer="-12")),
        ("Answer: unknown", Reply("answer", answer="")),
        # text after an action was written before its observation: the action wins
        ("Action: calculator[5 * 5]\nAnswer: 30", Reply("action", expression="5 * 5")),
        ("The total is 4458.95.", Reply("none")),
        ("", Reply("none")),
    ],
)
def test_parse_reply(text: str, expected: Reply) -> None:
    assert parse_reply(text) == expected


def test_last_number_skips_action_and_observation_lines() -> None:
    assert last_number("It is about 1,200 dollars.\nAction: calculator[3 * 4]") == "1200"
    assert last_number("Action: calculator[3 * 4]") == ""
    # an observation the model wrote itself is a guess, not an answer
    assert last_number("Observation: 410.5") == ""
    assert last_number("min(1,2) gives 1 then 2.50") == "2.5"


def _result(output: str, calls: list[dict[str, object]], stop: str = "answer") -> AgentResult:
    return AgentResult(
        output=output,
        trace=Trace(tool_calls=calls),
        metadata={"tool_calls": len(calls), "stop_reason": stop, "max_steps": 6},
    )


def _call(expression: str, result: str | None, error: str | None = None) -> dict[str, object]:
    return {
        "name": "calculator",
        "arguments": {"expression": expression},
        "result": result,
        "error": error,
    }


def test_verifier_scores_within_a_cent_and_explains_misses() -> None:
    verify = CalculatorVerifier()
    task = Task(name="calc-001", input={"question": "?"}, expected=4458.95)
    right = verify(task, _result("4458.951", [_call("347 * 12.85", "4458.95")]))
    assert right.score == 1.0
    assert right.feedback == "correct: answered 4458.951 (1 calculator call)"

    wrong = verify(task, _result("4458", []))
    assert wrong.score == 0.0
    assert wrong.feedback.startswith("answered 4458, expected 4458.95 (0 calculator calls).")
    assert "did not use the calculator" in wrong.feedback

    errors = verify(
        task,
        _result("", [_call("1,284 * 36", None, "commas are not allowed")], stop="max_steps"),
    )
    assert errors.feedback.startswith("gave no numeric answer, expected 4458.95")
    assert "'1,284 * 36' -> commas are not allowed" in errors.feedback
    assert "ran out of steps (6)" in errors.feedback

    no_line = verify(task, _result("12", [_call("3 * 4", "12")], stop="no_answer_line"))
    assert "Its last calculator result was 12." in no_line.feedback
    assert "neither an Action nor an 'Answer: <number>' line" in no_line.feedback


def test_verifier_rejects_a_row_without_a_number() -> None:
    with pytest.raises(UserError, match="is not a number"):
        CalculatorVerifier()(Task(name="x", input="?", expected="n/a"), AgentResult(output="1"))


def test_shipped_data_and_splits() -> None:
    dataset = load_dataset(DATASET)
    splits = load_splits(dataset, SPLITS_FILE)
    assert len(dataset) == 40 and (len(splits.train), len(splits.holdout)) == (24, 16)
    assert set(splits.train).isdisjoint(splits.holdout)
    assert set(splits.train) | set(splits.holdout) == {t.name for t in dataset.tasks}
    for task in dataset.tasks:
        assert set(task.input) == {"question"} and task.input["question"].strip()
        assert isinstance(task.expected, int | float) and not isinstance(task.expected, bool)
    raw = [json.loads(line) for line in DATASET.read_text().splitlines()]
    assert [r["name"] for r in raw] == [f"calc-{i:03d}" for i in range(1, 41)]


def test_settings_from_env() -> None:
    local = AgentSettings.from_env(
        {"OPENAI_BASE_URL": "http://127.0.0.1:8012/v1", "CALC_NATIVE_TOOLS": "1"}
    )
    assert (local.model, local.native_tools, local.max_steps) == ("student", True, 6)
    remote = AgentSettings.from_env({"OPENAI_API_KEY": "sk-x", "CALC_MAX_STEPS": "3"})
    assert (remote.model, remote.api_key, remote.max_steps) == ("gpt-4o-mini", "sk-x", 3)
    with pytest.raises(UserError, match="CALC_MAX_STEPS"):
        AgentSettings.from_env({"CALC_MAX_STEPS": "0"})
    with pytest.raises(UserError, match="CALC_NATIVE_TOOLS"):
        AgentSettings.from_env({"CALC_NATIVE_TOOLS": "maybe"})

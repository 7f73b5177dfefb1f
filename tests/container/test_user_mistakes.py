"""Deterministic user mistakes answer 422 naming the field and the fix, never a retried 5xx.

A row that cannot be rendered or scored, a target or verifier returning the wrong type: every
retry would end the same way, so the SDK answers 422 (the optimizer does not retry a 4xx).
Infrastructure faults stay 429/503 and a real crash of user code stays 500 (test_app.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from container import (
    AgentResult,
    Candidate,
    Task,
    UserMistake,
    build_served_program,
    create_app,
)
from schemas import ErrorBody, Program, PromptTemplate
from tests.container.conftest import make_target, write_jsonl

ClientFor = Callable[..., httpx.AsyncClient]


def _body(seed: str, candidate: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "run_id": "run-1",
        "candidate_id": "cand-1",
        "candidate": candidate or {"system_prompt": "Classify the message."},
        "seed": seed,
    }


def _error(response: httpx.Response) -> tuple[str, str]:
    body = ErrorBody.model_validate(response.json())
    return body.error.type, body.error.message


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (42, "returned int; return an AgentResult, a str, or a dict"),
        (None, "returned NoneType"),
        (["a"], "returned list"),
        ({"answer": "x"}, "not a valid AgentResult: output: Field required"),
    ],
)
async def test_a_bad_return_type_is_422_naming_the_type_and_the_fix(
    dataset_path: Path, client_for: ClientFor, returned: Any, message: str
) -> None:
    target = make_target(lambda task, candidate: returned)
    async with client_for(create_app(target, dataset=dataset_path)) as client:
        response = await client.post("/rollout", json=_body("row-0"))
    assert response.status_code == 422 and "retry-after" not in response.headers
    kind, text = _error(response)
    assert kind == "BadTargetResult" and message in text and "'output'" in text


async def test_a_row_without_a_label_is_422_under_the_default_verifier(
    tmp_path: Path, client_for: ClientFor
) -> None:
    rows = [{"id": f"r{i}", "text": f"m{i}", "label": "a"} for i in range(5)]
    rows.append({"id": "unlabelled", "text": "m5", "gold": "a"})  # a column the SDK does not read
    target = make_target(lambda task, candidate: "a")
    app = create_app(target, dataset=write_jsonl(tmp_path / "d.jsonl", rows))
    async with client_for(app) as client:
        labelled = await client.post("/rollout", json=_body("r0"))
        unlabelled = await client.post("/rollout", json=_body("unlabelled"))
    assert labelled.status_code == 200 and labelled.json()["reward"] == 1.0
    assert unlabelled.status_code == 422
    kind, text = _error(unlabelled)
    assert kind == "MissingLabel"
    assert "seed 'unlabelled' has no expected value" in text
    assert "normalized verifier" in text and "add an expected/label/answer value" in text


async def test_a_label_the_numeric_verifier_cannot_read_is_422(
    tmp_path: Path, client_for: ClientFor
) -> None:
    rows = [{"id": "n1", "question": "1+1?", "answer": "two"}]
    app = create_app(
        make_target(lambda task, candidate: "2"),
        dataset=write_jsonl(tmp_path / "d.jsonl", rows),
        verifier="numeric",
    )
    async with client_for(app) as client:
        response = await client.post("/rollout", json=_body("n1"))
    assert response.status_code == 422
    kind, text = _error(response)
    assert kind == "BadLabel" and "'two' is not a number" in text


async def test_a_row_the_template_cannot_render_is_422_before_the_target_runs(
    tmp_path: Path, client_for: ClientFor
) -> None:
    calls: list[str] = []

    def solve(task: Task, candidate: Candidate) -> str:
        calls.append(task.name)
        return candidate.template.render(task.input)[-1]["content"]

    template = PromptTemplate(system_prompt="Solve.", user_template="Q: {question} ({unit})")
    rows = [
        {"id": "fits", "input": {"question": "1+1", "unit": "apples"}, "answer": "Q: 1+1 (apples)"},
        {"id": "misfit", "input": {"text": "1+1"}, "answer": "2"},
    ]
    target = make_target(solve, baseline=template)
    app = create_app(target, dataset=write_jsonl(tmp_path / "d.jsonl", rows))
    candidate = {"system_prompt": "Solve.", "demos": "[]"}
    async with client_for(app) as client:
        fits = await client.post("/rollout", json=_body("fits", candidate))
        misfit = await client.post("/rollout", json=_body("misfit", candidate))
    assert fits.status_code == 200 and fits.json()["reward"] == 1.0
    assert misfit.status_code == 422 and calls == ["fits"]  # the target never ran on it
    kind, text = _error(misfit)
    assert kind == "TemplateMismatch"
    assert "seed 'misfit'" in text and "needs field(s) question, unit" in text
    assert "the row has: input, text" in text and "change the template's placeholders" in text


@pytest.mark.parametrize(
    ("score", "message"),
    [
        (7.0, "less than or equal to 1"),
        ("0.9", "returned str"),
        (("high", "looks right"), "score of type str"),
    ],
)
async def test_a_verifier_returning_a_bad_score_is_422(
    dataset_path: Path, client_for: ClientFor, score: Any, message: str
) -> None:
    def verifier(task: Task, result: AgentResult) -> Any:
        return score

    app = create_app(
        make_target(lambda task, candidate: "x"), dataset=dataset_path, verifier=verifier
    )
    async with client_for(app) as client:
        response = await client.post("/rollout", json=_body("row-0"))
    assert response.status_code == 422
    kind, text = _error(response)
    assert kind == "BadScore" and message in text and "[0, 1]" in text


async def test_a_user_mistake_raised_by_a_custom_verifier_is_422_with_its_kind(
    dataset_path: Path, client_for: ClientFor
) -> None:
    def verifier(task: Task, result: AgentResult) -> float:
        raise UserMistake("MissingRubric", f"seed {task.name!r} has no rubric; add one")

    app = create_app(
        make_target(lambda task, candidate: "x"), dataset=dataset_path, verifier=verifier
    )
    async with client_for(app) as client:
        response = await client.post("/rollout", json=_body("row-3"))
    assert response.status_code == 422
    assert _error(response) == ("MissingRubric", "seed 'row-3' has no rubric; add one")


async def test_candidate_text_on_a_multi_component_program_is_422(
    dataset_path: Path, client_for: ClientFor
) -> None:
    target = make_target(lambda task, candidate: candidate.text, baseline={"a": "1", "b": "2"})
    async with client_for(create_app(target, dataset=dataset_path)) as client:
        response = await client.post("/rollout", json=_body("row-0", {"a": "1", "b": "2"}))
    assert response.status_code == 422
    kind, text = _error(response)
    assert kind == "CandidateMisuse" and "a, b" in text and "candidate.components[name]" in text


async def test_the_program_warns_about_rows_every_rollout_would_refuse(
    tmp_path: Path, client_for: ClientFor
) -> None:
    template = PromptTemplate(system_prompt="Solve.", user_template="Q: {question}")
    rows = [{"id": f"q{i}", "input": {"question": f"{i}?"}, "answer": str(i)} for i in range(4)]
    rows += [
        {"id": "no-label", "input": {"question": "5?"}},
        {"id": "no-question", "input": {"text": "6?"}, "answer": "6"},
    ]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    splits = tmp_path / "splits.json"
    splits.write_text('{"train": ["q0", "q1", "q2", "q3", "no-label", "no-question"]}')
    target = make_target(lambda task, candidate: "x", baseline=template)
    served = build_served_program(target, dataset=data, splits=splits)
    holdout, labels, render = served.warnings
    assert "the holdout split is empty" in holdout and "--splits-file" in holdout
    assert labels.startswith("1 of 6 served seeds have no expected value (no-label)")
    assert "rollouts answer 422" in labels and "add an expected/label/answer value" in labels
    assert render.startswith("1 of 6 served seeds cannot be rendered (no-question)")
    assert "needs field(s) question" in render
    async with client_for(create_app(target, dataset=data, splits=splits)) as client:
        program = Program.model_validate((await client.get("/program")).json())
    assert program.metadata["warnings"] == list(served.warnings)

    clean = build_served_program(target, dataset=write_jsonl(tmp_path / "ok.jsonl", rows[:4]))
    assert clean.warnings == () and "warnings" not in clean.program.metadata

"""The Python API: ``run_gepa`` / ``run_mipro`` from a template, rows, a score function and models."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from container import AgentResult, Candidate, Task
from optimizer import run_gepa, run_mipro
from optimizer.testing import thread_server
from proposer import InstructionRequest, InstructionSet, Proposal, ProposalRequest
from schemas import ModelUsage, PromptTemplate, RunConfig, UserError

LABELS = ["ant", "bee", "cat", "cow", "dog", "eel"]
ROWS = [
    {
        "name": f"{label}-{i}",
        "input": {"riddle": f"which animal is {i} ({label[::-1]})"},
        "expected": label,
    }
    for label in LABELS
    for i in range(4)
]
SPLITS = {"train": [r["name"] for r in ROWS if not r["name"].endswith("3")],
          "holdout": [r["name"] for r in ROWS if r["name"].endswith("3")]}  # fmt: skip
TEMPLATE = PromptTemplate(system_prompt="Name the animal.", user_template="Riddle: {riddle}")


def _knows(messages: list[dict[str, str]], label: str) -> bool:
    context = " ".join(m["content"] for m in messages[:-1]).lower()
    return label in re.findall(r"[a-z]+", context)


def agent(task: Task, candidate: Candidate) -> AgentResult:
    """Knows a label when the prompt or a demo names it."""
    messages = candidate.template.render(task.input)
    return AgentResult(output=task.expected if _knows(messages, task.expected) else "unknown")


def score(task: Task, result: AgentResult) -> float:
    return 1.0 if result.output == task.expected else 0.0


class FakeProposer:
    """Instructions naming labels of the examples; mutations adding one missed label."""

    total_usage = ModelUsage()  # what the run books: nothing (the tests count calls elsewhere)

    async def instructions(self, request: InstructionRequest) -> InstructionSet:
        labels = sorted({str(e.expected) for e in request.examples})
        made = tuple(
            f"Name the animal: {labels[i]} or {labels[-1 - i]}." for i in range(request.count)
        )
        return InstructionSet(made, "animal riddles", ModelUsage(calls=1))

    async def propose(self, request: ProposalRequest) -> Proposal:
        prompt = request.parent.components["system_prompt"]
        missed = sorted({e.seed.split("-")[0] for e in request.evaluations if not e.reward})
        new = f"{prompt} {missed[0]}" if missed else prompt + " ."
        return Proposal(
            components={**request.parent.components, "system_prompt": new},
            rationale=f"add {missed[:1]}",
            usage=ModelUsage(calls=1),
            diff=f"+{new}",
            mode="text",
            parents=(request.parent.candidate_id,),
        )

    async def merge(self, request: object) -> Proposal:
        raise AssertionError("merges are off")

    async def aclose(self) -> None:
        """Nothing to release."""


def _config(**extra: Any) -> RunConfig:
    return RunConfig(
        max_metric_calls=220, minibatch_size=4, seed=1, use_merge=False, max_idle_iterations=5,
        num_instructions=3, num_demo_sets=4, max_demos=3, full_eval_every=3, **extra,
    )  # fmt: skip


@pytest.fixture
def splits(tmp_path: Path) -> Path:
    path = tmp_path / "splits.json"
    path.write_text(__import__("json").dumps(SPLITS))
    return path


async def test_run_mipro_returns_best_template_population_and_trials(
    tmp_path: Path, splits: Path
) -> None:
    result = await run_mipro(
        TEMPLATE, dataset=ROWS, score=score, agent=agent, splits=splits, reflection_model="fake",
        config=_config(), workspace=tmp_path / "ws", proposer=FakeProposer(),  # type: ignore[arg-type]
    )  # fmt: skip
    assert result.method == "mipro" and result.promoted and result.lift > 0
    best = result.best_template
    assert best is not None and best.user_template == TEMPLATE.user_template and best.demos
    assert best.with_components(result.best_components) == best
    assert best.id == result.run.evidence["best"]["candidate_id"]
    origins = {m.origin for m in result.members}
    assert origins == {"seed", "mipro"}
    baseline = next(m for m in result.members if m.origin == "seed")
    assert baseline.template is not None and baseline.train == 0.0
    assert baseline.template.model_dump(include={"system_prompt", "user_template", "demos"}) == (
        TEMPLATE.model_dump(include={"system_prompt", "user_template", "demos"})
    )
    assert (baseline.template.id, baseline.template.score) == (baseline.candidate_id, 0.0)
    assert [t.id for t in result.final_population] == [m.candidate_id for m in result.members]
    assert result.history and [t.generation for t in result.history] == list(
        range(1, len(result.history) + 1)
    )
    assert {"instruction", "demo_set", "score", "best"} <= set(result.history[0].details)
    last = result.history[-1]
    assert last.best_score == last.details["best"]["score"] and last.best_score > 0
    assert (result.evidence_dir / "evidence.json").exists()
    assert result.run.evidence["version"] == version("gepa-runtime")  # the release that ran it


async def test_run_gepa_returns_per_generation_statistics(tmp_path: Path, splits: Path) -> None:
    result = await run_gepa(
        TEMPLATE, dataset=ROWS, score=score, agent=agent, splits=splits, reflection_model="fake",
        config=_config(), workspace=tmp_path / "ws", proposer=FakeProposer(),  # type: ignore[arg-type]
    )  # fmt: skip
    assert result.method == "gepa" and result.best_template is not None
    assert result.best_template.system_prompt.startswith("Name the animal.")
    assert result.best_template.system_prompt != TEMPLATE.system_prompt
    gated = [s for s in result.history if s.details["outcome"] == "gated"]
    assert gated and all(
        {"parent_score", "child_score", "accepted"} <= set(s.details) for s in gated
    )
    assert all(s.num_evaluated == 1 and s.mean_score is not None for s in gated)
    bests = [s.best_score for s in result.history if s.best_score is not None]
    assert bests == sorted(bests) and bests[-1] > 0
    # use_merge=False: no merge of frontier pairs; proposals written in parallel may still be
    # rebased onto the best (stored with origin "merge" and the rationale saying so).
    origins = {m.origin for m in result.members}
    assert {"seed", "mutation"} <= origins <= {"seed", "mutation", "merge"}


def _student() -> Starlette:
    """A scripted OpenAI-compatible student: answers a label the conversation before it named."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        messages = body["messages"]
        asked = messages[-1]["content"]
        label = next((lab for lab in LABELS if f"({lab[::-1]})" in asked), "")
        content = label if _knows(messages, label) else "no idea"
        return JSONResponse(
            {
                "id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
            }
        )  # fmt: skip

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


async def test_default_agent_renders_the_template_for_the_task_model(
    tmp_path: Path, splits: Path
) -> None:
    with thread_server(_student()) as student:
        result = await run_mipro(
            TEMPLATE, dataset=ROWS, score="exact", splits=splits, task_model="student",
            task_base_url=f"{student}/v1", reflection_model="fake", config=_config(),
            workspace=tmp_path / "ws", proposer=FakeProposer(),  # type: ignore[arg-type]
        )  # fmt: skip
    assert result.run.status == "completed" and result.lift > 0
    assert result.best_template is not None and result.best_template.demos


async def test_missing_inputs_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="reflection_model"):
        await run_mipro(TEMPLATE, dataset=ROWS, score=score, agent=agent, workspace=tmp_path)
    with pytest.raises(UserError, match="task_model"):
        await run_mipro(
            TEMPLATE, dataset=ROWS, score=score, reflection_model="m", workspace=tmp_path
        )
    with pytest.raises(UserError, match="dataset="):
        await run_gepa(TEMPLATE, score=score, agent=agent, reflection_model="m", workspace=tmp_path)

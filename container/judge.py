"""The ``llm_judge`` verifier: a model behind any OpenAI-compatible endpoint grades the output.

The judge is asked for ``{"score": ..., "feedback": ...}``; a score in 0..1 is taken as is and
one in 1..10 is divided by 10. The client is made per call with ``max_retries`` from the spec;
an OpenAI error that survives them propagates, so the container answers 429/503 and the
optimizer retries the rollout instead of recording a made-up score. An answer with no
readable score is a ``Retryable`` for the same reason.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from container.results import AgentResult, Score
from container.specs import LlmJudgeSpec
from container.task import Task
from schemas import Retryable, UserError

if TYPE_CHECKING:  # loaded by the first judge client: importing the SDK must stay light
    import openai

__all__ = ["JUDGE_SYSTEM_PROMPT", "make_llm_judge", "parse_judge_answer"]

JUDGE_SYSTEM_PROMPT = (
    "You grade the output of an AI agent against a rubric. Reply with one JSON object and "
    'nothing else: {"score": <number from 0 to 1>, "feedback": "<one or two sentences: what '
    'is wrong and how to fix it, or why it is right>"}'
)
ClientFactory = Callable[[LlmJudgeSpec], "openai.AsyncOpenAI"]


def make_llm_judge(
    spec: LlmJudgeSpec, *, client_factory: ClientFactory | None = None
) -> Callable[[Task, AgentResult], Awaitable[Score]]:
    """An async verifier for ``spec``; ``client_factory`` replaces the default client."""
    if spec.base_url is None and not os.environ.get(spec.api_key_env):
        raise UserError(
            f"llm_judge verifier needs an API key in ${spec.api_key_env} "
            "(or a base_url for a local OpenAI-compatible server)"
        )
    factory = client_factory or _default_client

    async def judge(task: Task, result: AgentResult) -> Score:
        async with factory(spec) as client:
            completion = await client.chat.completions.create(
                model=spec.model,
                messages=[
                    {"role": "system", "content": JUDGE_SYSTEM_PROMPT},
                    {"role": "user", "content": _prompt(spec, task, result)},
                ],
                temperature=spec.temperature,
                max_tokens=spec.max_tokens,
            )
        answer = completion.choices[0].message.content if completion.choices else None
        score, feedback = parse_judge_answer(answer or "")
        return Score(
            score=score,
            feedback=f"predicted {_short(result.output)}, expected {_short(task.expected)}; "
            f"judge score {score:.2f}: {feedback}",
        )

    return judge


def parse_judge_answer(answer: str) -> tuple[float, str]:
    """``(score in [0, 1], feedback)`` from a judge's reply; ``Retryable`` when unreadable."""
    match = re.search(r"\{.*\}", answer, re.DOTALL)
    data: Any = None
    if match:
        try:
            data = json.loads(match.group())
        except json.JSONDecodeError:
            data = None
    raw: Any = data.get("score") if isinstance(data, dict) else None
    if raw is None:
        found = re.search(r'"?score"?\s*[:=]\s*(-?\d+(?:\.\d+)?)', answer, re.IGNORECASE)
        raw = found.group(1) if found else None
    try:
        value = float(raw) if raw is not None and not isinstance(raw, bool) else None
    except (TypeError, ValueError):
        value = None
    if value is None or not 0 <= value <= 10:
        raise Retryable(f"the llm judge gave no score in 0..1 or 0..10: {answer[:200]!r}")
    score = value if value <= 1 else value / 10
    feedback = ""
    if isinstance(data, dict):
        feedback = str(data.get("feedback") or data.get("reason") or data.get("explanation") or "")
    return score, feedback.strip() or answer.strip()[:500]


def _default_client(spec: LlmJudgeSpec) -> openai.AsyncOpenAI:
    import openai

    return openai.AsyncOpenAI(
        base_url=spec.base_url,
        api_key=os.environ.get(spec.api_key_env) or "not-needed",
        timeout=spec.timeout_s,
        max_retries=spec.max_retries,
    )


def _prompt(spec: LlmJudgeSpec, task: Task, result: AgentResult) -> str:
    parts = [f"Rubric:\n{spec.rubric}"]
    if task.instruction:
        parts.append(f"Task instruction:\n{task.instruction}")
    shown = next(iter(task.input.values())) if len(task.input) == 1 else task.input
    parts.append(f"Input:\n{_text(shown)}")
    if task.expected_schema:
        parts.append(f"The output should match this JSON Schema:\n{_text(task.expected_schema)}")
    if task.expected is not None:
        parts.append(f"Reference answer:\n{_text(task.expected)}")
    parts.append(f"Agent output:\n{_text(result.output)}")
    return "\n\n".join(parts)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _short(value: Any, limit: int = 200) -> str:
    text = _text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"

"""What a target returns (``AgentResult``) and what a verifier returns (``Score``, see
:mod:`schemas.scoring`: a score, or weighted metrics).

Both are pydantic models because user code hands them across a boundary; the coercion
helpers accept the short forms the decorator documents and reject anything else with a
``UserMistake`` (answered 422) whose message names the type that came back and what to return.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from container.faults import UserMistake
from schemas import Trace
from schemas.scoring import Score

__all__ = ["AgentResult", "Score", "coerce_result", "coerce_score"]


class AgentResult(BaseModel):
    """The outcome of one target call.

    Only ``output`` is required. Usage fields left ``None`` are measured (latency) or
    reported as zero by the SDK. ``trace`` holds ``messages``/``tool_calls``/``events``;
    ``messages`` is a shortcut appended to ``trace.messages``.
    """

    model_config = ConfigDict(extra="forbid")

    output: Any
    trace_id: str | None = None
    latency_ms: float | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    # Of input_tokens, those the provider served from its prompt cache (billed at a discount).
    cached_input_tokens: int | None = Field(default=None, ge=0)
    model: str | None = None  # the student model that answered: the optimizer prices its tokens
    metadata: dict[str, Any] | None = None
    trace: Trace | None = None
    messages: list[dict[str, Any]] | None = None


def coerce_result(value: Any, *, target_id: str) -> AgentResult:
    """An ``AgentResult`` from what a target returned: the model itself, a ``str`` or a dict."""
    if isinstance(value, AgentResult):
        return value
    if isinstance(value, str):
        return AgentResult(output=value)
    if isinstance(value, dict):
        try:
            return AgentResult.model_validate(value)
        except ValidationError as exc:
            raise UserMistake(
                "BadTargetResult",
                f"target {target_id!r} returned a dict that is not a valid AgentResult: "
                f"{_errors(exc)}; return AgentResult fields (at least 'output')",
            ) from exc
    raise UserMistake(
        "BadTargetResult",
        f"target {target_id!r} returned {type(value).__name__}; return an AgentResult, "
        "a str, or a dict with AgentResult fields (at least 'output')",
    )


def coerce_score(value: Any, *, verifier: str) -> Score:
    """A ``Score`` from what a verifier returned: ``Score``, ``(score, feedback)`` or a number."""
    try:
        if isinstance(value, Score):
            return value
        if isinstance(value, dict):
            return Score.model_validate(value)
        if isinstance(value, tuple) and len(value) == 2:
            return Score(score=_number(value[0], verifier), feedback=str(value[1]))
        if isinstance(value, int | float) and not isinstance(value, bool):
            return Score(score=_number(value, verifier))
        if isinstance(value, bool):
            return Score(score=float(value))
    except ValidationError as exc:
        raise UserMistake(
            "BadScore",
            f"verifier {verifier!r} returned an invalid score: {_errors(exc)}; "
            "return a finite score in [0, 1]",
        ) from exc
    raise UserMistake(
        "BadScore",
        f"verifier {verifier!r} returned {type(value).__name__}; return a Score, "
        "a (score, feedback) tuple, or a float in [0, 1]",
    )


def _number(value: Any, verifier: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserMistake(
            "BadScore",
            f"verifier {verifier!r} returned a score of type {type(value).__name__}; "
            "a score must be a number in [0, 1]",
        )
    return float(value)


def _errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()
    )

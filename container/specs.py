"""The verifier JSON file format: one object with a ``type`` and that type's options.

``{"type": "exact"}``, ``{"type": "normalized"}``, ``{"type": "contains"}``,
``{"type": "regex", "pattern": "^\\\\d+$"}``, ``{"type": "json_field", "field": "intent"}``,
``{"type": "numeric", "abs_tol": 0.01, "rel_tol": 0}``,
``{"type": "llm_judge", "model": "gpt-4o-mini", "rubric": "...", "base_url": null,
"api_key_env": "OPENAI_API_KEY"}``. Unknown keys are rejected: a typo is a mistake.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from schemas import UserError

__all__ = [
    "BUILTIN_TYPES",
    "ContainsSpec",
    "ExactSpec",
    "JsonFieldSpec",
    "LlmJudgeSpec",
    "NormalizedSpec",
    "NumericSpec",
    "RegexSpec",
    "VerifierSpec",
    "parse_spec",
]

DEFAULT_RUBRIC = (
    "Score 1 when the output fully and correctly does what the task asks (agreeing with the "
    "reference when one is given), 0 when it is wrong or missing, and in between for partial "
    "answers."
)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExactSpec(_Spec):
    """The output text equals the expected text exactly."""

    type: Literal["exact"]


class NormalizedSpec(_Spec):
    """Equal after case folding, punctuation removal and whitespace collapsing."""

    type: Literal["normalized"]


class ContainsSpec(_Spec):
    """The output contains the expected text (case-insensitive unless ``case_sensitive``)."""

    type: Literal["contains"]
    case_sensitive: bool = False


class RegexSpec(_Spec):
    """``pattern`` is found in the output (``re.search``)."""

    type: Literal["regex"]
    pattern: str
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from exc
        return value


class JsonFieldSpec(_Spec):
    """The output parsed as JSON has ``field`` (a dotted path, ``a.b.0``) equal to expected."""

    type: Literal["json_field"]
    field: str = Field(min_length=1)


class NumericSpec(_Spec):
    """The first number in the output is within ``abs_tol`` or ``rel_tol`` of expected."""

    type: Literal["numeric"]
    abs_tol: float = Field(default=1e-6, ge=0)
    rel_tol: float = Field(default=0.0, ge=0)


class LlmJudgeSpec(_Spec):
    """A model behind any OpenAI-compatible endpoint grades the output against ``rubric``."""

    type: Literal["llm_judge"]
    model: str = Field(min_length=1)
    rubric: str = DEFAULT_RUBRIC
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = Field(default=400, ge=1)
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=2, ge=0)


VerifierSpec = Annotated[
    ExactSpec
    | NormalizedSpec
    | ContainsSpec
    | RegexSpec
    | JsonFieldSpec
    | NumericSpec
    | LlmJudgeSpec,
    Field(discriminator="type"),
]
BUILTIN_TYPES: tuple[str, ...] = (
    "exact",
    "normalized",
    "contains",
    "regex",
    "json_field",
    "numeric",
    "llm_judge",
)
_ADAPTER: TypeAdapter[Any] = TypeAdapter(VerifierSpec)


def parse_spec(data: Any, *, where: str = "verifier spec") -> Any:
    """A validated spec model from a dict, or a ``UserError`` naming the bad fields."""
    if isinstance(data, dict) and data.get("type") not in BUILTIN_TYPES:
        raise UserError(
            f"{where}: unknown verifier type {data.get('type')!r}; "
            f"built-in types: {', '.join(BUILTIN_TYPES)}"
        )
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:]) or 'spec'}: {e['msg']}" for e in exc.errors()
        )
        raise UserError(f"{where}: {problems}") from exc

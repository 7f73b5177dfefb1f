"""Wire protocol ``gepa-container/1`` between the optimizer and a task container.

A task container is any HTTP app with three routes. The optimizer never calls the student
model and never sees the container's keys; the container never calls the reflection model.

``GET /health`` -> ``{"status": "ok", "protocol": "gepa-container/1"}``

``GET /program`` -> the mutable surface and the seeds::

    {"protocol": "gepa-container/1", "program_id": "banking77-intent",
     "fingerprint": "sha256 of everything that changes a rollout's result except the candidate",
     "description": "...",
     "components": [{"name": "system_prompt", "kind": "prompt", "description": "...",
                     "text": "baseline text"}],
     "seeds": {"train": ["b77-train-0001"], "val": [], "holdout": ["b77-test-0042"]},
     "objectives": ["reward"], "metadata": {}}

``kind`` is one of ``prompt``, ``tool_description``, ``router_prompt``, ``retrieval_prompt``,
``agent``. A candidate maps every component name to its text.

``objectives`` names what the rollouts' ``objectives`` maps report, each a name (maximised)
or ``{"name": "toxicity", "direction": "minimize"}``. The optimizer measures three more on
every rollout without the container's help (``cost_usd``, ``latency_ms``, ``prompt_tokens``,
all minimised: :mod:`optimizer.runtime.accounts.objectives`); those names are reserved.

``POST /rollout`` with ``{"run_id", "candidate_id", "candidate": {"system_prompt": "..."},
"seed": "b77-train-0001", "policy": {"model": null}, "return_trace": true}`` ->
``{"reward", "objectives", "output", "feedback", "trace": {"messages", "tool_calls", "events"},
"usage": {"input_tokens", "output_tokens", "cached_input_tokens", "cost_usd", "latency_ms",
"model"}, "error"}``. ``usage`` is the student's: ``input_tokens`` counts every prompt token,
``cached_input_tokens`` the part the provider served from its prompt cache, ``model`` the
student model that answered (priced by the optimizer's table when ``cost_usd`` is 0).

Status codes:

- ``200``: the rollout finished and was scored. An agent that failed the task scores low.
- ``4xx`` (unknown seed, missing component, bad body): the caller's fault, never retried.
  ``422`` also answers a user mistake every attempt would repeat (a row that cannot be
  rendered or scored, a target returning the wrong type): its message names the field and
  the fix, and the optimizer stops with it (``docs/container-errors.md``).
- ``401``/``403``: missing or wrong bearer token when the container has one.
- ``413``: request body over the container's size limit.
- ``429``/``503`` (with ``Retry-After`` where known), other ``5xx``, timeouts and dropped
  connections: infrastructure faults. Retried with backoff, never scored as 0, never cached.
  Error bodies are ``{"error": {"type": ..., "message": ...}}``.

Validation of a ``200`` answer happens in one place, :func:`parse_rollout`: numbers must be
JSON numbers (a reward of ``"0.9"`` or ``true`` is refused), the reward finite and inside
the program's ``reward_range`` (default ``[0, 1]``), objectives finite, usage counts and
costs finite and non-negative. A body that fails is ``InvalidRollout``: one errored
rollout with the reason, never scored, never retried, and not a failed run.

Compatibility: every model ignores unknown fields (a newer peer may add some) and rejects a
missing required field with an error naming it.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from schemas.exceptions import InvalidRollout

__all__ = [
    "COMPONENT_KINDS",
    "DEFAULT_REWARD_RANGE",
    "PROTOCOL",
    "Component",
    "ComponentKind",
    "Direction",
    "ErrorBody",
    "ErrorDetail",
    "Health",
    "Objective",
    "Policy",
    "Program",
    "RolloutRequest",
    "RolloutResponse",
    "Seeds",
    "Trace",
    "Usage",
    "WIRE_MODELS",
    "parse_rollout",
]

PROTOCOL = "gepa-container/1"
ComponentKind = Literal["prompt", "tool_description", "router_prompt", "retrieval_prompt", "agent"]
COMPONENT_KINDS: tuple[str, ...] = (
    "prompt",
    "tool_description",
    "router_prompt",
    "retrieval_prompt",
    "agent",
)
DEFAULT_REWARD_RANGE: tuple[float, float] = (0.0, 1.0)
Direction = Literal["maximize", "minimize"]


class WireModel(BaseModel):
    """Base of every wire model: tolerant of unknown fields from newer peers."""

    model_config = ConfigDict(extra="ignore")


class Health(WireModel):
    """Body of ``GET /health``."""

    status: str = "ok"
    protocol: str = PROTOCOL


class Component(WireModel):
    """One mutable piece of the program's surface, with its baseline text."""

    name: str = Field(min_length=1)
    kind: ComponentKind = "prompt"
    description: str = ""
    text: str


class Seeds(WireModel):
    """Seed names per split. Seeds are opaque strings the container understands."""

    train: list[str]
    val: list[str] = Field(default_factory=list)
    holdout: list[str] = Field(default_factory=list)


class Objective(WireModel):
    """One objective a container reports in its rollouts' ``objectives``, and which way is
    better. ``GET /program`` may list a plain name instead: maximised."""

    name: str = Field(min_length=1)
    direction: Direction = "maximize"


def _reward_only() -> list[str | Objective]:
    return ["reward"]


class Program(WireModel):
    """Body of ``GET /program``: what can be optimized and on which seeds.

    ``metadata.warnings`` (optional, a list of strings) is what the container wants the user
    to hear before optimizing (an empty holdout split, rows every rollout would refuse);
    ``optimize dry-run`` shows each one.
    """

    protocol: str = PROTOCOL
    program_id: str = Field(min_length=1)
    fingerprint: str = Field(min_length=1)
    description: str = ""
    components: list[Component] = Field(min_length=1)
    seeds: Seeds
    objectives: list[str | Objective] = Field(default_factory=_reward_only)
    metadata: dict[str, Any] = Field(default_factory=dict)
    reward_range: tuple[float, float] = Field(
        default=DEFAULT_REWARD_RANGE,
        description="[low, high]: every reward must lie in it; a reward outside is an error",
    )

    @field_validator("reward_range")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(
                f"reward_range must be [low, high] with finite low < high, got {value}"
            )
        return value

    def baseline(self) -> dict[str, str]:
        """The baseline candidate: every component name mapped to its baseline text."""
        return {c.name: c.text for c in self.components}

    def directions(self) -> dict[str, Direction]:
        """Every declared objective by name with its direction (a plain name is maximised);
        ``reward`` is always there, maximised."""
        out: dict[str, Direction] = {"reward": "maximize"}
        for item in self.objectives:
            spec = Objective(name=item) if isinstance(item, str) else item
            if spec.name != "reward":
                out[spec.name] = spec.direction
        return out


class Policy(WireModel):
    """What the optimizer asks of the student side; ``model=None`` keeps the container's own."""

    model: str | None = None


class RolloutRequest(WireModel):
    """Body of ``POST /rollout``: run one seed with one candidate."""

    run_id: str = ""
    candidate_id: str = ""
    candidate: dict[str, str]
    seed: str = Field(min_length=1)
    policy: Policy = Field(default_factory=Policy)
    return_trace: bool = True


class Trace(WireModel):
    """What happened inside a rollout, for the proposer to read."""

    messages: list[dict[str, Any]] = Field(default_factory=list)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    events: list[dict[str, Any]] = Field(default_factory=list)


def _whole(value: Any) -> Any:
    """``12.0`` is the count 12 (some JSON writers print every number as a float)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Count = Annotated[int, BeforeValidator(_whole)]


class Usage(WireModel):
    """Student-side usage of one rollout; on the wire every number is finite and >= 0."""

    input_tokens: Count = 0
    output_tokens: Count = 0
    cached_input_tokens: Count = Field(
        default=0, description="of input_tokens, those served from the provider's prompt cache"
    )
    cost_usd: float = Field(default=0.0, description="dollars, >= 0 (counted by --max-cost-usd)")
    latency_ms: float = 0.0
    model: str | None = Field(
        default=None, description="the student model that answered, priced when cost_usd is 0"
    )


class RolloutResponse(WireModel):
    """Body of a ``200`` answer to ``POST /rollout``: a finished, scored rollout."""

    reward: float
    objectives: dict[str, float] = Field(default_factory=dict)
    output: Any = None
    feedback: str = ""
    trace: Trace = Field(default_factory=Trace)
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None

    @field_validator("reward")
    @classmethod
    def _finite(cls, value: float) -> float:
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("reward must be a finite number")
        return value


class ErrorDetail(WireModel):
    """What went wrong, for a non-200 answer."""

    type: str
    message: str


class ErrorBody(WireModel):
    """Body of every non-200 answer: ``{"error": {"type", "message"}}``."""

    error: ErrorDetail


def parse_rollout(
    body: bytes | bytearray | str,
    *,
    reward_range: tuple[float, float] = DEFAULT_REWARD_RANGE,
) -> RolloutResponse:
    """The one check of a ``200`` answer: its JSON body as a scorable rollout.

    Raises ``InvalidRollout`` naming each bad field and what the container must send
    instead. Strict types (JSON numbers only, no strings or booleans for numbers) because
    a lenient parse would score a ``"0.9"`` that a buggy container meant as something else.
    """
    try:
        response = RolloutResponse.model_validate_json(body, strict=True)
    except ValidationError as exc:
        wrong = "; ".join(_describe(error) for error in exc.errors(include_url=False))
        raise InvalidRollout(f"the body is not a gepa-container/1 rollout: {wrong}") from None
    problems = _range_problems(response, reward_range)
    if problems:
        raise InvalidRollout("; ".join(problems))
    return response


def _describe(error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "body"
    return f"{where}: {error['msg']} (got {error['input']!r:.80})"


def _range_problems(response: RolloutResponse, reward_range: tuple[float, float]) -> list[str]:
    """What ``response`` breaks beyond types: ranges, finiteness, signs."""
    low, high = reward_range
    problems = []
    if not low <= response.reward <= high:
        problems.append(
            f"reward {response.reward!r} is outside the program's reward_range [{low:g}, {high:g}]: "
            "scale the verifier's score into it, or declare reward_range in GET /program"
        )
    for name, value in response.objectives.items():
        if not math.isfinite(value):
            problems.append(f"objectives.{name} is {value!r}: send a finite number")
    for name in USAGE_NUMBERS:  # its attributes: no dump per rollout
        value = getattr(response.usage, name)
        if not (math.isfinite(value) and value >= 0):
            problems.append(
                f"usage.{name} is {value!r}: counts and costs must be finite and >= 0 "
                "(a negative cost would hide spending from --max-cost-usd)"
            )
    return problems


USAGE_NUMBERS = ("input_tokens", "output_tokens", "cached_input_tokens", "cost_usd", "latency_ms")

WIRE_MODELS: dict[str, type[BaseModel]] = {
    "Health": Health,
    "Program": Program,
    "RolloutRequest": RolloutRequest,
    "RolloutResponse": RolloutResponse,
    "ErrorBody": ErrorBody,
}

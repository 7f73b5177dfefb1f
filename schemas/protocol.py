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

``POST /rollout`` with ``{"run_id", "candidate_id", "candidate": {"system_prompt": "..."},
"seed": "b77-train-0001", "policy": {"model": null}, "return_trace": true}`` ->
``{"reward", "objectives", "output", "feedback", "trace": {"messages", "tool_calls", "events"},
"usage": {"input_tokens", "output_tokens", "cost_usd", "latency_ms"}, "error"}``.

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

Compatibility: every model ignores unknown fields (a newer peer may add some) and rejects a
missing required field with an error naming it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "COMPONENT_KINDS",
    "PROTOCOL",
    "Component",
    "ComponentKind",
    "ErrorBody",
    "ErrorDetail",
    "Health",
    "Policy",
    "Program",
    "RolloutRequest",
    "RolloutResponse",
    "Seeds",
    "Trace",
    "Usage",
    "WIRE_MODELS",
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
    objectives: list[str] = Field(default_factory=lambda: ["reward"])
    metadata: dict[str, Any] = Field(default_factory=dict)

    def baseline(self) -> dict[str, str]:
        """The baseline candidate: every component name mapped to its baseline text."""
        return {c.name: c.text for c in self.components}


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


class Usage(WireModel):
    """Student-side usage of one rollout."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0


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


WIRE_MODELS: dict[str, type[BaseModel]] = {
    "Health": Health,
    "Program": Program,
    "RolloutRequest": RolloutRequest,
    "RolloutResponse": RolloutResponse,
    "ErrorBody": ErrorBody,
}

"""The spec API's task side: the student on an ``Endpoint``, tools, and ``score_fn`` as a verifier.

Both become ordinary container pieces, served like any program:

- without ``environment_factory`` the target is the SDK's ``ChatTarget`` (one completion of
  the rendered template);
- with it, ``ToolLoopTarget`` builds a fresh environment per row (``factory(sample)``),
  offers its tools as OpenAI tools and answers each native tool call with a ``role: tool``
  message until the model answers without one (or ``max_turns`` is reached);
- ``score_fn(trajectory, sample)`` becomes a ``Verifier`` whose fingerprint is the user
  function's own source (editing it invalidates cached rollouts). ``trajectory.messages`` is
  the whole chat, the last message being the model's answer.

An ``Environment`` is anything with ``tools()`` (OpenAI tool schemas) and
``call(name, arguments)`` (the model's JSON argument text -> the observation text; sync or
async). A tool error is the environment's to report as an observation.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from container.chat import ChatTarget
from container.results import AgentResult
from container.source import source_of
from container.target import is_async_callable
from container.task import Candidate, Task
from container.verifiers import Verifier
from optimizer.api.spec.config import Endpoint
from optimizer.api.spec.message import Message, messages_of
from optimizer.api.spec.rows import Sample
from schemas import Score, Trace

__all__ = [
    "Environment",
    "ScoreFn",
    "ToolLoopTarget",
    "Trajectory",
    "endpoint_target",
    "sample_of",
    "score_verifier",
]


@runtime_checkable
class Environment(Protocol):
    """Tools for one row: their OpenAI schemas and how to run a call."""

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI ``tools`` entries (``{"type": "function", "function": {...}}``)."""
        ...

    def call(self, name: str, arguments: str) -> Any:
        """Run one tool call; the observation text (or an awaitable of it)."""
        ...


EnvironmentFactory = Callable[[Sample], Environment]


@dataclass(frozen=True)
class Trajectory:
    """What the student did on one row: the chat (last message = its answer) and tool calls.

    Each message is a :class:`Message`: ``messages[-1].content`` and ``messages[-1]["content"]``
    both read the answer.
    """

    messages: tuple[Message, ...]
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    output: Any = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> str:
        """The last message's text."""
        return str(self.messages[-1].content or "") if self.messages else ""


# ``score_fn(trajectory, sample)``: a Score (or a float), sync or async.
ScoreFn = Callable[[Trajectory, Sample], Score | float | Awaitable[Score | float]]


def sample_of(task: Task) -> Sample:
    """The ``Sample`` of a served row (its name is ``row-<index>``)."""
    index = task.name.removeprefix("row-")
    return Sample(
        id=task.name,
        input=dict(task.input),
        ground_truth=task.expected,
        index=int(index) if index.isdigit() else -1,
        metadata=dict(task.metadata),
    )


class ToolLoopTarget:
    """A container target: the rendered template, then tool calls until a plain answer."""

    def __init__(
        self, endpoint: Endpoint, factory: EnvironmentFactory, *, max_turns: int = 8
    ) -> None:
        self.endpoint = endpoint
        self.factory = factory
        self.max_turns = max_turns
        from openai import AsyncOpenAI  # heavy: loaded only when a tool loop is served

        self._client = AsyncOpenAI(
            base_url=endpoint.base_url(),
            api_key=os.environ.get(endpoint.key_env()) or "sk-local-no-key",
            max_retries=0,
        )

    async def __call__(self, task: Task, candidate: Candidate) -> AgentResult:
        env = self.factory(sample_of(task))
        messages: list[dict[str, Any]] = list(candidate.template.render(task.fields))
        calls: list[dict[str, Any]] = []
        used = [0, 0]
        text = ""
        for _ in range(self.max_turns):
            response = await self._client.chat.completions.create(
                model=candidate.model or self.endpoint.model,
                messages=messages,  # type: ignore[arg-type]
                tools=env.tools(),  # type: ignore[arg-type]
                temperature=self.endpoint.temperature,
                max_tokens=self.endpoint.max_tokens,
            )
            if response.usage:
                used[0] += response.usage.prompt_tokens
                used[1] += response.usage.completion_tokens
            message = response.choices[0].message
            text = message.content or ""
            requested = [c.model_dump(exclude_none=True) for c in message.tool_calls or []]
            if not requested:
                messages.append({"role": "assistant", "content": text})
                break
            messages.append({"role": "assistant", "content": text or None, "tool_calls": requested})
            for call in requested:
                name = call["function"]["name"]
                arguments = str(call["function"].get("arguments") or "")
                observation = env.call(name, arguments)
                if inspect.isawaitable(observation):
                    observation = await observation
                calls.append({"name": name, "arguments": arguments, "result": str(observation)})
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.get("id", ""),
                        "content": str(observation),
                    }
                )
        return AgentResult(
            output=text.strip(),
            input_tokens=used[0],
            output_tokens=used[1],
            trace=Trace(messages=messages, tool_calls=calls),
        )

    async def aclose(self) -> None:
        """Close the client's connections."""
        await self._client.close()


def endpoint_target(
    endpoint: Endpoint, factory: EnvironmentFactory | None
) -> ChatTarget | ToolLoopTarget:
    """The student target for ``endpoint``: a plain completion, or the tool loop."""
    if factory is not None:
        return ToolLoopTarget(endpoint, factory)
    return ChatTarget(
        model=endpoint.model,
        base_url=endpoint.base_url(),
        api_key_env=endpoint.key_env(),
        temperature=endpoint.temperature,
        max_tokens=endpoint.max_tokens,
    )


def _trajectory(result: AgentResult) -> Trajectory:
    trace = result.trace or Trace()
    return Trajectory(
        messages=messages_of([*trace.messages, *(result.messages or [])]),
        tool_calls=tuple(trace.tool_calls),
        output=result.output,
        metadata=result.metadata or {},
    )


def score_verifier(score_fn: Callable[..., Any]) -> Verifier:
    """``score_fn(trajectory, sample)`` as a verifier of the container SDK."""
    if not callable(score_fn):
        raise TypeError("score_fn must be a function (trajectory, sample) -> Score")

    def verify(task: Task, result: AgentResult) -> Any:
        return score_fn(_trajectory(result), sample_of(task))

    async def verify_async(task: Task, result: AgentResult) -> Any:
        return await score_fn(_trajectory(result), sample_of(task))

    is_async = is_async_callable(score_fn)
    name = f"{getattr(score_fn, '__module__', '?')}:{getattr(score_fn, '__qualname__', 'score_fn')}"
    return Verifier(
        name=name,
        spec=f"{name}\n{source_of(score_fn)}",
        fn=verify_async if is_async else verify,
        in_thread=not is_async,
    )

"""The calculator agent: a ReAct loop over any OpenAI-compatible chat model.

The conversation starts from the candidate's template (system prompt, demos, the problem).
Each step is one chat completion. Native ``tool_calls`` (offered when the settings say so)
are run and answered with ``role: tool`` messages; otherwise the reply is read with the text
protocol: an action is run and answered with a user message ``Observation: <result>``, an
answer ends the task. A reply with neither also ends it (its last number is the output), and
so does the step limit. Every task gets a fresh ``CalculatorEnv``. Endpoint faults propagate
so the container SDK answers 429/503 and the optimizer retries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from openai import AsyncOpenAI

from container import AgentResult, Candidate, Task
from container.student import StudentClients
from examples.calculator.protocol import last_number, parse_reply
from examples.calculator.settings import AgentSettings
from examples.calculator.tools import TOOL_NAME, TOOL_SCHEMA, CalculatorEnv, ToolCall
from schemas import Trace

__all__ = ["CalculatorAgent"]

# The model must stop before it invents the observation itself.
_STOP = ["\nObservation:"]
# USD per million (input, output) tokens, for the spend the optimizer caps.
_PRICES = {"gpt-4o-mini": (0.15, 0.60), "gpt-4.1-mini": (0.40, 1.60), "gpt-4.1-nano": (0.10, 0.40)}


def demos_as_answers(messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Rendered messages with each demo's answer written as the agent's final ``Answer:`` line.

    Few-shot demos (MIPRO's, or a user's) carry only the final output; shown bare, a number
    would teach the model to answer without the protocol. The last message is the task.
    """
    out: list[dict[str, Any]] = []
    for message in messages[:-1]:
        content = message["content"]
        if message["role"] == "assistant" and "Answer:" not in content:
            message = {**message, "content": f"Answer: {content}"}
        out.append(message)
    return [*out, messages[-1]]


def _cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    price = _PRICES.get(model.removeprefix("openai/"))
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


@dataclass
class _Run:
    """The growing state of one task's loop."""

    messages: list[dict[str, Any]]
    env: CalculatorEnv
    events: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    output: str = ""
    stop: str = "max_steps"


class CalculatorAgent:
    """Solve one problem with the calculator; ``run`` is the container target's body."""

    def __init__(self, client: AsyncOpenAI, settings: AgentSettings) -> None:
        self.client = client
        self.settings = settings
        # ``client`` serves unprefixed and openai/ names; openrouter/... gets its own client
        self.clients = StudentClients(
            base_url=settings.base_url, api_key=settings.api_key, default_client=client
        )

    async def run(self, task: Task, candidate: Candidate) -> AgentResult:
        """The ReAct loop; the output is the final answer as a normalized number (or ``""``)."""
        model = candidate.model or self.settings.model
        state = _Run(
            messages=demos_as_answers(candidate.template.render(task.fields)),
            env=CalculatorEnv(max_calls=self.settings.max_calls),
        )
        for step in range(1, self.settings.max_steps + 1):
            if await self._step(state, model, step):
                break
        else:
            replies = [m for m in state.messages if m["role"] == "assistant"]
            state.output = last_number(str(replies[-1].get("content") or "")) if replies else ""
        return AgentResult(
            output=state.output,
            input_tokens=state.input_tokens,
            output_tokens=state.output_tokens,
            cost_usd=_cost(model, state.input_tokens, state.output_tokens),
            trace=Trace(
                messages=state.messages,
                tool_calls=[call.as_trace() for call in state.env.calls],
                events=state.events,
            ),
            metadata={
                "model": model,
                "steps": len(state.events),
                "stop_reason": state.stop,
                "tool_calls": len(state.env.calls),
                "tool_errors": sum(call.error is not None for call in state.env.calls),
                "max_steps": self.settings.max_steps,
            },
        )

    async def _step(self, state: _Run, model: str, step: int) -> bool:
        """One model call and its consequence; True when the task is finished."""
        extra: dict[str, Any] = {"tools": [TOOL_SCHEMA]} if self.settings.native_tools else {}
        client, wire_model = self.clients.resolve(model)
        response = await client.chat.completions.create(
            model=wire_model,
            messages=state.messages,  # type: ignore[arg-type]
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_tokens,
            stop=_STOP,
            **extra,
        )
        usage = response.usage
        state.input_tokens += usage.prompt_tokens if usage else 0
        state.output_tokens += usage.completion_tokens if usage else 0
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice else ""
        native = (choice.message.tool_calls or []) if choice else []
        event: dict[str, Any] = {
            "type": "step",
            "step": step,
            "finish_reason": choice.finish_reason if choice else None,
            "input_tokens": usage.prompt_tokens if usage else 0,
            "output_tokens": usage.completion_tokens if usage else 0,
        }
        state.events.append(event)
        if native:
            event["kind"] = "tool_calls"
            calls = [c.model_dump(exclude_none=True) for c in native]
            state.messages.append(
                {"role": "assistant", "content": text or None, "tool_calls": calls}
            )
            for call in calls:
                done = _native_call(state.env, call.get("function") or {})
                state.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.get("id", ""),
                        "content": done.observation,
                    }
                )
            return False
        reply = parse_reply(text)
        event["kind"] = reply.kind
        if reply.kind == "action":
            # What follows the action was written blind (a guessed result, an early answer):
            # keep it in the event, not in the conversation the model reads next.
            kept = text[: reply.end].rstrip()
            if kept != text.rstrip():
                event["dropped"] = text[reply.end :].strip()
            done = state.env.call(reply.expression)
            event["expression"] = reply.expression
            state.messages.append({"role": "assistant", "content": kept})
            state.messages.append({"role": "user", "content": f"Observation: {done.observation}"})
            return False
        state.messages.append({"role": "assistant", "content": text})
        state.output = reply.answer if reply.kind == "answer" else last_number(text)
        state.stop = "answer" if reply.kind == "answer" else "no_answer_line"
        return True


def _native_call(env: CalculatorEnv, function: dict[str, Any]) -> ToolCall:
    """Run one native tool call; a wrong name or bad arguments is an error observation."""
    name, arguments = function.get("name", ""), str(function.get("arguments") or "")
    if name != TOOL_NAME:
        return env.reject(arguments, f"unknown tool {name!r}; the only tool is {TOOL_NAME}")
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("expression"), str):
        return env.reject(arguments, 'arguments must be JSON like {"expression": "12 * 3.5"}')
    return env.call(parsed["expression"])

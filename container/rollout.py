"""Serve one ``POST /rollout``: resolve the seed and candidate, run the target, score it."""

from __future__ import annotations

import copy
import inspect
import time
from dataclasses import replace
from typing import Any

import anyio.to_thread
from pydantic_core import to_jsonable_python

from container.checks import check_row_fits
from container.faults import RequestRejected
from container.program import ServedProgram
from container.results import AgentResult, coerce_result
from container.target import Target, is_async_callable
from container.task import Candidate, Task
from container.tracing import rollout_span
from schemas import PromptTemplate, RolloutRequest, RolloutResponse, TemplateError, Trace, Usage
from schemas.template import placeholders

__all__ = ["call_target", "run_rollout"]


async def run_rollout(served: ServedProgram, request: RolloutRequest) -> RolloutResponse:
    """Run and score one rollout; caller faults raise ``RequestRejected`` (404/422).

    A row that cannot be rendered (its input lacks a field of the user template) raises
    ``UserMistake`` (422) before the target runs: no candidate can fix it. A template
    candidate whose ``demos`` component does not parse, or holds a demo whose input does not
    fit the user template, is not run: it scores 0 with feedback saying why (a broken prompt
    is the candidate's failure, not an infrastructure fault to retry). With OpenTelemetry,
    it all runs in an ``optimize:<target id>`` span (:mod:`container.tracing`).
    """
    task, candidate = _resolve(served, request)
    with rollout_span(served.target.id, request, task.split) as span:
        response = await _run(served, request, task, candidate)
        event = span.finish(response.reward) if span is not None else None
    if event is not None and request.return_trace:  # the trace id, for the console's feed
        response.trace.events.append(event)
    return response


async def _run(
    served: ServedProgram, request: RolloutRequest, task: Task, candidate: Candidate
) -> RolloutResponse:
    check_row_fits(served.target.template, task)
    if served.target.template is not None:
        try:
            template = served.target.template.with_components(candidate.components)
            template.check_demos()
            candidate = replace(candidate, template_=template)
        except TemplateError as exc:
            return RolloutResponse(
                reward=0.0, objectives={"reward": 0.0}, output=None, feedback=str(exc)
            )
    started = time.perf_counter()
    value = await call_target(served.target, task, candidate)
    measured_ms = (time.perf_counter() - started) * 1000
    result = coerce_result(value, target_id=served.target.id)
    score = await served.verifier.score(task, result)
    return RolloutResponse(
        reward=score.score,
        objectives=score.objectives(),
        output=to_jsonable_python(result.output, fallback=str),
        feedback=score.feedback,
        trace=_trace(result, task, served.target.template) if request.return_trace else Trace(),
        usage=Usage(
            input_tokens=result.input_tokens or 0,
            output_tokens=result.output_tokens or 0,
            cached_input_tokens=result.cached_input_tokens or 0,
            cost_usd=result.cost_usd or 0.0,
            model=result.model,
            latency_ms=result.latency_ms if result.latency_ms is not None else measured_ms,
        ),
    )


async def call_target(target: Target, task: Task, candidate: Candidate) -> Any:
    """Call the target: awaited when async, in a worker thread when sync."""
    fn = target.fn
    if is_async_callable(fn):
        return await fn(task, candidate)
    value = await anyio.to_thread.run_sync(fn, task, candidate)
    if inspect.isawaitable(value):
        value = await value
    return value


def _resolve(served: ServedProgram, request: RolloutRequest) -> tuple[Task, Candidate]:
    task = served.dataset.get(request.seed)
    if task is None:
        raise RequestRejected(
            404,
            "UnknownSeed",
            f"unknown seed {request.seed!r}; program {served.target.id!r} has "
            f"{len(served.dataset)} seeds, listed by GET /program",
        )
    expected = served.target.component_names
    missing = [n for n in expected if n not in request.candidate]
    unknown = [n for n in request.candidate if n not in expected]
    if missing or unknown:
        problems = []
        if missing:
            problems.append(f"missing component(s): {', '.join(missing)}")
        if unknown:
            problems.append(f"unknown component(s): {', '.join(unknown)}")
        raise RequestRejected(
            422,
            "ComponentMismatch",
            f"candidate {'; '.join(problems)}; the program's components are: {', '.join(expected)}",
        )
    # a copy: a target that edits its task's input or metadata must not edit the dataset
    task = replace(copy.deepcopy(task), split=served.splits.split_of(task.name))
    candidate = Candidate(
        components={n: request.candidate[n] for n in expected},
        candidate_id=request.candidate_id,
        model=request.policy.model,
    )
    return task, candidate


def _task_event(task: Task, template: PromptTemplate | None) -> dict[str, Any]:
    """The seed's input (and, on train seeds only, its label): what MIPRO builds demos from.

    Under a template, the input is the fields its placeholders name (a flat row's metadata
    columns included), so a demo made from it renders like the row did.
    """
    shown: Any = task.input
    if template is not None:
        fields = task.fields
        shown = {name: fields[name] for name in placeholders(template.user_template)}
    event: dict[str, Any] = {"type": "task", "seed": task.name, "input": shown}
    if task.split == "train":
        event["expected"] = task.expected
    return event


def _trace(result: AgentResult, task: Task, template: PromptTemplate | None) -> Trace:
    trace = result.trace or Trace()
    events = [_task_event(task, template), *trace.events]
    if result.trace_id is not None or result.metadata:
        events.append(
            {"type": "agent_result", "trace_id": result.trace_id, "metadata": result.metadata or {}}
        )
    return Trace.model_validate(
        to_jsonable_python(
            {
                "messages": [*trace.messages, *(result.messages or [])],
                "tool_calls": trace.tool_calls,
                "events": events,
            },
            fallback=str,
        )
    )

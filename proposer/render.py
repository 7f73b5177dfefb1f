"""Rollouts rendered as the reflection model reads them, under a token budget.

(Not the run's evidence packet: that is :mod:`optimizer.runtime.results.evidence`.)

The budget is approximate (4 characters per token). When failures do not fit, a sample
drawn with the injected ``random.Random`` is shown and the text says how many were left
out; long inputs, outputs, feedback and traces are cut in the middle with a note of how
many characters were omitted, so the model never mistakes a cut text for the whole.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from proposer.types import Evaluation

__all__ = [
    "CHARS_PER_TOKEN",
    "is_failure",
    "render_context",
    "render_evaluations",
    "render_trace",
    "task_input",
    "text_of",
    "truncate",
]

CHARS_PER_TOKEN = 4
SUCCESS_REWARD = 1.0  # rewards are read as fractions of full marks
_MAX_ITEM_CHARS = 2400
_MIN_ITEM_CHARS = 500
_SUCCESS_CHARS = 400
_MAX_SUCCESSES = 3


def is_failure(evaluation: Evaluation) -> bool:
    """An errored rollout, or a scored one below full marks."""
    return (
        evaluation.status != "ok" or evaluation.reward is None or evaluation.reward < SUCCESS_REWARD
    )


def text_of(value: Any) -> str:
    """Any output or message content as text (JSON for structures)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, Mapping) and "text" in p for p in value):
        return "\n".join(str(p["text"]) for p in value)  # OpenAI content parts
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def truncate(text: str, limit: int, what: str) -> str:
    """``text`` cut to about ``limit`` chars (head and tail kept), saying how much was cut."""
    if len(text) <= limit:
        return text
    omitted = len(text) - limit
    head = int(limit * 0.7)
    tail = limit - head
    note = f"\n[... {what} truncated: {omitted:,} chars omitted ...]\n"
    return text[:head] + note + (text[-tail:] if tail else "")


def _messages(trace: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = trace.get("messages") or []
    return [m for m in messages if isinstance(m, Mapping)]


def task_input(evaluation: Evaluation) -> str:
    """What the student was asked: the first user message of the trace, if any."""
    users = [m for m in _messages(evaluation.trace) if m.get("role") == "user"]
    if users:
        text = text_of(users[0].get("content"))
        if len(users) > 1:
            text += f"\n(+{len(users) - 1} more user messages in the trace)"
        return text
    if "input" in evaluation.trace:
        return text_of(evaluation.trace["input"])
    return ""


def render_trace(evaluation: Evaluation, limit_chars: int) -> str:
    """The whole trace of a rollout as readable lines, truncated to ``limit_chars``."""
    lines: list[str] = []
    for message in _messages(evaluation.trace):
        content = text_of(message.get("content"))
        if message.get("role") == "system":
            content = truncate(content, 600, "system message")
        lines.append(f"[{message.get('role', '?')}] {content}")
        for call in message.get("tool_calls") or ():
            lines.append(f"  -> tool call {text_of(call)}")
    for key in ("tool_calls", "events"):
        for item in evaluation.trace.get(key) or ():
            lines.append(f"[{key[:-1]}] {text_of(item)}")
    extra = {
        k: v for k, v in evaluation.trace.items() if k not in ("messages", "tool_calls", "events")
    }
    if extra:
        lines.append(f"[other] {text_of(extra)}")
    body = "\n".join(lines) or "(empty trace)"
    return truncate(body, limit_chars, "trace")


def _score(evaluation: Evaluation) -> str:
    if evaluation.status != "ok" or evaluation.reward is None:
        return f"rollout {evaluation.status}"
    return f"reward {evaluation.reward:.2f}"


def render_failure(evaluation: Evaluation, limit: int, label: str = "") -> str:
    """One failure: seed, score, input, output and feedback, within ``limit`` chars."""
    head = f"### {label}seed {evaluation.seed} ({_score(evaluation)})"
    parts = [head]
    task = task_input(evaluation)
    if task:
        parts.append("Input:\n" + truncate(task, int(limit * 0.35), "input"))
    parts.append(
        "Student output:\n"
        + (truncate(text_of(evaluation.output), int(limit * 0.2), "output") or "(empty)")
    )
    parts.append(
        "Verifier feedback:\n"
        + (truncate(evaluation.feedback, int(limit * 0.45), "feedback") or "(none)")
    )
    return "\n".join(parts)


def render_success(evaluation: Evaluation, label: str = "") -> str:
    """One success, briefly: what was asked and what was answered."""
    task = truncate(task_input(evaluation), _SUCCESS_CHARS // 2, "input") or "(input not in trace)"
    out = truncate(text_of(evaluation.output), _SUCCESS_CHARS // 2, "output")
    return f"- {label}seed {evaluation.seed} ({_score(evaluation)}): input: {task!r} -> output: {out!r}"


def render_evaluations(
    evaluations: Sequence[Evaluation],
    *,
    budget_tokens: int,
    rng: random.Random,
    label: str = "",
) -> str:
    """Failures in detail and a few successes briefly, together under ``budget_tokens``."""
    budget = max(budget_tokens, 100) * CHARS_PER_TOKEN
    failures = [e for e in evaluations if is_failure(e)]
    successes = [e for e in evaluations if not is_failure(e)]
    fail_budget = int(budget * 0.85) if successes else budget
    per_item = max(
        _MIN_ITEM_CHARS, min(_MAX_ITEM_CHARS, fail_budget // max(1, min(len(failures), 6)))
    )
    chosen: list[tuple[int, str]] = []
    used = 0
    for index in _shuffled(range(len(failures)), rng):
        block = render_failure(failures[index], per_item, label)
        if chosen and used + len(block) > fail_budget:
            continue  # a shorter one later may still fit
        chosen.append((index, block))
        used += len(block) + 2
    chosen.sort()
    sections = [f"## Failures ({len(failures)} of {len(evaluations)} rollouts)"]
    sections += [block for _, block in chosen] or ["(no failures on this minibatch)"]
    if len(chosen) < len(failures):
        sections.append(f"({len(failures) - len(chosen)} more failures not shown: evidence budget)")
    if successes:
        lines = [render_success(e, label) for e in successes[:_MAX_SUCCESSES]]
        room = budget - used
        lines = [line for line in lines if (room := room - len(line)) >= 0]
        if len(lines) < len(successes):
            lines.append(f"({len(successes) - len(lines)} more successes not shown)")
        sections.append(f"## Successes ({len(successes)}: behaviour to keep)\n" + "\n".join(lines))
    return "\n\n".join(sections)


def render_context(
    evaluations: Sequence[Evaluation], *, budget_tokens: int, rng: random.Random
) -> str:
    """The parent's other train rollouts, one line per failure (no traces), under the budget.

    These were paid for when the parent was scored on the whole train split; showing them
    costs no rollout and lets the model see which mistake patterns are frequent.
    """
    failures = [e for e in evaluations if is_failure(e)]
    head = (
        f"## Other training examples ({len(failures)} failures of {len(evaluations)} "
        "already scored with the same version, beyond the minibatch above)"
    )
    if not failures:
        return head + "\n(no other failures: the version above fails only on the minibatch)"
    budget = max(budget_tokens, 50) * CHARS_PER_TOKEN - len(head)
    lines: list[tuple[int, str]] = []
    for index in _shuffled(range(len(failures)), rng):
        e = failures[index]
        line = (
            f"- seed {e.seed} ({_score(e)}): input: "
            f"{truncate(' '.join(task_input(e).split()), 240, 'input')!r} -> output: "
            f"{truncate(' '.join(text_of(e.output).split()), 120, 'output')!r}; feedback: "
            f"{truncate(' '.join(e.feedback.split()), 300, 'feedback')}"
        )
        if budget - len(line) < 0:
            continue
        budget -= len(line) + 1
        lines.append((index, line))
    lines.sort()
    body = [line for _, line in lines]
    if len(lines) < len(failures):
        body.append(f"({len(failures) - len(lines)} more failures not shown: evidence budget)")
    return head + "\n" + "\n".join(body)


def _shuffled(indices: Iterable[int], rng: random.Random) -> list[int]:
    order = list(indices)
    rng.shuffle(order)
    return order

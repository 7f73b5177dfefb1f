"""Instruction candidates for MIPRO, grounded in the data (MIPRO's "grounded proposer").

First one call summarizes the dataset from sample examples; then each instruction is one
call that sees the program description, that summary, a fresh random sample of inputs (with
their labels), the baseline instruction, the instructions proposed so far and a
"tip" drawn from ``TIPS`` (variety is the point: TPE then searches among them). Answers use
the text-mode block format (the block first, an optional rationale after), so the same
tolerant parser reads them, including an answer cut off after its block. A failed or
rejected call costs its usage and is reported; it does not stop the others.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from proposer.answer import Shown, parse_reply
from proposer.client import ModelClient, UsageMeter
from proposer.types import ComponentSpec, ProposerConfig
from schemas.exceptions import ProposalRejected, ProposerError
from schemas.usage import ModelUsage

__all__ = ["TIPS", "InstructionRequest", "InstructionSet", "TaskExample", "propose_instructions"]

TIPS: tuple[str, ...] = (
    "",
    "Be creative: find a framing of the task that the current instruction misses.",
    "Keep the instruction simple and clear; remove anything that does not help.",
    "Describe the task precisely: what the input looks like and exactly what to output.",
    "Stress what is at stake: wrong answers are costly, so the model must be careful.",
    "Give the model a fitting expert persona for this task.",
    "List the common mistakes on inputs like these and how to avoid them.",
)

SYSTEM = (
    "You write instructions (system prompts) for a language model that performs a task. "
    "You are given what the task is, a summary of its data and sample inputs with their "
    "correct outputs. Answer only in the format asked for."
)


@dataclass(frozen=True)
class TaskExample:
    """One train example: its input, and its label or a verified-correct output if known."""

    input: Any
    expected: Any = None


@dataclass(frozen=True)
class InstructionRequest:
    """What instruction proposals are grounded in."""

    program_description: str
    component: ComponentSpec
    baseline: str
    examples: tuple[TaskExample, ...]
    count: int
    examples_per_call: int = 6


@dataclass(frozen=True)
class InstructionSet:
    """New instructions (baseline excluded, no duplicates), the summary, and the cost."""

    instructions: tuple[str, ...]
    summary: str
    usage: ModelUsage
    rejected: tuple[str, ...] = field(default_factory=tuple)


def _show(value: Any, limit: int = 400) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + " ..."


def _examples_text(examples: Sequence[TaskExample]) -> str:
    lines = []
    for i, ex in enumerate(examples, 1):
        lines.append(f"Example {i} input: {_show(ex.input)}")
        if ex.expected is not None:
            lines.append(f"Example {i} correct output: {_show(ex.expected, 200)}")
    return "\n".join(lines)


def _summary_messages(
    request: InstructionRequest, sample: Sequence[TaskExample]
) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": (
                f"Task: {request.program_description or '(no description)'}\n\n"
                f"{_examples_text(sample)}\n\n"
                "In 2 to 4 sentences, summarize this data: what the inputs are, what the outputs "
                "are, and what makes the task hard. Answer with the summary only."
            ),
        },
    ]


def _instruction_messages(
    request: InstructionRequest,
    summary: str,
    sample: Sequence[TaskExample],
    tip: str,
    so_far: Sequence[str],
    cap: int,
) -> list[dict[str, str]]:
    name = request.component.name
    previous = "\n".join(f"- {_show(text, 300)}" for text in so_far) or "- (none yet)"
    parts = [
        f"Task: {request.program_description or '(no description)'}",
        f"What the instruction is for: {request.component.description or name}",
        f"Summary of the data: {summary or '(not available)'}",
        f"Sample inputs with their correct outputs:\n{_examples_text(sample)}",
        f"Current instruction:\n{request.baseline}",
        f"Instructions already proposed (write a different one):\n{previous}",
    ]
    if tip:
        parts.append(f"Tip: {tip}")
    parts.append(
        f"Write one new, complete instruction for this task, at most {cap} characters. "
        f"Answer exactly in this format, starting with the block:\n<<<COMPONENT {name}\n"
        "<the new instruction>\n>>>\nRATIONALE: <optional: one short sentence on why it should "
        "work better>"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def _check(text: str, known: Sequence[str], cap: int) -> None:
    if not text.strip():
        raise ProposalRejected("empty", "the instruction is empty")
    if text.strip() in (k.strip() for k in known):
        raise ProposalRejected("duplicate", "the instruction repeats an existing one")
    if len(text) > cap:
        raise ProposalRejected("too_long", f"the instruction has {len(text)} > {cap} characters")


async def propose_instructions(
    client: ModelClient,
    request: InstructionRequest,
    config: ProposerConfig,
    rng: random.Random,
) -> InstructionSet:
    """Up to ``request.count`` new instructions; rejected attempts are listed with why."""
    meter = UsageMeter(client)
    examples = list(request.examples)

    def sample() -> list[TaskExample]:
        return rng.sample(examples, min(request.examples_per_call, len(examples)))

    summary = ""
    rejected: list[str] = []
    try:
        reply = await meter.chat(_summary_messages(request, sample()))
        summary = reply.content.strip()[:1200]
    except ProposerError as exc:
        rejected.append(f"summary: {exc}")
    made: list[str] = []
    targets = (request.component.name,)
    for attempt in range(request.count):
        tip = TIPS[attempt % len(TIPS)] if attempt < len(TIPS) else rng.choice(TIPS)
        messages = _instruction_messages(
            request, summary, sample(), tip, made, config.max_prompt_chars
        )
        try:
            reply = await meter.chat(messages)
            cut_off = config.max_tokens if reply.finish_reason == "length" else None
            shown = Shown(messages[-1]["content"], (request.baseline, *made))
            found, _ = parse_reply(reply.content, targets, cut_off_at=cut_off, shown=shown)
            text = found[request.component.name].strip()
            _check(text, [request.baseline, *made], config.max_prompt_chars)
        except ProposerError as exc:
            rejected.append(f"instruction {attempt + 1}: {exc}")
            continue
        made.append(text)
    return InstructionSet(tuple(made), summary, meter.usage, tuple(rejected))

"""Agent mode: a tool-calling loop in which the model edits a draft candidate and submits it.

The first message shows the components and a one-line summary per failure; the model
reads details through tools (progressive disclosure keeps every step's prompt small, since
the conversation is resent on each step). The loop is bounded by ``max_steps`` model
turns and ``max_total_tokens``; it ends when the model calls ``submit``.
"""

from __future__ import annotations

import random
from typing import Any

from proposer.brief import Brief
from proposer.client import UsageMeter
from proposer.prompts import GUIDELINES, components_section, notes_section, wins_table
from proposer.render import is_failure, truncate
from proposer.tools import TOOL_SPECS, Workspace
from proposer.types import ProposerConfig
from schemas.exceptions import ProposalRejected, ProposerError

__all__ = ["NoToolCalls", "agent_messages", "run_agent"]

_SUMMARY_LINES = 12


class NoToolCalls(ProposerError):
    """The model answered the first agent step without calling a tool (auto mode: use text)."""


def _system(config: ProposerConfig) -> str:
    return f"""You are an expert prompt engineer working as an agent in a workspace. An \
LLM-based program (the "student") runs with a few text components (prompts, tool \
descriptions). You write an improved version of one candidate so that the student does \
better on failures like the recorded ones, and on unseen inputs like them.

You act only through tools:
- list_failures, read_trace(seed): the evidence (inputs, outputs, verifier feedback, traces).
- read_components, list_frontier, read_candidate(candidate_id), diff(candidate_id): context.
- edit_component(name, old, new) for a targeted change; rewrite_component(name, text) to \
replace a whole component.
- submit(rationale) when the draft is ready. Nothing counts until you call submit.

Method: read the failures (and a trace when the feedback is not enough), name the failure \
patterns, edit, re-read the edited component if unsure, submit. You have at most \
{config.max_steps} turns: call several tools in one turn when you can. Each component must \
stay under {config.max_prompt_chars:,} characters.

{GUIDELINES}"""


def _summary(brief: Brief) -> str:
    lines = []
    failures = [(tag, e) for tag, e in brief.evaluations if is_failure(e)]
    for tag, evaluation in failures[:_SUMMARY_LINES]:
        score = "error" if evaluation.reward is None else f"{evaluation.reward:.2f}"
        feedback = truncate(" ".join(evaluation.feedback.split()), 160, "feedback")
        lines.append(f"- {tag + ':' if tag else ''}{evaluation.seed} (reward {score}): {feedback}")
    if len(failures) > _SUMMARY_LINES:
        lines.append(f"({len(failures) - _SUMMARY_LINES} more failures: see list_failures)")
    successes = len(brief.evaluations) - len(failures)
    lines.append(f"{len(failures)} failures and {successes} successes in total.")
    return "\n".join(lines)


def agent_messages(brief: Brief, config: ProposerConfig) -> list[dict[str, Any]]:
    """The system prompt and the first user message of an agent proposal."""
    parts = [f"# The program\n{brief.program_description or '(no description given)'}"]
    if brief.kind == "merge":
        a, b = brief.parents
        parts += [
            f"# Merge task\nCandidates A ({a.candidate_id}) and B ({b.candidate_id}) each win "
            f"training seeds the other loses:\n{wins_table(a, b)}\n\nThe draft starts as a copy of A. "
            f"Make it keep what makes A win on its seeds and what makes B win on its seeds: "
            f"combine the instructions that explain each one's wins into one coherent text "
            f"(no plain concatenation). Editable: {', '.join(brief.targets)}.",
            "# Draft (= candidate A)\n"
            + components_section(brief.specs, a.components, brief.targets),
            "# B's versions of the differing components\n"
            + components_section(
                [s for s in brief.specs if s.name in brief.targets],
                b.components,
                (),
                role="B's version",
            ),
        ]
    else:
        parent = brief.parents[0]
        parts += [
            f"# Task\nImprove candidate {parent.candidate_id}. The draft starts as a copy of it. "
            f"Editable: {', '.join(brief.targets)}.",
            "# Draft components\n" + components_section(brief.specs, brief.base, brief.targets),
        ]
    parts.append(
        "# Failures on the minibatch (one line each; list_failures shows details)\n"
        + _summary(brief)
    )
    if brief.notes:
        parts.append(notes_section(brief.notes))
    parts.append("Start by calling list_failures.")
    return [
        {"role": "system", "content": _system(config)},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


async def run_agent(
    meter: UsageMeter,
    brief: Brief,
    config: ProposerConfig,
    rng: random.Random,
    *,
    auto: bool,
) -> tuple[dict[str, str], str]:
    """Run the loop; the submitted components and rationale.

    Raises ``NoToolCalls`` when ``auto`` and the first reply calls no tool,
    ``ProposalRejected`` (``cut_off``, ``no_submission``) and whatever the client raises.
    """
    workspace = Workspace(brief, config, rng)
    messages = agent_messages(brief, config)
    for step in range(config.max_steps):
        if meter.tokens >= config.max_total_tokens:
            raise ProposalRejected(
                "no_submission",
                f"token budget of {config.max_total_tokens:,} spent after {step} steps without submit",
            )
        reply = await meter.chat(messages, tools=TOOL_SPECS)
        if not reply.tool_calls and step == 0 and auto:
            raise NoToolCalls("the model answered without tool calls")
        if reply.finish_reason == "length":
            raise ProposalRejected(
                "cut_off", f"step {step + 1} was cut off at max_tokens={config.max_tokens}"
            )
        messages.append(reply.assistant_message())
        if not reply.tool_calls:
            messages.append(
                {
                    "role": "user",
                    "content": "Use the tools: edit the draft, then call submit(rationale).",
                }
            )
            continue
        for call in reply.tool_calls:
            result = workspace.call(call.name, call.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        if workspace.rationale is not None:
            return dict(workspace.draft), workspace.rationale
        if step == config.max_steps - 2:
            messages.append(
                {"role": "user", "content": "This is your last turn: call submit(rationale) now."}
            )
    raise ProposalRejected("no_submission", f"no submit within max_steps={config.max_steps} turns")

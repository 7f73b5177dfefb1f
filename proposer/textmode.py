"""Text mode: one request carrying the evidence, the new text returned in delimited blocks.

For models that cannot call tools (Qwen2.5-Coder behind llama.cpp, whose chat template
does not produce OpenAI ``tool_calls``). The answer starts with the new text in
``<<<COMPONENT name`` ... ``>>>`` blocks and may end with a short ``RATIONALE:`` line;
``proposer.answer`` reads it (a ``PATTERNS:`` line before the blocks becomes the rationale).
An answer cut off at ``max_tokens`` still counts when its
blocks were complete before the cut (then usually only the rationale is missing).
"""

from __future__ import annotations

import random
from typing import Any

from proposer.answer import Shown, parse_reply, unformatted_revision
from proposer.brief import Brief, evidence_for
from proposer.client import ChatReply, UsageMeter, reflection_is_local
from proposer.guards import same_text
from proposer.prompts import (
    GUIDELINES,
    TEXT_SYSTEM,
    components_section,
    frontier_section,
    names,
    notes_section,
    output_format,
    task_line,
    wins_table,
)
from proposer.types import ProposerConfig
from schemas.exceptions import ProposalRejected

__all__ = ["run_text", "text_messages"]


def text_messages(brief: Brief, config: ProposerConfig, rng: random.Random) -> list[dict[str, Any]]:
    """The system and user messages of a text-mode request (mutation or merge)."""
    evidence = evidence_for(brief, budget_tokens=config.evidence_token_budget, rng=rng)
    cap = config.max_prompt_chars
    head = (
        f"{task_line(brief.targets)}\n\n"
        f"# The program\n{brief.program_description or '(no description given)'}"
    )
    if brief.kind == "merge":
        a, b = brief.parents
        body = [
            head,
            f"# Two candidates to merge\nCandidate A ({a.candidate_id}) and candidate B "
            f"({b.candidate_id}) are both on the Pareto frontier: each is the best on some "
            f"training examples where the other is not. Per-seed scores where either wins:\n"
            f"{wins_table(a, b)}",
            "# Components of candidate A\n"
            + components_section(brief.specs, a.components, brief.targets),
            "# The differing components in candidate B\n"
            + components_section(
                [s for s in brief.specs if s.name in brief.targets],
                b.components,
                (),
                role="B's version",
            ),
            evidence,
            notes_section(brief.notes),
            f"# Your task\nWrite one version of {names(brief.targets)} that keeps what makes A "
            f"win on its seeds and what makes B win on its seeds. Find the instruction in each "
            f"version that explains its wins and combine them into one coherent text; where they "
            f"conflict, keep the more general rule. Do not simply concatenate the two versions: "
            f"remove duplication.\n\n{GUIDELINES}",
        ]
    else:
        parent = brief.parents[0]
        body = [
            head,
            "# Components\n" + components_section(brief.specs, brief.base, brief.targets),
            f"# How the current version (candidate {parent.candidate_id}) did on a minibatch\n{evidence}",
            frontier_section(brief.frontier, parent.candidate_id),
            notes_section(brief.notes),
            f"# Your task\nImprove {names(brief.targets)} so that the student gets failures like "
            f"these right, on these inputs and on unseen ones like them, while keeping its "
            f"successes.\n\n{GUIDELINES}",
        ]
    body.append(output_format(brief.targets, cap))
    user = "\n\n".join(part for part in body if part)
    return [{"role": "system", "content": TEXT_SYSTEM}, {"role": "user", "content": user}]


UNCHANGED_NUDGE = (
    "Your new text is identical to the current text, so it cannot fix any failure. Name the "
    "mistake patterns on the PATTERNS line, then write a changed version with one precise "
    "rule for each, in the same format."
)


def block_first(messages: list[dict[str, Any]], brief: Brief, cap: int) -> list[dict[str, Any]]:
    """The same request asking for the block first (``output_format(block_first=True)``)."""
    user = messages[-1]["content"]
    for old, new in (
        (task_line(brief.targets), task_line(brief.targets, block_first=True)),
        (output_format(brief.targets, cap), output_format(brief.targets, cap, block_first=True)),
    ):
        user = user.replace(old, new)
    return [*messages[:-1], {**messages[-1], "content": user}]


CUT_OFF_NUDGE = (
    "Keep this answer short: start with the <<<COMPONENT block and close it with >>> before "
    "anything else. Do not repeat the request or the examples."
)


async def run_text(
    meter: UsageMeter, brief: Brief, config: ProposerConfig, rng: random.Random
) -> tuple[dict[str, str], str]:
    """One text-mode request; a second one only when the first needs it.

    Small local models often echo the current text; one push turns many of those answers
    into a real edit, at the price of one more call only when it is needed. A hosted model's
    unchanged text is taken as its answer (nothing it was shown can be fixed in the text):
    asking again would cost a call and a round's wait for the same answer. An answer with no
    usable block (the 0.5B copies the PATTERNS format, placeholder and all) is asked for once
    more in the block-first format, which such models fill in. A block that
    echoes the rest of the request (the evidence, the guidelines) does not count. An answer
    that ran out of tokens before its block was complete is asked for once more, with a note
    to write the block first (the cut-off answer is not sent back: it would fill the context).
    """
    messages = text_messages(brief, config, rng)
    # A rule taken from the person's notes is an edit asked for, not an echo of the request.
    own = tuple(text for parent in brief.parents for text in parent.components.values())
    own += tuple(note.text for note in brief.notes)
    shown = Shown(messages[-1]["content"], own)
    reply = await meter.chat(messages)
    try:
        changed, rationale = _parse(reply, brief, config, shown)
    except ProposalRejected as exc:
        salvaged = _unformatted(exc, reply, brief, config)
        if salvaged is not None:
            return {**brief.base, **salvaged}, "(the answer ignored the format; its text was read)"
        if exc.reason == "cut_off":
            again = [
                *messages[:-1],
                {**messages[-1], "content": messages[-1]["content"] + "\n\n" + CUT_OFF_NUDGE},
            ]
        elif exc.reason == "no_submission":
            again = block_first(messages, brief, config.max_prompt_chars)
        else:
            raise
        reply = await meter.chat(again)
        changed, rationale = _parse(reply, brief, config, shown)
    echoed = changed and same_text(changed, {n: brief.base.get(n, "") for n in changed})
    if echoed and reflection_is_local(config):
        messages = [
            *messages,
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": UNCHANGED_NUDGE},
        ]
        changed, rationale = _parse(await meter.chat(messages), brief, config, shown)
    return {**brief.base, **changed}, rationale


def _unformatted(
    exc: ProposalRejected, reply: ChatReply, brief: Brief, config: ProposerConfig
) -> dict[str, str] | None:
    """A hosted model's revision written without the block format, read as it is.

    Asking again would cost a call and a round's wait for the same text in blocks. Only a
    finished answer with one target, from a hosted model: a small local model that ignores
    the format mostly copies the request, which the block-first request is for.
    """
    if exc.reason != "no_submission" or len(brief.targets) != 1 or reflection_is_local(config):
        return None
    target = brief.targets[0]
    text = unformatted_revision(reply.content, brief.base.get(target, ""))
    return {target: text} if text else None


def _parse(
    reply: ChatReply, brief: Brief, config: ProposerConfig, shown: Shown
) -> tuple[dict[str, str], str]:
    cut_off = config.max_tokens if reply.finish_reason == "length" else None
    return parse_reply(reply.content, brief.targets, cut_off_at=cut_off, shown=shown)

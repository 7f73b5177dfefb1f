"""Text mode: one request carrying the evidence, the new text returned in delimited blocks.

For models that cannot call tools (Qwen2.5-Coder behind llama.cpp, whose chat template
does not produce OpenAI ``tool_calls``). The answer holds ``<<<COMPONENT name`` ... ``>>>``
blocks and a ``RATIONALE:`` line; with exactly one target component a single fenced
block is accepted too. Parsing is lenient about what small models get wrong (a missing
closing marker, a fence inside the block) and strict about what matters: no block, no
candidate.
"""

from __future__ import annotations

import random
import re
from typing import Any

from proposer.brief import Brief, evidence_for
from proposer.client import UsageMeter
from proposer.prompts import (
    GUIDELINES,
    PLACEHOLDER,
    TEXT_SYSTEM,
    components_section,
    frontier_section,
    names,
    output_format,
    task_line,
    wins_table,
)
from proposer.types import ProposerConfig
from schemas.exceptions import ProposalRejected

__all__ = ["parse_reply", "run_text", "text_messages"]

# "<<<COMPONENT name"; small models also drop the "<<<" or write a markdown header instead.
_OPEN = re.compile(
    r"^[ \t#]*(?:<<<)?[ \t]*COMPONENT[ \t:]+`?([\w.\-]+)`?[ \t]*>{0,3}[ \t]*$", re.M | re.I
)
_CLOSE = re.compile(r"^[ \t]*>>>[ \t]*$", re.M)
_RATIONALE = re.compile(r"^[ \t*#]*RATIONALE[ \t*]*:[ \t*]*(.*)$", re.M | re.I | re.S)
_FENCE = re.compile(r"^[ \t]*```[^\n`]*$", re.M)


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
            f"# Your task\nImprove {names(brief.targets)} so that the student gets failures like "
            f"these right, on these inputs and on unseen ones like them, while keeping its "
            f"successes.\n\n{GUIDELINES}",
        ]
    body.append(output_format(brief.targets, cap))
    user = "\n\n".join(part for part in body if part)
    return [{"role": "system", "content": TEXT_SYSTEM}, {"role": "user", "content": user}]


def _unfence(text: str) -> str:
    lines = text.strip().splitlines()
    if len(lines) >= 2 and _FENCE.match(lines[0]) and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1]).strip()
    return text.strip()


def _fenced_part(body: str) -> str:
    """The block's text without fences and without what follows a closing fence.

    Models often wrap the text in a fence, or close the block with a fence instead of
    ``>>>`` and then comment on it: the comment is not part of the component.
    """
    lines = body.splitlines()
    fences = [i for i, line in enumerate(lines) if _FENCE.match(line)]
    if not fences:
        return body.strip()
    if fences[0] == 0:
        end = fences[1] if len(fences) > 1 else len(lines)
        return "\n".join(lines[1:end]).strip()
    return "\n".join(lines[: fences[0]]).strip()


def parse_reply(content: str, targets: tuple[str, ...]) -> tuple[dict[str, str], str]:
    """The component texts and rationale in a text-mode answer.

    Returns only blocks naming a target (the last block wins when one is repeated); raises
    ``ProposalRejected("no_submission")`` when there is none.
    """
    found: dict[str, str] = {}
    opens = list(_OPEN.finditer(content))
    for i, match in enumerate(opens):
        end = opens[i + 1].start() if i + 1 < len(opens) else len(content)
        body = content[match.end() : end]
        close = _CLOSE.search(body)
        if close:  # well-formed: the text may itself contain fences; drop only a wrapping pair
            body = _unfence(body[: close.start()])
        else:
            stop = _RATIONALE.search(body)
            body = _fenced_part(body[: stop.start() if stop else None].strip().removesuffix(">>>"))
        if match.group(1) in targets and not body.startswith(PLACEHOLDER):
            found[match.group(1)] = body
    first = opens[0].start() if opens else len(content)
    if not opens and len(targets) == 1:
        fences = list(_FENCE.finditer(content))
        if len(fences) >= 2:  # the last fenced block: models often draft, then finalize
            found[targets[0]] = content[fences[-2].end() : fences[-1].start()].strip()
            first = fences[-2].start()
    if not found:
        raise ProposalRejected(
            "no_submission",
            f"the answer has no <<<COMPONENT block for {', '.join(targets)} "
            f"(starts with {content[:120]!r})",
        )
    rationale_match = _RATIONALE.search(content)
    if rationale_match:
        rationale = rationale_match.group(1)
        block = _OPEN.search(rationale)
        rationale = rationale[: block.start() if block else None].strip()
    else:  # the reasoning before the blocks says why, if nothing else does
        rationale = content[:first].strip()
    return found, rationale[:1500] or "(no rationale given)"


UNCHANGED_NUDGE = (
    "Your new text is identical to the current text, so it cannot fix any failure. Write a "
    "changed, improved version that addresses the failures above, in the same format."
)


async def run_text(
    meter: UsageMeter, brief: Brief, config: ProposerConfig, rng: random.Random
) -> tuple[dict[str, str], str]:
    """One text-mode request (two when the first copies the text back unchanged).

    Small local models often echo the current text; one push turns many of those answers
    into a real edit, at the price of one more call only when it is needed.
    """
    messages = text_messages(brief, config, rng)
    reply = await meter.chat(messages)
    changed, rationale = _parse(reply, brief, config)
    if changed and all(brief.base.get(name) == text for name, text in changed.items()):
        messages = [
            *messages,
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": UNCHANGED_NUDGE},
        ]
        changed, rationale = _parse(await meter.chat(messages), brief, config)
    return {**brief.base, **changed}, rationale


def _parse(reply: Any, brief: Brief, config: ProposerConfig) -> tuple[dict[str, str], str]:
    if reply.finish_reason == "length":
        raise ProposalRejected(
            "cut_off", f"the answer was cut off at max_tokens={config.max_tokens} before it ended"
        )
    return parse_reply(reply.content, brief.targets)

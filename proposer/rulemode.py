"""Rule mode: each proposal adds one rule, written by a small model from one failure.

Asked to rewrite a whole prompt, a 1.5B model on a CPU mostly copies it back, or turns it
into generic advice that breaks the output format, and each answer takes a minute or two.
Asked to complete one sentence, ``RULE: If the input is about <what it is about>, the answer
is <the correct answer>.``, from one failure and its verifier feedback, it writes a precise
rule in a short request and a short answer: a call takes a quarter of the time. The
proposer appends the rule to the target component, followed by the failing input it was
written from, labelled with the rule's answer (``Example: "<input>" -> <answer>``): a small
student follows a rule with one labelled example of it more often than the rule alone (the
benchmarks page has the main job's figures with and without).
Every proposal is one targeted edit the gate judges on its own; the text grows one rule at a
time, and rules that do not help are never accepted. A merge keeps the lines of both candidates (no model call).

The form suits programs whose verifier feedback names the right answer (classifiers,
extractors, routers). The failure shown is the first of the minibatch, where the search
puts the failures nobody in flight was shown yet, so successive proposals target different
inputs; the gate's minibatch holds it, so a rule that fixes it can pass.
"""

from __future__ import annotations

import random
import re
from typing import Any

from proposer.brief import Brief
from proposer.client import UsageMeter
from proposer.render import is_failure, task_input, text_of, truncate
from proposer.types import Evaluation, ProposerConfig
from schemas.exceptions import ProposalRejected

__all__ = ["MAX_FAILURES", "merge_rules", "parse_rule", "rule_messages", "run_rules"]

MAX_FAILURES = 1
RULE_TOKENS = 120  # one sentence; a longer answer is cut and its first sentence kept
_MAX_RULE_CHARS = 400
_RULE = re.compile(r"^[ \t>*#`-]*RULE[ \t*]*:[ \t*]*(.+)$", re.M | re.I)
_PLACEHOLDER = re.compile(r"<(?:what it is about|the correct answer|the sentence)>", re.I)

RULE_SYSTEM = (
    "You improve the instructions of an LLM-based program (the 'student') one rule at a "
    "time. You write general rules that also work on new inputs, never answers copied from "
    "the examples. You answer in exactly the format you are asked for."
)


def _failures(brief: Brief, rng: random.Random) -> list[Evaluation]:
    """The failures to show: the minibatch's first (the search puts the failures nobody in
    flight was shown first), then the parent's other ones shown."""
    shown = [e for _, e in brief.evaluations if is_failure(e)]
    others = [e for e in brief.context if is_failure(e)]
    rng.shuffle(others)
    return (shown + others)[:MAX_FAILURES]


def _item(e: Evaluation) -> str:
    lines = [f"- Input: {truncate(' '.join(task_input(e).split()), 300, 'input')!r}"]
    lines.append(
        f"  Student's answer: {truncate(' '.join(text_of(e.output).split()), 120, 'answer')!r}"
    )
    lines.append(f"  Feedback: {truncate(' '.join(e.feedback.split()), 500, 'feedback')}")
    return "\n".join(lines)


def rule_messages(
    brief: Brief, rng: random.Random, failures: list[Evaluation] | None = None
) -> list[dict[str, Any]]:
    """The system and user messages of a rule-mode request."""
    failures = _failures(brief, rng) if failures is None else failures
    items = "\n".join(_item(e) for e in failures) or "(no failure was shown)"
    user = "\n\n".join(
        [
            f"# The program\n{brief.program_description or '(no description given)'}",
            f"# An input the student got wrong\n{items}",
            "# Your task\nWrite one rule that makes the student answer inputs like this one "
            "correctly, without changing its answer for other kinds of inputs. Say what the "
            "input is about precisely (a few words, not its exact wording); if the feedback "
            "shows which answer the student confused it with, say what tells them apart. Take "
            "the correct answer from the feedback.\n\n"
            "Answer with exactly one line in this form:\n"
            "RULE: If the input is about <what it is about>, the answer is <the correct answer>.",
        ]
    )
    return [{"role": "system", "content": RULE_SYSTEM}, {"role": "user", "content": user}]


def parse_rule(content: str) -> str | None:
    """The sentence of a ``RULE:`` line (else of the first line of text); ``None`` if none."""
    found = _RULE.search(content)
    if found:
        text = found.group(1)
    else:
        lines = [
            line.strip(" \t*-`>#")
            for line in content.splitlines()
            if line.strip(" \t*-`>#") and not line.strip().startswith("```")
        ]
        text = lines[0] if lines else ""
    text = text.strip()
    while len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":  # quoted whole
        text = text[1:-1].strip()
    if not text or _PLACEHOLDER.search(text):
        return None
    if len(text) > _MAX_RULE_CHARS:  # a paragraph: keep its first sentence
        text = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0][:_MAX_RULE_CHARS]
    return text


async def run_rules(
    meter: UsageMeter, brief: Brief, config: ProposerConfig, rng: random.Random
) -> tuple[dict[str, str], str]:
    """One rule-mode request: the target component with the new rule appended."""
    target = brief.targets[0]
    current = brief.base.get(target, "")
    failures = _failures(brief, rng)
    reply = await meter.chat(
        rule_messages(brief, rng, failures), max_tokens=min(RULE_TOKENS, config.max_tokens)
    )
    rule = parse_rule(reply.content)
    if rule is None:
        raise ProposalRejected(
            "no_submission", f"the answer has no RULE line (starts with {reply.content[:120]!r})"
        )
    if " ".join(rule.lower().split()) in " ".join(current.lower().split()):
        raise ProposalRejected("unchanged", f"the instructions already say {rule[:120]!r}")
    example = _example(rule, failures)
    added = f"{rule}\n{example}" if example else rule
    return {target: f"{current.rstrip()}\n{added}"}, f"added the rule: {rule}"


_ANSWER = re.compile(r"the answer is\s+[\"'`]?([^\s\"'`]+?)[\"'`]?[.!]?\s*$", re.I)


def _example(rule: str, shown: list[Evaluation]) -> str | None:
    """The failing input the rule was written from, labelled with the rule's answer; ``None``
    when the rule names no single answer (``... the answer is X.``) or no failure was shown."""
    found = _ANSWER.search(rule)
    if not found or not shown:
        return None
    text = truncate(" ".join(task_input(shown[0]).split()), 200, "input")
    return f'Example: "{text}" -> {found.group(1)}'


def merge_rules(brief: Brief) -> tuple[dict[str, str], str]:
    """A merge in rule mode: candidate A's text plus the lines only B has, per target."""
    a, b = brief.parents
    merged = {}
    for name in brief.targets:
        mine = a.components.get(name, "")
        have = {line.strip() for line in mine.splitlines()}
        extra = [
            line for line in b.components.get(name, "").splitlines() if line.strip() not in have
        ]
        merged[name] = "\n".join([mine.rstrip(), *extra]) if extra else mine
    return merged, "kept the instructions of both candidates"

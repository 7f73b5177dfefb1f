"""The reflection prompts: what the proposer asks the model, in text and agent mode.

This text is the product's quality. Every prompt explains the job (make the student do
better on the failures shown *and on unseen cases like them*), shows the components with
their kind and purpose, the evidence, and asks for the complete new text in a form the
proposer can parse (``<<<COMPONENT name`` ... ``>>>`` blocks and a ``RATIONALE:`` line in
text mode; tool calls in agent mode).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proposer.types import CandidateView, ComponentSpec

__all__ = [
    "GUIDELINES",
    "TEXT_SYSTEM",
    "components_section",
    "frontier_section",
    "output_format",
    "wins_table",
]

TEXT_SYSTEM = (
    "You are an expert prompt engineer. You improve the instructions that steer an LLM-based "
    "program (the 'student') by studying where it failed. You write instructions that "
    "generalize to new inputs, never answers memorized from the examples shown."
)

GUIDELINES = """How to write the new version:
1. Diagnose first. Read every failure and its feedback (it often states the expected answer). \
Find the patterns behind them: a rule the student did not know, two cases it confuses, a \
format it got wrong, domain knowledge it lacked.
2. Fix the cause, in general terms. State the rule, the distinction or the procedure that \
would have produced the right answer for these inputs and for unseen inputs like them. Do not \
paste the example inputs or answer single examples; a short contrasting example is fine when \
it teaches a distinction.
3. Keep what works. The successes show behaviour the new text must preserve. Keep required \
content (allowed labels, output formats, tool names) exactly as it is unless it is the problem.
4. Be concise. Prefer sharpening or replacing a vague sentence to appending new ones; remove \
what is redundant. The student is a language model reading this text on every call.
5. Write the complete new text of each component you change, ready to use as is: not a \
diff, not a description of the changes, no placeholders."""


def _fence(text: str) -> str:
    return f"```\n{text}\n```"


def components_section(
    specs: Sequence[ComponentSpec],
    components: Mapping[str, str],
    targets: Sequence[str],
    *,
    role: str | None = None,
) -> str:
    """Every component with its kind, purpose and current text; targets marked editable."""
    blocks = []
    for spec in specs:
        text = components.get(spec.name, "")
        editable = "you may change this one" if spec.name in targets else "read-only here"
        lines = [
            f"## Component `{spec.name}` (kind: {spec.kind}, {len(text):,} chars; {role or editable})"
        ]
        if spec.description:
            lines.append(f"Purpose: {spec.description}")
        lines.append(_fence(text))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def frontier_section(frontier: Sequence[CandidateView], parent_id: str, limit: int = 3) -> str:
    """Other frontier candidates (what they changed, where they win), briefly; '' if none."""
    others = [c for c in frontier if c.candidate_id != parent_id][:limit]
    if not others:
        return ""
    lines = ["# Other candidates on the Pareto frontier (for ideas; do not just copy them)"]
    for view in others:
        lines.append(
            f"- {view.candidate_id}: wins {len(view.wins)} seeds ({', '.join(view.wins[:8])})"
        )
        if view.diff_from_parent:
            diff = view.diff_from_parent
            if len(diff) > 600:
                diff = diff[:600] + f"\n[... diff truncated: {len(diff) - 600:,} chars omitted ...]"
            lines.append(_fence(diff))
    more = len([c for c in frontier if c.candidate_id != parent_id]) - len(others)
    if more > 0:
        lines.append(f"({more} more frontier candidates not shown)")
    return "\n".join(lines)


def output_format(targets: Sequence[str], cap: int) -> str:
    """The text-mode answer format, with the length cap."""
    example = "\n".join(
        f"<<<COMPONENT {name}\n(the complete new text of {name})\n>>>" for name in targets
    )
    which = (
        f"the component `{targets[0]}`"
        if len(targets) == 1
        else "each component you change (at least one of: "
        + ", ".join(f"`{t}`" for t in targets)
        + ")"
    )
    return (
        f"# Answer format\nFirst think briefly about the failure patterns. Then write the new "
        f"text of {which} between the markers below, each at most {cap:,} characters, followed "
        f"by one line starting with RATIONALE: that says what you changed and why.\n\n"
        f"{example}\nRATIONALE: <one or two sentences>"
    )


def wins_table(a: CandidateView, b: CandidateView) -> str:
    """Per-seed scores of two candidates on the seeds where either one wins."""
    seeds = sorted(set(a.wins) | set(b.wins))
    if not seeds:
        return "(no per-seed wins recorded)"
    rows = ["| seed | A | B | won by |", "|---|---|---|---|"]
    for seed in seeds:
        winner = "both" if seed in a.wins and seed in b.wins else ("A" if seed in a.wins else "B")
        rows.append(
            f"| {seed} | {_num(a.scores.get(seed))} | {_num(b.scores.get(seed))} | {winner} |"
        )
    return "\n".join(rows)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"

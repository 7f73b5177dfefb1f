"""The reflection prompts: what the proposer asks the model, in text and agent mode.

This text is the product's quality. Every prompt explains the job (make the student do
better on the failures shown *and on unseen cases like them*), shows the components with
their kind and purpose, the evidence, and asks for the complete new text in a form the
proposer can parse (in text mode ``<<<COMPONENT name`` ... ``>>>`` blocks first, then an
optional one-line ``RATIONALE:``; tool calls in agent mode). The notes of the person running
the optimization (``notes_section``) come right before the task, in every mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proposer.types import CandidateView, ComponentSpec, PersonNote

__all__ = [
    "GUIDELINES",
    "NOTES_HEADING",
    "PLACEHOLDER",
    "TEXT_SYSTEM",
    "components_section",
    "frontier_section",
    "names",
    "notes_section",
    "output_format",
    "task_line",
    "wins_table",
]

TEXT_SYSTEM = (
    "You are an expert prompt engineer. You improve the instructions that steer an LLM-based "
    "program (the 'student') by studying where it failed. You write instructions that "
    "generalize to new inputs, never answers memorized from the examples shown. You answer "
    "in exactly the format you are asked for."
)

# Bullets, not numbered headings: small models turned "1. Diagnose 2. Fix ..." headings into
# the outline of their answer and never wrote the new text.
GUIDELINES = """Write the new version so that:
- it fixes the causes, not the single examples. The verifier feedback often states the right \
answer: find the pattern behind the mistakes (a rule the student did not know, two cases it \
confuses, a format it got wrong, missing domain knowledge) and state that rule so it also works \
on new inputs. Where the student gave one answer but another was expected, say how to tell the \
two apart. Do not paste the example inputs;
- it keeps what already works (the successes) and everything the program needs, such as the \
allowed labels, the output format and tool names;
- it stays concise: sharpen or replace vague sentences rather than only appending new ones. \
The student reads this text on every call;
- it is complete and ready to use as is: not a diff, not a list of changes, no placeholders.
Often a good new version is the current text, tightened, with one precise rule per mistake \
pattern."""


NOTES_HEADING = "Notes from the person running this optimization"


def notes_section(notes: Sequence[PersonNote], *, heading: str = "#") -> str:
    """The person's notes as one section (``""`` when there are none).

    They know the task beyond what the failures show (a policy, a case the verifier misses,
    where to look next), so the model is told to follow them where they apply.
    """
    if not notes:
        return ""
    lines = [
        f"{heading} {NOTES_HEADING}",
        "They know this task beyond what the failures show. Follow their notes where they "
        "apply; where a note and the failures disagree, the note wins.",
    ]
    for note in notes:
        about = f" (about candidate {note.candidate_id} and the candidates built on it)"
        lines.append(f"- {note.text.strip()}{about if note.candidate_id else ''}")
    return "\n".join(lines)


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


PLACEHOLDER = "<the complete new text of"


def task_line(targets: Sequence[str], *, block_first: bool = False) -> str:
    """The one-line statement of the job that opens a text-mode request."""
    answer = (
        "the new text first, in <<<COMPONENT blocks, then at most one short RATIONALE line"
        if block_first
        else "one PATTERNS line, then the new text in <<<COMPONENT blocks"
    )
    return (
        f"Task: write a better version of {names(targets)} so that the student stops making "
        f"the mistakes shown below. Answer with {answer}, as described at the end."
    )


def output_format(targets: Sequence[str], cap: int, *, block_first: bool = False) -> str:
    """The text-mode answer format, with the length cap: one PATTERNS line, then the blocks.

    Small models spend their tokens on whatever is asked for first: with a free rationale
    first, a 0.5B model ran out of tokens before (or inside) its block in most answers. With
    the block first and nothing before it, the 1.5B copied the current text back unchanged in
    most answers on Banking77. One line naming the mistake patterns is short enough for the
    first and gives the second what to write; an answer cut off after its blocks still counts.
    The 0.5B, though, copies this format as is, placeholder and all, and fills in the block
    when the block comes first: ``block_first`` is the format to ask again with.
    """
    if block_first:
        return _block_first_format(targets, cap)
    blocks = "\n".join(
        f"<<<COMPONENT {name}\n{PLACEHOLDER} {name}: the current text, tightened, plus one "
        f"precise rule for each pattern, at most {cap:,} characters>\n>>>"
        for name in targets
    )
    then = "the block" if len(targets) == 1 else "the blocks, one for each component you change"
    return (
        f"# Answer format (follow it exactly)\n"
        f"First one line naming the mistake patterns you will fix, then {then}:\n"
        f"PATTERNS: <the two or three mistake patterns behind most failures, a few words each>\n"
        f"{blocks}\n\n"
        f"Close each block with >>> on its own line. Write nothing after the last block."
    )


def _block_first_format(targets: Sequence[str], cap: int) -> str:
    blocks = "\n".join(
        f"<<<COMPONENT {name}\n{PLACEHOLDER} {name}, at most {cap:,} characters>\n>>>"
        for name in targets
    )
    start = (
        "Start your answer with this block; write nothing before it"
        if len(targets) == 1
        else "Start your answer with the blocks, one for each component you change; write "
        "nothing before them"
    )
    return (
        f"# Answer format (follow it exactly)\n"
        f"{start}:\n{blocks}\n"
        f"RATIONALE: <optional: one short sentence on the mistake pattern the new text fixes>\n\n"
        f"Close each block with >>> on its own line. Write nothing after the RATIONALE line."
    )


def names(targets: Sequence[str]) -> str:
    """Component names as a readable list: `a`, `b`."""
    return ", ".join(f"`{t}`" for t in targets)


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

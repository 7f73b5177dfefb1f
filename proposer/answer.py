"""Reading a text-mode answer: the new component texts and the rationale.

The format asked for (``prompts.output_format``) puts the new text first, so that a small
model's tokens go to the text and not to its reasoning::

    <<<COMPONENT name
    the complete new text
    >>>
    RATIONALE: one short sentence (optional)

The parser accepts what small models really write instead: ``COMPONENT name`` without
``<<<`` (or as a markdown header), a block closed by a fence instead of ``>>>`` and followed
by commentary, the text wrapped in a fence, the placeholder line copied above the text, the
rationale first (the older order), and with one target a plain fenced block without header.
It is strict where it matters: no block for a target, no candidate; in an answer cut off at
``max_tokens`` only blocks closed before the cut count, because a truncated prompt is worse
than none. And it tells new text from an echo (``Shown``): a 0.5B model often writes the
header, then copies the request until it runs out of tokens. A block made mostly of copied
lines is not a proposal; a block whose text is followed by a copied section heading of the
request ends there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from schemas.exceptions import ProposalRejected

__all__ = ["Shown", "parse_reply", "unformatted_revision"]

# "<<<COMPONENT name"; small models also drop the "<<<" or write a markdown header instead.
_OPEN = re.compile(
    r"^[ \t#*]*(?:<<<)?[ \t]*COMPONENT[ \t:]+`?([\w.\-]+)`?[ \t*]*>{0,3}[ \t]*$", re.M | re.I
)
# ">>>" on its own line, or at the end of the text's last line (a 0.5B also wrote ">>>>"), or
# at the start of a line that goes on with the rationale or the next block (">>>Rationale:").
_CLOSE = re.compile(r">{3,}[ \t]*$|^[ \t]*>{3,}(?=[ \t]*(?:rationale|<<<))", re.M | re.I)
# An XML-style closing tag naming the block a small model puts after the text
# ("</system_prompt>"); other tags may be the prompt's own.
_END_TAG = r"\n[ \t]*</(?:component|{name})>[ \t]*$"
_RATIONALE = re.compile(r"^[ \t*#]*RATIONALE[ \t*]*:[ \t*]*", re.M | re.I)
_FENCE = re.compile(r"^[ \t]*```[^\n`]*$", re.M)
_MARKER_LINE = re.compile(r"^[ \t]*(?:```[^\n`]*|>{3,}|<<<)[ \t]*$", re.M)
# The placeholders of the answer formats ("<the complete new text of x, ...>", "<the new
# instruction>"), which small models copy into their answer.
_PLACEHOLDER = re.compile(r"<[^<>\n]*\bnew (?:text|instruction)\b[^<>\n]*>", re.I)
# A placeholder copied into the rationale, possibly cut off before its ">".
_ANGLED = re.compile(r"<[^<>]*>?")
_NO_RATIONALE = "(no rationale given)"
_MIN_LINE = 6
_MIN_ECHO_LINES = 3  # fewer copied lines than this are an edit, not an echo  # shorter lines ("", "---", "Yes.") say nothing about copying
# A copied section heading of the request ("## Failures (4 of 6 rollouts)", "Component
# `x` (kind: ...)") starts an echo; short ones ("# Your task") may be a real prompt's own.
_MIN_HEADING = 20


@dataclass(frozen=True)
class Shown:
    """What the request showed the model, to tell a new text from an echo of the request.

    ``text`` is the request; ``own`` are the texts a proposal may legitimately repeat (the
    current components): their lines count neither as copied nor as new. Lines compare
    without case: small models change it when they copy.
    """

    text: str
    own: tuple[str, ...] = ()

    def echoed(self, block: str) -> bool:
        """Whether the block copies the request instead of writing a new text: most of its
        lines not in ``own`` are copied (a block that only repeats ``own`` is unchanged, not
        an echo; one quoted example input next to a new rule is fine)."""
        seen = self.text.lower()
        own = [text.lower() for text in self.own]
        lines = [line for line in _lines(block) if not any(line in text for text in own)]
        copied = sum(line in seen for line in lines)
        # A rule or two taken over from the feedback or from another candidate's diff is the
        # edit asked for; an echo copies the request wholesale.
        return copied >= _MIN_ECHO_LINES and 2 * copied > len(lines)

    def before_echo(self, block: str) -> str | None:
        """The block up to the first copied section heading of the request, where an echo
        starts (a model that copies the request goes on past the end of its text); ``None``
        when it copies no heading."""
        headings = {
            _heading(line) for line in self.text.lower().splitlines() if line.startswith("#")
        }
        lines = block.splitlines()
        for i, line in enumerate(lines):
            heading = _heading(line.lower())
            if len(heading) >= _MIN_HEADING and heading in headings:
                return "\n".join(lines[:i]).strip()
        return None

    def copies(self, text: str) -> bool:
        """Whether at least half of the lines are copied from the request, ``own`` included."""
        seen = self.text.lower()
        lines = _lines(text)
        return bool(lines) and 2 * sum(line in seen for line in lines) >= len(lines)


def _lines(text: str) -> list[str]:
    """The lines of ``text`` long enough to tell copying, stripped and lowercased."""
    return [line.strip().lower() for line in text.splitlines() if len(line.strip()) >= _MIN_LINE]


def _heading(line: str) -> str:
    return line.strip().lstrip("#").strip()


@dataclass(frozen=True)
class _Block:
    """One block of the answer; ``complete`` when something after it shows it had ended."""

    name: str  # a fenced block without header is named after the single target
    text: str
    complete: bool
    start: int  # offset of its header (or opening fence)
    end: int  # offset just after its closing marker, or after its text
    # What follows unfenced text closed by a bare fence: when that is a copy of the request,
    # the fence was part of the copy (a 0.5B echoes "Purpose: ...", a fence, the current text).
    after: str = ""


def parse_reply(
    content: str,
    targets: tuple[str, ...],
    *,
    cut_off_at: int | None = None,
    shown: Shown | None = None,
) -> tuple[dict[str, str], str]:
    """The component texts and rationale in a text-mode answer.

    Returns the blocks naming a target (the last usable one wins when one is repeated).
    ``cut_off_at`` is the ``max_tokens`` the answer ran into (``finish_reason == "length"``),
    ``None`` when it ended by itself: a cut-off answer keeps only its complete blocks.
    With ``shown``, blocks that echo the request are ignored; empty blocks do not count.
    Raises ``ProposalRejected``: ``cut_off`` when a cut-off answer has no usable block for a
    target, ``no_submission`` when a finished answer has none.
    """
    blocks = _header_blocks(content)
    if not blocks and len(targets) == 1:
        blocks = _fenced_block(content, targets[0])
    named = [b for b in blocks if b.name in targets]
    kept, echoes = _split_echoes(named, shown) if shown is not None else (named, [])
    # A block with no text is no submission either: it is asked for again, like an answer
    # without a block, instead of being refused by the guards as an empty component.
    usable = [b for b in kept if b.text.strip() and (cut_off_at is None or b.complete)]
    if not usable:
        empty = any(not b.text.strip() for b in kept)
        raise _rejection(content, targets, named, bool(echoes), cut_off_at, empty=empty)
    found = {b.name: b.text for b in usable}
    rationale = _rationale(content, blocks, shown)
    if rationale and cut_off_at is not None and content.rstrip().endswith(rationale):
        rationale += " [cut off]"
    return found, rationale[:1500] or _NO_RATIONALE


def _split_echoes(blocks: list[_Block], shown: Shown) -> tuple[list[_Block], list[_Block]]:
    """The blocks without the copy of the request that follows their text, and the echoes.

    A block whose text is followed by a copied section heading had ended where that began.
    """
    kept, echoes = [], []
    for block in blocks:
        text = shown.before_echo(block.text)
        if text is not None:
            block = replace(block, text=text, complete=True)
        copied_after = bool(block.after) and shown.copies(block.after)
        if text == "" or shown.echoed(block.text) or copied_after:
            echoes.append(block)
        else:
            kept.append(block)
    return kept, echoes


def _rejection(
    content: str,
    targets: tuple[str, ...],
    named: list[_Block],
    echoed: bool,
    cut_off_at: int | None,
    *,
    empty: bool = False,
) -> ProposalRejected:
    wanted = ", ".join(targets)
    if echoed:
        problem = f"its block for {wanted} copies the request instead of writing a new text"
    elif empty:
        problem = f"its block for {wanted} is empty"
    elif named:
        problem = f"its block for {wanted} was not closed before the cut, so it is incomplete"
    else:
        problem = f"it has no <<<COMPONENT block for {wanted}"
    if cut_off_at is None:
        return ProposalRejected(
            "no_submission", f"the answer failed: {problem} (starts with {content[:120]!r})"
        )
    return ProposalRejected(
        "cut_off", f"the answer was cut off at max_tokens={cut_off_at} and {problem}"
    )


def _header_blocks(content: str) -> list[_Block]:
    opens = list(_OPEN.finditer(content))
    blocks = []
    for i, match in enumerate(opens):
        last = i + 1 == len(opens)
        region = content[match.end() : len(content) if last else opens[i + 1].start()]
        body, close, used = _read_body(region, match.group(1))
        text = _drop_placeholders(body)
        if text is not None:
            after = region[used:] if close == "fence" else ""
            end = match.end() + used
            blocks.append(
                _Block(match.group(1), text, bool(close) or not last, match.start(), end, after)
            )
    return blocks


def _read_body(region: str, name: str) -> tuple[str, str, int]:
    """A block's text, what closed it, and how much of ``region`` it used.

    The close is "marker" (>>>), "fence" (a bare fence after unfenced text), "wrapped" (the
    fence closing a fenced text), "rationale" (the RATIONALE line) or "" (none).
    """
    marker = _CLOSE.search(region)
    if marker:  # well-formed: the text may itself contain fences; drop only a wrapping pair
        end_tag = re.compile(_END_TAG.format(name=re.escape(name)), re.I)
        text = end_tag.sub("", region[: marker.start()].rstrip())
        return _unfence(text), "marker", marker.end()
    stop = _RATIONALE.search(region)
    text, fence, used = _until_fence(region[: stop.start() if stop else None])
    return text, fence or ("rationale" if stop else ""), used


def _until_fence(body: str) -> tuple[str, str, int]:
    """The text up to the fence that closes the block (models close with ``` for >>>).

    A fence on the first line wraps the text. After it, a fence with a language tag opens a
    code example inside the text and a bare fence closes the innermost open one; a bare
    fence with none open closes the block, and what follows it is commentary. Returns the
    text, "wrapped", "fence" or "" for what closed it, and the length used.
    """
    kept: list[str] = []
    offset, depth, started, wrapped = 0, 0, False, False
    for line in body.splitlines(keepends=True):
        offset += len(line)
        stripped = line.strip()
        if not started:
            if not stripped:
                continue
            started = True
            if _FENCE.match(stripped):
                wrapped = True
                continue
        if _FENCE.match(stripped):
            if stripped != "```":
                depth += 1
            elif depth == 0:
                return "".join(kept).strip(), "wrapped" if wrapped else "fence", offset
            else:
                depth -= 1
        kept.append(line)
    return "".join(kept).strip(), "", len(body)


def _unfence(text: str) -> str:
    lines = text.strip().splitlines()
    if len(lines) >= 2 and _FENCE.match(lines[0]) and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1]).strip()
    return text.strip()


def _drop_placeholders(text: str) -> str | None:
    """``text`` without copied placeholder lines; ``None`` when they were all it held."""
    lines = text.splitlines()
    kept = [line for line in lines if not _PLACEHOLDER.fullmatch(line.strip())]
    if len(kept) == len(lines):
        return text
    return "\n".join(kept).strip() or None


def _fenced_block(content: str, target: str) -> list[_Block]:
    """The last fenced block, as the text of ``target`` (models draft, then finalize)."""
    fences = list(_FENCE.finditer(content))
    if not fences:
        return []
    if len(fences) % 2 == 0:
        opening, closing = fences[-2], fences[-1]
        text, complete, end = content[opening.end() : closing.start()], True, closing.end()
    else:  # the last fence is still open at the end of the answer
        opening = fences[-1]
        stop = _RATIONALE.search(content, opening.end())
        end = stop.start() if stop else len(content)
        text, complete = content[opening.end() : end], stop is not None
    kept = _drop_placeholders(text.strip())
    return [_Block(target, kept, complete, opening.start(), end)] if kept else []


def _rationale(content: str, blocks: list[_Block], shown: Shown | None) -> str:
    """A ``RATIONALE:`` outside the blocks; else the text before the first, or after the last.

    Unlabelled text that copies the request (a 0.5B echoes it after its block) is none.
    """
    for match in _RATIONALE.finditer(content):
        if any(b.start <= match.start() < b.end for b in blocks):
            continue
        after = _OPEN.search(content, match.end())
        return _first_paragraph(content[match.end() : after.start() if after else None])
    if not blocks:
        return ""
    for text in (content[: blocks[0].start], content[blocks[-1].end :]):
        paragraph = _first_paragraph(text)
        if paragraph and not (shown is not None and shown.copies(paragraph)):
            return paragraph
    return ""


def _first_paragraph(text: str) -> str:
    """The first paragraph, without marker lines; '' when it is a copied placeholder."""
    text = _MARKER_LINE.sub("", text).strip()
    first = re.split(r"\n[ \t]*\n", text, maxsplit=1)[0].strip()
    return "" if _ANGLED.fullmatch(first) else first


def unformatted_revision(content: str, current: str) -> str | None:
    """The revised text in an answer that ignored the format, when it is plainly one.

    A hosted model sometimes answers with the new text as plain prose between a sentence of
    preamble and one of sign-off, paragraphs apart. The revision is the run of paragraphs
    from the first to the last one that shares a line with the ``current`` text; ``None``
    when no paragraph does (a text rewritten from scratch, or no text at all).
    """
    ours = {line for line in _lines(current)}
    if not ours:
        return None
    paragraphs = [p.strip() for p in re.split(r"\n[ \t]*\n", content.strip()) if p.strip()]
    shared = [i for i, p in enumerate(paragraphs) if any(line in ours for line in _lines(p))]
    if not shared:
        return None
    return "\n\n".join(paragraphs[shared[0] : shared[-1] + 1])

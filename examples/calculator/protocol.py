"""The ReAct text protocol: read one model reply as a tool call, a final answer, or neither.

A reply asks for the tool with a line ``Action: calculator[<expression>]`` and ends the task
with ``Answer: <number>``. Small models drift from the exact form, so the parser also takes
``calculator(<expr>)`` with or without ``Action:``, backticks and bold markers, the
``Action: calculator`` + ``Action Input: <expr>`` pair, and ``Final Answer:``. Whichever of an
action and an answer comes first in the reply wins: text after an action was written before
its observation existed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from examples.calculator.tools import format_number

__all__ = ["Reply", "first_number", "last_number", "normalize_number", "parse_reply"]

_PREFIX = r"^[\s>*#`_-]*"  # list bullets, quotes, headings, bold and code markers
_ACTION = re.compile(
    _PREFIX + r"(?:action\W*:[\s*`]*)?calculator\s*(?P<open>[\[(])(?P<rest>.*)$", re.I | re.M
)
_ACTION_PAIR = re.compile(
    _PREFIX
    + r"action\W*:[\s*`]*calculator[\s*`]*\n"
    + _PREFIX
    + r"action\s+input\W*:(?P<rest>.*)$",
    re.I | re.M,
)
_ANSWER = re.compile(_PREFIX + r"(?:final\s+)?answer[\s*]*:", re.I | re.M)
# Lines whose numbers are not the model's answer: its tool calls and observations it made up.
_NOT_ANSWER = re.compile(
    _PREFIX + r"(?:action(?:\s+input)?\W*:|observation\W*:|calculator\s*[\[(]).*$", re.I | re.M
)
_NUMBER = re.compile(
    r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|(?<![\w.])-?\.\d+"
)
_CLOSER = {"[": "]", "(": ")"}


@dataclass(frozen=True)
class Reply:
    """One parsed reply: ``kind`` is ``action``, ``answer`` or ``none``.

    ``expression`` is set for an action; ``answer`` (a normalized number, or ``""`` when the
    answer line has none) for an answer. ``end`` is where an action's line ends in the reply:
    what follows was written before the observation existed.
    """

    kind: Literal["action", "answer", "none"]
    expression: str = ""
    answer: str = ""
    end: int = field(default=0, compare=False)


def normalize_number(text: str) -> str:
    """``"$4,458.950"`` -> ``"4458.95"``; the text must be one number as ``_NUMBER`` finds it."""
    return format_number(float(text.replace(",", "")))


def first_number(text: str) -> str:
    """The first number in ``text``, normalized, or ``""``."""
    match = _NUMBER.search(text)
    return normalize_number(match.group()) if match else ""


def last_number(text: str) -> str:
    """The last number in ``text`` outside action and observation lines, normalized, or ``""``."""
    found = _NUMBER.findall(_NOT_ANSWER.sub("", text))
    return normalize_number(found[-1]) if found else ""


def _expression(opener: str, rest: str) -> str:
    """The text up to the bracket that closes ``opener``; all of ``rest`` if none does."""
    depth = 1
    for i, char in enumerate(rest):
        if char == opener:
            depth += 1
        elif char == _CLOSER[opener]:
            depth -= 1
            if depth == 0:
                return rest[:i].strip().strip("`").strip()
    return rest.strip().rstrip("`*. ").strip("`").strip()


def parse_reply(text: str) -> Reply:
    """The first action or answer in ``text``; ``Reply("none")`` when there is neither."""
    found: list[tuple[int, Reply]] = []
    pair = _ACTION_PAIR.search(text)
    if pair:
        expression = pair["rest"].strip().strip("`").strip()
        found.append((pair.start(), Reply("action", expression, end=pair.end())))
    action = _ACTION.search(text)
    if action:
        expression = _expression(action["open"], action["rest"])
        found.append((action.start(), Reply("action", expression, end=action.end())))
    answer = _ANSWER.search(text)
    if answer:
        found.append((answer.start(), Reply("answer", answer=first_number(text[answer.end() :]))))
    if not found:
        return Reply("none")
    return min(found, key=lambda item: item[0])[1]

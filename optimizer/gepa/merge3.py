"""Three-way text merge of prompt components (pure): replay one edit on top of another.

``merge3(base, ours, theirs)`` applies the edit ``base -> theirs`` to ``ours`` (``base``
edited another way). Texts are compared in units of one sentence or line, with the
whitespace between them as units of their own, so two edits of different sentences of one
paragraph still merge. Where both edits insert at the same place and remove nothing there,
both insertions are kept, ours first, without repeating a sentence ours already added (what
git's ``union`` driver does; for prompts made of rules that is what a person would write).
Where both change the same units differently the merge is a conflict and ``None`` is
returned: the caller falls back to something that does not need a merge.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["merge3", "merge_components", "units"]

# Separators: the spaces after a sentence end, or a run of line breaks (with their indentation).
_SEPARATOR = re.compile(r"((?<=[.!?])[ \t]+|[ \t]*\n\s*)")


def units(text: str) -> list[str]:
    """``text`` cut into sentences/lines and the separators between them (``"".join`` undoes it)."""
    return [part for part in _SEPARATOR.split(text) if part]


@dataclass(frozen=True)
class _Hunk:
    start: int  # the base units [start, end) are replaced by ``new``
    end: int
    new: tuple[str, ...]

    @property
    def insertion(self) -> bool:
        return self.start == self.end


def _hunks(base: Sequence[str], other: Sequence[str]) -> list[_Hunk]:
    matcher = difflib.SequenceMatcher(a=base, b=other, autojunk=False)
    return [
        _Hunk(i1, i2, tuple(other[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _conflict(a: _Hunk, b: _Hunk) -> bool:
    """Whether two different hunks touch the same base units."""
    if a == b or (a.insertion and b.insertion):
        return False  # identical, or two insertions (kept both, as a union)
    if a.insertion:
        return b.start < a.start < b.end
    if b.insertion:
        return a.start < b.start < a.end
    return a.start < b.end and b.start < a.end


def _union(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """``first`` then ``second`` without the sentences ``first`` already has."""
    have = {u.strip() for u in first if u.strip()}
    out = list(first)
    pending_separator: list[str] = []
    for unit in second:
        if not unit.strip():
            pending_separator = [unit]
            continue
        if unit.strip() in have:
            pending_separator = []
            continue
        out.extend(pending_separator)
        out.append(unit)
        have.add(unit.strip())
        pending_separator = []
    return out + pending_separator


def merge3(base: str, ours: str, theirs: str) -> str | None:
    """``ours`` with the edit ``base -> theirs`` applied, or ``None`` on a conflict."""
    if theirs in (base, ours):
        return ours
    if ours == base:
        return theirs
    b = units(base)
    mine, yours = _hunks(b, units(ours)), _hunks(b, units(theirs))
    if any(_conflict(m, y) for m in mine for y in yours):
        return None
    inserts: dict[int, list[str]] = {}
    replaces: dict[int, _Hunk] = {}
    for side in (mine, yours):
        for h in side:
            if h.insertion:
                inserts[h.start] = _union(inserts.get(h.start, []), h.new)
            else:
                replaces.setdefault(h.start, h)  # identical hunks on both sides: once
    out: list[str] = []
    i = 0
    while i <= len(b):
        out.extend(inserts.get(i, ()))
        if i in replaces:
            out.extend(replaces[i].new)
            i = replaces[i].end
            continue
        if i < len(b):
            out.append(b[i])
        i += 1
    return "".join(out)


def merge_components(
    base: Mapping[str, str], ours: Mapping[str, str], theirs: Mapping[str, str]
) -> dict[str, str] | None:
    """Component-wise ``merge3`` over ``ours``'s names; ``None`` when any one conflicts."""
    merged: dict[str, str] = {}
    for name, text in ours.items():
        original = base.get(name, text)
        result = merge3(original, text, theirs.get(name, original))
        if result is None:
            return None
        merged[name] = result
    return merged

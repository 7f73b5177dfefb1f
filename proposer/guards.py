"""Guards a proposal must pass, and the diff recorded with it.

A proposal is rejected (``ProposalRejected`` with a machine-readable ``reason``) when a
changed component is empty (``empty``), longer than the cap (``too_long``, raised as
``PromptTooLong``), when nothing but whitespace changed (``unchanged``) or when the same
content already exists as a candidate (``duplicate``). Cut-off answers (``cut_off``) and
missing or echoed submissions (``no_submission``) are rejected where the reply is read.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from schemas.exceptions import PromptTooLong, ProposalRejected
from schemas.records import content_hash

__all__ = ["check_candidate", "length_cap", "same_text", "unified_diff"]


def length_cap(cap: int, parent_text: str) -> int:
    """The most characters a component may have: the cap, or the parent's length if larger.

    A seed prompt already over the cap may be edited but must not grow.
    """
    return max(cap, len(parent_text))


def same_text(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Whether two component mappings differ in whitespace at most.

    Small models often copy the text back with a blank line added or removed: evaluating
    that as a new candidate would spend rollouts on nothing.
    """
    return all(" ".join(a.get(k, "").split()) == " ".join(b.get(k, "").split()) for k in {*a, *b})


def check_candidate(
    new: Mapping[str, str],
    *,
    bases: Sequence[Mapping[str, str]],
    targets: Sequence[str],
    cap: int,
    existing_hashes: frozenset[str],
) -> None:
    """Raise ``ProposalRejected`` unless ``new`` is a usable, new candidate.

    ``bases`` are the parents (one for a mutation, two for a merge); the first one is the
    reference for length. ``new`` must map every component of the parent.
    """
    base = bases[0]
    changed = [name for name in targets if new.get(name) != base.get(name)]
    for name in changed:
        if not new.get(name, "").strip():
            raise ProposalRejected("empty", f"component {name!r} would be empty")
    for name in changed:
        limit = length_cap(cap, base.get(name, ""))
        if len(new[name]) > limit:
            raise PromptTooLong(
                f"component {name!r} has {len(new[name]):,} chars, over the cap of {limit:,}"
            )
    for parent in bases:
        if same_text(new, parent):
            raise ProposalRejected(
                "unchanged", "the proposal is identical to its parent (up to whitespace)"
            )
    chash = content_hash(dict(new))
    if chash in existing_hashes:
        raise ProposalRejected(
            "duplicate", "the proposal is identical to an existing candidate", content_hash=chash
        )


def unified_diff(old: Mapping[str, str], new: Mapping[str, str], old_label: str) -> str:
    """One string: a unified diff per changed component, labelled ``old_label/name``."""
    parts = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name, ""), new.get(name, "")
        if before == after:
            continue
        lines = difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"{old_label}/{name}",
            tofile=f"new/{name}",
        )
        parts.append("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    return "".join(parts)

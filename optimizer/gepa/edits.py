"""What an edit does to a candidate's text (pure)."""

from __future__ import annotations

from collections import Counter

from schemas import CandidateRecord

__all__ = ["adds_words"]


def adds_words(parent: CandidateRecord, child: CandidateRecord) -> bool:
    """Whether ``child``'s edit adds a word ``parent`` lacks (counting repeats; case aside).

    An edit that only deletes or reorders words (a dropped rule, a garbled one) cannot add
    what another proposal's edit needs; in a stack it can only break seeds, and finding
    that takes a round of rollouts and a restack while every proposal waits. Such a child is left
    out of the stacks (``_replay_on``) and dropped when written with children that add
    something (``AcceptancePipeline``); written alone it is gated, as a deletion may still fix
    something (a rule that misled the student).
    """
    for name, text in child.components.items():
        before = Counter(parent.components.get(name, "").lower().split())
        if Counter(text.lower().split()) - before:
            return True
    return False

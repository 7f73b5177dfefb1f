"""A person's notes to the reflection model: which proposals are shown which notes.

A note (``gepa-runtime runs note``, the console, the REST API) is shown to every proposal
asked after it, as the person's feedback, in every proposer mode, until it has been *taken
in*: a candidate written with it (or one built on such a candidate: a stack, a rebase, a
merge) was accepted on train. From then on the text the search builds on carries what the
note asked for, and repeating it would only crowd the request. A note a person marks
``keep`` is shown to every later proposal. A note about a candidate (``candidate_id``) is
shown only to proposals whose parent is that candidate or descends from it (for a merge,
whose either parent does).

Which candidates each note was written with is kept in GEPA's checkpointed state
(``GepaState.notes``), so a resumed run knows which notes were taken in.
"""

from __future__ import annotations

from collections.abc import Sequence

from optimizer.gepa.context import SearchContext
from optimizer.gepa.parents import ancestors
from optimizer.runtime.steering import Note
from proposer import PersonNote

__all__ = ["PersonNotes", "as_request_notes"]


class PersonNotes:
    """The notes each proposal is shown, and which proposals they were shown to."""

    def __init__(self, ctx: SearchContext) -> None:
        self._ctx = ctx

    def for_parents(self, parents: Sequence[str]) -> tuple[Note, ...]:
        """The notes a proposal on ``parents`` is shown now, oldest first."""
        lineage = self._ctx.lineage()
        lines = [ancestors(lineage, p) | {p} for p in parents]
        shown = []
        for note in self._ctx.deps.steering.state.notes:
            if note.candidate_id is not None and not any(note.candidate_id in ln for ln in lines):
                continue
            if not note.keep and self.is_taken_in(note):
                continue
            shown.append(note)
        return tuple(shown)

    def written(self, notes: Sequence[Note], candidate_id: str) -> None:
        """``candidate_id`` was written with ``notes`` (checkpointed with GEPA's state)."""
        for note in notes:
            written = self._ctx.gepa.notes.setdefault(str(note.seq), [])
            if candidate_id not in written:
                written.append(candidate_id)

    def is_taken_in(self, note: Note) -> bool:
        """Whether a candidate written with ``note``, or one built on such, was accepted on
        train (scored on every train seed)."""
        written = set(self._ctx.gepa.notes.get(str(note.seq), ()))
        if not written:
            return False
        state, lineage = self._ctx.deps.state, self._ctx.lineage()
        return any(
            cid in written or written & ancestors(lineage, cid)
            for cid in state.train
            if cid not in state.rejected
        )


def as_request_notes(notes: Sequence[Note]) -> tuple[PersonNote, ...]:
    """The notes as the proposer takes them."""
    return tuple(PersonNote(n.text, n.candidate_id) for n in notes)

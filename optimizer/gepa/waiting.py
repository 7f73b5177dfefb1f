"""The waiting room: children past their proposal, waiting their turn to be accepted.

With several proposals in flight, children are accepted one at a time in the background
while their proposals' workers write again. A child written on the best while a sibling
replaced that best is replayed on the new best (its *base*); children on one base are
stacked (``optimizer.gepa.stacking``).

A person's rejections count here too: a waiting child a person rejected is stacked with
nobody (and never accepted: ``AcceptancePipeline``), and a child whose parent a person
rejected is replayed on the best instead of it, so it is judged without its parent's edit.
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.gepa.context import SearchContext
from schemas import CandidateRecord

__all__ = ["Waiting", "WaitingRoom"]


@dataclass
class Waiting:
    """A child that passed its proposal and waits its turn to be gated and accepted."""

    iteration: int
    child: CandidateRecord
    parent_id: str
    best_at_start: str | None
    minibatch: list[str]
    context: list[str]
    done: bool = False  # accepted as part of a stack
    stackable: bool = True  # not yet in a stack that failed its gate
    adds: bool = True  # its edit adds a word its parent lacks (``adds_words``)


class WaitingRoom:
    """The children waiting to be accepted, in the order they were queued."""

    def __init__(self, ctx: SearchContext) -> None:
        self._ctx = ctx
        self.children: list[Waiting] = []

    def superseded(self, parent_id: str, best_at_start: str | None) -> str | None:
        """The new best when the parent was the best at the start and has been replaced, or
        when a person rejected the parent."""
        now = self._ctx.best_id()
        rejected = parent_id in self._ctx.deps.state.rejected
        if (parent_id == best_at_start or rejected) and now is not None and now != parent_id:
            return now
        return None

    def is_rejected(self, w: Waiting) -> bool:
        """Whether a person rejected the waiting child itself."""
        return w.child.candidate_id in self._ctx.deps.state.rejected

    def base_of(self, w: Waiting) -> str:
        """What a waiting child's edit is replayed on: the best that replaced its parent, if
        its parent was the best when it was asked, else its parent."""
        return self.superseded(w.parent_id, w.best_at_start) or w.parent_id

    def has_adding_siblings(self, entry: Waiting) -> bool:
        """Whether another child on ``entry``'s base that adds something is still waiting or
        being stacked (it leaves the room once settled)."""
        base = self.base_of(entry)
        return any(w is not entry and w.adds and self.base_of(w) == base for w in self.children)

    def stackable_on(self, base: str, entry: Waiting) -> list[Waiting]:
        """``entry`` and the children not yet accepted whose edit adds something and is
        replayed on ``base``, in the order they were asked (not the order their answers came
        in); none a person rejected."""
        queue = sorted(
            [entry, *(w for w in self.children if w is not entry and not w.done)],
            key=lambda w: w.iteration,
        )
        return [
            w
            for w in queue
            if w.stackable and w.adds and not self.is_rejected(w) and self.base_of(w) == base
        ]

"""The failure ledger: which failures of which candidate were shown to which proposals.

A fully evaluated candidate's train rollouts are cached, so reading its failures costs
nothing. Failures with the same verifier feedback are one *kind* (one fix repairs them all).
The ledger remembers, per parent, which kinds proposals on it were shown this round, which
are *taken* (shown to a proposal still being written or accepted), and which were shown to
proposals that came back with nothing new. The batch sampler reads it to show proposals in
flight different kinds; the candidate selector and the stop conditions read what it says of
each frontier member (``exhausted``, ``retired``, ``nothing_to_fix_in``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from optimizer.gepa.context import SearchContext
from optimizer.gepa.edits import adds_words
from optimizer.gepa.parents import ancestors
from optimizer.runtime.rollouts.records import SeedResult
from proposer import Evaluation

__all__ = ["FailureLedger", "Shown", "evaluations_of", "failure_kind"]


def evaluations_of(results: Mapping[str, SeedResult]) -> tuple[Evaluation, ...]:
    """Rollout results as the proposer reads them; a seed set aside (never sent: it failed
    for two candidates before) is no failure of this one and is left out."""
    return tuple(
        Evaluation(
            seed=r.seed,
            reward=r.reward,
            output=r.record.output,
            feedback=r.record.feedback or (r.record.error or ""),
            trace=r.record.trace,
            status=r.record.status,
        )
        for r in results.values()
        if not r.set_aside
    )


def failure_kind(seed: str, feedback: str) -> str:
    """What a failure is about: its feedback (whitespace aside), or the seed when it has none.

    Only identical feedback groups: feedback that quotes the seed's own input or an id keeps
    each failure its own kind, and numbers are not masked (``expected 42`` and ``expected 41``
    are different failures).
    """
    text = " ".join(feedback.split())[:500]
    return f"feedback:{text}" if text else seed


@dataclass(frozen=True)
class Shown:
    """What one proposal on ``parent_id`` is shown, and the failures it marks as taken."""

    parent_id: str
    minibatch: list[str]  # scored for the proposal and its gate
    context: list[str]  # other failures, shown briefly; the gate's extension
    marks: list[str] = field(default_factory=list)  # failing seeds and kinds (``taken``)


class FailureLedger:
    """Which failures were shown to which proposals, and what came of them."""

    def __init__(self, ctx: SearchContext) -> None:
        self._ctx = ctx
        self.taken: Counter[str] = Counter()  # failing seeds and kinds shown to those in flight
        self.open_proposals = 0  # mutations between choosing what they are shown and their answer
        self.repeats: Counter[str] = Counter()  # proposals on a parent that repeated a text
        self._kinds: dict[str, dict[str, str]] = {}  # parent -> failing seed -> failure kind
        self._asked: dict[str, set[str]] = {}  # parent -> failure kinds shown to proposals on it
        # Parent -> kinds shown in proposals that came back unchanged or a duplicate.
        self._found_nothing: dict[str, set[str]] = {}
        self._unchanged: set[int] = set()  # iterations whose answer was unchanged or a duplicate
        self._later_round: set[str] = set()  # members in a round after their first

    @property
    def unproven(self) -> set[str]:
        """Children that only deleted text and did not prove it on train
        (:meth:`optimizer.gepa.train_stage.TrainStage.is_unproven_deletion`): never proposed
        on, and nothing built on them counts."""
        return self._ctx.deps.state.held_back

    # what the candidate selector and the stop conditions read

    def kinds_of(self, parent_id: str) -> Mapping[str, str]:
        """The parent's failing train seeds -> their kind (empty until learnt)."""
        return self._kinds.get(parent_id, {})

    def exhausted(self) -> set[str]:
        """Candidates each of whose failure kinds was already shown to a proposal on them.

        Another proposal on one would be shown what an earlier one was shown and mostly write
        the same edit again; while other frontier candidates have failures nobody was shown,
        the next proposal goes to one of them. An unproven deletion counts with them: its new
        failures are what it deleted from its parent.
        """
        covered = {cid for cid in self._kinds if self._is_covered(cid, self._asked)}
        return covered | self.unproven

    def is_unasked(self, cid: str) -> bool:
        """Whether no proposal on ``cid`` was shown any of its failures yet (this round)."""
        return not self._asked.get(cid)

    def _is_covered(self, cid: str, shown: Mapping[str, set[str]]) -> bool:
        """Whether ``cid`` has failures and every kind of them is in ``shown[cid]``."""
        kinds = set(self._kinds.get(cid, {}).values())
        return bool(kinds) and kinds <= shown.get(cid, set())

    def retired(self, members: set[str]) -> set[str]:
        """Frontier ``members`` not worth another round of proposals.

        Each failure kind of one was shown in a proposal that came back unchanged or a
        duplicate (a refused answer, cut off or writing outside the components, does not
        count: the model may still have something to say), or each was shown and another
        member has been built on it since (the edits its proposals made live on there). An
        unproven deletion is retired, and builds on nothing: what it deleted lives on nowhere.
        """
        built_on = self._built_on(members - self.unproven)
        return {cid for cid in members if self._is_retired(cid, built_on)}

    def _built_on(self, cids: set[str]) -> set[str]:
        """Every candidate one of ``cids`` descends from."""
        lineage = self._ctx.lineage()
        return {a for cid in cids for a in ancestors(lineage, cid)}

    def _is_retired(self, cid: str, built_on: set[str]) -> bool:
        """Whether ``cid`` is an unproven deletion or has nothing to fix, or each of its
        failure kinds was shown and it is in ``built_on``."""
        if cid in self.unproven or self.has_nothing_to_fix(cid):
            return True
        return cid in built_on and self._is_covered(cid, self._asked)

    def has_nothing_to_fix(self, cid: str) -> bool:
        """Whether each failure kind of ``cid`` was shown in a proposal on it that came back
        unchanged or a duplicate: the reflection model found nothing to fix there."""
        return self._is_covered(cid, self._found_nothing)

    def nothing_to_fix_in(self, tops: set[str]) -> bool:
        """Whether nothing was found to fix in ``tops`` (the best and the members tying it):
        each has nothing to fix, or had each failure kind shown and a candidate with nothing
        to fix was built on it.

        A child of the best that holds its fix but is worth no more on train (a tie, or below
        it: a student right only most of the time) is what answering the best's failures
        gives when nothing is left to fix; once that child found nothing more, the best's
        failures were answered and the answer was tried.
        """
        lineage = self._ctx.lineage()
        done = {
            cid
            for cid in self._found_nothing
            if self.has_nothing_to_fix(cid) and (cid in tops or ancestors(lineage, cid) & tops)
        }
        if not done:
            return False
        built_on = self._built_on(done)
        return all(self._is_retired(cid, built_on) for cid in tops)

    def later_round_kinds(self, parent_id: str) -> set[str]:
        """In a round after the parent's first, the kinds an answer found nothing in (they are
        shown last and not shared out); empty in a first round."""
        if parent_id not in self._later_round:
            return set()
        return self._found_nothing.get(parent_id, set())

    def new_round(self, members: set[str]) -> None:
        """Forget what was shown on ``members``: their failures may be shown once more.

        In a round after the first, only the kinds no answer found nothing in are shared out
        between proposals in flight, and they are shown first; a proposal left without a
        share is shown them all, so that what an erring answer spoilt (a deleted line, a
        rewrite) is asked again by more than one proposal.
        """
        for cid in members:
            self._asked.pop(cid, None)
            self._later_round.add(cid)

    # one proposal

    def take(
        self, parent_id: str, minibatch: list[str], context: list[str], *, accepting: bool
    ) -> Shown | None:
        """Mark what a proposal on ``parent_id`` is shown as taken; ``None`` when it should
        wait instead.

        It waits when every failure it could be shown is taken already and a child waits to
        be accepted (``accepting``): the new best is worth more than the same fix paid for
        again. Call under the context's lock; ``release`` gives the marks back.
        """
        marks = self.marks_for(parent_id, (*minibatch, *context))
        if marks and accepting and all(self.taken[s] > 0 for s in marks):
            return None
        self.taken.update(marks)
        self._asked.setdefault(parent_id, set()).update(marks)
        self.open_proposals += 1
        return Shown(parent_id, minibatch, context, marks)

    def release(self, iteration: int, shown: Shown) -> None:
        """The proposal ``shown`` was for is answered (stored, rejected or dropped)."""
        if iteration in self._unchanged:  # nothing new came of showing these failures on it
            self._unchanged.discard(iteration)
            self._found_nothing.setdefault(shown.parent_id, set()).update(shown.marks)
        self.taken.subtract(shown.marks)
        self.open_proposals -= 1

    def note_rejection(
        self, iteration: int, parents: tuple[str, ...], reason: str, repeats: str | None = None
    ) -> None:
        """A proposal made no candidate: a repeat counts against its parent.

        An unchanged text, or one a sibling already wrote, says the model saw the failures
        and found nothing new to write. A text that is a step back is not that
        (``_is_step_back``): the failures shown may still be fixed by another answer.
        """
        if len(parents) != 1:
            return
        parent = parents[0]
        if reason == "duplicate":
            self.repeats[parent] += 1
            if not self._is_step_back(parent, repeats):
                self._unchanged.add(iteration)
        elif reason == "unchanged":
            self._unchanged.add(iteration)

    def _is_step_back(self, parent: str, repeats: str | None) -> bool:
        """Whether the text an answer repeated is a step back from ``parent``: one of its
        ancestors (the answer dropped the parent's own edit), or a text that only deletes or
        garbles what the parent says (``adds_words``: an earlier answer's deleted rule,
        written again)."""
        candidates = self._ctx.deps.state.candidates
        if repeats is None or repeats not in candidates or parent not in candidates:
            return False
        if repeats in ancestors(self._ctx.lineage(), parent):
            return True
        return not adds_words(candidates[parent], candidates[repeats])

    async def learn_kinds(self, parent_id: str) -> None:
        """Group the parent's train failures by their verifier feedback (from the cache, free)."""
        d = self._ctx.deps
        scores = d.state.train.get(parent_id)
        if scores is None or parent_id in self._kinds:
            return
        failing = [s for s in d.state.train_seeds if scores.get(s, 1.0) < 1.0]
        found = await d.queue.cached(d.state.candidates[parent_id].components, failing)
        self._kinds[parent_id] = {
            seed: failure_kind(seed, r.record.feedback) for seed, r in found.items()
        }

    async def relearn_kinds(self, parent_id: str) -> None:
        """Group the parent's failures again: its train row grew (the baseline's rest is in).

        A parent each of whose kinds was shown stays so: its proposals took its failures as a
        whole, as they split them all when all are known. A proposal freed by the new kinds
        would otherwise be written on it while its siblings' stack is judged, out of step.
        """
        covered = self._is_covered(parent_id, self._asked)
        self._kinds.pop(parent_id, None)
        await self.learn_kinds(parent_id)
        if covered:
            self._asked[parent_id].update(self._kinds.get(parent_id, {}).values())

    def marks_for(self, parent_id: str, seeds: Sequence[str]) -> list[str]:
        """The parent's failing ``seeds`` and their kinds, once each: what ``taken`` counts."""
        d = self._ctx.deps
        scores, kind = d.state.train.get(parent_id, {}), self._kinds.get(parent_id, {})
        failing = [s for s in seeds if scores.get(s, 1.0) < 1.0]
        return list(dict.fromkeys([*failing, *(kind.get(s, s) for s in failing)]))

    async def brief(self, parent_id: str, seeds: Sequence[str]) -> tuple[Evaluation, ...]:
        """The parent's rollouts on ``seeds``, read from the cache (no rollout is paid)."""
        d = self._ctx.deps
        if parent_id not in d.state.train or not seeds:
            return ()
        return evaluations_of(await d.queue.cached(d.state.candidates[parent_id].components, seeds))

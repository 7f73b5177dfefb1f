"""What a proposal is shown: the parent's failures, grouped by kind, shared among writers.

A fully evaluated parent's train rollouts are cached, so choosing the failures a proposal
sees costs nothing. Failures with the same verifier feedback are one kind (one fix repairs
them all). Proposals written at the same time are shown different kinds, so they write
different fixes; a parent each of whose kinds was shown already is left for others, and the
search ends when every frontier member's failures were shown and nothing new came of them.
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

__all__ = [
    "CONTEXT_PER_MINIBATCH",
    "Shown",
    "Showing",
    "evaluations_of",
    "failure_kind",
    "one_of_each",
]

# Other failing train seeds shown briefly to the proposer, per minibatch seed (see the gate's
# extension in ``optimizer.gepa.gate``).
CONTEXT_PER_MINIBATCH = 2


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
    each failure its own kind, as before, and numbers are not masked (``expected 42`` and
    ``expected 41`` are different failures).
    """
    text = " ".join(feedback.split())[:500]
    return f"feedback:{text}" if text else seed


def one_of_each(seeds: Sequence[str], kind: Mapping[str, str]) -> list[str]:
    """``seeds`` reordered so that the first seed of every kind comes before any repeat."""
    firsts: list[str] = []
    repeats: list[str] = []
    seen: set[str] = set()
    for s in seeds:
        k = kind.get(s, s)
        (repeats if k in seen else firsts).append(s)
        seen.add(k)
    return firsts + repeats


@dataclass(frozen=True)
class Shown:
    """What one proposal on ``parent_id`` is shown, and the failures it marks as taken."""

    parent_id: str
    minibatch: list[str]  # scored for the proposal and its gate
    context: list[str]  # other failures, shown briefly; the gate's extension
    marks: list[str] = field(default_factory=list)  # failing seeds and kinds (``Showing.shown``)


class Showing:
    """Which failures were shown to which proposals, and which to show next."""

    def __init__(self, ctx: SearchContext) -> None:
        self._ctx = ctx
        self.shown: Counter[str] = Counter()  # failing seeds and kinds shown to those in flight
        self.writers = 0  # mutations between choosing what they are shown and their answer
        self.repeats: Counter[str] = Counter()  # proposals on a parent that repeated a text
        self._kinds: dict[str, dict[str, str]] = {}  # parent -> failing seed -> failure kind
        self._asked: dict[str, set[str]] = {}  # parent -> failure kinds shown to proposals on it
        # Parent -> kinds shown in proposals that came back unchanged or duplicate (``spent``).
        self._barren: dict[str, set[str]] = {}
        self._kept: set[int] = set()  # iterations whose answer was unchanged or a duplicate
        self._again: set[str] = set()  # members in a round after their first (``new_round``)

    @property
    def hollow(self) -> set[str]:
        """Children that only dropped text and did not prove it on train
        (``Acceptance.hollow``): never proposed on, and no candidate is built on by them."""
        return self._ctx.deps.state.hollow

    # choosing a parent

    def exhausted(self) -> set[str]:
        """Candidates each of whose failure kinds was already shown to a proposal on them.

        Another proposal on one would be shown what an earlier one was shown and mostly write
        the same edit again (or nothing new); while other frontier candidates have failures
        nobody was shown, the next proposal goes to one of them. A ``hollow`` child is
        counted with them: its new failures are what it dropped from its parent.
        """
        covered = {cid for cid in self._kinds if self._covered(cid, self._asked)}
        return covered | self.hollow

    def unasked(self, cid: str) -> bool:
        """No proposal on ``cid`` was shown any of its failures yet (this round)."""
        return not self._asked.get(cid)

    def _covered(self, cid: str, shown: Mapping[str, set[str]]) -> bool:
        """``cid`` has failures, and every kind of them is in ``shown[cid]``."""
        kinds = set(self._kinds.get(cid, {}).values())
        return bool(kinds) and kinds <= shown.get(cid, set())

    def spent(self, members: set[str]) -> set[str]:
        """Frontier ``members`` not worth another round of proposals.

        Each failure kind of one was shown in a proposal that came back unchanged or a
        duplicate (a refused answer, cut off or writing outside the components, does not
        count: the model may still have something to say), or each was shown and another
        member has been built on it since (the edits its proposals made live on there, so a
        new round on it would mostly write them again). A ``hollow`` member is spent, and
        builds on nothing: what it dropped lives on nowhere.
        """
        built_on = self._built_on(members - self.hollow)
        return {cid for cid in members if self._answered(cid, built_on)}

    def _built_on(self, cids: set[str]) -> set[str]:
        """Every candidate one of ``cids`` descends from."""
        lineage = self._ctx.lineage()
        return {a for cid in cids for a in ancestors(lineage, cid)}

    def _answered(self, cid: str, built_on: set[str]) -> bool:
        """``cid`` is ``hollow`` or ``barren``, or each of its failure kinds was shown and it
        is in ``built_on`` (the edits its proposals made live on in a descendant)."""
        if cid in self.hollow or self.barren(cid):
            return True
        return cid in built_on and self._covered(cid, self._asked)

    def barren(self, cid: str) -> bool:
        """Each failure kind of ``cid`` was shown in a proposal on it that came back
        unchanged or a duplicate: the reflection model found nothing to fix there."""
        return self._covered(cid, self._barren)

    def found_nothing(self, tops: set[str]) -> bool:
        """Nothing was found to fix in ``tops`` (the best and the members tying it): each is
        ``barren``, or had each failure kind shown and a barren candidate was built on it.

        A child of the best that holds its fix but is worth no more on train (a tie, or
        below it: a student right only most of the time) is what answering the best's
        failures gives when nothing is left to fix; once that child found nothing more, the
        best's failures were answered and the answer was tried.
        """
        lineage = self._ctx.lineage()
        barren = {
            cid
            for cid in self._barren
            if self.barren(cid) and (cid in tops or ancestors(lineage, cid) & tops)
        }
        if not barren:
            return False
        built_on = self._built_on(barren)
        return all(self._answered(cid, built_on) for cid in tops)

    def new_round(self, members: set[str]) -> None:
        """Forget what was shown on ``members``: their failures may be shown once more.

        In a round after the first, only the kinds no answer found nothing in are shared
        out between writers, and they are shown first (``seeds``); a writer left without a
        share is shown them all, so that what an erring answer spoilt (a dropped line, a
        rewrite) is asked again by more than one writer.
        """
        for cid in members:
            self._asked.pop(cid, None)
            self._again.add(cid)

    # one proposal

    def choose(
        self, parent_id: str, rotation: list[str], broken: Sequence[str], accepting: bool
    ) -> Shown | None:
        """What a proposal on ``parent_id`` is shown, marked as taken; ``None`` when it waits.

        It waits when every failure it could be shown is being fixed already and a child
        waits to be accepted (``accepting``): the new best is worth more than the same fix
        paid for again. Call under the context's lock; ``done`` releases the marks.
        """
        minibatch, context = self.seeds(parent_id, rotation, broken)
        marks = self.failure_kinds(parent_id, (*minibatch, *context))
        if marks and accepting and all(self.shown[s] > 0 for s in marks):
            return None
        self.shown.update(marks)
        self._asked.setdefault(parent_id, set()).update(marks)
        self.writers += 1
        return Shown(parent_id, minibatch, context, marks)

    def done(self, iteration: int, shown: Shown) -> None:
        """The proposal ``shown`` was for is answered (stored, rejected or dropped)."""
        if iteration in self._kept:  # nothing new came of showing these failures on it
            self._kept.discard(iteration)
            self._barren.setdefault(shown.parent_id, set()).update(shown.marks)
        self.shown.subtract(shown.marks)
        self.writers -= 1

    def rejected(
        self, iteration: int, parents: tuple[str, ...], reason: str, repeats: str | None = None
    ) -> None:
        """A proposal made no candidate: a repeat counts against its parent.

        An unchanged text, or one a sibling already wrote, says the model saw the failures
        and found nothing new to write. A text that is a step back is not that (``_regressed``):
        the failures shown may still be fixed by another answer.
        """
        if len(parents) != 1:
            return
        parent = parents[0]
        if reason == "duplicate":
            self.repeats[parent] += 1
            if not self._regressed(parent, repeats):
                self._kept.add(iteration)
        elif reason == "unchanged":
            self._kept.add(iteration)

    def _regressed(self, parent: str, repeats: str | None) -> bool:
        """Whether the text an answer repeated is a step back from ``parent``: one of its
        ancestors (the answer dropped the parent's own edit), or a text that only drops or
        garbles what the parent says (``adds_words``: an earlier answer's dropped rule,
        written again)."""
        candidates = self._ctx.deps.state.candidates
        if repeats is None or repeats not in candidates or parent not in candidates:
            return False
        if repeats in ancestors(self._ctx.lineage(), parent):
            return True
        return not adds_words(candidates[parent], candidates[repeats])

    def seeds(
        self, parent_id: str, rotation: list[str], broken: Sequence[str] = (), *, share: bool = True
    ) -> tuple[list[str], list[str]]:
        """The minibatch (half failures of the parent, half successes) and other failures.

        A fully evaluated parent's train scores are cached, so choosing seeds where it fails
        costs nothing and gives the reflection something to fix, while seeds it passes (taken
        in the rotation's order) catch regressions. Proposals written at the same time are
        shown different failures where there are enough, so they write different fixes; the
        brief failures are bounded so that the gate can extend onto all of them.
        """
        d = self._ctx.deps
        scores = d.state.train.get(parent_id)
        if scores is None:
            return rotation, []
        size = len(rotation)
        failing = [s for s in d.state.train_seeds if scores.get(s, 1.0) < 1.0]
        d.rng.shuffle(failing)
        kind = self._kinds.get(parent_id, {})
        shown = {s: (self.shown[kind.get(s, s)] > 0, self.shown[s] > 0) for s in failing}
        failing = one_of_each(failing, kind)  # stable sorts below: varied kinds come first
        failing.sort(key=lambda s: shown[s])  # unshown kinds, then unshown seeds of shown ones
        # In a later round, the kinds no answer found nothing in come first, and only they
        # are shared out (``new_round``).
        barren = self._barren.get(parent_id, set()) if parent_id in self._again else set()
        failing.sort(key=lambda s: kind.get(s, s) in barren)
        failing.sort(key=lambda s: s not in broken)  # a follow-up is shown what its edit broke
        all_failing = set(failing)
        if share:
            failing = self._share_of(failing, kind, shown, barren)
        fresh = [s for s in failing if not any(shown[s])]
        chosen = failing[: min(len(failing), -(-size // 2))]
        # A seed still being scored (``SearchContext.unscored``) is not known to pass.
        passing = [s for s in rotation if s not in all_failing and s not in self._ctx.unscored]
        rest = passing + [s for s in failing if s not in chosen]  # failing: fresh kinds first
        minibatch = chosen + rest[: size - len(chosen)]
        pool = [s for s in (fresh or failing) if s not in minibatch]
        return minibatch, pool[: CONTEXT_PER_MINIBATCH * size]

    def _share_of(
        self,
        failing: list[str],
        kind: Mapping[str, str],
        shown: Mapping[str, tuple[bool, bool]],
        barren: set[str],
    ) -> list[str]:
        """The failures of this writer's share of the kinds nobody in flight was shown.

        Proposals written at the same time split the unshown kinds between them (``failing``
        lists them first): with ten kinds and four writers, 3 + 3 + 2 + 2, so that each wave
        of proposals fixes as many different things as it has writers, and the stack of their
        edits (``Acceptance``) gains one fix per writer. A writer that finds every kind taken
        is shown all of them, as one writer alone is. The seeds a follow-up's parent broke
        come first in ``failing``, so the writers building on it share those first. Kinds
        found ``barren`` before (a later round) are not shared out: once the others are
        taken, a writer is shown all, the others first, and asks again what an erring
        answer spoilt.
        """
        workers = self._ctx.in_flight
        taken = {kind.get(s, s): shown[s][0] for s in failing}
        unshown = [k for k, is_taken in taken.items() if not is_taken and k not in barren]
        if workers <= 1 or not unshown:
            return failing
        free = max(1, workers - self.writers)
        mine = set(unshown[: -(-len(unshown) // free)])  # what a follow-up broke comes first
        return [s for s in failing if kind.get(s, s) in mine]

    async def learn_kinds(self, parent_id: str) -> None:
        """Group the parent's train failures by their verifier feedback (from the cache, free).

        Failures with the same feedback (whitespace aside) are one kind: the same fix
        repairs them all. Proposals written at the same time are shown different kinds, so
        they write different fixes rather than one fix twice.
        """
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

        A parent each of whose kinds was shown stays so: its writers took its failures as a
        whole, as they split them all when all are known. A writer freed by the new kinds
        would otherwise write on it while its writers' stack is judged, out of step with
        them (the early-parent trials of docs/race.md).
        """
        covered = self._covered(parent_id, self._asked)
        self._kinds.pop(parent_id, None)
        await self.learn_kinds(parent_id)
        if covered:
            self._asked[parent_id].update(self._kinds.get(parent_id, {}).values())

    def failure_kinds(self, parent_id: str, seeds: Sequence[str]) -> list[str]:
        """The parent's failing ``seeds`` and their kinds, once each: what ``shown`` marks."""
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

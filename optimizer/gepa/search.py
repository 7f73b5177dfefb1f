"""The GEPA search loop: sample a parent, reflect, gate on a minibatch, keep the frontier.

``proposals_in_flight`` workers share one queue, one budget and one frontier; every
read-modify-write of the shared state happens under one lock, so with one worker the loop
is strictly sequential and deterministic for a given seed. Each iteration's proposal is
logged in the run state, so a resumed run replays earlier iterations from the workspace
(cached rollouts, stored candidates) and pays for nothing twice.

What keeps parallel proposals as good as sequential ones:

- **Rebasing.** A proposal written on the best candidate while another worker replaced that
  best is replayed on the new best by a three-way text merge (``optimizer.gepa.merge3``), with no
  extra reflection call, and gated against the new best; only a conflicting merge keeps the
  stale parent. Improvements then stack on one line instead of scattering over siblings.
- **Merges across branches only.** Two frontier candidates are merged only when neither
  descends from the other; a clean text merge on their common ancestor needs no reflection
  call; a merge (like any child) must beat its best parent strictly, never tie it.
- **Evidence at no rollout cost.** The proposer sees the parent's minibatch in detail and its
  other failures from the full train evaluation it already paid for.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from optimizer.gepa.gate import gate_total, passes_gate, ties
from optimizer.gepa.merge3 import merge_components
from optimizer.gepa.parents import (
    ancestors,
    common_ancestor,
    complementary_pairs,
    sample_parent,
)
from optimizer.runtime.deps import SearchDeps, score_on_train
from optimizer.runtime.dispatch import SeedResult
from optimizer.runtime.minibatch import MinibatchSampler
from proposer import (
    CandidateView,
    Evaluation,
    MergeRequest,
    Proposal,
    ProposalRequest,
)
from proposer.guards import unified_diff
from schemas import (
    BudgetExhausted,
    CandidateRecord,
    ModelUsage,
    Origin,
    ProposerError,
    candidate_id_for,
    content_hash,
)

__all__ = ["GepaSearch", "evaluations_of"]

MERGE_MINIBATCH = 6
# Other failing train seeds shown briefly to the proposer, per minibatch seed (see _gate).
CONTEXT_PER_MINIBATCH = 2
CONFLICT, REDUNDANT = "conflict", "redundant"  # why a rebase did not apply
# A text written again after it failed its gate is gated again this many times at most.
MAX_REGATES = 2
# Proposals asked for within this many seconds of each other count as written together: a
# child waits for its siblings (at most GATHER_SHARE of its own writing time, GATHER_MAX_S)
# so that they are stacked and gated once (``_gather``).
TOGETHER_S = 0.5
GATHER_SHARE = 0.25
GATHER_MAX_S = 2.0
CONVERGED = (
    "nothing left to show: every failure of every frontier candidate was shown to the "
    "reflection model, which proposed nothing new for the candidates not built on since"
)


def evaluations_of(results: Mapping[str, SeedResult]) -> tuple[Evaluation, ...]:
    """Rollout results as the proposer reads them."""
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
    )


def _rewards(results: Mapping[str, SeedResult]) -> dict[str, float | None]:
    return {s: r.reward for s, r in results.items()}


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


def _scored(results: Mapping[str, SeedResult]) -> dict[str, float]:
    return {s: r.reward for s, r in results.items() if r.reward is not None}


@dataclass
class _Waiting:
    """A child that passed its proposal and waits its turn to be gated and accepted."""

    iteration: int
    child: CandidateRecord
    parent_id: str
    best_at_start: str | None
    minibatch: list[str]
    context: list[str]
    done: bool = False  # accepted as part of a stack (``_stack``)
    stackable: bool = True  # not yet in a stack that failed its gate


class GepaSearch:
    """Runs iterations until a budget is reached or the search goes idle."""

    def __init__(self, deps: SearchDeps) -> None:
        self._d = deps
        self._lock = asyncio.Lock()
        self._accepting = asyncio.Lock()
        self._sampler = MinibatchSampler(
            deps.state.train_seeds, deps.config.minibatch_size, deps.rng
        )
        self._iteration = 0
        self._merge_due = False
        self._merges = 0
        self._idle = 0
        self._best_mean: float | None = None  # the best train mean when last improved
        self._since_better = 0  # proposals written since then (``_count_toward_patience``)
        self._stop: str | None = None
        self._stopped = asyncio.Event()  # set with _stop: pending reflection calls give up
        self._gating: set[str] = set()  # candidates being gated or scored right now
        self._gates: Counter[str] = Counter()  # gates each candidate went through
        self._shown: Counter[str] = Counter()  # failing seeds and kinds shown to those in flight
        self._writers = 0  # mutations between choosing their evidence and their answer
        self._repeats: Counter[str] = Counter()  # proposals on a parent that repeated a text
        self._kinds: dict[str, dict[str, str]] = {}  # parent -> failing seed -> failure kind
        self._asked: dict[str, set[str]] = {}  # parent -> failure kinds shown to proposals on it
        # Parent -> kinds shown in proposals that came back unchanged or duplicate (``_spent``).
        self._barren: dict[str, set[str]] = {}
        self._kept: set[int] = set()  # iterations whose answer was unchanged or a duplicate
        self._pending: set[asyncio.Task[None]] = set()  # children being accepted
        # Accepted children that broke seeds their parent passed without beating it -> (the
        # seeds it broke, writers still to build on it, shown those first) (``_follow_up``).
        self._follow: dict[str, tuple[list[str], int]] = {}
        self._waiting: list[_Waiting] = []  # children queued for ``_accepting``
        self._writing: dict[int, float] = {}  # iteration -> when its reflection call began
        self._spans: dict[int, tuple[float, float]] = {}  # iteration -> call began, ended
        self._written = asyncio.Condition()  # notified when a reflection call ends

    @property
    def stop_reason(self) -> str | None:
        """Why the search ended (budget, idle)."""
        return self._stop

    async def run(self) -> str:
        """Search until stopped; returns the reason."""
        workers = [
            asyncio.create_task(self._worker())
            for _ in range(max(1, self._d.config.proposals_in_flight or 1))
        ]
        best = self._d.state.best()
        self._best_mean = best[1] if best else None
        try:
            await asyncio.gather(*workers)
            while self._pending:  # children still being accepted in the background
                await asyncio.gather(*list(self._pending))
        finally:
            for task in [*workers, *self._pending]:
                task.cancel()
        return self._stop or "stopped"

    async def _worker(self) -> None:
        while self._stop is None:
            try:
                made = await self._step()
                if made is None:  # it only waited
                    continue
                self._count_toward_patience()
                if not made and self._pending:
                    continue  # repeated a fix still being accepted: the search is not stuck
                self._idle = 0 if made else self._idle + 1
                if self._idle >= self._d.config.max_idle_iterations:
                    self._halt(
                        f"no new candidate in {self._idle} iterations in a row "
                        "(proposals rejected, duplicates, or parents already perfect)"
                    )
            except BudgetExhausted as exc:
                self._halt(str(exc))

    def _count_toward_patience(self) -> None:
        """One more proposal written; stop after ``patience`` in a row found nothing better.

        Counted when a proposal is written, reset when the best train mean rises (a child
        accepted in the background counts for the proposals written meanwhile). A search
        whose best has stopped moving would otherwise spend the rest of its budget on
        reflections and gates that change nothing.
        """
        best = self._d.state.best()
        mean = best[1] if best else None
        if mean is not None and (self._best_mean is None or mean > self._best_mean):
            self._best_mean, self._since_better = mean, 0
            return
        self._since_better += 1
        patience = self._d.config.patience
        if patience and self._since_better >= patience:
            self._halt(
                f"no better candidate in the last {self._since_better} proposals "
                f"(--patience {patience}; the best train mean stayed {self._best_mean:.3f})"
            )

    def _halt(self, reason: str) -> None:
        """Stop the search (the first reason wins); reflections still pending are dropped."""
        if self._stop is None:
            self._stop = reason
        self._stopped.set()

    def _exhausted(self) -> set[str]:
        """Candidates each of whose failure kinds was already shown to a proposal on them.

        Another proposal on one would be shown what an earlier one was shown and mostly write
        the same edit again (or nothing new); while other frontier candidates have failures
        nobody was shown, the next proposal goes to one of them.
        """
        return {cid for cid in self._kinds if self._covered(cid, self._asked)}

    def _covered(self, cid: str, shown: Mapping[str, set[str]]) -> bool:
        """``cid`` has failures, and every kind of them is in ``shown[cid]``."""
        kinds = set(self._kinds.get(cid, {}).values())
        return bool(kinds) and kinds <= shown.get(cid, set())

    def _spent(self, members: set[str]) -> set[str]:
        """Frontier ``members`` not worth another round of proposals.

        Each failure kind of one was shown in a proposal that came back unchanged or a
        duplicate (a refused answer, cut off or writing outside the components, does not
        count: the model may still have something to say), or each was shown and another
        member has been built on it since (the edits its proposals made live on there, so a
        new round on it would mostly write them again).
        """
        lineage = self._parents()
        built_on = {a for cid in members for a in ancestors(lineage, cid)}
        return {
            cid
            for cid in members
            if self._covered(cid, self._barren)
            or (cid in built_on and self._covered(cid, self._asked))
        }

    async def _news(self) -> None:
        """Wait until a proposal being written ends, a child is settled or the search stops."""

        async def written() -> None:
            async with self._written:
                await self._written.wait()

        waiters = [asyncio.create_task(written()), asyncio.create_task(self._stopped.wait())]
        try:
            await asyncio.wait([*waiters, *self._pending], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waiters:
                task.cancel()

    def _parents(self) -> dict[str, Sequence[str]]:
        return {cid: r.parents for cid, r in self._d.state.candidates.items()}

    def _view(self, candidate_id: str) -> CandidateView:
        record = self._d.state.candidates[candidate_id]
        wins = self._d.state.frontier.wins().get(candidate_id, ())
        diff = next(iter(record.diffs.values()), "")
        return CandidateView(
            candidate_id=candidate_id,
            components=dict(record.components),
            parents=tuple(record.parents),
            scores=dict(self._d.state.train.get(candidate_id, {})),
            wins=wins,
            diff_from_parent=diff,
        )

    def _regatable(self, candidate_id: str) -> bool:
        """A child that failed its gate and is not being evaluated: it may be tried again.

        Proposers often write the same text again from another minibatch; a child rejected on
        one unlucky minibatch then gets a second gate, where its seeds already scored are
        cached (free), instead of being thrown away as a duplicate.
        """
        s = self._d.state
        return (
            self._gates[candidate_id] <= MAX_REGATES
            and candidate_id in s.minibatch
            and candidate_id not in s.train
            and candidate_id not in s.partial
            and candidate_id not in s.promising
            and candidate_id not in self._gating
        )

    def _settled_hashes(self) -> frozenset[str]:
        """Content hashes a proposal must not repeat (every candidate but re-gatable ones)."""
        return frozenset(
            c.content_hash
            for cid, c in self._d.state.candidates.items()
            if not self._regatable(cid)
        )

    def _best_id(self) -> str | None:
        best = self._d.state.best()
        return best[0] if best else None

    async def _step(self) -> bool | None:
        """One iteration; True when it produced a new candidate, None when it only waited."""
        self._d.budget.check_search()
        parent_id: str | None = None
        async with self._lock:
            self._iteration += 1
            iteration = self._iteration
            pairs = complementary_pairs(self._d.state.frontier, self._parents())
            merging = (
                self._merge_due
                and self._d.config.use_merge
                and self._merges < self._d.config.max_merges
                and bool(pairs)
            )
            if merging:
                self._merge_due = False
                self._merges += 1
                pair = pairs[self._d.rng.randrange(len(pairs))]
            elif self._follow:
                parent_id = next(iter(self._follow))
                broken, left = self._follow.pop(parent_id)
                if left > 1:  # writers still to have their turn on it
                    self._follow[parent_id] = (broken, left - 1)
            else:
                parent_id, broken = self._unshown_parent(), []
            minibatch = self._sampler.next()
            best_at_start = self._best_id()
        if merging:
            return await self._merge(iteration, pair)
        if parent_id is None:  # nothing new to show yet: wait for news (at once if halted)
            await self._news()
            return None
        return await self._mutate(iteration, parent_id, minibatch, best_at_start, broken)

    def _unshown_parent(self) -> str | None:
        """A frontier member to propose on (``sample_parent``), one with failures nobody was
        shown first; ``None`` when every member's failures were all shown.

        Then what is being written or accepted may bring new failures (the caller waits for
        it); with nothing in flight the search halts when every member is ``_spent``, else
        a new round starts on the others (their failures may be shown once more).
        """
        members, exhausted = set(self._d.state.frontier.wins()), self._exhausted()
        if members <= exhausted:
            if self._writers or self._pending:
                return None
            spent = self._spent(members)
            if members <= spent:
                self._halt(CONVERGED)
                return None
            for cid in members - spent:
                self._asked.pop(cid, None)
            exhausted = self._exhausted()
        return sample_parent(
            self._d.state.frontier, self._d.rng, self._repeats, exhausted=exhausted
        )

    # mutations

    async def _mutate(
        self,
        iteration: int,
        parent_id: str,
        rotation: list[str],
        best_at_start: str | None,
        broken: Sequence[str] = (),
    ) -> bool | None:
        await self._learn_kinds(parent_id)
        async with self._lock:
            minibatch, context = self._evidence_seeds(parent_id, rotation, broken)
            shown = self._failure_kinds(parent_id, (*minibatch, *context))
            if shown and self._pending and all(self._shown[s] > 0 for s in shown):
                # Every failure it could be shown is being fixed already and a child waits to
                # be accepted: wait for the new best rather than pay for the same fix again.
                busy = True
            else:
                busy = False
                self._shown.update(shown)
                self._asked.setdefault(parent_id, set()).update(shown)
                self._writers += 1
        if busy:
            await asyncio.wait(set(self._pending), return_when=asyncio.FIRST_COMPLETED)
            return None
        try:
            return await self._reflect_and_gate(
                iteration, parent_id, minibatch, context, best_at_start
            )
        finally:
            if iteration in self._kept:  # nothing new came of showing these failures on it
                self._kept.discard(iteration)
                self._barren.setdefault(parent_id, set()).update(shown)
            self._shown.subtract(shown)
            self._writers -= 1
            async with self._written:
                self._written.notify_all()

    async def _reflect_and_gate(
        self,
        iteration: int,
        parent_id: str,
        minibatch: list[str],
        context: list[str],
        best_at_start: str | None,
    ) -> bool:
        d = self._d
        parent = d.state.candidates[parent_id]
        await d.events.emit(
            "iteration", {"iteration": iteration, "parent": parent_id, "minibatch": minibatch}
        )
        parent_mb: Mapping[str, SeedResult] | None = await d.queue.evaluate(
            parent_id, parent.components, minibatch
        )
        assert parent_mb is not None
        if all(r.reward is not None and r.reward >= 1.0 for r in parent_mb.values()):
            await d.events.emit(
                "skipped", {"iteration": iteration, "reason": "parent is perfect on the minibatch"}
            )
            return False
        names = [c.name for c in d.components]
        target = (names[iteration % len(names)],) if len(names) > 1 else tuple(names)
        request = ProposalRequest(
            program_description=d.description,
            components=d.components,
            parent=self._view(parent_id),
            evaluations=evaluations_of(parent_mb),
            frontier=tuple(self._view(c) for c in d.state.frontier.members() if c != parent_id),
            target_components=target,
            existing_hashes=self._settled_hashes(),
            train_evaluations=await self._context(parent_id, context),
        )
        try:
            child = await self._proposal(
                iteration, "mutation", (parent_id,), lambda: d.proposer.propose(request)
            )
            if child is None:
                return False
            entry = _Waiting(iteration, child, parent_id, best_at_start, minibatch, context)
            self._waiting.append(entry)  # queued before it stops counting as being written
        finally:
            span = self._spans.pop(iteration, None)
            await self._written_out(iteration)
        accept = self._gate_and_accept(entry, parent_mb, span)
        if (d.config.proposals_in_flight or 1) <= 1:
            await accept
            return True
        # In flight: the child waits its turn to be gated and accepted in the background while
        # this worker writes its next proposal; every failure it was shown stays marked (its
        # edit may fix any of them), so the next proposals are shown other failures.
        targets = self._failure_kinds(parent_id, (*minibatch, *context))
        self._shown.update(targets)
        task = asyncio.create_task(self._settle(accept, targets))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return True

    async def _settle(self, accept: Awaitable[None], shown: Sequence[str]) -> None:
        try:
            await accept
        except BudgetExhausted as exc:
            self._halt(str(exc))
        finally:
            self._shown.subtract(shown)

    async def _gate_and_accept(
        self,
        entry: _Waiting,
        parent_mb: Mapping[str, SeedResult] | None,
        span: tuple[float, float] | None = None,
    ) -> None:
        """Gate a child once against what it would be stacked on; if it passes, score it on train.

        Children are gated and accepted one at a time. Those waiting for the same best are
        first tried together as one stacked candidate (``_stack``). Otherwise, one written on
        the best while a sibling replaced that best is first rebased onto the new best (a
        three-way text merge) and gated against it, on the failures its proposal targeted that
        the new best still has, so parallel improvements stack; one whose edit the best
        already has is dropped; one whose edit conflicts stays on its own branch and is gated
        against its parent.
        """
        try:
            if span is not None:
                await self._gather(*span)
            async with self._accepting:
                if entry.done or await self._stack(entry):
                    return
                await self._accept_one(entry, parent_mb)
        finally:
            self._waiting.remove(entry)

    async def _written_out(self, iteration: int) -> None:
        """``iteration``'s proposal is no longer being written (queued, dropped or failed)."""
        if self._writing.pop(iteration, None) is not None:
            async with self._written:
                self._written.notify_all()

    async def _gather(self, began: float, ended: float) -> None:
        """Wait a little for the proposals asked for together with the one asked at ``began``.

        Calls sent to a hosted model at the same moment answer within a moment of each other;
        the first child to arrive would otherwise be gated and scored alone, and its siblings
        stacked only after that (a gate and a train evaluation later).
        """
        deadline = ended + min(GATHER_MAX_S, GATHER_SHARE * (ended - began))

        def siblings_writing() -> bool:
            return any(abs(t - began) <= TOGETHER_S for t in self._writing.values())

        async with self._written:
            while siblings_writing() and (left := deadline - time.monotonic()) > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._written.wait(), left)

    async def _accept_one(
        self, entry: _Waiting, parent_mb: Mapping[str, SeedResult] | None
    ) -> None:
        d = self._d
        iteration, child, parent_id = entry.iteration, entry.child, entry.parent_id
        minibatch, context = entry.minibatch, entry.context
        candidate, against, seeds, extension = child, parent_id, minibatch, context
        if (onto := self._superseded(parent_id, entry.best_at_start)) is not None:
            rebased = await self._rebase(iteration, 0, child, parent_id, onto)
            if rebased == REDUNDANT:
                return
            if isinstance(rebased, CandidateRecord):
                parent_scores = d.state.train.get(parent_id, {})
                targets = [s for s in (*minibatch, *context) if parent_scores.get(s, 1.0) < 1.0]
                candidate, against, parent_mb = rebased, onto, None
                seeds, extension = await self._seeds_for(onto, targets, minibatch)
        if await self._gate(
            iteration, candidate, against, seeds, parent_mb=parent_mb, extension=extension
        ):
            await self._full_train(candidate.candidate_id, against)

    async def _stack(self, entry: _Waiting) -> bool:
        """Accept ``entry`` together with the other children waiting on the same base.

        Children written at the same time on one parent each add their own fix; their base
        is that parent, or the best that replaced it when the parent was the best
        (``_base_of``). Replayed one after another on the base (three-way merges, no
        reflection call), they make one candidate that is scored on train once
        (``_scored_better``), instead of a gate and a train evaluation per child in turn.
        One that is worse than its base leaves each child to its own gate; one that only
        trades seeds with it is built on next (``_follow_up``).
        """
        d = self._d
        if not entry.stackable:
            return False
        base = self._base_of(entry)
        merged, used = self._replay_on(base, entry)
        if len(used) < 2 or entry not in used:
            return False
        ids = [w.child.candidate_id for w in used]
        record = await self._derive(
            f"{entry.iteration}s",
            merged,
            (base, *ids),
            f"stacked: the edits of {', '.join(ids)} (written at the same time) replayed on "
            f"{base}. " + " | ".join(w.child.rationale for w in used),
            "merge",
            entry.iteration,
        )
        if record is None:
            return False
        await d.events.emit(
            "stack",
            {
                "iteration": entry.iteration,
                "candidate_id": record.candidate_id,
                "children": ids,
                "onto": base,
            },
        )
        if await self._scored_better(entry.iteration, record, base):
            for w in used:
                w.done = True
            await self._full_train(record.candidate_id, base)
            return True
        if not self._sideways(record.candidate_id, base):
            for w in used:  # some edit hurt: each child is gated on its own
                w.stackable = False
            return False
        # As good as its base, winning other seeds: the edits trade seeds (look-alike rules).
        # Gating each child alone would pay a gate and a train evaluation per child to find
        # the same; the next proposals build on the stack, shown the seeds it broke.
        for w in used:
            w.done = True
        self._follow_up(record.candidate_id, base)
        return True

    def _base_of(self, w: _Waiting) -> str:
        """What a waiting child's edit is replayed on: the best that replaced its parent, if
        its parent was the best when it was asked, else its parent."""
        return self._superseded(w.parent_id, w.best_at_start) or w.parent_id

    def _sideways(self, candidate_id: str, base: str) -> bool:
        """Whether a fully scored candidate ties ``base``'s train mean and wins other seeds."""
        s = self._d.state
        mean, base_mean = s.train_mean(candidate_id), s.train_mean(base)
        return (
            mean is not None
            and base_mean is not None
            and abs(mean - base_mean) < 1e-9
            and candidate_id in s.frontier.members()
        )

    async def _scored_better(self, iteration: int, record: CandidateRecord, base: str) -> bool:
        """Score a stack on every train seed at once; whether it beats ``base`` there.

        A stack carries several writers' fixes and nearly always earns its train evaluation,
        so it skips the minibatch gate: the full evaluation takes as many rounds of rollouts
        as a gate and the rest of the train split would (fewer when the gate would extend),
        and it decides on every seed, which a noisy student needs (a few seeds can hide
        several fixes). What happens to one that is no better: ``_stack``.
        """
        d, cid = self._d, record.candidate_id
        self._gating.add(cid)
        self._gates[cid] += 1
        try:
            await score_on_train(d, self._lock, cid)
        finally:
            self._gating.discard(cid)
        scores, parent = d.state.train.get(cid, {}), d.state.train.get(base, {})
        seeds = [s for s in d.state.train_seeds if s in scores and s in parent]
        accepted = passes_gate([parent], scores, seeds)
        await d.events.emit(
            "gate",
            {
                "iteration": iteration,
                "candidate_id": cid,
                "parent": base,
                "parent_score": gate_total(parent, seeds),
                "child_score": gate_total(scores, seeds),
                "minibatch": seeds,
                "accepted": accepted,
            },
        )
        if accepted:
            async with self._lock:
                d.state.promising.add(cid)
                d.refresh_reserve()
        return accepted

    def _replay_on(self, base: str, entry: _Waiting) -> tuple[dict[str, str], list[_Waiting]]:
        """The waiting children's edits replayed on ``base`` (``entry`` first), and who added one.

        A child counts when its base (``_base_of``) is ``base`` and its three-way merge
        applies cleanly and changes something.
        """
        d = self._d
        queue = [entry, *(w for w in self._waiting if w is not entry and not w.done)]
        merged, used = dict(d.state.candidates[base].components), []
        for w in queue:
            if not w.stackable or self._base_of(w) != base:
                continue
            parent = d.state.candidates[w.parent_id].components
            m = merge_components(parent, merged, w.child.components)
            if m is not None and m != merged:
                merged = m
                used.append(w)
        return merged, used

    def _evidence_seeds(
        self, parent_id: str, rotation: list[str], broken: Sequence[str] = (), *, share: bool = True
    ) -> tuple[list[str], list[str]]:
        """The minibatch (half failures of the parent, half successes) and other failures.

        A fully evaluated parent's train scores are cached, so choosing seeds where it fails
        costs nothing and gives the reflection something to fix, while seeds it passes (taken
        in the rotation's order) catch regressions. Proposals written at the same time are
        shown different failures where there are enough, so they write different fixes; the
        brief failures are bounded so that the gate can extend onto all of them (``_gate``).
        """
        scores = self._d.state.train.get(parent_id)
        if scores is None:
            return rotation, []
        size = len(rotation)
        failing = [s for s in self._d.state.train_seeds if scores.get(s, 1.0) < 1.0]
        self._d.rng.shuffle(failing)
        kind = self._kinds.get(parent_id, {})
        shown = {s: (self._shown[kind.get(s, s)] > 0, self._shown[s] > 0) for s in failing}
        failing = one_of_each(failing, kind)  # stable sorts below: varied kinds come first
        failing.sort(key=lambda s: shown[s])  # unshown kinds, then unshown seeds of shown ones
        failing.sort(key=lambda s: s not in broken)  # a follow-up is shown what its edit broke
        all_failing = set(failing)
        if share:
            failing = self._share_of(failing, kind, shown)
        fresh = [s for s in failing if not any(shown[s])]
        chosen = failing[: min(len(failing), -(-size // 2))]
        passing = [s for s in rotation if s not in all_failing]
        rest = passing + [s for s in failing if s not in chosen]  # failing: fresh kinds first
        minibatch = chosen + rest[: size - len(chosen)]
        pool = [s for s in (fresh or failing) if s not in minibatch]
        return minibatch, pool[: CONTEXT_PER_MINIBATCH * size]

    def _share_of(
        self,
        failing: list[str],
        kind: Mapping[str, str],
        shown: Mapping[str, tuple[bool, bool]],
    ) -> list[str]:
        """The failures of this writer's share of the kinds nobody in flight was shown.

        Proposals written at the same time split the unshown kinds between them (``failing``
        lists them first): with ten kinds and four writers, 3 + 3 + 2 + 2, so that each wave
        of proposals fixes as many different things as it has writers, and the stack of their
        edits (``_stack``) gains one fix per writer. A writer that finds every kind taken is
        shown all of them, as one writer alone is. The seeds a follow-up's parent broke
        come first in ``failing``, so the writers building on it share those first.
        """
        workers = self._d.config.proposals_in_flight or 1
        taken = {kind.get(s, s): shown[s][0] for s in failing}
        unshown = [k for k, is_taken in taken.items() if not is_taken]  # in ``failing``'s order
        if workers <= 1 or not unshown:
            return failing
        free = max(1, workers - self._writers)
        mine = set(unshown[: -(-len(unshown) // free)])  # what a follow-up broke comes first
        return [s for s in failing if kind.get(s, s) in mine]

    async def _learn_kinds(self, parent_id: str) -> None:
        """Group the parent's train failures by their verifier feedback (from the cache, free).

        Failures with the same feedback (whitespace aside) are one kind: the same fix
        repairs them all. Proposals written at the same time are shown different kinds, so
        they write different fixes rather than one fix twice.
        """
        d = self._d
        scores = d.state.train.get(parent_id)
        if scores is None or parent_id in self._kinds:
            return
        failing = [s for s in d.state.train_seeds if scores.get(s, 1.0) < 1.0]
        found = await d.queue.cached(d.state.candidates[parent_id].components, failing)
        self._kinds[parent_id] = {
            seed: failure_kind(seed, r.record.feedback) for seed, r in found.items()
        }

    def _failure_kinds(self, parent_id: str, seeds: Sequence[str]) -> list[str]:
        """The parent's failing ``seeds`` and their kinds, once each: what ``_shown`` marks."""
        scores, kind = self._d.state.train.get(parent_id, {}), self._kinds.get(parent_id, {})
        failing = [s for s in seeds if scores.get(s, 1.0) < 1.0]
        return list(dict.fromkeys([*failing, *(kind.get(s, s) for s in failing)]))

    async def _seeds_for(
        self, parent_id: str, targets: Sequence[str], rotation: list[str]
    ) -> tuple[list[str], list[str]]:
        """Gate seeds for an edit (meant to fix ``targets``) rebased onto ``parent_id``.

        Targets that ``parent_id`` still fails show whether the edit still fixes something;
        seeds it passes catch regressions; its other failures are the extension. (The first
        minibatch may be solved entirely by the new parent, which would leave the gate
        nothing to show.)
        """
        async with self._lock:
            minibatch, context = self._evidence_seeds(parent_id, rotation, share=False)
            scores = self._d.state.train.get(parent_id, {})
            still = [s for s in targets if scores.get(s, 1.0) < 1.0]
            if not still:
                return minibatch, context
            size = len(rotation)
            passing = [s for s in minibatch + rotation if scores.get(s, 0.0) >= 1.0]
            chosen = still[: -(-size // 2)]
            seeds = list(dict.fromkeys(chosen + passing))[:size]
            extension = [s for s in dict.fromkeys(still + context) if s not in seeds]
            return seeds, extension[: CONTEXT_PER_MINIBATCH * size]

    async def _context(self, parent_id: str, seeds: Sequence[str]) -> tuple[Evaluation, ...]:
        """The parent's rollouts on ``seeds``, read from the cache (no rollout is paid)."""
        d = self._d
        if parent_id not in d.state.train or not seeds:
            return ()
        return evaluations_of(await d.queue.cached(d.state.candidates[parent_id].components, seeds))

    def _superseded(self, parent_id: str, best_at_start: str | None) -> str | None:
        """The new best when the parent was the best at the start and has been replaced."""
        now = self._best_id()
        if parent_id == best_at_start and now is not None and now != parent_id:
            return now
        return None

    async def _rebase(
        self, iteration: int, attempt: int, child: CandidateRecord, parent_id: str, onto: str
    ) -> CandidateRecord | str:
        """``child``'s edit replayed on ``onto`` (a clean three-way merge), or why not.

        ``CONFLICT``: the edits overlap, the child stays on its own branch. ``REDUNDANT``:
        the best already has the child's edit (or the rebased text exists), so the child
        would only pay a train evaluation to learn what is known.
        """
        d = self._d
        parent, best = d.state.candidates[parent_id], d.state.candidates[onto]
        merged = merge_components(parent.components, best.components, child.components)
        if merged is None or merged == dict(best.components):
            why = CONFLICT if merged is None else REDUNDANT
            await d.events.emit(
                "rebase",
                {
                    "iteration": iteration,
                    "candidate_id": child.candidate_id,
                    "onto": onto,
                    "applied": False,
                    "reason": "conflict" if merged is None else "already in the best",
                },
            )
            return why
        rationale = (
            f"rebased: the edit of {child.candidate_id} (written on {parent_id}) replayed on "
            f"{onto}, the best candidate when it was done. {child.rationale}"
        )
        record = await self._derive(
            f"{iteration}r{attempt}",
            merged,
            (onto, child.candidate_id),
            rationale,
            "merge",
            iteration,
        )
        await d.events.emit(
            "rebase",
            {
                "iteration": iteration,
                "candidate_id": child.candidate_id,
                "onto": onto,
                "applied": record is not None,
                "rebased": record.candidate_id if record else None,
            },
        )
        return record if record is not None else REDUNDANT

    # the gate

    async def _gate(
        self,
        iteration: int,
        child: CandidateRecord,
        parent: str | tuple[str, str],
        seeds: list[str],
        *,
        parent_mb: Mapping[str, SeedResult] | None = None,
        extension: Sequence[str] = (),
    ) -> bool:
        """Score ``child`` on ``seeds`` against its parent(s); whether it beat them strictly.

        A child that scores exactly like its parent on every minibatch seed may have fixed a
        failure the proposer was shown outside the minibatch: it is then scored on those
        ``extension`` seeds too, a minibatch at a time, until it is better or worse overall.
        Its rollouts are reused by its full train evaluation if it passes.
        """
        d = self._d
        parent_ids = (parent,) if isinstance(parent, str) else parent
        results = [
            parent_mb
            if parent_mb is not None
            else await d.queue.evaluate(p, d.state.candidates[p].components, seeds)
            for p in parent_ids
        ]
        if all(r.reward is not None and r.reward >= 1.0 for res in results for r in res.values()):
            await d.events.emit(
                "skipped",
                {
                    "iteration": iteration,
                    "candidate_id": child.candidate_id,
                    "reason": "the parent already solves every seed of this minibatch",
                },
            )
            async with self._lock:  # never scored: it may be gated again when written again
                d.state.minibatch.setdefault(child.candidate_id, {})
            return False
        self._gating.add(child.candidate_id)
        self._gates[child.candidate_id] += 1
        try:
            first = await d.queue.evaluate(child.candidate_id, child.components, seeds)
            seeds, child_res = await self._extend(
                child, parent_ids, results, first, seeds, extension
            )
            accepted = passes_gate([_rewards(r) for r in results], _rewards(child_res), seeds)
            await self._record_gate(
                iteration, child, parent_ids, results, child_res, seeds, accepted
            )
        finally:
            self._gating.discard(child.candidate_id)
        return accepted

    async def _extend(
        self,
        child: CandidateRecord,
        parent_ids: tuple[str, ...],
        results: list[Mapping[str, SeedResult]],
        child_res: Mapping[str, SeedResult],
        seeds: list[str],
        extension: Sequence[str],
    ) -> tuple[list[str], Mapping[str, SeedResult]]:
        """While the child ties its parent seed for seed, score both on more ``extension`` seeds.

        Updates ``results`` (the parents' rollouts) in place; the parents' are cached when
        they were fully evaluated, so only the child's rollouts are paid.
        """
        d, seeds = self._d, list(seeds)
        step = max(1, len(seeds))
        for at in range(0, len(extension), step):
            parents = [_rewards(r) for r in results]
            if passes_gate(parents, _rewards(child_res), seeds) or not ties(
                parents, _rewards(child_res), seeds
            ):
                break
            chunk = [s for s in extension[at : at + step] if s not in seeds]
            for i, p in enumerate(parent_ids):
                more = await d.queue.evaluate(p, d.state.candidates[p].components, chunk)
                results[i] = {**results[i], **more}
            more = await d.queue.evaluate(child.candidate_id, child.components, chunk)
            child_res = {**child_res, **more}
            seeds += chunk
        return seeds, child_res

    async def _record_gate(
        self,
        iteration: int,
        child: CandidateRecord,
        parent_ids: tuple[str, ...],
        results: list[Mapping[str, SeedResult]],
        child_res: Mapping[str, SeedResult],
        seeds: list[str],
        accepted: bool,
    ) -> None:
        d = self._d
        await d.events.emit(
            "gate",
            {
                "iteration": iteration,
                "candidate_id": child.candidate_id,
                "parent": parent_ids[0] if len(parent_ids) == 1 else list(parent_ids),
                "parent_score": max(gate_total(_rewards(r), seeds) for r in results),
                "child_score": gate_total(_rewards(child_res), seeds),
                "minibatch": seeds,
                "accepted": accepted,
            },
        )
        async with self._lock:
            d.state.minibatch.setdefault(child.candidate_id, {}).update(_scored(child_res))
            if accepted:
                d.state.promising.add(child.candidate_id)
                d.refresh_reserve()

    # merges

    async def _merge(self, iteration: int, pair: tuple[str, str]) -> bool:
        d = self._d
        ranked = [cid for cid, _ in d.state.ranked(list(pair))]
        a, b = (d.state.candidates[c] for c in (ranked if len(ranked) == 2 else pair))
        wins = d.state.frontier.wins()
        differing = sorted(set(wins.get(a.candidate_id, ())) ^ set(wins.get(b.candidate_id, ())))
        seeds = differing[:MERGE_MINIBATCH] or self._sampler.next()
        await d.events.emit(
            "iteration",
            {"iteration": iteration, "merge": [a.candidate_id, b.candidate_id], "minibatch": seeds},
        )
        child = await self._text_merge(iteration, a, b)
        if child is None:
            res_a = await d.queue.evaluate(a.candidate_id, a.components, seeds)
            res_b = await d.queue.evaluate(b.candidate_id, b.components, seeds)
            request = MergeRequest(
                program_description=d.description,
                components=d.components,
                a=self._view(a.candidate_id),
                b=self._view(b.candidate_id),
                evaluations_a=evaluations_of(res_a),
                evaluations_b=evaluations_of(res_b),
                existing_hashes=frozenset(c.content_hash for c in d.state.candidates.values()),
            )
            pair = (a.candidate_id, b.candidate_id)
            try:
                child = await self._proposal(
                    iteration, "merge", pair, lambda: d.proposer.merge(request)
                )
            finally:
                self._spans.pop(iteration, None)
                await self._written_out(iteration)
        if child is None:
            return False
        if await self._gate(iteration, child, (a.candidate_id, b.candidate_id), seeds):
            async with self._accepting:
                await self._full_train(child.candidate_id, (a.candidate_id, b.candidate_id))
        return True

    async def _text_merge(
        self, iteration: int, a: CandidateRecord, b: CandidateRecord
    ) -> CandidateRecord | None:
        """``a`` and ``b`` merged on their common ancestor with no reflection call, if clean."""
        d = self._d
        base = common_ancestor(self._parents(), a.candidate_id, b.candidate_id, d.state.order())
        if base is None:
            return None
        merged = merge_components(d.state.candidates[base].components, a.components, b.components)
        if merged is None or merged in (dict(a.components), dict(b.components)):
            return None
        rationale = (
            f"three-way text merge of {a.candidate_id} and {b.candidate_id} on their common "
            f"ancestor {base}: both edits kept, no reflection call"
        )
        return await self._derive(
            f"{iteration}m", merged, (a.candidate_id, b.candidate_id), rationale, "merge", iteration
        )

    # candidates

    async def _derive(
        self,
        key: str,
        components: Mapping[str, str],
        parents: tuple[str, ...],
        rationale: str,
        origin: Origin,
        iteration: int,
    ) -> CandidateRecord | None:
        """Store a candidate made without the proposer (replayed by ``key`` on resume)."""
        d = self._d
        if key in d.state.proposals:
            stored = d.state.proposals[key]
            return d.state.candidates.get(stored) if stored else None
        chash = content_hash(dict(components))
        if any(c.content_hash == chash for c in d.state.candidates.values()):
            d.state.proposals[key] = None
            await d.checkpoint()
            return None
        diffs = {
            p: unified_diff(d.state.candidates[p].components, dict(components), p) for p in parents
        }
        record = CandidateRecord(
            run_id=d.run_id,
            candidate_id=candidate_id_for(dict(components)),
            content_hash=chash,
            components=dict(components),
            parents=list(parents),
            origin=origin,
            rationale=rationale,
            diffs=diffs,
            proposer_usage=ModelUsage(),
        )
        return await self._store(key, record, iteration, "".join(diffs.values()), "text-merge")

    async def _proposal(
        self,
        iteration: int,
        origin: Origin,
        parents: tuple[str, ...],
        call: Callable[[], Awaitable[Proposal]],
    ) -> CandidateRecord | None:
        """Replay the iteration's stored proposal or ask the proposer; store the candidate."""
        d = self._d
        key = str(iteration)
        if key in d.state.proposals:
            stored = d.state.proposals[key]
            return d.state.candidates.get(stored) if stored else None
        writing = await self._write(iteration, call)
        if writing is None:
            return None
        try:
            proposal = writing.result()
        except ProposerError as exc:
            d.budget.proposer_cost_usd = d.proposer_cost()
            reason, message = getattr(exc, "reason", "error"), str(exc)[:500]
            await self._reject(key, iteration, parents, reason, message)
            return None
        d.budget.proposer_cost_usd = d.proposer_cost()
        return await self._child_of(key, iteration, origin, parents, proposal)

    async def _write(
        self, iteration: int, call: Callable[[], Awaitable[Proposal]]
    ) -> asyncio.Future[Proposal] | None:
        """The proposer's answer, or None when the search stopped first (it could change nothing)."""
        began = self._writing[iteration] = time.monotonic()
        writing = asyncio.ensure_future(call())
        halted = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait({writing, halted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            halted.cancel()
            self._spans[iteration] = (began, time.monotonic())
        if not writing.done():
            writing.cancel()
            with contextlib.suppress(asyncio.CancelledError, ProposerError):
                await writing
            return None
        return writing

    async def _reject(
        self, key: str, iteration: int, parents: tuple[str, ...], reason: str, message: str
    ) -> None:
        """Log the iteration as one that made no candidate (a resumed run replays that too)."""
        d = self._d
        d.state.proposals[key] = None
        if reason == "duplicate" and len(parents) == 1:
            self._repeats[parents[0]] += 1
        if reason in ("duplicate", "unchanged") and len(parents) == 1:
            self._kept.add(iteration)  # the model saw the failures and wrote nothing new
        await d.events.emit(
            "proposal_rejected",
            {
                "iteration": iteration,
                "parents": list(parents),
                "reason": reason,
                "message": message,
            },
        )
        await d.checkpoint()

    async def _child_of(
        self,
        key: str,
        iteration: int,
        origin: Origin,
        parents: tuple[str, ...],
        proposal: Proposal,
    ) -> CandidateRecord | None:
        """The proposal as a stored candidate: a re-gate of a text seen before, or a new one."""
        d = self._d
        components = {**d.state.candidates[parents[0]].components, **proposal.components}
        again = next(
            (
                cid
                for cid, c in d.state.candidates.items()
                if c.content_hash == content_hash(components) and self._regatable(cid)
            ),
            None,
        )
        if again is not None and origin == "mutation":
            d.state.proposals[key] = again
            await d.checkpoint()
            await d.events.emit(
                "regate", {"iteration": iteration, "candidate_id": again, "parent": parents[0]}
            )
            return d.state.candidates[again]
        if any(c.content_hash == content_hash(components) for c in d.state.candidates.values()):
            # Another worker stored the same text while this one was written.
            message = "another proposal written at the same time has the same text"
            await self._reject(key, iteration, parents, "duplicate", message)
            return None
        record = CandidateRecord(
            run_id=d.run_id,
            candidate_id=candidate_id_for(components),
            content_hash=content_hash(components),
            components=components,
            parents=list(parents),
            origin=origin,
            rationale=d.workspace.scrubber.text(proposal.rationale),  # a model may quote its key
            diffs=dict(proposal.diffs) or {parents[0]: proposal.diff},
            proposer_usage=proposal.usage,
        )
        return await self._store(key, record, iteration, proposal.diff, proposal.mode)

    async def _store(
        self, key: str, record: CandidateRecord, iteration: int, diff: str, mode: str
    ) -> CandidateRecord:
        d = self._d
        await d.workspace.add_candidate(record)
        async with self._lock:
            d.state.add(record)
            d.state.proposals[key] = record.candidate_id
        await d.checkpoint()
        await d.events.emit(
            "candidate",
            {
                "candidate_id": record.candidate_id,
                "parents": record.parents,
                "origin": record.origin,
                "iteration": iteration,
                "rationale": record.rationale[:1000],
                "diff": diff[:4000],
                "mode": mode,
            },
        )
        return d.state.candidates[record.candidate_id]

    async def _full_train(self, candidate_id: str, against: str | tuple[str, str]) -> None:
        d = self._d
        if candidate_id not in d.state.train:
            await score_on_train(d, self._lock, candidate_id)
        self._merge_due = True
        if isinstance(against, str):
            self._follow_up(candidate_id, against)
        scores = d.state.train.get(candidate_id, {})
        if len(scores) == len(d.state.train_seeds) and min(scores.values(), default=0.0) >= 1.0:
            self._halt(f"{candidate_id} scores full marks on every train seed")

    def _follow_up(self, candidate_id: str, parent_id: str) -> None:
        """Queue a sideways child (it fixed seeds and broke others, no better on the mean).

        Fixes interact: a new rule can win its own seeds and take over others' (two
        look-alike cases). The child is kept on the frontier for the seeds it wins, but only
        a next edit on it (one that tells the cases apart) pays off, and sampling parents by
        seeds won rarely picks a child that wins few. So the next free worker writes that edit,
        shown the seeds the child broke first.
        """
        s = self._d.state
        child, parent = s.train.get(candidate_id, {}), s.train.get(parent_id, {})
        broken = [x for x in s.train_seeds if x in child and child[x] < parent.get(x, 0.0)]
        mean, parent_mean = s.train_mean(candidate_id), s.train_mean(parent_id)
        sideways = mean is not None and parent_mean is not None and mean <= parent_mean
        if broken and sideways and candidate_id in s.frontier.members():
            # Every writer free meanwhile builds on it, each shown its share of what it broke.
            self._follow[candidate_id] = (broken, self._d.config.proposals_in_flight or 1)

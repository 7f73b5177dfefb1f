"""Stacking: children written at the same time replayed on one base, judged once on train.

A wave of proposals on one parent each adds its own fix. Replayed one after another on their
base (three-way merges, no reflection call), their edits make one candidate that is scored
on every train seed once, instead of a gate and a train evaluation per child in turn. Real
reflection models err: one answer of a wave may drop or garble a rule the text had. A stack
that broke seeds its base solved is stacked again without the children to blame
(``Stacking._blame``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from optimizer.gepa.candidates import Candidates
from optimizer.gepa.context import SearchContext
from optimizer.gepa.followups import LateralFollowUps
from optimizer.gepa.gate import MinibatchGate
from optimizer.gepa.merge3 import merge_components
from optimizer.gepa.train_stage import TrainStage
from optimizer.gepa.waiting import Waiting, WaitingRoom
from schemas import CandidateRecord, content_hash

__all__ = ["Stacking"]


def _removes(parent: CandidateRecord, child: CandidateRecord) -> bool:
    """Whether ``child``'s edit removed or rewrote a (non-blank) line of ``parent``'s text."""
    for name, text in parent.components.items():
        kept = {line.strip() for line in child.components.get(name, "").splitlines()}
        if any(line.strip() and line.strip() not in kept for line in text.splitlines()):
            return True
    return False


class Stacking:
    """Stacks the children waiting on one base (the acceptance pipeline asks, in its turn)."""

    def __init__(
        self,
        ctx: SearchContext,
        room: WaitingRoom,
        gate: MinibatchGate,
        candidates: Candidates,
        train: TrainStage,
        followups: LateralFollowUps,
    ) -> None:
        self._ctx = ctx
        self._room = room
        self._gate = gate
        self._candidates = candidates
        self._train = train
        self._followups = followups

    async def stack(self, entry: Waiting) -> bool:
        """Accept ``entry`` together with the other children waiting on the same base.

        Children written at the same time on one parent each add their own fix; their base
        is that parent, or the best that replaced it when the parent was the best
        (``WaitingRoom.base_of``). Replayed one after another on the base (three-way merges, no
        reflection call), they make one candidate that is scored on train once
        (``MinibatchGate.on_train``), instead of a gate and a train evaluation per child in turn.
        A stack that broke seeds its base solved is stacked again without the children to
        blame (``_blame``). One that is worse than its base leaves each child to its own
        gate; one that only trades seeds with it is built on next (``LateralFollowUps``).
        """
        if not entry.stackable:
            return False
        base = self._room.base_of(entry)
        merged, used, conflicted = self._replay_on(base, entry)
        if len(used) < 2:
            return False
        iteration = used[0].iteration  # the first asked: the same whoever's turn it is
        record = await self._stacked(iteration, "s", base, merged, used)
        if record is None:
            return False
        if culprits := await self._blame_early(iteration, record, base, used):
            for w in used:
                w.done = True
            await self._without(iteration, base, used, culprits, base, conflicted)
            return entry.done
        better = await self._gate.on_train(iteration, record, base)
        culprits = await self._blame(iteration, record, base, used)
        if culprits:
            for w in used:
                w.done = True
            if better:
                await self._train.full_train(record.candidate_id, base)
            against = record.candidate_id if better else base
            await self._without(iteration, base, used, culprits, against, conflicted)
            return entry.done
        if better:
            for w in used:
                w.done = True
            await self._train.full_train(record.candidate_id, base)
            return entry.done
        if not self._train.is_lateral(record.candidate_id, base):
            for w in used:  # some edit hurt: each child is gated on its own
                w.stackable = False
            return False
        # As good as its base, winning other seeds: the edits trade seeds (look-alike rules).
        # Gating each child alone would pay a gate and a train evaluation per child to find
        # the same; the next proposals build on the stack, shown the seeds it broke.
        for w in used:
            w.done = True
        self._followups.offer(record.candidate_id, base)
        await self._train.verdict(record.candidate_id, base, lateral=True)
        return entry.done

    async def _stacked(
        self, iteration: int, suffix: str, base: str, merged: dict[str, str], used: list[Waiting]
    ) -> CandidateRecord | None:
        """The stack of ``used`` on ``base`` stored as a candidate, and announced.

        A stack whose text exists already (one child's edit held the others': a model that
        fixed two things where a sibling fixed one) is that candidate, judged as the stack.
        """
        ids = [w.child.candidate_id for w in used]
        same = self._candidates.with_hash(content_hash(merged))
        record = self._ctx.deps.state.candidates[same] if same else None
        if record is None:
            record = await self._candidates.derive(
                f"{iteration}{suffix}",
                merged,
                (base, *ids),
                f"stacked: the edits of {', '.join(ids)} (written at the same time) replayed "
                f"on {base}. " + " | ".join(w.child.rationale for w in used),
                "merge",
                iteration,
            )
        if record is not None:
            await self._ctx.deps.events.emit(
                "stack",
                {
                    "iteration": iteration,
                    "candidate_id": record.candidate_id,
                    "children": ids,
                    "onto": base,
                },
            )
        return record

    async def _blame(
        self, iteration: int, stack: CandidateRecord, base: str, used: list[Waiting]
    ) -> list[Waiting]:
        """The children of a stack that broke seeds its base solved.

        Suspects are the children whose edit removed or rewrote a line of their parent: an
        edit that only adds text can break seeds too (a rule for one of two look-alike
        cases), but that trade is what a follow-up builds on. Each suspect's edit alone on
        the base, and the lines it added alone, are scored on the broken seeds (one round of
        rollouts); those whose edit breaks one while the lines they added break none are to
        blame (``_culprits``). A stack with no suspects costs nothing more.
        """
        d = self._ctx.deps
        mine, theirs = d.state.train.get(stack.candidate_id, {}), d.state.train.get(base, {})
        broken = [s for s in d.state.train_seeds if s in mine and mine[s] < theirs.get(s, 0.0)]
        suspects = self._suspects(used)
        if not broken or not suspects:
            return []
        return await self._culprits(iteration, stack, base, suspects, broken)

    async def _blame_early(
        self, iteration: int, stack: CandidateRecord, base: str, used: list[Waiting]
    ) -> list[Waiting]:
        """The children to blame, found before the stack's train evaluation ends.

        A stack with suspects and other children is scored first on the seeds its base
        scores on, the only ones it can break (``MinibatchGate.breaks``). When a round shows broken
        seeds and a suspect alone breaks one, the stack is dropped there, unscored on the
        rest of train, and the others are restacked and judged against the base: the rounds
        of rollouts the rest would take are not paid while the proposals wait. Otherwise the
        stack's evaluation goes on (a stack of suspects only is judged whole, as it may
        still beat its base).
        """
        suspects = self._suspects(used)
        if not suspects or len(suspects) == len(used):  # nothing would be left to restack
            return []
        broken = await self._gate.breaks(stack, base)
        if not broken:
            return []
        return await self._culprits(iteration, stack, base, suspects, broken, early=True)

    def _suspects(self, used: list[Waiting]) -> list[Waiting]:
        """The children whose edit removed or rewrote a line of their parent."""
        candidates = self._ctx.deps.state.candidates
        return [w for w in used if _removes(candidates[w.parent_id], w.child)]

    async def _culprits(
        self,
        iteration: int,
        stack: CandidateRecord,
        base: str,
        suspects: list[Waiting],
        broken: list[str],
        *,
        early: bool = False,
    ) -> list[Waiting]:
        """The suspects whose edit alone on ``base`` breaks one of the ``broken`` seeds, when
        what it added alone does not (the same round of rollouts scores both).

        A suspect's edit both removed or reworded lines and added some. When what it added,
        kept without the rest of its edit, breaks those seeds too, the break is a trade its
        new text makes (a rule for one of two look-alike cases, which a rewrite states as a
        kind answer would), not damage: it is not to blame, and the stack goes on to be
        judged whole, as a stack of additions that trades seeds is.
        """
        d = self._ctx.deps
        theirs = d.state.train.get(base, {})
        singles = [await self._alone(iteration, k, w, base) for k, w in enumerate(suspects)]
        tried = [(w, rec) for w, rec in zip(suspects, singles, strict=True) if rec is not None]
        added = [await self._added_alone(iteration, k, w, base) for k, (w, _) in enumerate(tried)]
        scored = [rec for _, rec in tried] + [rec for rec in added if rec is not None]
        results = await asyncio.gather(
            *(d.queue.evaluate(rec.candidate_id, rec.components, broken) for rec in scored)
        )
        by_id = {rec.candidate_id: res for rec, res in zip(scored, results, strict=True)}

        def broke(rec: CandidateRecord | None) -> list[str]:
            res = by_id.get(rec.candidate_id, {}) if rec is not None else {}
            return [s for s, r in res.items() if r.reward is not None and r.reward < theirs[s]]

        culprits = [
            w for (w, rec), own in zip(tried, added, strict=True) if broke(rec) and not broke(own)
        ]
        await d.events.emit(
            "blame",
            {
                "iteration": iteration,
                "candidate_id": stack.candidate_id,
                "onto": base,
                "broken": broken,
                "suspects": [w.child.candidate_id for w in suspects],
                "culprits": [w.child.candidate_id for w in culprits],
                "early": early,  # before the stack's train evaluation ended
                # For each suspect: the broken seeds its edit alone broke, and those the
                # lines it added alone broke (a trade when they match, not damage).
                "edit_broke": {w.child.candidate_id: broke(rec) for w, rec in tried},
                "added_broke": {
                    w.child.candidate_id: broke(own)
                    for (w, _), own in zip(tried, added, strict=True)
                },
            },
        )
        return culprits

    async def _alone(self, iteration: int, k: int, w: Waiting, base: str) -> CandidateRecord | None:
        """``w``'s edit alone on ``base``: the child itself when it was written on ``base``."""
        if w.parent_id == base:
            return w.child
        single = self._on_base(w.parent_id, w.child.components, base)
        if single is None:
            return None
        rationale = (
            f"the edit of {w.child.candidate_id} alone on {base}, to find what a stack broke"
        )
        return await self._candidates.derive(
            f"{iteration}b{k}", single, (base, w.child.candidate_id), rationale, "merge", iteration
        )

    async def _added_alone(
        self, iteration: int, k: int, w: Waiting, base: str
    ) -> CandidateRecord | None:
        """The lines ``w``'s edit added (those its parent lacks), appended to its parent's text
        and replayed on ``base``: its edit without what it removed or reworded."""
        d = self._ctx.deps
        parent = d.state.candidates[w.parent_id]
        additions: dict[str, str] = {}
        for name, text in parent.components.items():
            had = {line.strip() for line in text.splitlines()}
            new = [
                line
                for line in w.child.components.get(name, "").splitlines()
                if line.strip() and line.strip() not in had
            ]
            additions[name] = "\n".join([text.rstrip("\n"), *new]) if new else text
        single = self._on_base(w.parent_id, additions, base)
        if single is None:
            return None
        same = self._candidates.with_hash(content_hash(single))
        if same:
            return d.state.candidates[same]
        rationale = (
            f"the lines {w.child.candidate_id} added, alone on {base}, to tell a trade from a break"
        )
        return await self._candidates.derive(
            f"{iteration}a{k}", single, (base, w.child.candidate_id), rationale, "merge", iteration
        )

    def _on_base(
        self, parent_id: str, edited: Mapping[str, str], base: str
    ) -> dict[str, str] | None:
        """The edit from ``parent_id``'s text to ``edited`` replayed on ``base`` (a three-way
        merge); ``None`` when it conflicts or changes nothing there."""
        candidates = self._ctx.deps.state.candidates
        onto = candidates[base].components
        merged = merge_components(candidates[parent_id].components, onto, edited)
        return None if merged is None or merged == dict(onto) else merged

    async def _without(
        self,
        iteration: int,
        base: str,
        used: list[Waiting],
        culprits: list[Waiting],
        against: str,
        conflicted: Sequence[Waiting] = (),
    ) -> None:
        """Stack the children not to blame on ``base`` again; accept it if it beats ``against``.

        The ``conflicted`` siblings were left out of the first stack because their edit
        conflicted with one stacked before them: without the culprits they may apply (a
        culprit that reworded the text conflicts with edits of the lines it moved), and then
        they join the restack rather than be gated alone later, out of step with the wave.
        One child left on its own parent is that child itself, judged the same way.
        """
        state = self._ctx.deps.state
        again = [*(w for w in used if w not in culprits), *(w for w in conflicted if not w.done)]
        merged, rest, _ = self._replay(base, again)
        if merged == dict(state.candidates[base].components):
            return
        for w in rest:
            w.done = True
        record = await self._stacked(iteration, "t", base, merged, rest)
        if record is not None and await self._gate.on_train(iteration, record, against):
            await self._train.full_train(record.candidate_id, against)

    def _replay_on(
        self, base: str, entry: Waiting
    ) -> tuple[dict[str, str], list[Waiting], list[Waiting]]:
        """The waiting children's edits replayed on ``base`` in the order they were asked
        (not the order their answers came in), who added one, and whose edit conflicted
        with those replayed before it.

        A child counts when its base (``WaitingRoom.base_of``) is ``base``, its edit adds something
        (``adds_words``) and its three-way merge applies cleanly and changes something.
        """
        return self._replay(base, self._room.stackable_on(base, entry))

    def _replay(
        self, base: str, children: list[Waiting]
    ) -> tuple[dict[str, str], list[Waiting], list[Waiting]]:
        """``children``'s edits replayed in turn on ``base`` (three-way merges): the text,
        whose edit applied and changed it, and whose conflicted with those before it."""
        candidates = self._ctx.deps.state.candidates
        merged, applied, conflicted = dict(candidates[base].components), [], []
        for w in children:
            m = merge_components(candidates[w.parent_id].components, merged, w.child.components)
            if m is None:
                conflicted.append(w)
            elif m != merged:
                merged = m
                applied.append(w)
        return merged, applied, conflicted

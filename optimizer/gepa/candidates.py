"""Candidates: a proposal written, rejected or stored; a candidate derived without the proposer.

Every iteration's outcome is logged in GEPA's iteration log (:mod:`optimizer.gepa.state`)
under a key (the iteration, or the iteration and a suffix for a stack, a rebase or a text
merge), so a resumed run replays it from the workspace instead of asking the reflection
model again. A reflection call still
pending when the search stops is dropped: it could change nothing; while the run is paused,
none starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping

from optimizer.gepa.context import SearchContext
from optimizer.gepa.gate import MinibatchGate
from optimizer.gepa.ledger import FailureLedger
from optimizer.gepa.stopping import Stopping
from proposer import Proposal
from proposer.guards import unified_diff
from schemas import (
    CandidateRecord,
    ModelUsage,
    Origin,
    ProposalRejected,
    ProposerError,
    candidate_id_for,
    content_hash,
)

__all__ = ["Candidates"]


class Candidates:
    """Writes proposals through the proposer and stores what they make."""

    def __init__(
        self, ctx: SearchContext, gate: MinibatchGate, ledger: FailureLedger, stopping: Stopping
    ) -> None:
        self._ctx = ctx
        self._gate = gate
        self._ledger = ledger
        self._stopping = stopping
        self.writing: dict[int, float] = {}  # iteration -> when its reflection call began
        self._spans: dict[int, tuple[float, float]] = {}  # iteration -> call began, ended
        self._storing: set[str] = set()  # content hashes of children being stored

    def settled_hashes(self) -> frozenset[str]:
        """Content hashes a proposal must not repeat (every candidate but re-gatable ones)."""
        return frozenset(
            c.content_hash
            for cid, c in self._ctx.deps.state.candidates.items()
            if not self._gate.is_regatable(cid)
        )

    async def written_out(self, iteration: int) -> tuple[float, float] | None:
        """``iteration``'s proposal is no longer being written (queued, dropped or failed).

        Returns when its reflection call began and ended (``None`` when none was made).
        """
        span = self._spans.pop(iteration, None)
        if self.writing.pop(iteration, None) is not None:
            await self._ctx.notify_written()
        return span

    async def proposal(
        self,
        iteration: int,
        origin: Origin,
        parents: tuple[str, ...],
        call: Callable[[], Awaitable[Proposal]],
    ) -> CandidateRecord | None:
        """Replay the iteration's stored proposal or ask the proposer; store the candidate."""
        d = self._ctx.deps
        key = str(iteration)
        if key in self._ctx.gepa.proposals:
            stored = self._ctx.gepa.proposals[key]
            return d.state.candidates.get(stored) if stored else None
        writing = await self._write(iteration, call)
        if writing is None:
            return None
        try:
            proposal = writing.result()
        except ProposerError as exc:
            d.budget.proposer_cost_usd = d.proposer_cost()
            repeated = exc.content_hash if isinstance(exc, ProposalRejected) else None
            await self.reject(key, iteration, parents, exc.reason, str(exc)[:500], repeated)
            return None
        d.budget.proposer_cost_usd = d.proposer_cost()
        return await self._child_of(key, iteration, origin, parents, proposal)

    async def _write(
        self, iteration: int, call: Callable[[], Awaitable[Proposal]]
    ) -> asyncio.Future[Proposal] | None:
        """The proposer's answer, or None when the search stopped first (it could change nothing).

        A paused run starts no reflection call: the call waits here until it is resumed."""
        await self._ctx.deps.steering.hold()
        if self._ctx.stop is not None:
            return None
        began = self.writing[iteration] = time.monotonic()
        writing = asyncio.ensure_future(call())
        halted = asyncio.ensure_future(self._ctx.stopped.wait())
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

    async def reject(
        self,
        key: str,
        iteration: int,
        parents: tuple[str, ...],
        reason: str,
        message: str,
        repeated: str | None = None,
    ) -> None:
        """Log the iteration as one that made no candidate (a resumed run replays that too).

        ``repeated`` is the content hash of the existing text a duplicate repeats, if known.
        """
        d = self._ctx.deps
        self._ctx.gepa.proposals[key] = None
        self._ledger.note_rejection(iteration, parents, reason, self.with_hash(repeated))
        await d.events.emit(
            "proposal_rejected",
            {
                "iteration": iteration,
                "parents": list(parents),
                "reason": reason,
                "message": message,
            },
        )
        await self._ctx.checkpoint()

    def with_hash(self, chash: str | None) -> str | None:
        """The candidate whose text has content hash ``chash``."""
        if chash is None:
            return None
        items = self._ctx.deps.state.candidates.items()
        return next((cid for cid, c in items if c.content_hash == chash), None)

    async def _child_of(
        self,
        key: str,
        iteration: int,
        origin: Origin,
        parents: tuple[str, ...],
        proposal: Proposal,
    ) -> CandidateRecord | None:
        """The proposal as a stored candidate: a re-gate of a text seen before, or a new one."""
        d = self._ctx.deps
        components = {**d.state.candidates[parents[0]].components, **proposal.components}
        again = next(
            (
                cid
                for cid, c in d.state.candidates.items()
                if c.content_hash == content_hash(components) and self._gate.is_regatable(cid)
            ),
            None,
        )
        if again is not None and origin == "mutation":
            self._ctx.gepa.proposals[key] = again
            await self._ctx.checkpoint()
            await d.events.emit(
                "regate", {"iteration": iteration, "candidate_id": again, "parent": parents[0]}
            )
            return d.state.candidates[again]
        chash = content_hash(components)
        if chash in self._storing or any(
            c.content_hash == chash for c in d.state.candidates.values()
        ):
            # Another worker stored the same text while this one was written.
            message = "another proposal written at the same time has the same text"
            await self.reject(key, iteration, parents, "duplicate", message, chash)
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
        self._storing.add(chash)  # before the first await: a twin answer is a duplicate
        try:
            stored = await self._store(key, record, iteration, proposal.diff, proposal.mode)
        finally:
            self._storing.discard(chash)
        self._stopping.candidate_made()  # one the reflection model wrote (not a stack's)
        return stored

    async def derive(
        self,
        key: str,
        components: Mapping[str, str],
        parents: tuple[str, ...],
        rationale: str,
        origin: Origin,
        iteration: int,
    ) -> CandidateRecord | None:
        """Store a candidate made without the proposer (replayed by ``key`` on resume)."""
        d = self._ctx.deps
        if key in self._ctx.gepa.proposals:
            stored = self._ctx.gepa.proposals[key]
            return d.state.candidates.get(stored) if stored else None
        chash = content_hash(dict(components))
        if any(c.content_hash == chash for c in d.state.candidates.values()):
            self._ctx.gepa.proposals[key] = None
            await self._ctx.checkpoint()
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

    async def _store(
        self, key: str, record: CandidateRecord, iteration: int, diff: str, mode: str
    ) -> CandidateRecord:
        d = self._ctx.deps
        await d.workspace.add_candidate(record)
        async with self._ctx.lock:
            d.state.add(record)
            self._ctx.gepa.proposals[key] = record.candidate_id
        await self._ctx.checkpoint()
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

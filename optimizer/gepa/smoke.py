"""A budget too small to search still writes one proposal: a smoke test of the pipeline.

The proposal is stored (origin ``mutation``, event ``candidate`` with ``evaluated: false``)
but never scored, so it costs no rollout; a rejected one is reported in the stop reason.
"""

from __future__ import annotations

from collections.abc import Mapping

from optimizer.gepa.ledger import evaluations_of
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.deps import SearchDeps
from proposer import CandidateView, ProposalRequest
from schemas import CandidateRecord, ProposerError, candidate_id_for, content_hash

__all__ = ["smoke_proposal"]


async def smoke_proposal(
    deps: SearchDeps, baseline_id: str, train: Mapping[str, SeedResult]
) -> str:
    """One proposal from the baseline's train rollouts, stored but never evaluated.

    A budget too small to search still checks that the reflection model answers and that its
    answer parses, which is what a smoke test of the whole pipeline is for.
    """
    base = deps.state.candidates[baseline_id]
    request = ProposalRequest(
        program_description=deps.description,
        components=deps.components,
        parent=CandidateView(baseline_id, dict(base.components)),
        evaluations=evaluations_of(train),
        target_components=(deps.components[0].name,),
        existing_hashes=frozenset(c.content_hash for c in deps.state.candidates.values()),
    )
    try:
        proposal = await deps.proposer.propose(request)
    except ProposerError as exc:
        deps.budget.proposer_cost_usd = deps.proposer_cost()
        return f" (smoke proposal rejected: {exc.reason}: {str(exc)[:200]})"
    deps.budget.proposer_cost_usd = deps.proposer_cost()
    components = {**base.components, **proposal.components}
    record = CandidateRecord(
        run_id=deps.run_id,
        candidate_id=candidate_id_for(components),
        content_hash=content_hash(components),
        components=components,
        parents=[baseline_id],
        origin="mutation",
        rationale=deps.workspace.scrubber.text(proposal.rationale),
        diffs=dict(proposal.diffs) or {baseline_id: proposal.diff},
        proposer_usage=proposal.usage,
    )
    await deps.workspace.add_candidate(record)
    deps.state.add(record)
    await deps.events.emit(
        "candidate",
        {
            "candidate_id": record.candidate_id,
            "parents": record.parents,
            "origin": "mutation",
            "iteration": 0,
            "rationale": record.rationale[:1000],
            "diff": proposal.diff[:4000],
            "mode": proposal.mode,
            "evaluated": False,
        },
    )
    return f" (smoke proposal {record.candidate_id} written by the reflection model, not evaluated)"

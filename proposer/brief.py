"""One proposal job, mutation or merge, in the single shape both modes work from.

A ``Brief`` says where the draft starts (``base``), which components may change
(``targets``), which candidates it descends from, which rollouts are evidence (each
tagged with the candidate it belongs to, ``"A"``/``"B"`` in a merge), and the notes of the
person running the optimization (every mode shows them: ``prompts.notes_section``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from proposer.render import CHARS_PER_TOKEN, render_context, render_evaluations
from proposer.types import (
    CandidateView,
    ComponentSpec,
    Evaluation,
    MergeRequest,
    PersonNote,
    ProposalRequest,
)
from schemas.exceptions import ProposalRejected, UserError

__all__ = ["Brief", "brief_for_merge", "brief_for_proposal", "evidence_for"]


@dataclass(frozen=True)
class Brief:
    """Everything one proposal needs, independent of the mode that writes it."""

    kind: str  # "mutation" | "merge"
    program_description: str
    specs: tuple[ComponentSpec, ...]
    base: Mapping[str, str]
    parents: tuple[CandidateView, ...]
    targets: tuple[str, ...]
    evaluations: tuple[tuple[str, Evaluation], ...]  # (label, rollout); label "" for mutations
    frontier: tuple[CandidateView, ...]
    existing_hashes: frozenset[str]
    context: tuple[Evaluation, ...] = ()  # the parent's other train rollouts (mutations only)
    notes: tuple[PersonNote, ...] = ()  # the person's feedback

    @property
    def parent_ids(self) -> tuple[str, ...]:
        """Ids of the candidates the new one descends from."""
        return tuple(p.candidate_id for p in self.parents)

    def candidate(self, candidate_id: str) -> CandidateView | None:
        """A parent or frontier candidate by id."""
        for view in (*self.parents, *self.frontier):
            if view.candidate_id == candidate_id:
                return view
        return None


def _specs(
    specs: tuple[ComponentSpec, ...], components: Mapping[str, str]
) -> tuple[ComponentSpec, ...]:
    # A component present in the candidate but missing from the specs is still shown.
    known = {s.name for s in specs}
    return specs + tuple(ComponentSpec(n, "prompt") for n in components if n not in known)


def brief_for_proposal(request: ProposalRequest) -> Brief:
    """The brief of a mutation; ``UserError`` when a target component does not exist."""
    components = request.parent.components
    specs = _specs(request.components, components)
    targets = request.target_components or tuple(s.name for s in specs)
    unknown = [t for t in targets if t not in components]
    if unknown:
        raise UserError(
            f"target components {unknown} are not components of candidate "
            f"{request.parent.candidate_id} (it has {sorted(components)})"
        )
    return Brief(
        kind="mutation",
        program_description=request.program_description,
        specs=specs,
        base=dict(components),
        parents=(request.parent,),
        targets=tuple(targets),
        evaluations=tuple(("", e) for e in request.evaluations),
        frontier=request.frontier,
        existing_hashes=request.existing_hashes,
        context=tuple(
            e
            for e in request.train_evaluations
            if e.seed not in {x.seed for x in request.evaluations}
        ),
        notes=request.notes,
    )


def brief_for_merge(request: MergeRequest) -> Brief:
    """The brief of a merge: the draft starts from ``a``; targets are where a and b differ."""
    a, b = request.a.components, request.b.components
    if set(a) != set(b):
        raise UserError(
            f"cannot merge candidates with different components: {sorted(a)} vs {sorted(b)}"
        )
    targets = tuple(name for name in a if a[name] != b[name])
    if not targets:
        raise ProposalRejected("unchanged", "the two candidates to merge have identical components")
    return Brief(
        kind="merge",
        program_description=request.program_description,
        specs=_specs(request.components, a),
        base=dict(a),
        parents=(request.a, request.b),
        targets=targets,
        evaluations=tuple(("A", e) for e in request.evaluations_a)
        + tuple(("B", e) for e in request.evaluations_b),
        frontier=(request.a, request.b),
        existing_hashes=request.existing_hashes,
        notes=request.notes,
    )


def evidence_for(brief: Brief, *, budget_tokens: int, rng: random.Random) -> str:
    """The brief's rollouts rendered under the budget, one section per candidate in a merge."""
    labels = sorted({label for label, _ in brief.evaluations})
    if not labels:
        return "(no rollouts were provided)"
    if labels == [""]:
        evaluations = [e for _, e in brief.evaluations]
        if not brief.context:
            return render_evaluations(evaluations, budget_tokens=budget_tokens, rng=rng)
        # The minibatch in detail first; the rest of the train split, briefly, in what is left.
        main = render_evaluations(evaluations, budget_tokens=budget_tokens * 3 // 5, rng=rng)
        left = budget_tokens - len(main) // CHARS_PER_TOKEN
        return main + "\n\n" + render_context(brief.context, budget_tokens=left, rng=rng)
    ids = dict(zip(("A", "B"), brief.parent_ids, strict=False))
    sections = []
    for label in labels:
        evaluations = [e for tag, e in brief.evaluations if tag == label]
        body = render_evaluations(
            evaluations, budget_tokens=budget_tokens // len(labels), rng=rng, label=f"{label}: "
        )
        sections.append(f"# Rollouts of candidate {label} ({ids.get(label, '?')})\n{body}")
    return "\n\n".join(sections)

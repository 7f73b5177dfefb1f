"""What ``run_gepa`` / ``run_mipro`` return: ``OptimizationResult`` with ``GenerationStats``.

One result type for both call styles (the spec's and the keyword one). The spec's three
fields are there as it names them: ``best_template``, ``final_population`` (every evaluated
candidate as a ``PromptTemplate`` whose ``score`` is its train mean, ``generation`` its depth
in the lineage and ``id`` its candidate id) and ``history`` (one ``GenerationStats`` per GEPA
iteration or MIPRO trial, the runtime's own row in ``details``). ``members`` keeps what a
template cannot hold (lineage, holdout scores, components of a program with no template),
and ``run`` the run itself with its evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optimizer.runtime.lifecycle.run import RunResult
from schemas import CandidateRecord, Event, PromptTemplate, TemplateError
from workspace import Workspace

__all__ = ["GenerationStats", "Member", "OptimizationResult", "build_result"]


@dataclass(frozen=True)
class Member:
    """One candidate of the final population with its scores (None: not evaluated there)."""

    candidate_id: str
    origin: str
    parents: tuple[str, ...]
    components: Mapping[str, str]
    template: PromptTemplate | None
    train: float | None
    holdout: float | None
    minibatch: Mapping[str, float] | None


@dataclass(frozen=True)
class GenerationStats:
    """One GEPA iteration or MIPRO trial.

    ``best_score``: the best score known after it (GEPA: the best train mean; MIPRO: the best
    trial's, as the search ranks them); ``mean_score``: the mean of the
    candidate it evaluated on its minibatch (None when it evaluated none); ``num_evaluated``:
    how many candidates it evaluated (0 or 1); ``details``: the runtime's row (the proposal's
    fate and gate for GEPA, the instruction and demo set for MIPRO).
    """

    generation: int
    best_score: float | None
    mean_score: float | None
    num_evaluated: int
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OptimizationResult:
    """The best template, every evaluated candidate, per-iteration statistics and the run."""

    best_template: PromptTemplate | None
    final_population: tuple[PromptTemplate, ...]
    history: tuple[GenerationStats, ...]
    method: str = "gepa"
    best_components: Mapping[str, str] = field(default_factory=dict)
    promoted: bool = False
    lift: float = 0.0
    # Where ``lift`` was measured: "holdout" (seeds that took no part in choosing the winner),
    # or, for a spec run without holdout seeds, "val" / "train": the seeds that chose it, so
    # the lift includes the luck of that choice.
    measured_on: str = "holdout"
    members: tuple[Member, ...] = ()
    run: RunResult | None = None

    @property
    def evidence_dir(self) -> Path:
        """The run's folder with ``evidence.json`` and ``report.md``."""
        if self.run is None:
            raise AttributeError("this result has no run")
        return self.run.evidence_dir


async def build_result(
    method: str, template: PromptTemplate | None, run: RunResult, ws: Workspace
) -> OptimizationResult:
    """The result of a finished run, read from its evidence packet, candidates and events."""
    packet = run.evidence
    scores = {c["candidate_id"]: c for c in packet["candidates"]}
    records = await ws.list_candidates(run.run_id)
    depth = _generations_of(records)

    def as_template(record_id: str | None, components: Mapping[str, str]) -> PromptTemplate | None:
        if template is None or "demos" not in components:
            return None
        try:
            made = template.with_components(components)
        except TemplateError:  # a GEPA edit that broke the demos JSON: no template for it
            return None
        if record_id is None:
            return made
        score = scores.get(record_id, {}).get("train")
        return made.model_copy(
            update={"id": record_id, "score": score, "generation": depth.get(record_id, 0)}
        )

    members = tuple(
        Member(
            candidate_id=r.candidate_id,
            origin=r.origin,
            parents=tuple(r.parents),
            components=dict(r.components),
            template=as_template(r.candidate_id, r.components),
            train=scores.get(r.candidate_id, {}).get("train"),
            holdout=scores.get(r.candidate_id, {}).get("holdout"),
            minibatch=scores.get(r.candidate_id, {}).get("minibatch"),
        )
        for r in records
    )
    best = packet["best"]
    if method == "mipro":
        history = _trials(packet.get("mipro", {}).get("trials", []))
    else:
        history = _iterations(await ws.events_since(run.run_id))
    return OptimizationResult(
        best_template=as_template(best.get("candidate_id"), best["components"]),
        final_population=tuple(m.template for m in members if m.template is not None),
        history=history,
        method=method,
        best_components=best["components"],
        promoted=bool(packet["promotion"]["promoted"]),
        lift=float(packet["promotion"]["lift"]),
        measured_on=str(packet["promotion"].get("measured_on", "holdout")),
        members=members,
        run=run,
    )


def _generations_of(records: Sequence[CandidateRecord]) -> dict[str, int]:
    """Each candidate's depth in the lineage: the baseline 0, a child one more than its parents."""
    depth: dict[str, int] = {}
    for record in records:  # stored in creation order: parents come first
        parents = [depth.get(p, 0) for p in record.parents]
        depth[record.candidate_id] = (max(parents) + 1) if parents else 0
    return depth


def _trials(rows: Sequence[Mapping[str, Any]]) -> tuple[GenerationStats, ...]:
    return tuple(
        GenerationStats(
            generation=int(row.get("trial", i + 1)),
            best_score=_best_of(row.get("best")),
            mean_score=row.get("score"),
            num_evaluated=1 if row.get("score") is not None else 0,
            details=dict(row),
        )
        for i, row in enumerate(rows)
    )


def _best_of(best: Any) -> float | None:
    """A trial row's best-so-far: ``{"candidate_id", "score", "trial"}`` (or a bare number)."""
    if isinstance(best, Mapping):
        return best.get("score")
    return best if isinstance(best, int | float) else None


def _iterations(events: Sequence[Event]) -> tuple[GenerationStats, ...]:
    return tuple(
        GenerationStats(
            generation=int(row["iteration"]),
            best_score=row.get("best_train"),
            mean_score=row.get("child_score"),
            num_evaluated=1 if row.get("child_score") is not None else 0,
            details=row,
        )
        for row in _iteration_rows(events)
    )


def _iteration_rows(events: Sequence[Event]) -> list[dict[str, Any]]:
    """One row per GEPA iteration: the proposal's fate, its (last) gate, the best train mean
    after it (a rebased proposal's row shows the gate of its rebased text)."""
    rows: dict[int, dict[str, Any]] = {}
    best: float | None = None
    current: int | None = None
    outcomes = {"gate": "gated", "proposal_rejected": "rejected", "skipped": "skipped"}
    keys = ("candidate_id", "parent", "parent_score", "child_score", "accepted", "reason")
    for event in events:
        d = event.data
        if event.type == "scored" and d.get("split") == "train" and d.get("mean") is not None:
            best = d["mean"] if best is None else max(best, d["mean"])
            if current is not None:
                rows[current]["best_train"] = best
        elif event.type in outcomes and "iteration" in d:
            current = int(d["iteration"])
            row = rows.setdefault(current, {"iteration": current})
            row["outcome"] = outcomes[event.type]
            row["best_train"] = best
            row.update({key: d[key] for key in keys if key in d})
    # With proposals in flight, iterations finish out of order: each row gets the best train
    # mean known once it and every earlier iteration had finished.
    ordered, so_far = [rows[k] for k in sorted(rows)], None
    for row in ordered:
        if row.get("best_train") is not None:
            so_far = row["best_train"] if so_far is None else max(so_far, row["best_train"])
        row["best_train"] = so_far
    return ordered

"""What a run logs to MLflow, as plain operations: pure functions of its config and events.

:mod:`optimizer.runtime.tracking.tracker` feeds every event of a run to an ``EventRecorder``, which
keeps the counters the events carry (paid and cached calls, spend, frontier coverage, the
best train score) and answers the operations to send: metrics at each iteration's outcome
(``step`` = the iteration, or the MIPRO trial), tags at phase changes, the promotion. At the
end, ``candidate_artifacts`` gives one JSON file per candidate (its texts and its scores).
Nothing here talks to MLflow, so the mapping is tested without a server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from optimizer.runtime.tracking.prompts import RegisterPrompt
from schemas import CandidateRecord, Event

__all__ = [
    "MAX_PARAM_CHARS",
    "Artifact",
    "End",
    "EventRecorder",
    "Metrics",
    "Op",
    "Params",
    "Tags",
    "candidate_artifacts",
    "config_params",
    "mlflow_status",
]

MAX_PARAM_CHARS = 6000  # MLflow's limit for a param value
MAX_TAG_CHARS = 5000
# The outcome of an iteration (as in optimizer.api.optimize's per-iteration stats) and a MIPRO trial.
OUTCOMES = ("gate", "proposal_rejected", "skipped")
_STATUS = {"completed": "FINISHED", "failed": "FAILED", "cancelled": "KILLED"}


@dataclass(frozen=True)
class Metrics:
    """Metric values at one step."""

    step: int
    values: Mapping[str, float]


@dataclass(frozen=True)
class Params:
    """Params to log; one already logged is kept (MLflow refuses to change a param)."""

    values: Mapping[str, str]


@dataclass(frozen=True)
class Tags:
    """Tags to set (a tag can change)."""

    values: Mapping[str, str]


@dataclass(frozen=True)
class Artifact:
    """A text file at ``path`` among the run's artifacts."""

    path: str
    text: str


@dataclass(frozen=True)
class End:
    """Mark the MLflow run ended with an MLflow run status (FINISHED, FAILED, KILLED)."""

    status: str


Op = Metrics | Params | Tags | Artifact | End | RegisterPrompt


def mlflow_status(run_status: str) -> str | None:
    """The MLflow status of a run that ended so; ``None`` while it has not (it was taken over)."""
    return _STATUS.get(run_status)


def config_params(config: Mapping[str, Any]) -> dict[str, str]:
    """The stored (redacted, scrubbed) config as MLflow params, without keys or key names.

    ``*_env`` fields name where a secret lives and masked fields held one: neither is an
    experiment parameter. Unset fields are left out; lists and objects become JSON.
    """
    params: dict[str, str] = {}
    for key, value in sorted(config.items()):
        if key.endswith("_env") or value is None or value == "***":
            continue
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        params[key] = text[:MAX_PARAM_CHARS]
    return params


@dataclass
class EventRecorder:
    """The counters of a run as its events tell them, and the MLflow operations they make."""

    best_train: float | None = None
    paid: int = 0
    cached: int = 0
    errors: int = 0
    cost_usd: float = 0.0
    coverage: float | None = None  # share of train seeds the best candidate wins
    frontier_size: int | None = None  # candidates on the Pareto frontier
    candidates: int = 0
    step: int = 0  # the last iteration (or trial) seen
    scores: dict[str, dict[str, float]] = field(default_factory=dict)

    def metrics(self) -> dict[str, float]:
        """The values logged at each step (those known so far)."""
        values: dict[str, float | None] = {
            "best_train_score": self.best_train,
            "paid_calls": self.paid,
            "cached_calls": self.cached,
            "errored_calls": self.errors,
            "cost_usd": self.cost_usd,
            "frontier_best_coverage": self.coverage,
            "frontier_size": self.frontier_size,
            "candidates": self.candidates,
        }
        return {k: float(v) for k, v in values.items() if v is not None}

    def ops(self, event: Event) -> list[Op]:
        """Update the counters from ``event``; the operations it makes (often none)."""
        d, kind = event.data, event.type
        self._count(kind, d)
        if kind in OUTCOMES and "iteration" in d:
            return [self._at(int(d["iteration"]))]
        if kind == "trial" and "trial" in d:
            return [self._at(int(d["trial"]))]
        if kind == "search_stopped":
            self._budget(d.get("budget") or {})
            return [Metrics(self.step, self.metrics())]
        if kind == "program":
            return [
                Tags({"gepa.program_id": str(d.get("program_id")),
                      "gepa.fingerprint": str(d.get("fingerprint"))}),
                Params({"resolved_max_metric_calls":
                        str((d.get("budget") or {}).get("max_metric_calls"))}),
            ]  # fmt: skip
        if kind == "phase":
            return [Tags(_phase_tags(d))]
        if kind == "promotion":
            return _promotion_ops(d, self.step)
        return []

    def _at(self, step: int) -> Metrics:
        self.step = max(self.step, step)
        return Metrics(step, self.metrics())

    def _count(self, kind: str, d: Mapping[str, Any]) -> None:
        if kind == "trials":
            self._budget(d.get("budget") or {})
        elif kind == "candidate":
            self.candidates += 1
        elif kind == "scored" and d.get("mean") is not None and "candidate_id" in d:
            self._score(str(d["candidate_id"]), str(d.get("split")), float(d["mean"]))
            if d.get("split") == "train":
                self.best_train = max(self.best_train or 0.0, float(d["mean"]))
        elif kind == "frontier":
            coverage, best = d.get("coverage") or {}, d.get("best") or {}
            self.frontier_size = len(coverage)
            if best.get("mean") is not None:
                self.best_train = max(self.best_train or 0.0, float(best["mean"]))
                self.coverage = coverage.get(best.get("candidate_id"), self.coverage)
        elif kind == "gate" and d.get("child_score") is not None:
            self._score(str(d["candidate_id"]), "minibatch_gate", float(d["child_score"]))
        elif kind == "trial" and d.get("score") is not None:
            self._score(str(d["candidate_id"]), "minibatch", float(d["score"]))

    def _budget(self, budget: Mapping[str, Any]) -> None:
        self.paid = int(budget.get("paid", self.paid))
        self.cached = int(budget.get("cached", self.cached))
        self.errors = int(budget.get("errors", self.errors))
        self.cost_usd = float(budget.get("cost_usd", self.cost_usd) or 0.0)

    def _score(self, candidate_id: str, name: str, value: float) -> None:
        self.scores.setdefault(candidate_id, {})[name] = value


def _phase_tags(d: Mapping[str, Any]) -> dict[str, str]:
    tags = {"gepa.phase": str(d.get("phase"))}
    if "promoted" in d:
        tags["gepa.promoted"] = str(bool(d["promoted"])).lower()
    if d.get("error"):
        tags["gepa.error"] = str(d["error"])[:MAX_TAG_CHARS]
    return tags


def _promotion_ops(d: Mapping[str, Any], step: int) -> list[Op]:
    values = {
        "holdout_lift": d.get("lift"),
        "holdout_lift_ci_low": d.get("ci_low"),
        "holdout_lift_ci_high": d.get("ci_high"),
        "best_holdout_score": d.get("best_holdout"),
        "baseline_holdout_score": d.get("baseline_holdout"),
    }
    return [
        Metrics(step, {k: float(v) for k, v in values.items() if v is not None}),
        Tags({"gepa.promoted": str(bool(d.get("promoted"))).lower(),
              "gepa.best_candidate": str(d.get("best_id"))}),
    ]  # fmt: skip


def candidate_artifacts(
    records: Sequence[CandidateRecord],
    packet: Mapping[str, Any] | None,
    seen: Mapping[str, Mapping[str, float]],
) -> list[Artifact]:
    """``candidates/<id>.json`` per candidate: its texts, lineage and scores.

    Scores come from the evidence packet when the run finished (train, val, holdout means),
    else from what the events said (train means, gate scores).
    """
    final = {c["candidate_id"]: c for c in (packet or {}).get("candidates", [])}
    out = []
    for r in records:
        known = final.get(r.candidate_id)
        scores = (
            {k: known.get(k) for k in ("train", "val", "holdout", "minibatch", "train_partial")}
            if known
            else dict(seen.get(r.candidate_id, {}))
        )
        body = {
            "candidate_id": r.candidate_id,
            "origin": r.origin,
            "parents": r.parents,
            "rationale": r.rationale,
            "scores": scores,
            "components": r.components,
        }
        out.append(Artifact(f"candidates/{r.candidate_id}.json", json.dumps(body, indent=2)))
    return out

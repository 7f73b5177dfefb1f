"""A check's one config object (``CheckSpec``) and what it found (``CheckResult``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optimizer.regression.sources import Side
from optimizer.regression.verdict import Verdict
from schemas import RunConfig

__all__ = ["SPLITS", "CheckResult", "CheckSpec"]

SPLITS = ("train", "val", "holdout")


@dataclass(frozen=True)
class CheckSpec:
    """What to check, where, and how hard.

    ``source`` says where the container is (``containers`` or ``module`` with its dataset,
    splits and verifier), its token, retries and timeouts; its other fields are not read.
    With ``run_id``, a missing side, container, seed or task model is the run's.
    """

    source: RunConfig = field(default_factory=RunConfig)
    candidate: str | None = None  # None: the run's best
    reference: str = "baseline"
    run_id: str | None = None
    split: str | None = None  # None: the split the run's lift was measured on, else holdout
    margin: float = 0.0
    max_metric_calls: int | None = None
    seed: int | None = None  # the bootstrap's; None: the run's, else 0
    task_model: str | None = None  # the rollout policy; None: the run's, else the container's
    concurrency: int = 4


@dataclass(frozen=True)
class CheckResult:
    """The verdict, what it was measured on, and what it cost."""

    check_id: str
    candidate: Side
    reference: Side
    verdict: Verdict
    program_id: str
    fingerprint: str
    split: str
    seeds: tuple[str, ...]  # the seeds both sides were sent to, in the program's order
    seeds_from: str  # how they were chosen (the run's measured seeds, or the split)
    scores: Mapping[str, Mapping[str, float]]  # "candidate"/"reference" -> seed -> reward
    errors: Mapping[str, Mapping[str, str]]  # side -> seed -> why its rollout failed
    paid: int
    cached: int
    seed: int
    task_model: str | None
    run_id: str | None = None
    recorded: Mapping[str, Any] | None = None  # the run's promotion, when checking best vs baseline
    warnings: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """Whether the candidate is not worse than the reference by more than the margin."""
        return self.verdict.passed

    @property
    def drift(self) -> float | None:
        """The lift now minus the lift the run recorded (``None`` without a recorded one)."""
        if self.recorded is None:
            return None
        return self.verdict.lift - float(self.recorded["lift"])

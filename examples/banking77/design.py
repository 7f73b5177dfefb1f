"""The Banking77 task design: split sizes, budget and search flags, in one place.

The README's main job (``examples/banking77/main_job.py``) takes its defaults from
``DESIGN``, and so does the Banking77 arena of ``bench/race.py``: change a value here and both
follow, so the peers always race on the work the main job does.
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.runtime.accounts.budget import auto_metric_calls
from schemas import RunConfig

__all__ = ["DESIGN", "Design"]


@dataclass(frozen=True)
class Design:
    """What the main job optimizes on, and with how much."""

    # The task: the 27 card intents (docs/main-job.md says why), 2 train queries and 11
    # holdout queries per intent, drawn by the run's seed.
    intents: str = "cards"
    train_size: int = 54
    holdout_size: int = 297
    # The budget: ``--auto`` level, unless ``max_metric_calls`` is set (main_job's flags).
    auto: str = "light"
    max_metric_calls: int | None = 1400
    # On the local models: rollouts in flight (one llama.cpp server answers one at a time)
    # and proposals written at once (one reflection server).
    concurrency: int = 4
    proposals_in_flight: int = 1
    # Also on the local models (text-mode proposer), ~10 tokens/s on 2 cores: cap each reflection
    # at ~1 minute, and stop a search that keeps getting echoes instead of burning the
    # afternoon on it. A 1.5B improves the prompt rarely (one proposal in 5-10), so the
    # budget, not --patience, ends the search: 12 proposals without a better one can stop a
    # run a few proposals before its next improvement.
    reflection_max_tokens: int = 700
    max_prompt_chars: int = 2500
    max_idle_iterations: int = 6
    patience: int = 0
    # On the local models: one rule per proposal (proposer/rulemode.py), each gated on a
    # minibatch of 8 (a rule that fixes its own input and breaks another's is caught there
    # more often than on 4, before it pays for a train evaluation).
    proposer_mode: str = "rule"
    minibatch_size: int = 8

    def container_args(self, seed: int = 0) -> list[str]:
        """Flags of ``python -m examples.banking77`` for this design's splits, drawn by ``seed``."""
        return [
            "--train-size",
            str(self.train_size),
            "--holdout-size",
            str(self.holdout_size),
            "--intents",
            self.intents,
            "--seed",
            str(seed),
        ]

    def local_args(self) -> list[str]:
        """``optimize run`` flags the main job adds on the local models."""
        return [
            "--concurrency",
            str(self.concurrency),
            "--proposals-in-flight",
            str(self.proposals_in_flight),
            "--reflection-max-tokens",
            str(self.reflection_max_tokens),
            *self.proposer_args(),
        ]

    def proposer_args(self) -> list[str]:
        """The part of ``local_args`` other than concurrency, proposals and their tokens."""
        return [
            "--max-prompt-chars",
            str(self.max_prompt_chars),
            "--max-idle-iterations",
            str(self.max_idle_iterations),
            "--patience",
            str(self.patience),
            "--minibatch-size",
            str(self.minibatch_size),
        ]

    def metric_calls(self, *, train: int, holdout: int, val: int = 0) -> int:
        """The paid-rollout limit of a run on splits of these sizes (what the budget flags give)."""
        if self.max_metric_calls is not None:
            return self.max_metric_calls
        defaults = RunConfig.model_fields
        return auto_metric_calls(
            self.auto,
            train=train,
            holdout=holdout,
            val=val,
            minibatch=self.minibatch_size,
            top_k=defaults["holdout_top_k"].default,
        )


DESIGN = Design()

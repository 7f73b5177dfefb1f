"""Optuna's TPE sampler over (instruction index, demo-set index), seeded.

Optuna is an optional extra (``gepa-runtime[mipro]``); ``load_optuna`` says how to install
it. The ask/tell interface suits an async loop: the search asks for a trial's parameters,
scores them on a minibatch through the rollout queue, and tells the result. Same seed and
same told scores give the same trials.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from schemas import UserError

__all__ = ["TrialSampler", "load_optuna"]


def load_optuna() -> ModuleType:
    """The ``optuna`` module, or a ``UserError`` with the install command."""
    try:
        optuna = importlib.import_module("optuna")
    except ImportError:
        raise UserError(
            "--method mipro needs Optuna, which is not installed: "
            "pip install 'gepa-runtime[mipro]' (or pip install optuna)"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


@dataclass(frozen=True)
class Ask:
    """One trial's parameters, with the handle to tell its score back."""

    number: int
    instruction: int
    demo_set: int
    handle: Any


class TrialSampler:
    """Asks TPE for (instruction, demo set) and tells it each trial's minibatch score."""

    def __init__(self, instructions: int, demo_sets: int, *, seed: int) -> None:
        optuna = load_optuna()
        self._study = optuna.create_study(
            direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed)
        )
        self._instructions = list(range(instructions))
        self._demo_sets = list(range(demo_sets))
        self._fail = optuna.trial.TrialState.FAIL

    def ask(self) -> Ask:
        """The next trial's parameters."""
        trial = self._study.ask()
        return Ask(
            number=trial.number,
            instruction=int(trial.suggest_categorical("instruction", self._instructions)),
            demo_set=int(trial.suggest_categorical("demo_set", self._demo_sets)),
            handle=trial,
        )

    def tell(self, ask: Ask, score: float | None) -> None:
        """The trial's score; None (every rollout errored) marks it failed."""
        if score is None:
            self._study.tell(ask.handle, state=self._fail)
        else:
            self._study.tell(ask.handle, score)

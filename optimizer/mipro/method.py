"""MIPRO as a :class:`~optimizer.runtime.search.strategy.SearchMethod` (``--method mipro``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import optimizer.mipro.evidence as evidence
from optimizer.mipro.decisions import mipro_decisions
from optimizer.mipro.sampler import load_optuna
from optimizer.mipro.search import InstructionSource, MiproSearch
from optimizer.mipro.surface import surface_for
from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.deps import SearchDeps
from optimizer.runtime.search.state import SearchState
from optimizer.runtime.search.strategy import SearchStart
from schemas import Event, RunConfig, UserError

__all__ = ["MiproMethod"]


class MiproMethod:
    """Instructions x demo sets chosen by a seeded TPE (:class:`MiproSearch`)."""

    def prepare(self, config: RunConfig) -> None:
        """Fail before the baseline is paid for when the ``[mipro]`` extra (optuna) is missing."""
        load_optuna()

    def starts_on_first_round(
        self, config: RunConfig, first_round: Mapping[str, SeedResult]
    ) -> bool:
        """No: its candidates are built from the baseline's whole train split."""
        return False

    def build(self, deps: SearchDeps, start: SearchStart) -> MiproSearch:
        """The search over the program's template surface, seeded with the baseline's results."""
        if not isinstance(deps.proposer, InstructionSource):
            raise UserError(
                f"--method mipro needs a proposer with instructions(); "
                f"{type(deps.proposer).__name__} has none"
            )
        return MiproSearch(
            deps,
            surface=surface_for(start.program),
            source=deps.proposer,
            baseline_id=start.baseline_id,
            baseline_train=start.baseline_train,
        )

    async def without_search(self, deps: SearchDeps, start: SearchStart) -> str:
        """Nothing: MIPRO's setup (instructions, demos) is part of its search."""
        return ""

    def evidence_section(self, state: SearchState, best_id: str) -> dict[str, Any] | None:
        """The search space, the trials and the winner's parameters (:mod:`.evidence`)."""
        return evidence.evidence_section(state, best_id)

    def report_lines(self, section: Mapping[str, Any]) -> list[str]:
        """The ``## MIPRO search`` tables of ``report.md``."""
        return evidence.report_lines(section)

    def decisions(self, events: Sequence[Event]) -> dict[str, list[dict[str, Any]]]:
        """Each candidate's trials (:mod:`optimizer.mipro.decisions`)."""
        return mipro_decisions(events)

"""A search, as the runtime sees it: the ``searching`` phase behind two small Protocols.

The runtime owns everything around a search (baseline, queue, budget, promotion, evidence)
and never names a method: it is handed a :data:`Searches` registry (``RunConfig.method`` ->
:class:`SearchMethod`) by the layer above (:mod:`optimizer.searches`). A third method is a new
package with one ``SearchMethod`` and one entry in that registry; no runtime file changes.

    method = method_of(searches, config)   # refused at once when the method is unknown
    method.prepare(config)                 # before any rollout is paid (e.g. an extra missing)
    method.starts_on_first_round(config, first_round)   # start before the baseline is all in?
    reason = await method.build(deps, start).run()
    packet[config.method] = method.evidence_section(state, best_id)  # when not None
    report += method.report_lines(packet[config.method])
    method.decisions(events)               # why each candidate was kept or dropped
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from optimizer.runtime.rollouts.records import SeedResult
from optimizer.runtime.search.baseline import BaselineScores
from optimizer.runtime.search.deps import SearchDeps
from optimizer.runtime.search.state import SearchState
from schemas import Event, Program, RunConfig, UserError

__all__ = ["Search", "SearchMethod", "SearchStart", "Searches", "method_of"]


class Search(Protocol):
    """One search of one run: runs until its budget or its own criterion stops it."""

    async def run(self) -> str:
        """Search; returns why it stopped (shown in the events, the report and the evidence)."""
        ...


@dataclass(frozen=True)
class SearchStart:
    """Where a search starts: the program, the baseline and its train rollouts (paid already)."""

    program: Program
    baseline_id: str
    baseline_train: Mapping[str, SeedResult]
    # The rest of the baseline's train split while it is scored, when the method
    # ``starts_on_first_round`` (``baseline_train`` is that round); ``None``: it is all in.
    scoring: BaselineScores | None = None


class SearchMethod(Protocol):
    """A method by name: what it checks before the run pays, the search it builds, and its own
    part of the evidence packet and the report."""

    def prepare(self, config: RunConfig) -> None:
        """Raise ``UserError`` when the method cannot run (e.g. its extra is not installed)."""
        ...

    def starts_on_first_round(
        self, config: RunConfig, first_round: Mapping[str, SeedResult]
    ) -> bool:
        """Whether its search may start on the baseline's ``first_round`` of train rollouts,
        the rest scored behind it (``SearchStart.scoring``); asked only with several
        proposals in flight and more train seeds than one round."""
        ...

    def build(self, deps: SearchDeps, start: SearchStart) -> Search:
        """The search over the run's shared parts."""
        ...

    async def without_search(self, deps: SearchDeps, start: SearchStart) -> str:
        """What a budget too small to search still does; appended to the stop reason."""
        ...

    def evidence_section(self, state: SearchState, best_id: str) -> dict[str, Any] | None:
        """The method's own part of the evidence packet, stored under its name
        (``RunConfig.method``), or ``None`` for none; ``best_id`` is the winner."""
        ...

    def report_lines(self, section: Mapping[str, Any]) -> list[str]:
        """``report.md``'s Markdown lines for that part, read back from the packet."""
        ...

    def decisions(self, events: Sequence[Event]) -> dict[str, list[dict[str, Any]]]:
        """What the method's events of a run say about each candidate: candidate id -> its
        decisions in the order they were logged, each ``{"kind", "seq", "ts", "text"}``, an
        ``outcome`` (what the candidate is after it) where it decides something, and the
        numbers it rests on; ``kind`` ``"created"`` says how it was made. Read from the event
        log alone, so a finished run answers (:mod:`optimizer.runtime.results.why`)."""
        ...


Searches = Mapping[str, SearchMethod]


def method_of(searches: Searches, config: RunConfig) -> SearchMethod:
    """The method ``config.method`` names; a ``UserError`` naming the known ones otherwise."""
    method = searches.get(config.method)
    if method is None:
        known = ", ".join(sorted(searches)) or "none"
        raise UserError(f"unknown --method {config.method!r}; this runtime knows: {known}")
    return method

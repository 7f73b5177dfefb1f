"""Fakes that record, for driving GEPA's parts directly: the rollout queue, the event sink and
the workspace, as far as the parts call them.

The queue scores a (text, seed) by a function (``rule_score``, by default: a seed
``<label>-<i>`` passes when the prompt has the line ``- <label>``, as the rule container of
``tests/fakes/scripted.py`` says) and pays for it once: it is cached after, and booked on the
run's budget, which refuses what does not fit as the real queue does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.rollouts.records import SeedResult
from schemas import CandidateRecord, RolloutRecord, content_hash
from workspace.redact import Scrubber

__all__ = [
    "FakeQueue",
    "FakeWorkspace",
    "RecordingEvents",
    "Score",
    "label_of",
    "look_alike_score",
    "rule_score",
]

Score = Callable[[Mapping[str, str], str], float | None]  # (components, seed) -> reward


def label_of(seed: str) -> str:
    """The label a seed ``<label>-<i>`` asks for."""
    return seed.rsplit("-", 1)[0]


def rule_score(components: Mapping[str, str], seed: str) -> float:
    """1.0 when the prompt has the line ``- <label>`` of the seed's label, else 0.0."""
    lines = {line.strip() for line in components["system_prompt"].splitlines()}
    return 1.0 if f"- {label_of(seed)}" in lines else 0.0


def look_alike_score(components: Mapping[str, str], seed: str) -> float:
    """``rule_score`` where ant and bee are look-alikes: with both lines and no ``- ant_bee``
    line telling them apart, ant's items get bee's label (an edit that adds bee trades ant's
    seeds for bee's)."""
    lines = {line.strip() for line in components["system_prompt"].splitlines()}
    if label_of(seed) == "ant" and "- bee" in lines and "- ant_bee" not in lines:
        return 0.0
    return rule_score(components, seed)


class FakeQueue:
    """The rollout queue: ``evaluate``, ``cached``, ``misses`` and ``idle_slots``.

    ``sent`` records each ``evaluate`` call that paid for something: the candidate and the
    seeds it paid for, in the order asked. ``idle`` is what ``idle_slots`` answers.
    """

    def __init__(self, budget: Budget, score: Score = rule_score, *, idle: int = 4) -> None:
        self.budget = budget
        self.score = score
        self.idle = idle
        self.sent: list[tuple[str, list[str]]] = []
        self._done: dict[tuple[str, str], RolloutRecord] = {}  # (content hash, seed) -> record

    def idle_slots(self) -> int:
        """Rollout slots free right now."""
        return self.idle

    def seeds_sent(self, candidate_id: str) -> list[str]:
        """Every seed paid for ``candidate_id``, in the order sent."""
        return [s for cid, seeds in self.sent if cid == candidate_id for s in seeds]

    def rounds_of(self, candidate_id: str) -> list[list[str]]:
        """The seeds paid for ``candidate_id``, one list per ``evaluate`` call."""
        return [seeds for cid, seeds in self.sent if cid == candidate_id]

    async def evaluate(
        self,
        candidate_id: str,
        components: Mapping[str, str],
        seeds: Sequence[str],
        **_: Any,
    ) -> dict[str, SeedResult]:
        """Each seed's result: cached, or scored now (booked first; ``BudgetExhausted`` when
        the search's budget cannot pay for all of them)."""
        seeds = list(dict.fromkeys(seeds))
        chash = content_hash(dict(components))
        fresh = [s for s in seeds if (chash, s) not in self._done]
        self.budget.reserve(len(fresh))
        await asyncio.sleep(0)  # a rollout takes a turn of the event loop
        for seed in fresh:
            self._done[(chash, seed)] = self._record(candidate_id, chash, components, seed)
            self.budget.settle(cost_usd=0.0, error=False, retries=0)
        if fresh:
            self.sent.append((candidate_id, fresh))
        return {
            s: SeedResult(seed=s, record=self._done[(chash, s)], cached=s not in fresh)
            for s in seeds
        }

    async def cached(
        self, components: Mapping[str, str], seeds: Sequence[str]
    ) -> dict[str, SeedResult]:
        """The cached results among ``seeds``."""
        chash = content_hash(dict(components))
        return {
            s: SeedResult(seed=s, record=self._done[(chash, s)], cached=True)
            for s in seeds
            if (chash, s) in self._done
        }

    async def misses(self, components: Mapping[str, str], seeds: Sequence[str]) -> list[str]:
        """The seeds of ``seeds`` not paid for yet."""
        chash = content_hash(dict(components))
        return [s for s in seeds if (chash, s) not in self._done]

    def _record(
        self, candidate_id: str, chash: str, components: Mapping[str, str], seed: str
    ) -> RolloutRecord:
        reward = self.score(components, seed)
        passed = reward is not None and reward >= 1.0
        return RolloutRecord(
            cache_key=f"{chash}:{seed}",
            run_id="r",
            candidate_id=candidate_id,
            candidate_hash=chash,
            fingerprint="fp",
            seed=seed,
            policy="p",
            status="ok" if reward is not None else "error",
            reward=reward,
            feedback="correct" if passed else f"expected {label_of(seed)}",
        )


class RecordingEvents:
    """The event sink: keeps every event emitted, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, type: str, data: dict[str, Any] | None = None) -> None:
        """Record one event."""
        self.events.append((type, dict(data or {})))

    def of(self, type: str) -> list[dict[str, Any]]:
        """The data of every event of ``type``, in order."""
        return [data for t, data in self.events if t == type]


class FakeWorkspace:
    """The workspace: stores candidates and frontiers in lists, scrubs with a real scrubber.

    Clear ``open`` to hold ``add_candidate`` (``entered`` is set once one waits there).
    """

    def __init__(self) -> None:
        self.scrubber = Scrubber()
        self.candidates: list[CandidateRecord] = []
        self.frontiers: list[Mapping[str, Sequence[str]]] = []
        self.open = asyncio.Event()
        self.open.set()
        self.entered = asyncio.Event()

    async def add_candidate(self, record: CandidateRecord) -> bool:
        """Store a candidate."""
        self.entered.set()
        await self.open.wait()
        self.candidates.append(record)
        return True

    async def save_frontier(
        self, run_id: str, winners: Mapping[str, Sequence[str]], scores: Mapping[str, float]
    ) -> None:
        """Keep the frontier's winners."""
        self.frontiers.append(winners)

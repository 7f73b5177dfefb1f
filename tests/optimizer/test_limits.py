"""Adaptive concurrency per endpoint (optimizer/runtime/rollouts/limits.py): the rules, then a
simulation.

The simulation is a discrete-event model of queue workers against a container that takes
``capacity`` rollouts at once and answers 429 above that: no sockets, no clock, so the
figures it asserts are exact for a given model. The real thing, over HTTP, is measured by
bench/scale.py and tests/e2e/test_adaptive_concurrency_e2e.py.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field

import pytest

from optimizer.runtime.rollouts.limits import FRESH_AFTER_S, AdaptiveLimit, EndpointLimits


def _limit(ceiling: int = 32) -> AdaptiveLimit:
    limit = AdaptiveLimit("http://c")
    limit.join(ceiling, now=0.0)
    return limit


def _round(limit: AdaptiveLimit, now: float = 1.0) -> None:
    """One clean round: ``permits`` requests answered 200, each sent with every slot in use."""
    n = limit.permits
    others = [limit.take(now) for _ in range(n - 1)]
    for _ in range(n):
        limit.settle(limit.take(now), 200, now)
    for ticket in others:  # sent while slots were free: they count for nothing
        limit.settle(ticket, 200, now)


def test_it_starts_at_the_concurrency_and_never_exceeds_it() -> None:
    limit = _limit(8)
    assert limit.permits == 8
    for _ in range(20):
        _round(limit)
    assert limit.permits == 8


def test_a_429_cuts_to_four_fifths_once_per_episode() -> None:
    limit = _limit(20)
    tickets = [limit.take(0.0) for _ in range(20)]
    for ticket in tickets[:5]:  # five answers to requests sent before the cut: one episode
        limit.settle(ticket, 429, 0.1)
    assert limit.permits == 16 and limit.epoch == 1
    late = limit.take(0.2)  # sent after the cut: a new episode
    limit.settle(late, 503, 0.3)
    assert limit.permits == 12  # 16 * 0.8 = 12.8


def test_it_never_goes_below_one() -> None:
    limit = _limit(4)
    for step in range(30):
        limit.settle(limit.take(float(step)), 429, float(step))
    assert limit.permits == 1


def test_clean_rounds_grow_it_by_one_or_five_percent() -> None:
    limit = _limit(100)
    limit.limit = 10.0
    _round(limit)
    assert limit.limit == 11.0  # +1: 5% of 10 is less
    limit.limit = 40.0
    _round(limit)
    assert limit.limit == 42.0  # +5%


def test_a_limit_not_in_use_does_not_grow() -> None:
    limit = _limit(32)
    limit.limit = 4.0
    for _ in range(50):  # two requests at a time under a limit of four: nothing learned
        a, b = limit.take(1.0), limit.take(1.0)
        limit.settle(a, 200, 1.0)
        limit.settle(b, 200, 1.0)
    assert limit.permits == 4


def test_the_level_cut_from_is_tried_again_after_doubling_waits() -> None:
    limit = _limit(32)
    limit.limit = 5.0
    limit.settle(limit.take(0.0), 429, 0.0)  # 5 was too many
    assert limit.permits == 4
    rounds = []
    for _ in range(3):  # each try at 5 fails again
        n = 0
        while limit.permits < 5:
            _round(limit)
            n += 1
        rounds.append(n)
        limit.settle(limit.take(1.0), 429, 1.0)
    assert rounds == [2, 4, 8]


def test_a_clean_round_at_the_wall_forgets_it() -> None:
    limit = _limit(32)
    limit.limit = 5.0
    limit.settle(limit.take(0.0), 429, 0.0)
    while limit.permits < 5:
        _round(limit)
    _round(limit)  # 5 works now (the container got more room): no more waiting
    assert limit.permits == 6
    _round(limit)
    assert limit.permits == 7


def test_runs_of_one_process_share_an_endpoints_limit() -> None:
    limits = EndpointLimits()
    a, b = limits.get("http://c"), limits.get("http://c")
    assert a is b and limits.get("http://other") is not a
    a.join(8, now=0.0)
    a.settle(a.take(0.0), 429, 0.0)
    assert a.permits == 6
    a.join(8, now=1.0)  # a second run: the cut is remembered, the ceiling is the sum
    assert (a.permits, a.ceiling) == (6, 16)
    a.leave(8)
    a.leave(8)
    a.join(4, now=1.0 + FRESH_AFTER_S + 1)  # long after the pressure: a fresh start
    assert a.permits == 4


def test_a_fixed_limit_does_not_adapt() -> None:
    limit = AdaptiveLimit("http://c", adaptive=False)
    limit.join(32, now=0.0)
    limit.settle(limit.take(0.0), 429, 0.0)
    assert limit.permits == 32 and limit.limited_since == 0.0


def test_limited_since_tracks_an_unbroken_run_of_429s() -> None:
    limit = _limit(4)
    limit.settle(limit.take(0.0), 429, 1.0, retry_after=5.0)
    limit.settle(limit.take(2.0), 429, 3.0, retry_after=5.0)
    assert limit.limited_since == 1.0 and limit.view(4.0)["rate_limited_s"] == 3.0
    limit.settle(limit.take(4.0), 503, 4.5)  # any other answer ends it
    assert limit.limited_since is None


# ---- simulation ------------------------------------------------------------------------


@dataclass
class Sim:
    """Workers that always have work, one endpoint limit, a container of ``capacity``."""

    capacity: int
    workers: int = 32
    latency: float = 0.1
    retry_after: float = 1.0
    adaptive: bool = True
    log: list[tuple[float, int]] = field(default_factory=list)  # (time, status)
    limits: list[tuple[float, int]] = field(default_factory=list)

    def run(self, until: float, capacity_at: dict[float, int] | None = None) -> AdaptiveLimit:
        limit = AdaptiveLimit("sim", adaptive=self.adaptive)
        limit.join(self.workers, now=0.0)
        events: list[tuple[float, int, str, object]] = []
        order = itertools.count()
        waiting: deque[int] = deque()
        busy = 0
        changes = sorted((capacity_at or {}).items())
        for w in range(self.workers):
            heapq.heappush(events, (0.0, next(order), "ready", w))
        while events:
            now, _, kind, item = heapq.heappop(events)
            if now > until:
                break
            while changes and changes[0][0] <= now:
                self.capacity = changes.pop(0)[1]
            if kind == "done":
                worker, ticket = item  # type: ignore[misc]
                busy -= 1
                limit.settle(ticket, 200, now)
                self.log.append((now, 200))
                waiting.append(worker)
            else:
                waiting.append(item)  # type: ignore[arg-type]
            while waiting and limit.room() > 0:
                worker = waiting.popleft()
                ticket = limit.take(now)
                if busy < self.capacity:
                    busy += 1
                    heapq.heappush(
                        events, (now + self.latency, next(order), "done", (worker, ticket))
                    )
                else:
                    limit.settle(ticket, 429, now, self.retry_after)
                    self.log.append((now, 429))
                    heapq.heappush(events, (now + self.retry_after, next(order), "ready", worker))
            self.limits.append((now, limit.permits))
        return limit

    def window(self, start: float, end: float) -> tuple[float, float]:
        """(goodput in rollouts/s, share of requests answered 429) between two times."""
        inside = [status for t, status in self.log if start <= t < end]
        ok = sum(1 for status in inside if status == 200)
        return ok / (end - start), (len(inside) - ok) / max(1, len(inside))


@pytest.mark.parametrize("capacity", [4, 8])
def test_it_finds_a_hidden_capacity_with_few_429s_and_full_goodput(capacity: int) -> None:
    sim = Sim(capacity=capacity)
    sim.run(until=240.0)
    goodput, refused = sim.window(60.0, 240.0)
    assert goodput >= 0.9 * capacity / sim.latency
    assert refused < 0.05
    assert max(p for t, p in sim.limits if t > 60.0) <= capacity + 1


def test_a_fixed_limit_is_mostly_429s_against_the_same_container() -> None:
    sim = Sim(capacity=4, adaptive=False)
    sim.run(until=120.0)
    _, refused = sim.window(60.0, 120.0)
    assert refused > 0.3  # what --concurrency 32 meets at a fixed limit (Retry-After: 1)


def test_it_climbs_back_when_the_pressure_ends() -> None:
    sim = Sim(capacity=4)
    limit = sim.run(until=200.0, capacity_at={100.0: 64})
    assert max(p for t, p in sim.limits if 50.0 < t < 100.0) <= 5
    assert limit.permits == 32  # back at --concurrency, and never above it
    assert max(p for _, p in sim.limits) <= 32
    climbed = next(t for t, p in sim.limits if t > 100.0 and p == 32)
    assert climbed - 100.0 < 30.0


def test_a_url_tried_again_after_refusals_takes_one_request_at_a_time() -> None:
    limit = _limit(8)
    limit.refusing = True  # what the client sets when a connection was refused
    assert limit.room() == 1
    ticket = limit.take(0.0)
    assert limit.room() == 0
    limit.settle(ticket, 200, 0.1)  # it answered: reachable again
    assert not limit.refusing and limit.room() == 8

"""Adaptive concurrency per container endpoint: AIMD on 429/503, shared by a process's runs.

A container says it is over capacity with a 429 (rate limited) or a 503 (unavailable).
Sending the same load again only earns more of them: against a container that takes a few
rollouts at once, a high ``--concurrency`` at a fixed limit has most of its requests
answered 429. So each endpoint URL has one limit on the rollouts in flight to it, an
:class:`AdaptiveLimit`, that every queue worker asks for a slot before it sends:

- It starts at the ``--concurrency`` of the run using it (of several runs: the sum of
  theirs), and never goes above that.
- Multiplicative decrease: a 429 or 503 cuts it to 0.8x, once per episode: the answers to
  requests sent before the last cut are that same episode and cut nothing more.
- Additive increase: each clean round (as many 200s as the limit, of requests sent while
  the limit was all in use) raises it by 5% or by 1, whichever is more. A limit that is
  not in use does not grow: nothing showed the container takes more.
- The wall: the level a cut came from is tried again only after 2, 4, ... 64 clean rounds
  below it (one more doubling per failed try); a clean round at that level forgets it.
  Against a fixed capacity this keeps the 429s rare once the limit found it (the probes
  of plain AIMD would be one request in twenty there), and when the pressure ends the
  limit climbs back at a round per step.
- ``Retry-After`` is honoured by the rollout that got it (:mod:`optimizer.runtime.rollouts.client`);
  the cut holds the others back meanwhile.

The limit also keeps what the client's routing reads: the rollouts in flight (across
runs), requests that got no answer, how long the endpoint rests after a refused connection
(and that it then takes one request at a time until it answers again), and since when it
answers nothing but 429s (``limited_since``), which bounds the wait of ``--rate-limit-wait``.

One registry per event loop (:meth:`EndpointLimits.of_loop`): every run of one ``serve``
or ``optimize run`` process (one loop) on the same URL shares one limit; tests, each with
a loop of their own, never see another test's limits.

Across processes, the limit is shared through the workspace by every runner that calls the
URL (:mod:`optimizer.runtime.rollouts.shared_limits`): the same arithmetic runs on one limit
kept in the store, and this process sends at most its ``allotted`` part of it. Meanwhile
a 429 or a 503 still backs this process off at once; the cut it saw, and the clean answers it
counted, reach the store's limit at the next visit (:meth:`AdaptiveLimit.report`).
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["AdaptiveLimit", "EndpointLimits", "Report", "Ticket"]

CUT = 0.8  # multiplicative decrease per 429/503 episode
GROWTH = 0.05  # increase per clean round: this share of the limit, at least 1
MAX_STRIKES = 6  # at most 2**6 = 64 clean rounds below the wall before it is tried again
FRESH_AFTER_S = 60.0  # a run joining an endpoint without pressure this long starts at the top
PRESSURE = frozenset({429, 503})
HOLD_S = 0.25  # shared: how long a refused request's slot rests (a visit's period)


@dataclass(frozen=True)
class Report:
    """What a process saw of a shared limit since its last visit to the store."""

    cut_from: int | None  # the episode it saw a 429/503 in (None: none)
    cut_sent: float  # when the last request refused in that episode was sent (time.time())
    epoch: int  # the episode its clean answers belong to
    clean: int  # clean answers of requests sent while its part was all in use


@dataclass(frozen=True)
class Ticket:
    """One request's slot: when it was sent, in which episode, and whether the limit was in use."""

    sent: float
    epoch: int
    saturated: bool


class AdaptiveLimit:
    """The limit on rollouts in flight to one endpoint URL (see the module docstring)."""

    def __init__(self, url: str, *, adaptive: bool = True) -> None:
        self.url = url
        self.adaptive = adaptive
        self.ceiling = 0  # the sum of the shares of the runs using it
        self.limit = 0.0
        self.in_flight = 0
        self.wanting = 0  # rollouts under way that may go to this URL (their client's count)
        self.failures = 0  # requests in a row that got no answer
        self.down_until = 0.0  # resting after a refused or dropped connection
        self.refusing = False  # since then, no answer: one request at a time tries it
        self.limited_since: float | None = None  # the first 429 after any other answer
        self.retry_after: float | None = None  # the last 429's Retry-After
        self.epoch = 0  # cuts so far
        self.last_pressure = -math.inf
        self._clean = 0
        self._held = 0  # clean rounds waited below the wall
        self._wall: int | None = None
        self._strikes = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        # Shared through the store (shared_limits): this process's part, and what it saw.
        self.allotted: int | None = None
        self.shared: dict[str, Any] = {}  # the store's limit as last seen: limit, runners
        self._cut_from: int | None = None
        self._cut_sent = 0.0
        self._counted = 0
        self._level_since = 0.0  # when this process heard of the store's current level
        self.nudge = asyncio.Event()  # set when the store should hear of a cut at once
        self.member: str | None = None  # this process's token among the URL's runners
        self.visiting = asyncio.Lock()  # one visit to the store at a time

    @property
    def permits(self) -> int:
        """Requests it lets in flight now (no limit while no run has joined: checks, probes)."""
        if self.ceiling == 0:
            return sys.maxsize
        if not self.adaptive:
            return self.ceiling
        if self.allotted is not None:
            return max(1, min(self.allotted, self.ceiling))
        return max(1, int(self.limit))

    @property
    def demand(self) -> int:
        """Rollouts under way on this URL (in flight, waiting for a slot, or resting before a
        retry), at most the ceiling."""
        return min(self.ceiling, max(self.wanting, self.in_flight + len(self._waiters)))

    def room(self) -> int:
        """Slots free now (one at most while the URL is tried again after refusals)."""
        if self.refusing:
            return 1 - self.in_flight
        return self.permits - self.in_flight

    def join(self, share: int, now: float) -> None:
        """A run's queue of ``share`` workers starts using this endpoint."""
        fresh = self.limit >= self.ceiling or now - self.last_pressure > FRESH_AFTER_S
        self.ceiling += share
        if fresh:  # no pressure to remember: the new run gets its whole share at once
            self.limit = float(self.ceiling)
            self._wall, self._strikes = None, 0
        self.wake()

    def leave(self, share: int) -> None:
        """A run's queue stops using this endpoint."""
        self.ceiling = max(0, self.ceiling - share)
        self.limit = min(self.limit, float(self.ceiling))
        self.wake()

    def take(self, now: float) -> Ticket:
        """Count one request in flight (the caller checked ``room()``)."""
        saturated = self.in_flight + 1 >= self.permits
        self.in_flight += 1
        return Ticket(now, self.epoch, saturated)

    def settle(
        self, ticket: Ticket, status: int | None, now: float, retry_after: float | None = None
    ) -> None:
        """The request of ``ticket`` ended: ``status`` of its answer, None for no answer."""
        if self.allotted is not None and status in PRESSURE:
            # Shared: a refusal often comes of another runner that has not heard of the last
            # cut yet; the slot rests a while instead of earning the next request a refusal
            # at once, and again, until that runner hears of it (its next visit).
            asyncio.get_running_loop().call_later(HOLD_S, self._rested)
        else:
            self.in_flight -= 1
        if status is not None:  # it answered: reachable again
            self.failures, self.refusing = 0, False
        if status == 429:
            self.limited_since = now if self.limited_since is None else self.limited_since
            self.retry_after = retry_after
        elif status is not None:
            self.limited_since = None
        if status in PRESSURE:
            self._pressure(ticket, now)
        elif status == 200:
            self._clean_answer(ticket)
        self.wake()

    def _rested(self) -> None:
        self.in_flight -= 1
        self.wake()

    def _pressure(self, ticket: Ticket, now: float) -> None:
        self.last_pressure = now
        if not self.adaptive or ticket.epoch != self.epoch:
            return  # an answer of an episode that already cut
        if self.allotted is not None:  # shared: back off now, the store's limit is cut soon
            sent = time.time() - (now - ticket.sent)
            self._cut_sent = max(self._cut_sent, sent)
            if self._cut_from != self.epoch:  # once per episode, which the store numbers
                self._cut_from = self.epoch
                self.allotted = max(1, int(self.allotted * CUT))
                self._counted = 0
                self.nudge.set()
            return
        level = self.permits
        if level == self._wall:
            self._strikes = min(self._strikes + 1, MAX_STRIKES)
        else:
            self._wall, self._strikes = level, 1
        self.limit = max(1.0, self.limit * CUT)
        self.epoch += 1
        self._clean = self._held = 0

    def _clean_answer(self, ticket: Ticket) -> None:
        if not self.adaptive or ticket.epoch != self.epoch or not ticket.saturated:
            return
        if self.allotted is not None:  # shared: the store's limit counts the rounds
            if ticket.sent >= self._level_since:  # sent knowing the store's current level
                self._counted += 1
            return
        self._clean += 1
        if self._clean >= self.permits:
            self._clean = 0
            self._grow()

    def _grow(self) -> None:
        """One clean round: step up, unless the step reaches the wall too soon."""
        if self._wall is not None and self.permits >= self._wall:
            self._wall, self._strikes = None, 0  # the level that failed works now
        target = min(float(self.ceiling), self.limit + max(1.0, self.limit * GROWTH))
        if self._wall is not None and int(target) >= self._wall:
            self._held += 1
            if self._held < 2**self._strikes:
                return
            self._held = 0
        self.limit = target

    def report(self) -> Report:
        """What this process saw since its last visit to the store (see the docstring)."""
        return Report(self._cut_from, self._cut_sent, self.epoch, self._counted)

    def adopt(self, report: Report, epoch: int, allotted: int, shared: dict[str, Any]) -> None:
        """The store took ``report`` in: its limit is at episode ``epoch`` now, and this
        process may send ``allotted`` at once. A cut seen since it was sent stays pending,
        and so does the back-off it made."""
        if self._cut_from is not None and self._cut_from == report.cut_from:
            self._cut_from = None
        if self.epoch == report.epoch:
            self._counted = max(0, self._counted - report.clean)
        if epoch != self.epoch:  # the store's episodes: answers of earlier ones count no more
            self.epoch, self._counted, self._cut_from = epoch, 0, None
        if self._cut_from is not None and self.allotted is not None:
            allotted = min(allotted, self.allotted)
        self.allotted = allotted
        if shared.get("limit") != self.shared.get("limit"):
            self._level_since, self._counted = time.monotonic(), 0
        self.shared = shared
        self.wake()

    def unshare(self) -> None:
        """Back to a limit of this process alone (no run of it calls the URL any more)."""
        self.allotted, self.shared, self._cut_from, self._counted = None, {}, None, 0
        self._cut_sent = 0.0
        self.member = None

    def state(self) -> dict[str, Any]:
        """The arithmetic's state, as the store keeps a shared limit (JSON)."""
        return {
            "limit": self.limit, "ceiling": self.ceiling, "epoch": self.epoch,
            "clean": self._clean, "held": self._held, "wall": self._wall,
            "strikes": self._strikes,
            "last_pressure": None if self.last_pressure == -math.inf else self.last_pressure,
        }  # fmt: skip

    @classmethod
    def restored(cls, url: str, state: dict[str, Any]) -> AdaptiveLimit:
        """A limit with the arithmetic's ``state`` (a new one for ``{}``)."""
        limit = cls(url)
        if state:
            limit.limit, limit.ceiling = float(state["limit"]), int(state["ceiling"])
            limit.epoch, limit._clean, limit._held = state["epoch"], state["clean"], state["held"]
            limit._wall, limit._strikes = state["wall"], state["strikes"]
            pressure = state["last_pressure"]
            limit.last_pressure = -math.inf if pressure is None else float(pressure)
        return limit

    def observe(self, report: Report, now: float) -> None:
        """Apply another process's ``report`` to this limit (the store's copy)."""
        if report.cut_from is not None:
            self._pressure(Ticket(now, report.cut_from, True), now)
        for _ in range(report.clean):
            self._clean_answer(Ticket(now, report.epoch, True))

    def wake(self) -> None:
        """Wake as many waiting workers as there are free slots."""
        room = self.room()
        while room > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                room -= 1

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        """Wake ``waiter`` when a slot frees up (see ``wake``)."""
        self._waiters.append(waiter)

    def drop_waiter(self, waiter: asyncio.Future[None]) -> None:
        """Forget ``waiter`` (it was woken elsewhere, or it gave up)."""
        if waiter in self._waiters:
            self._waiters.remove(waiter)

    def view(self, now: float) -> dict[str, Any]:
        """What events and the console show of it."""
        limited = None if self.limited_since is None else round(now - self.limited_since, 1)
        return {
            "url": self.url,
            "limit": self.permits if self.ceiling else None,
            "max": self.ceiling or None,
            "in_flight": self.in_flight,
            "cuts": self.epoch,
            "adaptive": self.adaptive,
            "rate_limited_s": limited,
            "retry_after_s": self.retry_after if limited is not None else None,
            "shared": self.shared or None,
        }


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, EndpointLimits] = (
    weakref.WeakKeyDictionary()
)


class EndpointLimits:
    """The limits of one process's container endpoints, one per URL."""

    def __init__(self, *, adaptive: bool = True) -> None:
        self.adaptive = adaptive
        self._by_url: dict[str, AdaptiveLimit] = {}

    def get(self, url: str) -> AdaptiveLimit:
        """The limit of ``url`` (made on first use)."""
        limit = self._by_url.get(url)
        if limit is None:
            limit = self._by_url[url] = AdaptiveLimit(url, adaptive=self.adaptive)
        return limit

    @staticmethod
    def of_loop() -> EndpointLimits:
        """The registry of the running event loop (a new one outside a loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return EndpointLimits()
        registry = _BY_LOOP.get(loop)
        if registry is None:
            registry = _BY_LOOP[loop] = EndpointLimits()
        return registry

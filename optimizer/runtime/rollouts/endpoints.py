"""A client's container URLs and which one the next request goes to.

Each URL is an :class:`Endpoint` holding the process's adaptive limit for it
(:mod:`optimizer.runtime.rollouts.limits`). A request first takes a slot: on the least busy URL
relative to its limit (in flight / limit, then the fewest requests without an answer),
among the URLs not resting after a refused connection (all of them when every one rests);
when every URL is full it waits for a slot to free up, or for a resting URL to come back.
A refused or dropped connection rests a URL 1, 2, 4 ... 30 s (doubling while it keeps
failing); after that, it takes one request at a time until it answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from optimizer.runtime.rollouts.limits import AdaptiveLimit, EndpointLimits, Ticket

__all__ = ["Endpoint", "Endpoints"]

MAX_REST_S = 30.0


@dataclass
class Endpoint:
    """One container URL and its limit (shared by every client of the process on this URL)."""

    url: str
    limit: AdaptiveLimit
    rollout_url: httpx.URL = field(init=False)  # parsed once, not per rollout

    def __post_init__(self) -> None:
        self.rollout_url = httpx.URL(f"{self.url}/rollout")


class Endpoints:
    """The URLs of one client, routed to by slot (see the module docstring)."""

    def __init__(self, urls: Sequence[str], limits: EndpointLimits) -> None:
        self.all = [
            Endpoint(url, limits.get(url)) for url in dict.fromkeys(u.rstrip("/") for u in urls)
        ]
        self._joined: list[tuple[AdaptiveLimit, int]] = []

    def keep(self, urls: set[str]) -> None:
        """Route only to ``urls`` from now on (e.g. the healthy ones)."""
        self.all = [e for e in self.all if e.url in urls]

    def join(self, share: int) -> None:
        """``share`` workers start sending: each URL's limit may grow by that much."""
        now = time.monotonic()
        for endpoint in self.all:
            endpoint.limit.join(share, now)
            self._joined.append((endpoint.limit, share))

    def leave(self) -> None:
        """Undo every ``join``."""
        for limit, share in self._joined:
            limit.leave(share)
        self._joined.clear()

    @contextlib.contextmanager
    def wanted(self) -> Iterator[None]:
        """One rollout under way, which may go to any URL (their limits' ``demand``)."""
        limits = [endpoint.limit for endpoint in self.all]
        for limit in limits:
            limit.wanting += 1
        try:
            yield
        finally:
            for limit in limits:
                limit.wanting -= 1

    def views(self) -> list[dict[str, Any]]:
        """Each URL's ``AdaptiveLimit.view``."""
        now = time.monotonic()
        return [endpoint.limit.view(now) for endpoint in self.all]

    def _pick(self, now: float) -> tuple[Endpoint | None, list[Endpoint]]:
        """The least busy URL with a free slot (None: all full), and the URLs considered."""
        up = [e for e in self.all if e.limit.down_until <= now] or self.all
        free = [e for e in up if e.limit.room() > 0]
        if not free:
            return None, up
        best = min(free, key=lambda e: (e.limit.in_flight / e.limit.permits, e.limit.failures))
        return best, up

    async def acquire(self) -> tuple[Endpoint, Ticket]:
        """A slot on some URL under its limit, waiting for one when every URL is full."""
        while True:
            now = time.monotonic()
            endpoint, up = self._pick(now)
            if endpoint is not None:
                return endpoint, endpoint.limit.take(now)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for e in up:
                e.limit.add_waiter(waiter)
            # A URL resting after a refused connection comes back by itself, unannounced.
            resting = [e.limit.down_until - now for e in self.all if e not in up]
            try:
                await asyncio.wait([waiter], timeout=min(resting) if resting else None)
            finally:
                for e in up:
                    e.limit.drop_waiter(waiter)
                if not waiter.done():  # a wake-up it did not use goes to the next waiter
                    waiter.cancel()
                    for e in up:
                        e.limit.wake()

    def another_up(self, endpoint: Endpoint) -> bool:
        """Whether a URL other than ``endpoint`` is not resting."""
        now = time.monotonic()
        return any(e is not endpoint and e.limit.down_until <= now for e in self.all)

    def unanswered(self, endpoint: Endpoint, refused: bool) -> None:
        """A request to ``endpoint`` got no answer; ``refused``: its connection was refused or
        dropped (not a timeout), so the URL rests, longer each time, then takes one request
        at a time."""
        limit = endpoint.limit
        limit.failures += 1
        if refused:
            limit.down_until = time.monotonic() + min(MAX_REST_S, 2.0 ** (limit.failures - 1))
            limit.refusing = True

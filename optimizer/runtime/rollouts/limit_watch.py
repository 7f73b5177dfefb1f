"""What a run says about its container endpoints' limits: ``concurrency`` events and waits.

The adaptive limits (:mod:`optimizer.runtime.rollouts.limits`) change under the run's feet, shared
with other runs of the process; every ``period_s`` the watch reads the run's client and:

- emits ``concurrency`` when a URL's limit, its ceiling or whether it is rate limited changed:
  ``{"limit", "max", "endpoints": [...]}``, where ``limit`` is what this run may have in
  flight now (the URLs' limits summed, at most its ``--concurrency``, which is ``max``) and
  each endpoint is an ``AdaptiveLimit.view`` (its own limit, shared by the process's runs);
- emits a ``warning`` (the CLI prints it on stderr, the console shows it) once a URL has
  answered nothing but 429s for 5 s, again at 30 s, 60 s, and at every doubling after,
  saying how long it has waited and how long it will wait before rollouts fail
  (``--rate-limit-wait``); and one more when the limit clears.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["LimitWatch", "rate_limit_notice"]

NOTICE_S = (5.0, 30.0, 60.0)  # then every doubling

Emit = Callable[[str, dict[str, Any]], Awaitable[Any]]


def _next_notice(after_s: float) -> float:
    for threshold in NOTICE_S:
        if threshold > after_s:
            return threshold
    return after_s * 2


def rate_limit_notice(view: dict[str, Any], wait_s: float) -> str:
    """The waiting message for an endpoint view that is rate limited."""
    waited = float(view["rate_limited_s"])
    retry = view.get("retry_after_s")
    said = f", Retry-After {retry:g} s" if retry is not None else ""
    limit = view.get("limit")
    slowed = f"; rollouts to it slowed to {limit} at a time" if limit else ""
    return (
        f"waiting on the container's rate limit: {view['url']} has answered only 429 for "
        f"{waited:.0f} s{said}{slowed}; rollouts keep waiting up to {wait_s:g} s "
        f"(--rate-limit-wait), {max(0.0, wait_s - waited):.0f} s more, before they fail"
    )


class LimitWatch:
    """Reads a client's limits and tells the run (see the module docstring)."""

    def __init__(
        self,
        views: Callable[[], list[dict[str, Any]]],
        emit: Emit,
        *,
        concurrency: int,
        wait_s: float,
        period_s: float = 1.0,
    ) -> None:
        self._views = views
        self._emit = emit
        self._concurrency = concurrency
        self._wait_s = wait_s
        self._period = period_s
        self._shown: tuple[Any, ...] | None = None
        self._notices: dict[str, float] = {}  # url -> the wait that earns the next notice
        self._since: dict[str, float] = {}  # url -> its wait so far, once announced

    async def run(self) -> None:
        """Look every ``period_s`` until cancelled."""
        while True:
            await self.look()
            await asyncio.sleep(self._period)

    async def look(self) -> None:
        """Emit what changed since the last look."""
        views = self._views()
        state = tuple((v["url"], v["limit"], v["max"], v["rate_limited_s"] is None) for v in views)
        if state != self._shown:
            self._shown = state
            await self._emit("concurrency", self.summary(views))
        for view in views:
            await self._rate_limit(view)

    def summary(self, views: list[dict[str, Any]]) -> dict[str, Any]:
        """The ``concurrency`` event's data."""
        limits = [v["limit"] for v in views if v["limit"] is not None]
        total = min(self._concurrency, sum(limits)) if limits else self._concurrency
        return {"limit": total, "max": self._concurrency, "endpoints": views}

    async def _rate_limit(self, view: dict[str, Any]) -> None:
        url, waited = view["url"], view["rate_limited_s"]
        if waited is None:
            if url in self._since:
                since = self._since.pop(url)
                self._notices.pop(url, None)
                await self._emit(
                    "warning",
                    {
                        "message": f"the container's rate limit at {url} cleared after "
                        f"{since:.0f} s or a little more; the concurrency limit climbs back "
                        f"toward {self._concurrency}",
                        "rate_limit": {"url": url, "cleared": True},
                    },
                )
            return
        if url in self._since:
            self._since[url] = waited
        if waited < self._notices.setdefault(url, NOTICE_S[0]):
            return
        self._notices[url] = _next_notice(waited)
        self._since[url] = waited
        await self._emit(
            "warning",
            {
                "message": rate_limit_notice(view, self._wait_s),
                "rate_limit": {
                    "url": url,
                    "waited_s": waited,
                    "wait_s": self._wait_s,
                    "retry_after_s": view.get("retry_after_s"),
                    "limit": view.get("limit"),
                },
            },
        )

"""One adaptive limit per container endpoint for every runner that calls it, through the store.

Each process adapts its limit on a URL to the 429s it gets (:mod:`optimizer.runtime.rollouts.
limits`). Alone, N processes against one container would each find its capacity and
together send N times it. So while a rollout queue runs, :class:`SharedLimits` visits the
store for each of its URLs every ``period_s`` (at once after a 429 or a 503), in one
transaction (:meth:`workspace.endpoint_limits.LimitStore.sync`) that:

- renews this process as a member of the URL (its ceiling: the workers of its runs; its
  demand: the rollouts it is sending or waiting to send) and drops members that are gone;
- applies what this process saw since its last visit (a cut, clean answers) to the one
  limit kept in the store, with the same arithmetic a lone process uses
  (:meth:`AdaptiveLimit.observe`): a cut once per episode whoever saw it, a clean round
  once as many clean answers as the limit came in from all of them;
- splits the limit between the members (:func:`split`): each gets up to what it wants, in
  turns, and what nobody wants goes to those that could still send more, so a runner that
  gets busy has room before its next visit.

This process then sends at most its part. The store's limit starts at the sum of the
members' ceilings and never goes above it, as a lone limit does.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import time
from collections.abc import Iterable
from typing import Any

from optimizer.runtime.rollouts.limits import AdaptiveLimit, Report
from schemas import WorkspaceError
from workspace import Workspace
from workspace.endpoint_limits import Member
from workspace.lease import this_host

__all__ = ["PERIOD_S", "SharedLimits", "decide", "split"]

PERIOD_S = 0.25
MEMBER_TIMEOUT_S = 5.0  # a member not heard of this long is gone (and its part goes)


def split(total: int, members: list[Member]) -> dict[str, int]:
    """``total`` slots between ``members`` (see the module docstring), in member order."""
    wants = {m.member: min(max(m.demand, 0), m.ceiling) for m in members}
    give = dict.fromkeys(wants, 0)
    left = total
    for cap in (wants, {m.member: m.ceiling for m in members}):
        while left > 0 and any(give[name] < cap[name] for name in give):
            for name in give:
                if left > 0 and give[name] < cap[name]:
                    give[name] += 1
                    left -= 1
    return give


def decide(
    url: str, state: dict[str, Any], members: list[Member], me: str, report: Report, now: float
) -> dict[str, Any]:
    """The store's limit of ``url`` after the visit of member ``me``: its ceiling follows the
    members', ``report`` is applied, and the limit is split (see the module docstring).

    A cut counts only for a request refused after every member heard of the last one: until
    then, members that have not heard of it still send their old part, and the refusals that
    earns belong to the episode that was already cut (as the answers to requests sent before
    a cut do for a lone process).
    """
    limit = AdaptiveLimit.restored(url, state.get("aimd", {}))
    ceiling = sum(m.ceiling for m in members)
    if ceiling > limit.ceiling:
        limit.join(ceiling - limit.ceiling, now)
    elif ceiling < limit.ceiling:
        limit.leave(limit.ceiling - ceiling)
    heard: dict[str, list[float]] = state.get("heard", {})  # member -> [episode, when]
    live = [m.member for m in members]
    everyone = all(heard.get(name, [-1.0])[0] == limit.epoch for name in live)
    last = max((heard[name][1] for name in live if name in heard), default=0.0)
    if report.cut_from is not None and not (everyone and report.cut_sent > last):
        report = dataclasses.replace(report, cut_from=None)
    limit.observe(report, now)
    mine = heard.get(me)
    heard = {name: heard[name] for name in live if name in heard}
    if mine is None or mine[0] != limit.epoch:  # when it first heard of this episode
        heard[me] = [limit.epoch, now]
    return {
        "aimd": limit.state(),
        "allot": split(limit.permits if ceiling else 0, members),
        "limit": limit.permits if ceiling else 0,
        "runners": len(members),
        "heard": heard,
    }


class SharedLimits:
    """Keeps the limits of a queue's URLs shared through ``workspace`` (``run()`` as a task)."""

    def __init__(
        self, workspace: Workspace, limits: Iterable[AdaptiveLimit], *, period_s: float = PERIOD_S
    ) -> None:
        self._workspace = workspace
        self._limits = list(limits)
        self._period = period_s

    async def sync_all(self) -> None:
        """Visit the store once for every URL (a store that fails is tried at the next)."""
        for limit in self._limits:
            with contextlib.suppress(WorkspaceError):
                await _sync(self._workspace, limit)

    async def run(self) -> None:
        """Visit every ``period_s``, and at once when a URL saw a cut."""
        while True:
            nudged = [asyncio.ensure_future(limit.nudge.wait()) for limit in self._limits]
            try:
                await asyncio.wait(nudged, timeout=self._period, return_when="FIRST_COMPLETED")
            finally:
                for waiter in nudged:
                    waiter.cancel()
            await self.sync_all()

    async def close(self) -> None:
        """Leave the URLs no run of this process calls any more."""
        for limit in self._limits:
            member = limit.member
            if limit.ceiling == 0 and member is not None:
                limit.unshare()
                with contextlib.suppress(WorkspaceError):
                    await self._workspace.endpoint_limits.leave(limit.url, member)


async def _sync(workspace: Workspace, limit: AdaptiveLimit) -> None:
    if limit.ceiling == 0 or not limit.adaptive:
        return
    # Several queues of this process may share the limit: their visits take turns.
    async with limit.visiting:
        if limit.member is None:
            limit.member = secrets.token_hex(8)
        member = limit.member
        limit.nudge.clear()
        report = limit.report()
        me = Member(
            member, this_host(), os.getpid(), limit.ceiling, limit.demand, time.time(),
            max(MEMBER_TIMEOUT_S, workspace.lease_timeout_s / 6),
        )  # fmt: skip
        state = await workspace.endpoint_limits.sync(
            limit.url,
            me,
            lambda stored, members, now: decide(limit.url, stored, members, member, report, now),
        )
        allotted = int(state["allot"].get(member, 1))
        shared = {"limit": state["limit"], "runners": state["runners"]}
        limit.adopt(report, int(state["aimd"]["epoch"]), allotted, shared)

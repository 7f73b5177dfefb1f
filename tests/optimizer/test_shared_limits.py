"""One limit per endpoint for every runner: the split, the store's arithmetic, a process's part.

The split and the decision are pure functions; a process's side is an ``AdaptiveLimit`` with
a part; the last tests visit a real store (SQLite) from two "processes", each with a registry
of limits and a workspace connection of its own.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

from optimizer.runtime.rollouts.limits import HOLD_S, AdaptiveLimit, EndpointLimits, Report
from optimizer.runtime.rollouts.shared_limits import SharedLimits, decide, split
from workspace import Workspace
from workspace.endpoint_limits import Member

URL = "http://container:8000"
NOTHING = Report(cut_from=None, cut_sent=0.0, epoch=0, clean=0)


def _members(*demands: int, ceiling: int = 32) -> list[Member]:
    host = socket.gethostname()
    return [Member(f"m{i}", host, 1, ceiling, d, 0.0, 10.0) for i, d in enumerate(demands)]


def test_the_split_gives_each_what_it_wants_in_turns() -> None:
    assert split(4, _members(32, 32, 32, 32)) == {"m0": 1, "m1": 1, "m2": 1, "m3": 1}
    assert split(5, _members(32, 32, 32, 32)) == {"m0": 2, "m1": 1, "m2": 1, "m3": 1}
    assert split(6, _members(0, 8, 8, 8)) == {"m0": 0, "m1": 2, "m2": 2, "m3": 2}
    # What nobody wants goes to those that could send more: room before their next visit.
    assert split(8, _members(1, 1, 0, 0, ceiling=8)) == {"m0": 3, "m1": 3, "m2": 1, "m3": 1}
    assert split(100, _members(4, 4, ceiling=8)) == {"m0": 8, "m1": 8}  # never past a ceiling
    assert split(0, _members(4, 4)) == {"m0": 0, "m1": 0}


def _visit(state: dict, members: list[Member], me: str, report: Report, now: float) -> dict:
    return decide(URL, state, members, me, report, now)


def test_the_store_starts_at_the_sum_of_the_ceilings_and_splits_it() -> None:
    one = _visit({}, _members(32), "m0", NOTHING, 100.0)
    assert (one["limit"], one["allot"], one["runners"]) == (32, {"m0": 32}, 1)
    two = _visit(one, _members(32, 32), "m1", NOTHING, 101.0)
    assert (two["limit"], two["allot"]) == (64, {"m0": 32, "m1": 32})
    assert two["heard"] == {"m0": [0, 100.0], "m1": [0, 101.0]}


def test_a_cut_counts_once_every_runner_heard_of_the_last_one() -> None:
    state = _visit(_visit({}, _members(32), "m0", NOTHING, 100.0), _members(32, 32), "m1",
                   NOTHING, 101.0)  # fmt: skip
    early = Report(cut_from=0, cut_sent=100.5, epoch=0, clean=0)  # sent before m1 heard
    assert _visit(state, _members(32, 32), "m0", early, 102.0)["limit"] == 64
    cut = _visit(state, _members(32, 32), "m0", Report(0, 101.5, 0, 0), 102.0)
    assert (cut["limit"], cut["aimd"]["epoch"]) == (51, 1)
    # m1 has not heard of episode 1 yet: its refusals belong to the cut episode.
    again = _visit(cut, _members(32, 32), "m0", Report(1, 103.0, 1, 0), 103.5)
    assert again["limit"] == 51
    heard = _visit(cut, _members(32, 32), "m1", NOTHING, 104.0)  # m1 visits: it heard
    assert heard["heard"]["m1"] == [1, 104.0]
    assert _visit(heard, _members(32, 32), "m0", Report(1, 104.5, 1, 0), 105.0)["limit"] == 40


def test_clean_answers_of_all_runners_make_one_round() -> None:
    state = _visit({}, _members(32, 32), "m0", NOTHING, 100.0)
    state["aimd"]["limit"] = 10.0
    half = Report(cut_from=None, cut_sent=0.0, epoch=0, clean=5)
    state = _visit(state, _members(32, 32), "m0", half, 101.0)
    assert state["limit"] == 10  # half a round
    state = _visit(state, _members(32, 32), "m1", half, 101.5)
    assert state["limit"] == 11  # the other half, from the other runner: +1


async def test_a_refusal_backs_the_part_off_at_once_and_rests_its_slot() -> None:
    limit = AdaptiveLimit(URL)
    limit.join(32, 0.0)
    limit.adopt(NOTHING, 0, 4, {"limit": 16, "runners": 4})
    assert limit.permits == 4
    tickets = [limit.take(1.0) for _ in range(4)]
    limit.settle(tickets[0], 429, 1.0, retry_after=None)
    assert limit.permits == 3 and limit.nudge.is_set()  # backed off before the store hears
    assert limit.in_flight == 4  # the refused request's slot rests
    report = limit.report()
    assert (report.cut_from, report.epoch) == (0, 0) and report.cut_sent > 0
    limit.settle(tickets[1], 429, 1.0)  # the same episode: no second cut
    assert limit.permits == 3
    await asyncio.sleep(HOLD_S + 0.1)
    assert limit.in_flight == 2
    limit.adopt(report, 1, 3, {"limit": 12, "runners": 4})  # the store cut: episode 1
    assert (limit.epoch, limit.report().cut_from, limit.permits) == (1, None, 3)
    limit.unshare()
    assert limit.allotted is None and limit.permits == 32


@pytest.fixture
async def two_processes(tmp_path: Path):
    """Two runners' limits of one URL, each with a workspace connection of its own."""
    async with Workspace(tmp_path / "ws") as a, Workspace(tmp_path / "ws") as b:
        limits = [EndpointLimits().get(URL), EndpointLimits().get(URL)]
        for limit in limits:
            limit.join(32, time.monotonic())
        yield [SharedLimits(a, [limits[0]]), SharedLimits(b, [limits[1]])], limits


async def test_runners_share_one_limit_through_the_store(two_processes) -> None:
    shared, (one, two) = two_processes
    for side in shared:
        await side.sync_all()
    await shared[0].sync_all()  # the first hears of the second
    assert (one.permits, two.permits) == (32, 32)
    assert one.shared == {"limit": 64, "runners": 2}
    # The first is refused; the store cuts the one limit, and both take their part of it.
    one.settle(one.take(time.monotonic()), 429, time.monotonic())
    await shared[0].sync_all()
    await shared[1].sync_all()
    assert one.shared["limit"] == two.shared["limit"] == 51
    assert one.permits + two.permits == 51
    # A runner that leaves gives its part to the other at its next visit.
    one.leave(32)
    await shared[0].close()
    await shared[1].sync_all()
    assert two.shared == {"limit": 32, "runners": 1} and two.permits == 32

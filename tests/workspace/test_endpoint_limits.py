"""Endpoint limits kept in the store: one state per URL changed in turn, its members renewed,
gone ones dropped; on both engines."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

from tests.workspace.conftest import Store
from workspace import Workspace
from workspace.endpoint_limits import Member, endpoint_key

URL = "http://container:8000"


def _member(name: str, *, pid: int | None = None, host: str = "", demand: int = 4) -> Member:
    import socket

    return Member(name, host or socket.gethostname(), pid or os.getpid(), 8, demand, 0.0, 10.0)


def _counting(state: dict[str, Any], members: list[Member], now: float) -> dict[str, Any]:
    """A decision that counts the visits and names the members it was shown."""
    return {"visits": state.get("visits", 0) + 1, "members": [m.member for m in members]}


async def test_a_visit_renews_the_member_and_replaces_the_state(ws: Workspace) -> None:
    state = await ws.endpoint_limits.sync(URL, _member("a"), _counting)
    assert state == {"visits": 1, "members": ["a"]}
    state = await ws.endpoint_limits.sync(URL, _member("b", demand=2), _counting)
    assert state == {"visits": 2, "members": ["a", "b"]}
    stored, members = await ws.endpoint_limits.state(URL)
    assert stored == state
    assert [(m.member, m.ceiling, m.demand) for m in members] == [("a", 8, 4), ("b", 8, 2)]
    assert all(time.time() - m.heartbeat_at < 60 for m in members)
    assert (await ws.endpoint_limits.state("http://other"))[0] == {}


async def test_gone_members_are_dropped_and_a_leaving_one_goes(ws: Workspace, store: Store) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    await ws.endpoint_limits.sync(URL, _member("dead", pid=dead.pid), _counting)
    await ws.endpoint_limits.sync(URL, _member("away", host="other-host"), _counting)
    await ws.endpoint_limits.sync(URL, _member("stays"), _counting)
    store.sql("UPDATE endpoint_members SET heartbeat_at = ? WHERE member = 'away'", (0.0,))
    state = await ws.endpoint_limits.sync(URL, _member("stays"), _counting)
    assert state["members"] == ["stays"]  # the dead pid and the silent host are gone
    await ws.endpoint_limits.leave(URL, "stays")
    assert (await ws.endpoint_limits.state(URL))[1] == []


async def test_visits_of_runners_at_once_apply_one_after_the_other(store: Store) -> None:
    """Four processes (four connections) visit 25 times each at once: no visit is lost."""
    opened = [store.open() for _ in range(4)]
    for ws in opened:
        await ws.open()
    try:
        await asyncio.gather(
            *(
                ws.endpoint_limits.sync(URL, _member(f"m{i}"), _counting)
                for _ in range(25)
                for i, ws in enumerate(opened)
            )
        )
        state, members = await opened[0].endpoint_limits.state(URL)
    finally:
        for ws in opened:
            await ws.close()
    assert state["visits"] == 100 and len(members) == 4


def test_an_endpoint_is_kept_without_its_credentials() -> None:
    assert endpoint_key("http://admin:pw@127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert endpoint_key("https://tok@h.example:443") == "https://h.example:443"
    assert endpoint_key("http://[::1]:9000") == "http://[::1]:9000"
    assert endpoint_key("http://127.0.0.1:8000") == "http://127.0.0.1:8000"

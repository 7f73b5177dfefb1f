"""Run leases: one holder at a time, stale holders taken over, strict JSON files."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from schemas import RunConfig, RunLeased, UserError
from tests.workspace.conftest import Store
from workspace import Workspace
from workspace.lease import pid_alive


def _set_lease(store: Store, run_id: str, **columns: object) -> None:
    """Change the lease row as another process (or another host) would have left it."""
    assignments = ", ".join(f"{name} = ?" for name in columns)
    store.sql(f"UPDATE leases SET {assignments} WHERE run_id = ?", (*columns.values(), run_id))


def _dead_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


async def test_a_live_holder_is_named_and_a_second_holder_refused(
    ws: Workspace, run_id: str
) -> None:
    lease, takeover = await ws.acquire_lease(run_id)
    assert takeover is None
    assert (lease.pid, lease.host) == (os.getpid(), socket.gethostname())
    assert await ws.lease_holder(run_id) == lease
    # Another holder, even a task of the same process, is refused and told who holds it.
    with pytest.raises(RunLeased) as refused:
        await ws.acquire_lease(run_id)
    message = str(refused.value)
    assert f"run {run_id} is being run by pid {os.getpid()} on host {lease.host} since " in message
    assert time.strftime("%Y-%m-%d", time.localtime(lease.acquired_at)) in message
    assert f"kill {os.getpid()}" in message
    assert await ws.lease_holder(run_id) == lease  # the refusal changed nothing


async def test_a_released_lease_is_free(ws: Workspace, run_id: str) -> None:
    lease, _ = await ws.acquire_lease(run_id)
    await ws.release_lease(lease)
    assert await ws.lease_holder(run_id) is None
    again, takeover = await ws.acquire_lease(run_id)
    assert takeover is None and again.token != lease.token


async def test_a_dead_holder_on_this_host_is_taken_over(
    ws: Workspace, store: Store, run_id: str
) -> None:
    old, _ = await ws.acquire_lease(run_id)
    dead = _dead_pid()
    assert not pid_alive(dead)
    _set_lease(store, run_id, pid=dead)
    assert await ws.lease_holder(run_id) is None  # stale: nobody executes the run
    lease, takeover = await ws.acquire_lease(run_id)
    assert takeover is not None and takeover.previous.pid == dead
    assert f"pid {dead} is no longer running" in takeover.reason
    # The old holder finds out at its next heartbeat, and its release leaves the new lease.
    assert await ws.renew_lease(old) is False
    await ws.release_lease(old)
    assert await ws.lease_holder(run_id) == lease


async def test_a_holder_without_heartbeat_is_taken_over(
    ws: Workspace, store: Store, run_id: str
) -> None:
    await ws.acquire_lease(run_id)
    # A live pid (this one) whose heartbeat stopped two minutes ago: frozen, or a reused pid.
    _set_lease(store, run_id, heartbeat_at=time.time() - 120)
    lease, takeover = await ws.acquire_lease(run_id, timeout_s=60)
    assert takeover is not None and "no heartbeat for 120 s" in takeover.reason
    assert await ws.lease_holder(run_id) == lease


async def test_a_holder_on_another_host_is_judged_by_its_heartbeat(
    ws: Workspace, store: Store, run_id: str
) -> None:
    await ws.acquire_lease(run_id)
    # Its pid means nothing here (the dead pid must not make it stale).
    _set_lease(store, run_id, host="build-box-7", pid=_dead_pid())
    with pytest.raises(RunLeased, match=r"on host build-box-7 .*kill \d+ on build-box-7"):
        await ws.acquire_lease(run_id)
    _set_lease(store, run_id, heartbeat_at=time.time() - 61)
    _, takeover = await ws.acquire_lease(run_id, timeout_s=60)
    assert takeover is not None and takeover.previous.host == "build-box-7"


async def test_renew_moves_the_heartbeat(ws: Workspace, store: Store, run_id: str) -> None:
    lease, _ = await ws.acquire_lease(run_id)
    _set_lease(store, run_id, heartbeat_at=lease.heartbeat_at - 30)
    assert await ws.renew_lease(lease) is True
    holder = await ws.lease_holder(run_id)
    assert holder is not None and holder.heartbeat_at >= lease.heartbeat_at


async def test_a_read_only_opener_sees_the_holder(store: Store) -> None:
    async with store.open() as ws:
        run_id = (await ws.create_run(RunConfig(containers=["http://127.0.0.1:9"]))).run_id
        lease, _ = await ws.acquire_lease(run_id)
    async with store.open(readonly=True) as reader:
        assert await reader.lease_holder(run_id) == lease


async def test_write_json_never_writes_bare_nan(ws: Workspace, run_id: str) -> None:
    packet = {"lift": float("nan"), "ci": [float("-inf"), 0.5], "nested": {"x": float("inf")}}
    path = await ws.write_json(run_id, "evidence.json", packet)

    def refuse(name: str) -> None:
        raise ValueError(f"bare {name} in JSON")

    data = json.loads(path.read_text(), parse_constant=refuse)
    assert data == {"lift": None, "ci": [None, 0.5], "nested": {"x": None}}


async def test_a_held_run_is_not_deleted_and_a_deleted_run_takes_its_lease_along(
    ws: Workspace, store: Store, run_id: str
) -> None:
    lease, _ = await ws.acquire_lease(run_id)
    with pytest.raises(RunLeased, match=f"pid {os.getpid()}"):
        await ws.delete_run(run_id)
    assert (await ws.get_run(run_id)).run_id == run_id  # still there
    _set_lease(store, run_id, pid=_dead_pid())  # its holder died: the run may go
    await ws.delete_run(run_id)
    assert store.sql("SELECT COUNT(*) FROM leases") == [(0,)]


async def test_two_openers_racing_for_a_free_run_get_one_lease(store: Store) -> None:
    """Two processes (two connections) that find no lease, or a stale one, at the same time:
    exactly one takes it, the other is refused naming it."""
    async with store.open() as a, store.open() as b:
        run_id = (await a.create_run(RunConfig(containers=["http://127.0.0.1:9"]))).run_id
        for _ in range(5):
            results = await asyncio.gather(
                a.acquire_lease(run_id), b.acquire_lease(run_id), return_exceptions=True
            )
            won = [r for r in results if isinstance(r, tuple)]
            refused = [r for r in results if isinstance(r, RunLeased)]
            assert (len(won), len(refused)) == (1, 1), results
            lease = won[0][0]
            assert await a.lease_holder(run_id) == lease
            # Next round: the holder died (its heartbeat is long gone) and both race again.
            _set_lease(store, run_id, host="gone-host", heartbeat_at=time.time() - 3600)


async def test_a_holder_is_judged_by_the_timeout_it_promised(store: Store) -> None:
    """Processes sharing a store may run with different lease timeouts: each lease carries
    its holder's, and every other process judges the holder by that one."""
    async with store.open(lease_timeout_s=5) as quick, store.open() as patient:
        assert patient.lease_timeout_s == 60
        run_id = (await quick.create_run(RunConfig())).run_id
        lease, _ = await quick.acquire_lease(run_id)
        assert (lease.timeout_s, lease.every_s) == (5, 5 / 6)
        _set_lease(store, run_id, host="build-box-7", heartbeat_at=time.time() - 10)
        assert await patient.lease_holder(run_id) is None  # 10 s > the 5 s it promised
        taken, takeover = await patient.acquire_lease(run_id)
        assert takeover is not None and "the limit is 5 s" in takeover.reason
        assert (await quick.lease_holder(run_id)) == taken and taken.timeout_s == 60
        # A slow holder (it promised 60 s) is live for a judge whose own setting is 5 s.
        _set_lease(store, run_id, host="build-box-7", heartbeat_at=time.time() - 30)
        with pytest.raises(RunLeased, match="without a heartbeat for 60 s is taken over"):
            await quick.acquire_lease(run_id)


@pytest.mark.parametrize("raw", ["0", "abc", "-5", "100000"])
def test_a_bad_lease_timeout_names_the_range(monkeypatch, raw: str) -> None:
    monkeypatch.setenv("GEPA_LEASE_TIMEOUT", raw)
    with pytest.raises(UserError, match="from 1 to 86400"):
        Workspace(".gepa-never-created")

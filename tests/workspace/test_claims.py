"""Claims: a rollout one runner pays for, held under a heartbeat, let go of when stored or
errored, taken over from a dead holder; on both engines."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time

from tests.workspace.conftest import RolloutFactory, Store
from workspace import Workspace
from workspace.claims import new_claimant


def _dead_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _set_claims(store: Store, token: str, **columns: object) -> None:
    """Change a holder's claim rows as another process (or another host) left them."""
    assignments = ", ".join(f"{name} = ?" for name in columns)
    store.sql(f"UPDATE claims SET {assignments} WHERE token = ?", (*columns.values(), token))


async def test_free_keys_are_claimed_and_a_second_runner_waits_naming_the_holder(
    ws: Workspace, run_id: str
) -> None:
    first, second = new_claimant(run_id, 60.0), new_claimant("run-other", 60.0)
    split = await ws.claims.take(first, ["k1", "k2"])
    assert (split.mine, split.stored, split.held) == (["k1", "k2"], [], {})
    again = await ws.claims.take(second, ["k2", "k3"])
    assert again.mine == ["k3"] and list(again.held) == ["k2"]
    holder = again.held["k2"]
    assert (holder.token, holder.pid, holder.host) == (
        first.token,
        os.getpid(),
        socket.gethostname(),
    )
    assert holder.describe() == f"run {run_id} (pid {os.getpid()} on host {socket.gethostname()})"
    # Claiming again what one holds already is a no-op, not a wait on oneself.
    assert (await ws.claims.take(first, ["k1"])).mine == ["k1"]
    status = await ws.claims.status(["k1", "k3", "k9"])
    assert (sorted(status.held), status.mine, status.stored) == (["k1", "k3"], ["k9"], [])


async def test_a_stored_key_is_served_not_claimed(
    ws: Workspace, run_id: str, rollout: RolloutFactory
) -> None:
    record = rollout("s1", run_id=run_id)
    await ws.record_rollouts([record])
    claimant = new_claimant(run_id, 60.0)
    split = await ws.claims.take(claimant, [record.cache_key, "k-new"])
    assert (split.mine, split.stored) == (["k-new"], [record.cache_key])
    assert set(await ws.claims.held_by()) == {"k-new"}
    assert (await ws.claims.status([record.cache_key])).stored == [record.cache_key]


async def test_storing_a_rollout_lets_go_of_its_claim_ok_or_errored(
    ws: Workspace, run_id: str, rollout: RolloutFactory
) -> None:
    ok, failed = rollout("s1", run_id=run_id), rollout("s2", run_id=run_id, status="error")
    holder, waiter = new_claimant(run_id, 60.0), new_claimant(run_id, 60.0)
    await ws.claims.take(holder, [ok.cache_key, failed.cache_key, "k-other"])
    await ws.record_paid_trials(run_id, [ok, failed], holder)
    assert set(await ws.claims.held_by()) == {"k-other"}
    # The waiter is served the stored one and pays for the errored one itself.
    split = await ws.claims.take(waiter, [ok.cache_key, failed.cache_key])
    assert (split.stored, split.mine) == ([ok.cache_key], [failed.cache_key])


async def test_a_dead_holder_on_this_host_is_taken_over(ws: Workspace, store: Store) -> None:
    dead, taker = new_claimant("run-a", 60.0), new_claimant("run-b", 60.0)
    await ws.claims.take(dead, ["k1", "k2"])
    pid = _dead_pid()
    _set_claims(store, dead.token, pid=pid)
    split = await ws.claims.take(taker, ["k1", "k2"])
    assert split.mine == ["k1", "k2"]
    assert split.taken_over["k1"] == (
        f"run run-a (pid {pid} on host {socket.gethostname()}): "
        f"pid {pid} is no longer running on {socket.gethostname()}"
    )
    assert {h.token for h in (await ws.claims.held_by()).values()} == {taker.token}
    # The old holder lets go of nothing that is not its own any more.
    assert await ws.claims.release(dead) == 0
    assert len(await ws.claims.held_by()) == 2


async def test_a_holder_on_another_host_is_judged_by_its_heartbeat(
    ws: Workspace, store: Store
) -> None:
    away, here = new_claimant("run-a", 5.0), new_claimant("run-b", 60.0)
    await ws.claims.take(away, ["k1"])
    _set_claims(store, away.token, host="other-host", heartbeat_at=time.time() - 3)
    assert list((await ws.claims.take(here, ["k1"])).held) == ["k1"]  # 3 s < its 5 s
    _set_claims(store, away.token, heartbeat_at=time.time() - 6)
    split = await ws.claims.take(here, ["k1"])
    assert (
        split.mine == ["k1"] and "no heartbeat for 6 s (the limit is 5 s)" in split.taken_over["k1"]
    )


async def test_a_renewed_holder_stays_and_a_forced_take_overrides_it(
    ws: Workspace, store: Store
) -> None:
    holder, waiter = new_claimant("run-a", 5.0), new_claimant("run-b", 60.0)
    await ws.claims.take(holder, ["k1", "k2"])
    _set_claims(store, holder.token, host="other-host", heartbeat_at=time.time() - 60)
    assert await ws.claims.renew(holder) == 2  # it beats again: live
    assert list((await ws.claims.take(waiter, ["k1"])).held) == ["k1"]
    forced = await ws.claims.take(waiter, ["k1"], force=True)
    assert forced.mine == ["k1"] and "waited past its bound" in forced.taken_over["k1"]
    assert await ws.claims.release(holder) == 1  # k2 only: k1 is the waiter's now
    assert set(await ws.claims.held_by()) == {"k1"}


async def test_runners_claiming_the_same_keys_at_once_split_them(store: Store) -> None:
    """Two processes (two connections) claim 300 keys each at the same moment, five times:
    every key goes to exactly one of them."""
    async with store.open() as a, store.open() as b:
        for round_ in range(5):
            keys = [f"r{round_}-k{i}" for i in range(300)]
            first, second = new_claimant("run-a", 60.0), new_claimant("run-b", 60.0)
            one, two = await asyncio.gather(
                a.claims.take(first, keys), b.claims.take(second, list(reversed(keys)))
            )
            assert not set(one.mine) & set(two.mine)
            assert set(one.mine) | set(two.mine) == set(keys)
            assert set(one.held) == set(two.mine) and set(two.held) == set(one.mine)

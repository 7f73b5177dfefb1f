"""A writer process killed with SIGKILL at a random point loses nothing it reported.

While the writer runs, this process reads the same store through a read-only workspace
(as the console does) and must see every rollout the writer has reported. On both engines.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
import time
from pathlib import Path

from tests.workspace.conftest import Store

WRITER = Path(__file__).with_name("crash_writer.py")
ROUNDS = 3


def _parse(lines: list[str]) -> list[tuple[int, str, str]]:
    return [(int(i), status, key) for i, status, key in (line.split() for line in lines)]


async def _run_and_kill(store: Store, tag: str, delay: float) -> list[tuple[int, str, str]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(WRITER), store.target, tag,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    reported: list[str] = []
    reader = None
    try:
        first = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
        assert first.endswith(b"\n"), (await proc.stderr.read()).decode()
        reported.append(first.decode().strip())
        reader = await store.open(readonly=True).open()
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), timeout=0.02)
            except TimeoutError:
                line = b""
            if line.endswith(b"\n"):
                reported.append(line.decode().strip())
            if len(reported) % 10 == 0:
                # A concurrent reader in another process sees every reported commit.
                ok = [key for _, status, key in _parse(reported) if status == "ok"]
                assert set(await reader.lookup_many(ok)) == set(ok)
    finally:
        proc.kill()  # SIGKILL
        rest = await proc.stdout.read()
        await proc.stderr.read()
        await proc.wait()
        if reader is not None:
            await reader.close()
    # Lines written before the kill are complete; a torn last line would lack its newline.
    reported += [line for line in rest.decode().split("\n")[:-1] if line]
    assert proc.returncode == -9
    return _parse(reported)


async def test_rollouts_reported_committed_survive_sigkill(store: Store) -> None:
    rng = random.Random()
    seed = rng.randrange(2**32)
    rng.seed(seed)
    everything: list[tuple[int, str, str]] = []
    for round_ in range(ROUNDS):
        delay = rng.uniform(0.05, 0.5)
        reported = await _run_and_kill(store, f"r{round_}", delay)
        assert reported, f"writer reported nothing (seed {seed})"
        everything += reported

        if store.engine == "sqlite":
            with sqlite3.connect(Path(store.target) / "workspace.sqlite") as conn:
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
                assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        else:  # the killed client's open transaction was rolled back: no trial without rollout
            orphans = "SELECT COUNT(*) FROM trials t LEFT JOIN rollouts r ON r.id = t.rollout_id"
            assert store.sql(f"{orphans} WHERE r.id IS NULL") == [(0,)]
        async with store.open() as ws:
            ok = {key: rid for rid, status, key in everything if status == "ok"}
            found = await ws.lookup_many(list(ok))
            missing = set(ok) - set(found)
            assert not missing, f"{len(missing)} committed rollouts lost (seed {seed})"
            assert {k: r.rollout_id for k, r in found.items()} == ok
            for rid, status, key in everything:
                if status == "error":
                    row = await ws.get_rollout(rid)
                    assert (row.status, row.cache_key) == ("error", key)
            # The next writer carries on from where the killed one stopped.
            run = await ws.get_run(f"crash-r{round_}")
            assert run.status == "created"

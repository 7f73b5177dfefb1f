"""Fixtures of the workspace tests: the store on each engine, and a rollout factory.

``store`` is parametrized over both engines (SQLite in a temporary folder, PostgreSQL in a
fresh schema of the real test server), so every test that takes ``ws`` or ``store`` is the
one contract suite both must pass. ``Store.sql`` changes rows behind the workspace's back,
as another process (or host) would have left them.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from schemas import Policy, RolloutRecord, RunConfig, cache_key, content_hash
from tests.postgres import execute
from workspace import Workspace

RolloutFactory = Callable[..., RolloutRecord]


@dataclass(frozen=True)
class Store:
    """Where one test's store lives, on one engine."""

    engine: str  # "sqlite" | "postgres"
    target: str  # the folder or the URL
    files: Path  # the run files folder (SQLite: the workspace folder itself)

    def open(self, **options: Any) -> Workspace:
        """A ``Workspace`` of this store (not opened yet)."""
        if self.engine == "postgres":
            return Workspace(self.target, run_files=self.files, **options)
        return Workspace(self.target, **options)

    def sql(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (``?`` placeholders) from another connection; its rows."""
        if self.engine == "postgres":
            return execute(self.target, statement, params)
        with sqlite3.connect(Path(self.target) / "workspace.sqlite") as conn:
            return [tuple(row) for row in conn.execute(statement, params)]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_store_url")
        return Store("postgres", url, tmp_path / "files")
    return Store("sqlite", str(tmp_path / "ws"), tmp_path / "ws")


@pytest.fixture
async def ws(store: Store) -> AsyncIterator[Workspace]:
    async with store.open() as workspace:
        yield workspace


@pytest.fixture
async def run_id(ws: Workspace) -> str:
    return (await ws.create_run(RunConfig(containers=["http://127.0.0.1:9"]))).run_id


def make_rollout(
    seed: str = "seed-1",
    *,
    run_id: str = "run-a",
    prompt: str = "You are a classifier.",
    fingerprint: str = "fp-1",
    model: str | None = None,
    status: str = "ok",
    reward: float | None = 1.0,
    trace: dict[str, Any] | None = None,
    **fields: Any,
) -> RolloutRecord:
    """A realistic rollout record; its cache key is derived like the runtime derives it."""
    components = {"system_prompt": prompt}
    policy = Policy(model=model)
    chash = content_hash(components)
    return RolloutRecord(
        cache_key=cache_key(fingerprint, chash, seed, policy),
        run_id=run_id,
        candidate_id=chash[:16],
        candidate_hash=chash,
        fingerprint=fingerprint,
        seed=seed,
        policy=policy.model_dump_json(),
        status=status,
        reward=reward if status == "ok" else None,
        trace=trace if trace is not None else {"messages": [{"role": "user", "content": seed}]},
        error=None if status == "ok" else "HTTP 503 after 5 attempts",
        **fields,
    )


@pytest.fixture
def rollout() -> RolloutFactory:
    return make_rollout


def count_round_trips(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each call queued to the connection's thread and each hop to a worker thread."""
    raw = ws._db._conn
    assert raw is not None
    queued: list[str] = []
    execute = raw._execute

    async def counting(fn: Any, *args: Any, **kwargs: Any) -> Any:
        queued.append(getattr(fn, "__name__", repr(fn)))
        return await execute(fn, *args, **kwargs)

    async def to_thread(fn: Any, *args: Any, **kwargs: Any) -> Any:
        queued.append(f"to_thread {getattr(fn, '__name__', repr(fn))}")
        return fn(*args, **kwargs)

    monkeypatch.setattr(raw, "_execute", counting)
    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    return queued

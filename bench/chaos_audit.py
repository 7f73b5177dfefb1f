"""What the chaos bench measures after a scenario, from the peers' logs and the stored files.

- **Paid twice**, from the container's own request log: for each (candidate, seed), the
  requests it answered normally beyond the first. Requests the container answered with an
  injected fault or a hostile body are not counted (the client was right to ask again), nor
  is one request per pair that was in flight when the bench killed the run (it was answered
  to a process that died before it could commit it: :func:`lost_at_kill`).
- **Secrets found**: every planted secret, searched as bytes in every file of the workspace
  (``workspace.sqlite`` and its WAL, the run folders) and of the captured output of the
  bench's own processes (CLI stdout/stderr, service logs, API answers), and in every
  compressed value stored in the database (traces are zlib-compressed JSON).
- **Scores changed**: every stored score compared with what the deterministic container
  says it must be (:func:`chaos_container.expected_reward`); a stored score for a seed that
  only ever answered a hostile body counts too.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import tempfile
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from chaos_container import expected_reward

from workspace import Workspace

T = TypeVar("T")
Pair = tuple[str, str]  # (candidate content hash, seed)


@dataclass(frozen=True)
class Call:
    """One ``POST /rollout`` as the container logged it."""

    program: str
    cand: str
    seed: str
    fault: str | None


def calls(log: Path) -> list[Call]:
    """Every rollout request the container received, in order."""
    if not log.exists():
        return []
    rows = (json.loads(line) for line in log.read_text().splitlines() if line.strip())
    return [Call(r["program"], r["cand"], r["seed"], r["fault"]) for r in rows]


def paid_twice(served: Iterable[Call], lost: set[Pair]) -> int:
    """Normal answers beyond one per (candidate, seed), less one per pair lost at a kill."""
    answered = Counter((c.cand, c.seed) for c in served if c.fault is None)
    return sum(max(0, n - 1 - (pair in lost)) for pair, n in answered.items())


def read_workspace(root: Path, fn: Callable[[Workspace], Awaitable[T]]) -> T:
    """``await fn(workspace)`` on a read-only workspace (nothing is written by the audit)."""

    async def go() -> T:
        async with Workspace(root, readonly=True) as ws:
            return await fn(ws)

    return asyncio.run(go())


async def committed(ws: Workspace) -> set[Pair]:
    """(candidate hash, seed) of every score the workspace holds."""
    out: set[Pair] = set()
    for run in await ws.list_runs():
        for cand in await ws.list_candidates(run.run_id):
            for record in await ws.rollouts_for_candidate(run.run_id, cand.candidate_id):
                if record.status == "ok":
                    out.add((record.candidate_hash, record.seed))
    return out


def lost_at_kill(root: Path, log: Path) -> set[Pair]:
    """Pairs answered normally before a kill that the killed run never committed."""
    stored: set[Pair] = set()
    if (root / "workspace.sqlite").exists():
        stored = read_workspace(root, committed)
    return {(c.cand, c.seed) for c in calls(log) if c.fault is None} - stored


async def changed_scores(ws: Workspace, hostile: bool) -> tuple[int, int]:
    """(stored scores that differ from the container's rule, stored scores checked)."""
    changed = checked = 0
    for run in await ws.list_runs():
        for cand in await ws.list_candidates(run.run_id):
            for record in await ws.rollouts_for_candidate(run.run_id, cand.candidate_id):
                if record.status != "ok":
                    continue
                checked += 1
                must = expected_reward(cand.components, record.seed, hostile=hostile)
                changed += must is None or record.reward != must
    return changed, checked


def scores_changed(root: Path, hostile: bool = False) -> tuple[int, int]:
    """:func:`changed_scores` of the workspace at ``root`` ((0, 0) when there is none)."""
    if not (root / "workspace.sqlite").exists():
        return 0, 0
    return read_workspace(root, lambda ws: changed_scores(ws, hostile))


def secrets_found(folders: Iterable[Path], secrets: dict[str, str]) -> list[str]:
    """Each place (file, or table of compressed values) where a planted secret was found,
    as ``"<secret name> in <place>"``, once per place."""
    found: list[str] = []
    for path in _files(folders):
        data = path.read_bytes()
        found += [f"{name} in {path}" for name, value in secrets.items() if value.encode() in data]
        if path.name == "workspace.sqlite":
            found += [
                f"{name} in {path} ({where}, compressed)"
                for name, where in _in_compressed_cells(path, secrets)
            ]
    return list(dict.fromkeys(found))


def _files(folders: Iterable[Path]) -> Iterator[Path]:
    for folder in folders:
        if folder.exists():
            yield from sorted(p for p in folder.rglob("*") if p.is_file())


def _in_compressed_cells(db: Path, secrets: dict[str, str]) -> Iterator[tuple[str, str]]:
    """Secrets inside zlib-compressed cells, read from a copy (its WAL applied)."""
    with tempfile.TemporaryDirectory() as tmp:
        for part in db.parent.glob(db.name + "*"):
            shutil.copy(part, Path(tmp) / part.name)
        conn = sqlite3.connect(Path(tmp) / db.name)
        try:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for table in tables:
                for row in conn.execute(f'SELECT * FROM "{table}"'):  # noqa: S608 (names from sqlite_master)
                    for cell in row:
                        text = _inflate(cell)
                        for name, value in secrets.items():
                            if text is not None and value.encode() in text:
                                yield name, f"table {table}"
        finally:
            conn.close()


def _inflate(cell: object) -> bytes | None:
    if not isinstance(cell, bytes):
        return None
    try:
        return zlib.decompress(cell)
    except zlib.error:
        return None

"""``runs why``, ``runs compare`` and ``runs branch`` over real processes on 127.0.0.1.

A ``gepa-runtime container`` process serves the toy program and logs every rollout it serves
(``<candidate hash> <seed>``), the scripted reflection model answers from a thread, and every
command is a real ``python -m optimizer.cli`` process on one workspace. A branch's baseline is
the candidate it branches from, and the rollouts its origin stored cost it nothing.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optimizer.testing import reflection_app, rollout_calls, thread_server, toy_container
from optimizer.testing.toy import TOY_SPLITS
from tests.fakes.servers import ROOT, fake_reflection_flags
from workspace import Workspace

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "optimizer.cli"]
SPLITS = json.loads(TOY_SPLITS.read_text())


@pytest.fixture(scope="module")
def reflection_url() -> Iterator[str]:
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


def _packet(root: Path, run_id: str) -> dict[str, Any]:
    return json.loads((root / "runs" / run_id / "evidence.json").read_text())  # type: ignore[no-any-return]


def _run_ids(root: Path) -> list[str]:
    async def read() -> list[str]:
        async with Workspace(root, readonly=True) as ws:
            return [r.run_id for r in await ws.list_runs()]

    return asyncio.run(read())


def test_why_compare_and_a_branch_that_pays_nothing_for_its_stored_baseline(
    tmp_path: Path, reflection_url: str
) -> None:
    log, root = tmp_path / "calls.log", tmp_path / "ws"
    where = ["--workspace", str(root)]
    with toy_container(log) as url:
        _cli("optimize", "run", "--container", url, *fake_reflection_flags(reflection_url, 400),
             "--seed", "3", "--use-merge", "false", "--proposals-in-flight", "1",
             *where, "--quiet")  # fmt: skip
        (origin,) = _run_ids(root)
        packet = _packet(root, origin)
        base, best = packet["baseline"]["candidate_id"], packet["best"]["candidate_id"]
        mid = next(
            c["candidate_id"]
            for c in packet["candidates"]
            if c["train"] is not None and c["holdout"] is None and c["origin"] != "seed"
        )
        served = Counter(rollout_calls(log))

        why = _cli("runs", "why", origin, *where).stdout
        for c in packet["candidates"]:  # every candidate: its decision, then its numbers
            assert f"{c['candidate_id']}  {c['origin']}  -> " in why, c["candidate_id"]
        assert f"{best}  mutation  -> winner, promoted\n  train 1," in why
        assert "passed its gate against" in why and "scored on every train seed: mean" in why
        one = json.loads(_cli("runs", "why", origin, mid[:8], "--json", *where).stdout)
        assert [c["candidate_id"] for c in one["candidates"]] == [mid]

        compared = _cli("runs", "compare", origin, base, best, *where).stdout
        assert f"A = {base} (seed), B = {best} (mutation)" in compared
        assert "## Prompt diff (A -> B)" in compared and "+Answer with the label." in compared
        assert f"## train: A 0, B 1 on {len(SPLITS['train'])} seeds" in compared
        assert "A feedback: predicted unknown, expected" in compared
        assert Counter(rollout_calls(log)) == served  # why and compare paid for nothing

        made = _cli("runs", "branch", origin, mid[:8], "--max-metric-calls", "150", *where)
        branch = made.stdout.splitlines()[0]
        assert f"a branch of run {origin} at candidate {mid}" in made.stdout
        assert f"branched from run {origin} at {mid}" in _cli("runs", "show", branch, *where).stdout
        assert f"branches: {branch} (at {mid})" in _cli("runs", "show", origin, *where).stdout

        before = Counter(rollout_calls(log))
        _cli("optimize", "run", branch, *where, "--quiet")
        paid = Counter(rollout_calls(log)) - before
    assert _packet(root, branch)["baseline"]["candidate_id"] == mid
    assert _packet(root, branch)["config"]["max_metric_calls"] == 150
    assert all(before[(mid, s)] == 1 for s in SPLITS["train"])  # the origin paid them once
    assert not [s for s in SPLITS["train"] if paid[(mid, s)]], "the branch paid its baseline again"
    assert all(paid[(mid, s)] == 1 for s in SPLITS["holdout"])  # never scored there before
    decisions = _packet(root, branch)["decisions"]
    assert (decisions[0]["candidate_id"], decisions[0]["decision"]) == (mid, "baseline")
    assert decisions[0]["created"]["text"] == (
        f"the baseline of this branch: candidate {mid} of run {origin}"
    )

"""A container that answers 429 for a long while: the run waits it out and says so.

``optimize run`` (a real process) against a real container process that refuses every
rollout with 429 (``Retry-After: 1``) for its first 8 seconds, with ``--max-retries 2``: a
rate limit spends no retries, so no rollout fails; stderr says the run is waiting on the
container's rate limit, for how long so far and how long it will keep waiting; the events
carry the same warning and the concurrency limit the 429s cut.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optimizer.testing import reflection_app, thread_server
from optimizer.testing.replicas import replicas
from tests.fakes.servers import ROOT, fake_reflection_flags
from workspace import Workspace

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LIMITED_FOR_S = 8.0


@pytest.fixture(scope="module")
def reflection_url() -> Iterator[str]:
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


async def _events(root: Path) -> list[Any]:
    async with Workspace(root, readonly=True) as ws:
        (run,) = await ws.list_runs()
        return list(await ws.events_since(run.run_id, 0, 100000))


def _optimize(
    container: str, reflection_url: str, root: Path, *flags: str
) -> subprocess.CompletedProcess[str]:
    """``optimize run`` (a real process) on ``container`` with the fake reflection model."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "optimizer.cli",
            "optimize",
            "run",
            "--container",
            container,
            *fake_reflection_flags(reflection_url, 150),
            "--workspace",
            str(root),
            "--quiet",
            *flags,
        ],  # fmt: skip
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_minute_long_style_rate_limit_is_waited_out_and_announced(
    tmp_path: Path, reflection_url: str
) -> None:
    root = tmp_path / "ws"
    with replicas(1, capacity=64, latency=0.01, retry_after=1, limited_for=LIMITED_FOR_S) as (
        container,
    ):
        started = time.monotonic()
        done = _optimize(
            container.url, reflection_url, root,
            "--max-retries", "2", "--concurrency", "8", "--use-merge", "false",
        )  # fmt: skip
        elapsed = time.monotonic() - started
        stats = container.stats()
    assert done.returncode == 0, done.stdout + done.stderr
    assert elapsed >= LIMITED_FOR_S
    notice = re.search(
        r"warning: waiting on the container's rate limit: \S+ has answered only 429 for (\d+) s"
        r", Retry-After 1 s; rollouts to it slowed to (\d+) at a time; rollouts keep waiting "
        r"up to 600 s \(--rate-limit-wait\), (\d+) s more, before they fail",
        done.stderr,
    )
    assert notice, done.stderr
    waited, slowed, more = (int(g) for g in notice.groups())
    assert waited >= 5 and slowed < 8 and waited + more in (599, 600, 601)
    assert "rate limit at" in done.stderr and "cleared" in done.stderr
    run_dir = next((root / "runs").iterdir())
    packet = json.loads((run_dir / "evidence.json").read_text())
    assert packet["status"] == "completed"
    assert packet["rollouts"]["errors"] == 0 and packet["rollouts"]["paid"] > 0
    assert stats["rejected"] > 0 and stats["accepted"] == packet["rollouts"]["paid"]
    events = asyncio.run(_events(root))
    limits = [e.data["limit"] for e in events if e.type == "concurrency"]
    assert limits[0] == 8 and min(limits) < 8  # the 429s cut it
    waits = [e.data for e in events if e.type == "warning" and "rate_limit" in e.data]
    assert waits and waits[0]["rate_limit"]["waited_s"] >= 5


def test_a_run_stops_waiting_after_its_rate_limit_wait(tmp_path: Path, reflection_url: str) -> None:
    """``--rate-limit-wait`` reaches the run's rollouts: a container that answers only 429 for
    a minute fails the run after about that many seconds, naming the rate limit."""
    root = tmp_path / "ws"
    with replicas(1, capacity=64, latency=0.01, retry_after=1, limited_for=120.0) as (container,):
        started = time.monotonic()
        done = _optimize(
            container.url, reflection_url, root, "--rate-limit-wait", "3", "--concurrency", "4"
        )
        elapsed = time.monotonic() - started
    assert done.returncode != 0, done.stdout + done.stderr
    assert elapsed < 60, elapsed  # not the 600 s default, nor the container's 120 s
    assert "gave up on the container's rate limit" in done.stderr, done.stderr
    assert "(--rate-limit-wait 3;" in done.stderr and "raise --rate-limit-wait" in done.stderr

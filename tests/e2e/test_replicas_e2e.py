"""Container replicas: real container processes on 127.0.0.1, reached through
Debian's HAProxy (the recipe of ``docs/replicas.md``) or as a list of ``--container`` URLs.

A replica killed (``kill -9``) mid-run loses nothing: every rollout it had in flight is
retried on another replica, none is recorded as an error, and every score is the one the
container's rule gives (a score depends only on prompt and seed). A whole optimization run
with a replica killed mid-search ends with the same evidence as one without.

The HAProxy tests skip without ``haproxy`` (``apt-get install -y haproxy``), unless
``GEPA_REQUIRE_HAPROXY=1`` (CI), which makes that a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optimizer.searches import run_optimization
from optimizer.testing import reflection_app, thread_server
from optimizer.testing.replicas import (
    HAPROXY_MISSING,
    KillAt,
    Replica,
    haproxy,
    haproxy_binary,
    prompt,
    replicas,
    run_queue,
)
from optimizer.testing.toy.capacity_container import answer, load_program
from schemas import RunConfig

pytestmark = pytest.mark.e2e

CANDIDATES = 10  # x 36 seeds = 360 rollouts


def _expected(candidates: int) -> dict[tuple[str, str], float]:
    """Every (candidate, seed)'s score by the container's rule, computed here, not served."""
    program, labels = load_program()
    seeds = [*program["seeds"]["train"], *program["seeds"]["holdout"]]
    return {
        (f"c{i}", seed): answer(
            {"seed": seed, "candidate": {"system_prompt": prompt(i)}}, labels, 0.0
        )["reward"]
        for i in range(candidates)
        for seed in seeds
    }


def _survives_a_kill(urls: list[str], reps: list[Replica], tmp_path: Path) -> int:
    """Kill the first replica mid-run; returns the client's retries."""
    kill = KillAt(reps[0], paid=100)
    served_before = reps[0]
    result = asyncio.run(
        run_queue(urls, tmp_path / "ws", concurrency=12, candidates=CANDIDATES, on_sample=kill)
    )
    assert kill.at is not None, "the run ended before the replica was killed"
    assert result.errors == 0 and result.paid == 36 * CANDIDATES
    assert result.rewards == _expected(CANDIDATES)
    survivors = [r.stats()["accepted"] for r in reps[1:]]
    assert all(n > 0 for n in survivors)
    assert served_before.proc.returncode == -9
    return result.retries


@pytest.fixture()
def haproxy_bin() -> str:
    """The ``haproxy`` executable; without it a skip (a failure under GEPA_REQUIRE_HAPROXY=1)."""
    found = haproxy_binary()
    if found is None:
        if os.environ.get("GEPA_REQUIRE_HAPROXY") == "1":
            pytest.fail(f"GEPA_REQUIRE_HAPROXY=1 but {HAPROXY_MISSING}", pytrace=False)
        pytest.skip(HAPROXY_MISSING)
    return found


@pytest.fixture()
def three() -> Iterator[list[Replica]]:
    with replicas(3, capacity=4, latency=0.05) as reps:
        yield reps


def test_a_replica_killed_behind_haproxy_loses_nothing(
    haproxy_bin: str, three: list[Replica], tmp_path: Path
) -> None:
    with haproxy([r.url for r in three], maxconn=4, binary=haproxy_bin) as url:
        _survives_a_kill([url], three, tmp_path)


def test_a_replica_killed_in_a_list_of_urls_loses_nothing(
    three: list[Replica], tmp_path: Path
) -> None:
    retries = _survives_a_kill([r.url for r in three], three, tmp_path)
    assert retries >= 1  # what it had in flight lost its connection and went elsewhere


def test_haproxy_spreads_rollouts_over_the_replicas_up_to_their_capacity(
    haproxy_bin: str, tmp_path: Path
) -> None:
    with (
        replicas(2, capacity=4, latency=0.05) as reps,
        haproxy([r.url for r in reps], maxconn=4, binary=haproxy_bin) as url,
    ):
        result = asyncio.run(run_queue([url], tmp_path / "ws", concurrency=16, candidates=4))
        stats = [r.stats() for r in reps]
    assert result.errors == 0 and result.rewards == _expected(4)
    # HAProxy queues what a replica cannot take: no replica ever said 429, both were full.
    assert [s["rejected"] for s in stats] == [0, 0]
    assert [s["max_in_flight"] for s in stats] == [4, 4]
    assert abs(stats[0]["accepted"] - stats[1]["accepted"]) <= 0.2 * 144


# ---- a whole run --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reflection_url() -> Iterator[str]:
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


def _config(url: str, reflection: str) -> RunConfig:
    return RunConfig(
        containers=[url],
        reflection_model="fake-reflection",
        reflection_base_url=reflection,
        proposer_mode="text",
        max_metric_calls=300,
        max_idle_iterations=6,
        seed=3,
        concurrency=8,
        retry_base_delay_s=0.05,
        use_merge=False,
    )


def _run(url: str, reflection: str, root: Path) -> dict[str, Any]:
    result = asyncio.run(run_optimization(_config(url, reflection), workspace=root))
    return dict(json.loads((result.evidence_dir / "evidence.json").read_text()))


def _kill_after(replica: Replica, accepted: int) -> threading.Thread:
    def watch() -> None:
        while replica.proc.poll() is None:
            if replica.stats()["accepted"] >= accepted:
                replica.kill()
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_run_with_a_replica_killed_mid_search_scores_as_one_without(
    haproxy_bin: str, tmp_path: Path, reflection_url: str
) -> None:
    with (
        replicas(3, capacity=4, latency=0.03) as reps,
        haproxy([r.url for r in reps], maxconn=4, binary=haproxy_bin) as url,
    ):
        calm = _run(url, reflection_url, tmp_path / "calm")
    with (
        replicas(3, capacity=4, latency=0.03) as reps,
        haproxy([r.url for r in reps], maxconn=4, binary=haproxy_bin) as url,
    ):
        watcher = _kill_after(reps[1], accepted=40)
        killed = _run(url, reflection_url, tmp_path / "killed")
        watcher.join(timeout=5)
        assert reps[1].proc.returncode == -9, "the run ended before the replica was killed"
    for packet in (calm, killed):
        assert packet["status"] == "completed" and packet["rollouts"]["errors"] == 0
    for key in ("baseline", "best"):
        for field in ("candidate_id", "train", "holdout"):
            assert killed[key][field] == calm[key][field], (key, field)
    assert killed["rollouts"]["paid"] == calm["rollouts"]["paid"]
    assert killed["promotion"]["lift"] == calm["promotion"]["lift"]

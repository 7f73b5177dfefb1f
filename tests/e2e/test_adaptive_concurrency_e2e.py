"""Adaptive concurrency against a real container process with a hidden capacity.

The container takes 4 rollouts at once and answers 429 (``Retry-After: 0.5``) above that;
the queue runs at ``--concurrency 32`` with far more work than it can take. Once the limit
has come down to the capacity, while the queue still has work: goodput is at least 0.9 x
capacity / latency, and under 5% of the requests are answered 429. What is counted is the
container's own timeline of answers (on the monotonic clock every process of the machine
shares).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from optimizer.testing.replicas import replicas, run_queue

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CAPACITY, LATENCY, CONCURRENCY, CANDIDATES = 4, 0.2, 32, 10


def test_the_limit_finds_a_hidden_capacity_with_full_goodput_and_few_429s(tmp_path: Path) -> None:
    converged: list[float] = []

    def on_sample(seconds: float, paid: int, limit: int) -> None:
        if not converged and limit <= CAPACITY + 1:
            converged.append(time.monotonic())

    with replicas(1, capacity=CAPACITY, latency=LATENCY, retry_after=0.5) as (container,):
        run = asyncio.run(
            run_queue(
                [container.url],
                tmp_path / "ws",
                concurrency=CONCURRENCY,
                candidates=CANDIDATES,
                on_sample=on_sample,
            )
        )
        ended = time.monotonic()
        timeline = container.stats(timeline=True)["timeline"]
    assert run.errors == 0 and run.paid == 36 * CANDIDATES
    assert max(limit for _, _, limit in run.samples) <= CONCURRENCY
    assert converged, f"the limit never came down to {CAPACITY + 1}: {run.samples[-5:]}"
    start, end = converged[0], ended - 1.0  # the last second: the queue runs dry
    assert end - start >= 4.0, end - start
    window = [status for t, status in timeline if start <= t < end]
    goodput = window.count(200) / (end - start)
    refused = window.count(429) / len(window)
    assert goodput >= 0.9 * CAPACITY / LATENCY, (goodput, refused)
    assert refused < 0.05, (goodput, refused)

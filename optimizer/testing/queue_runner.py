"""One runner as a process of its own: candidates through the real rollout queue, on a store
other runners share.

Several of these, started at once on one workspace (a SQLite folder or a PostgreSQL URL)
against one container, are the team of ``tests/e2e/test_team_e2e.py`` and ``bench/team.py``:
each evaluates candidates ``first`` to ``first + candidates - 1`` (:func:`prompt`) on every
seed of the container's program, through its own ``ContainerClient`` and ``RolloutQueue``,
with the claims and the shared endpoint limits of the workspace. When done it prints one
JSON line: what it paid, what it was served, its errors, and every result.

Run: python -m optimizer.testing.queue_runner --workspace DIR_OR_URL --container URL
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.rollouts.client import ContainerClient, RetryPolicy
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.testing.replicas import prompt
from schemas import RunConfig
from workspace import Workspace

__all__ = ["main", "run"]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Evaluate the candidates; what was paid, served and scored."""
    async with Workspace(args.workspace) as ws:
        record = await ws.create_run(RunConfig(containers=[args.container]))
        client = ContainerClient(
            [args.container],
            policy=RetryPolicy(base_delay_s=0.05),
            max_connections=args.concurrency * 2,
        )
        await client.check_health()
        program = await client.program()
        seeds = [*program.seeds.train, *program.seeds.holdout]
        budget = Budget()
        queue = RolloutQueue(
            client=client,
            workspace=ws,
            run_id=record.run_id,
            program=program,
            budget=budget,
            events=EventSink(ws, record.run_id),
            concurrency=args.concurrency,
        )
        if args.start_at:  # the team starts sending at one moment, whatever its import times
            await asyncio.sleep(max(0.0, args.start_at - time.time()))
        started = time.monotonic()
        async with queue:
            print(json.dumps({"run_id": record.run_id, "started": started}), flush=True)
            ids = range(args.first, args.first + args.candidates)
            results = await asyncio.gather(
                *(queue.evaluate(f"c{i}", {"system_prompt": prompt(i)}, seeds) for i in ids)
            )
        ended = time.monotonic()
        await client.aclose()
    rewards = {
        f"c{i} {seed}": result.reward
        for i, by_seed in zip(ids, results, strict=True)
        for seed, result in by_seed.items()
    }
    return {
        "run_id": record.run_id, "started": started, "ended": ended, "paid": budget.paid,
        "cached": budget.cached, "errors": budget.errors, "rewards": rewards,
    }  # fmt: skip


def main() -> None:
    """Parse the flags, run, print the summary as one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--container", required=True)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--start-at", type=float, default=0.0, help="time.time() to start at")
    print(json.dumps(asyncio.run(run(parser.parse_args()))), flush=True)


if __name__ == "__main__":
    main()

"""CPU the rollout queue spends per rollout, without a server: where P1's overhead goes.

P1 of ``dispatch_bench.py`` runs the client and a no-op container on the same cores, so its
ratio depends on the load of the machine. This script replaces the container with an
``httpx.MockTransport`` that answers the no-op container's body, and measures CPU time
(``time.process_time``: every thread of the process, SQLite's included) per rollout:

- bare: a plain ``httpx.AsyncClient`` loop posting the same requests at the same concurrency;
- queue: the same rollouts through ``RolloutQueue`` + ``ContainerClient`` with a fresh
  workspace (all misses: cache lookup, budget, SQLite commit, events).

Then a cProfile of the queue path, top functions by own time (``--top``). A mock transport
has no connection pool: what httpcore's pool costs (see ``optimizer/runtime/rollouts/lanes.py``)
shows only in P1's CPU per rollout of ``dispatch_bench.py``.

Run: .venv/bin/python bench/dispatch_profile.py [--n 4000] [--concurrency 16] [--top 20]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.dispatch_bench import post_rollouts  # noqa: E402
from optimizer.runtime.accounts.budget import Budget  # noqa: E402
from optimizer.runtime.accounts.events import EventSink  # noqa: E402
from optimizer.runtime.rollouts.client import ContainerClient  # noqa: E402
from optimizer.runtime.rollouts.queue import RolloutQueue  # noqa: E402
from schemas import Program, RunConfig  # noqa: E402
from workspace import Workspace  # noqa: E402

URL = "http://noop.test"
# What bench/noop_container.py answers to every rollout.
REPLY = json.dumps(
    {"reward": 1.0, "output": "ok", "feedback": "", "usage": {"latency_ms": 0.0}}
).encode()
PROGRAM = Program.model_validate(
    {
        "protocol": "gepa-container/1",
        "program_id": "noop",
        "fingerprint": "noop-profile",
        "components": [{"name": "system_prompt", "kind": "prompt", "text": "noop"}],
        "seeds": {"train": ["s0"], "val": [], "holdout": ["h0"]},
    }
)


async def _answer(request: httpx.Request) -> httpx.Response:
    # A socket makes the caller wait for the answer at least once: yield as it would, so
    # rollouts finish interleaved and the queue commits batches of realistic size.
    await asyncio.sleep(0)
    json.loads(request.content)  # the container reads the body too
    return httpx.Response(200, content=REPLY, headers={"content-type": "application/json"})


def _http() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(_answer), timeout=60)


async def bare(n: int, concurrency: int) -> None:
    """``n`` POST /rollout by ``concurrency`` workers, and nothing else."""
    async with _http() as http:
        await post_rollouts(http, URL, n, concurrency)


async def queued(n: int, concurrency: int, per_candidate: int = 40) -> None:
    """``n`` paid rollouts through the queue, 40 seeds a candidate, into a fresh workspace."""
    with tempfile.TemporaryDirectory() as tmp:
        async with Workspace(Path(tmp) / "ws") as ws:
            run = await ws.create_run(RunConfig(containers=[URL]))
            async with _http() as http:
                client = ContainerClient([URL], http=http)
                budget = Budget()
                async with RolloutQueue(
                    client=client,
                    workspace=ws,
                    run_id=run.run_id,
                    program=PROGRAM,
                    budget=budget,
                    events=EventSink(ws, run.run_id),
                    concurrency=concurrency,
                ) as queue:
                    await asyncio.gather(
                        *(
                            queue.evaluate(
                                f"c{c}",
                                {"system_prompt": f"candidate {c}"},
                                [f"s{i}" for i in range(c, min(n, c + per_candidate))],
                            )
                            for c in range(0, n, per_candidate)
                        )
                    )
                await client.aclose()
            if budget.paid != n:
                raise RuntimeError(f"paid {budget.paid} rollouts, expected {n}")


def cpu_us(run: Callable[[], Awaitable[None]], n: int, repeats: int) -> tuple[float, float]:
    """The least CPU microseconds per rollout over ``repeats`` runs (noise only adds): of
    the whole process, and of its other threads (SQLite's connection, encoding)."""
    best = (float("inf"), 0.0)
    for _ in range(repeats):
        start, main_start = time.process_time(), time.thread_time()
        asyncio.run(run())  # type: ignore[arg-type]
        total = (time.process_time() - start) / n * 1e6
        main = (time.thread_time() - main_start) / n * 1e6
        best = min(best, (total, total - main))
    return best


def profile(n: int, concurrency: int, top: int) -> str:
    """cProfile of the queue path, the ``top`` functions by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(queued(n, concurrency))
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=4000, help="rollouts a measurement")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3, help="runs; the least CPU is kept")
    parser.add_argument("--top", type=int, default=20, help="profile lines (0: no profile)")
    args = parser.parse_args()
    n, conc = args.n, args.concurrency
    bare_us, _ = cpu_us(lambda: bare(n, conc), n, args.repeats)
    queue_us, threads_us = cpu_us(lambda: queued(n, conc), n, args.repeats)
    print(f"CPU per rollout over MockTransport, n={n}, concurrency={conc}")
    print(f"   bare httpx loop : {bare_us:7.1f} us")
    print(
        f"   rollout queue   : {queue_us:7.1f} us  (overhead {queue_us - bare_us:+.1f} us; "
        f"{threads_us:.1f} us of it off the event loop's thread)"
    )
    print(f"   bare / queue    : {bare_us / queue_us:7.2f}")
    if args.top:
        print(profile(n, conc, args.top))


if __name__ == "__main__":
    main()

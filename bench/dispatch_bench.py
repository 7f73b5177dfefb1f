"""Dispatch benchmark: what the rollout queue costs on top of plain HTTP.

P1: paid rollouts/s through the queue (cache lookup, budget, SQLite commit, events) against a
    no-op container, next to a bare httpx loop posting the same requests at the same
    concurrency. Target: ratio >= 0.8. The client's CPU per rollout (this process, all its
    threads) is printed too: unlike the rates, it barely moves with the load of the machine.
P2: the latency sweep: a container answering in 0, 10, 50 and 100 ms, concurrency 8 and 32:
    rollouts/s through the queue and through the bare httpx loop, their ratio (target >= 0.9
    at concurrency 32), and the wall time against the ideal N*L/C where latency > 0.

Run: .venv/bin/python bench/dispatch_bench.py [--n 2000] [--concurrency 16] [--sweep-n 1500]
CPU per rollout without a server, and where it goes: bench/dispatch_profile.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.runtime.accounts.budget import Budget  # noqa: E402
from optimizer.runtime.accounts.events import EventSink  # noqa: E402
from optimizer.runtime.rollouts.client import ContainerClient  # noqa: E402
from optimizer.runtime.rollouts.queue import RolloutQueue  # noqa: E402
from schemas import RunConfig  # noqa: E402
from workspace import Workspace  # noqa: E402


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def noop_container(latency: float) -> Iterator[str]:
    port = _port()
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "noop_container.py"),
            "--port",
            str(port),
            "--latency",
            str(latency),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=0.5).status_code == 200:
                    break
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def raw_loop(url: str, n: int, concurrency: int) -> float:
    """Seconds for ``n`` POST /rollout with ``concurrency`` workers and nothing else."""
    limits = httpx.Limits(
        max_connections=concurrency * 2, max_keepalive_connections=concurrency * 2
    )
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        start = time.perf_counter()
        await post_rollouts(http, url, n, concurrency)
        return time.perf_counter() - start


async def post_rollouts(http: httpx.AsyncClient, url: str, n: int, concurrency: int) -> None:
    """``n`` POST /rollout by ``concurrency`` workers on ``http``, each answer parsed: the
    bare httpx loop the queue is compared with (here and in ``dispatch_profile.py``)."""
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            body = {
                "candidate": {"system_prompt": "raw"},
                "seed": f"s{i}",
                "run_id": "raw",
                "candidate_id": "raw",
            }
            response = await http.post(f"{url}/rollout", json=body)
            response.raise_for_status()
            response.json()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def queue_run(url: str, n: int, concurrency: int, per_candidate: int) -> float:
    """Seconds for ``n`` paid rollouts through the RolloutQueue (fresh workspace: all misses)."""
    with tempfile.TemporaryDirectory() as tmp:
        async with Workspace(Path(tmp) / "ws") as ws:
            run = await ws.create_run(RunConfig(containers=[url]))
            client = ContainerClient([url], max_connections=concurrency * 2)
            await client.check_health()
            program = await client.program()
            budget = Budget()
            events = EventSink(ws, run.run_id)
            async with RolloutQueue(
                client=client,
                workspace=ws,
                run_id=run.run_id,
                program=program,
                budget=budget,
                events=events,
                concurrency=concurrency,
            ) as queue:
                start = time.perf_counter()
                jobs = []
                for c in range(0, n, per_candidate):
                    seeds = [f"s{i}" for i in range(c, min(n, c + per_candidate))]
                    jobs.append(queue.evaluate(f"c{c}", {"system_prompt": f"candidate {c}"}, seeds))
                await asyncio.gather(*jobs)
                elapsed = time.perf_counter() - start
            await client.aclose()
            assert budget.paid == n, budget.snapshot()
            return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=2000, help="rollouts for P1")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrency for P1")
    parser.add_argument(
        "--sweep-n", type=int, default=1500, help="rollouts a point for P2 (0: P1 only)"
    )
    args = parser.parse_args()

    with noop_container(0.0) as url:
        await raw_loop(url, 200, args.concurrency)  # warm up the server
        cpu = time.process_time()
        raw = await raw_loop(url, args.n, args.concurrency)
        cpu, raw_cpu = time.process_time(), time.process_time() - cpu
        queued = await queue_run(url, args.n, args.concurrency, per_candidate=40)
        queue_cpu = time.process_time() - cpu  # with the queue's setup: a fresh workspace
    raw_rate, queue_rate = args.n / raw, args.n / queued
    raw_us, queue_us = raw_cpu / args.n * 1e6, queue_cpu / args.n * 1e6
    print(f"P1 no-op container, n={args.n}, concurrency={args.concurrency}")
    print(f"   bare httpx loop : {raw_rate:8.1f} rollouts/s  {raw_us:7.1f} us CPU a rollout")
    print(
        f"   rollout queue   : {queue_rate:8.1f} rollouts/s  {queue_us:7.1f} us CPU a rollout"
        "  (cache lookup + budget + SQLite commit + events)"
    )
    print(f"   ratio           : {queue_rate / raw_rate:8.2f}   (target >= 0.80)")

    if args.sweep_n > 0:
        await sweep(args.sweep_n)


async def sweep(n: int) -> None:
    """P2: queue against bare loop at each latency and concurrency, one line each."""
    print(f"P2 latency sweep, n={n} rollouts a point")
    print("   latency  conc   bare/s  queue/s  ratio  queue wall / ideal")
    for latency in (0.0, 0.01, 0.05, 0.1):
        with noop_container(latency) as url:
            await raw_loop(url, 200, 32)  # warm up the server
            for conc in (8, 32):
                raw = await raw_loop(url, n, conc)
                queued = await queue_run(url, n, conc, per_candidate=40)
                ideal = n * latency / conc
                versus = f"{queued / ideal:6.2f}" if ideal else "     -"
                print(
                    f"   {latency * 1000:5.0f} ms {conc:5d} {n / raw:8.1f} {n / queued:8.1f}"
                    f" {raw / queued:6.2f}  {versus}"
                )


if __name__ == "__main__":
    asyncio.run(main())

"""Container replicas as real processes on 127.0.0.1, and HAProxy (Debian's) in front of them.

``replicas(n, ...)`` starts ``n`` processes of :data:`optimizer.testing.toy.CAPACITY_CONTAINER`;
``haproxy(urls)`` starts ``haproxy`` in the foreground with the recipe of ``docs/replicas.md``
(least-connections balancing, a slot limit per replica, health checks, a dead replica's
requests redispatched) and yields the one URL the optimizer is given. ``haproxy_binary()`` is
``None`` without the ``haproxy`` binary (``apt-get install -y haproxy`` on Debian).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from optimizer.runtime.accounts.budget import Budget
from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.rollouts.client import ContainerClient, RetryPolicy
from optimizer.runtime.rollouts.queue import RolloutQueue
from optimizer.testing.processes import stop_process
from optimizer.testing.servers import free_port, wait_http
from optimizer.testing.toy import CAPACITY_CONTAINER
from schemas import RunConfig
from workspace import Workspace

__all__ = [
    "HAPROXY_MISSING",
    "KillAt",
    "QueueRun",
    "Replica",
    "haproxy",
    "haproxy_binary",
    "haproxy_config",
    "prompt",
    "replicas",
    "run_queue",
    "wait_until",
]

HAPROXY_MISSING = "haproxy is not installed: apt-get install -y haproxy (Debian)"

HAPROXY_CONFIG = """\
global
    maxconn 4096

defaults
    mode http
    timeout connect 2s
    timeout client 330s
    timeout server 330s
    timeout queue 330s
    # A request that never reached a replica (refused, reset before any answer) goes to
    # another one: rollouts are idempotent (same candidate and seed, same score).
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response junk-response

frontend rollouts
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance leastconn
    option httpchk GET /health
    http-check expect status 200
    # maxconn: HAProxy queues what a replica cannot take instead of sending it a 429.
    # observe: a replica that refuses or drops a connection is marked down at once, not
    # after the next failed health checks (leastconn would keep picking the idle dead one).
    default-server check inter 250ms fall 2 rise 2 maxconn {maxconn} observe layer4 error-limit 1 on-error mark-down
{servers}
"""


def haproxy_binary() -> str | None:
    """The ``haproxy`` executable, or ``None`` when it is not installed."""
    return shutil.which("haproxy") or next(
        (p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if Path(p).exists()), None
    )


def haproxy_config(port: int, urls: list[str], maxconn: int) -> str:
    """The HAProxy recipe of ``docs/replicas.md`` for ``urls`` on 127.0.0.1:``port``."""
    servers = "\n".join(
        f"    server r{i} {url.removeprefix('http://')}" for i, url in enumerate(urls, 1)
    )
    return HAPROXY_CONFIG.format(port=port, maxconn=maxconn, servers=servers)


@contextlib.contextmanager
def haproxy(urls: list[str], *, maxconn: int = 8, binary: str | None = None) -> Iterator[str]:
    """HAProxy in front of ``urls``; yields its URL once a replica answers through it."""
    binary = binary or haproxy_binary()
    if binary is None:
        raise RuntimeError(HAPROXY_MISSING)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="gepa-haproxy-") as folder:
        config = Path(folder) / "haproxy.cfg"
        config.write_text(haproxy_config(port, urls, maxconn))
        check = subprocess.run([binary, "-c", "-f", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused the config: {check.stdout}{check.stderr}")
        proc = subprocess.Popen(
            [binary, "-db", "-f", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/health", proc=proc)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(proc)


@dataclass
class Replica:
    """One container process."""

    url: str
    proc: subprocess.Popen[bytes]

    def stats(self, *, timeline: bool = False) -> dict[str, Any]:
        """Its ``GET /stats`` (with every answer's time and status when ``timeline``)."""
        query = "?timeline=1" if timeline else ""
        return dict(httpx.get(f"{self.url}/stats{query}", timeout=5).json())

    def kill(self) -> None:
        """``kill -9``: in-flight rollouts lose their connection, nothing is answered."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


class KillAt:
    """``on_sample`` of ``run_queue``: kills ``replica`` once the run has paid ``paid`` rollouts."""

    def __init__(self, replica: Replica, paid: int) -> None:
        self.replica, self.paid = replica, paid
        self.at: int | None = None  # what the run had paid when it was killed

    def __call__(self, seconds: float, paid: int, limit: int) -> None:
        if self.at is None and paid >= self.paid:
            self.at = paid
            self.replica.kill()


@contextlib.contextmanager
def replicas(n: int, **settings: float | int | None) -> Iterator[list[Replica]]:
    """``n`` processes of the capacity container (``--capacity``, ``--latency``, ...)."""
    started: list[Replica] = []
    try:
        for _ in range(n):
            port = free_port()
            flags = [
                f"--{name.replace('_', '-')}={value}"
                for name, value in settings.items()
                if value is not None
            ]
            proc = subprocess.Popen(
                [sys.executable, str(CAPACITY_CONTAINER), f"--port={port}", *flags],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            started.append(Replica(f"http://127.0.0.1:{port}", proc))
        for replica in started:
            wait_http(f"{replica.url}/health", proc=replica.proc)
        yield started
    finally:
        for replica in started:
            stop_process(replica.proc)


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    """Poll ``predicate()`` every 20 ms until true, or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise TimeoutError(f"{what} did not happen within {timeout:g} s")


LABELS = ("cow", "cat", "dog", "owl", "bee", "fox", "pig", "hen", "eel", "ant", "yak", "elk")


def prompt(i: int) -> str:
    """Candidate ``i`` of a queue run: the baseline naming a subset of the labels (its bits)."""
    named = [label for bit, label in enumerate(LABELS) if (i + 1) >> bit & 1]
    return f"Answer with the label. Known labels: {', '.join(named)}. Variant {i}."


@dataclass
class QueueRun:
    """What ``run_queue`` measured."""

    elapsed: float
    paid: int
    errors: int
    retries: int
    rewards: dict[tuple[str, str], float | None]  # (candidate, seed) -> reward
    samples: list[tuple[float, int, int]]  # (seconds, paid so far, limit summed over URLs)


async def run_queue(
    urls: list[str],
    workdir: Path,
    *,
    concurrency: int,
    candidates: int,
    limits: Any = None,
    on_sample: Any = None,
    sample_s: float = 0.05,
    retry_base_delay_s: float = 0.05,
) -> QueueRun:
    """``candidates`` candidates on every seed of the capacity container, all queued at once
    through the real ``RolloutQueue`` and ``ContainerClient``; ``on_sample(seconds, paid,
    limit)`` is called every ``sample_s`` (e.g. to kill a replica mid-run)."""
    async with Workspace(workdir) as ws:
        run = await ws.create_run(RunConfig(containers=urls))
        policy = RetryPolicy(base_delay_s=retry_base_delay_s)
        client = ContainerClient(
            urls, limits=limits, policy=policy, max_connections=concurrency * 2
        )
        await client.check_health()
        program = await client.program()
        seeds = [*program.seeds.train, *program.seeds.holdout]
        budget = Budget()
        samples: list[tuple[float, int, int]] = []
        queue = RolloutQueue(
            client=client,
            workspace=ws,
            run_id=run.run_id,
            program=program,
            budget=budget,
            events=EventSink(ws, run.run_id),
            concurrency=concurrency,
        )
        started = time.perf_counter()
        async with queue:
            sampler = asyncio.create_task(
                _sample(client, budget, started, samples, on_sample, sample_s)
            )
            results = await asyncio.gather(
                *(
                    queue.evaluate(f"c{i}", {"system_prompt": prompt(i)}, seeds)
                    for i in range(candidates)
                )
            )
            elapsed = time.perf_counter() - started
            sampler.cancel()
        await client.aclose()
    rewards = {
        (f"c{i}", seed): result.reward
        for i, by_seed in enumerate(results)
        for seed, result in by_seed.items()
    }
    return QueueRun(elapsed, budget.paid, budget.errors, budget.retries, rewards, samples)


async def _sample(
    client: ContainerClient,
    budget: Budget,
    started: float,
    samples: list[tuple[float, int, int]],
    on_sample: Any,
    every_s: float,
) -> None:
    """Append ``(seconds, paid, limit summed over URLs)`` to ``samples`` every ``every_s``."""
    while True:
        now = time.perf_counter() - started
        limit = sum(v["limit"] or 0 for v in client.limits_view())
        samples.append((now, budget.paid, limit))
        if on_sample is not None:
            on_sample(now, budget.paid, limit)
        await asyncio.sleep(every_s)

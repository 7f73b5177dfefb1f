"""A team of runners on one store, as real processes: what ``tests/e2e/test_team_e2e.py``
asserts and ``bench/team.py`` prints.

Every runner is a ``python -m optimizer.cli optimize run`` process (or, for the shared limit,
a :mod:`optimizer.testing.queue_runner` process) of this source tree; the toy container logs
every rollout it serves (:func:`optimizer.testing.processes.rollout_calls`), which is how
pairs paid twice are counted; the scripted reflection model answers from a thread.

- :func:`same_program`: runners of one config (same seed, same candidates) started at once;
- :func:`killed_runner`: the same, and the runner holding claims killed with SIGKILL (on
  another "host" when ``away``: a hostname of its own via ``unshare --uts``, judged by its
  heartbeat only) once it holds some;
- :func:`restarted_run`: one run undisturbed, and the same run with ``pg_ctl restart -m fast``
  at given numbers of container calls, on a server of its own;
- :func:`stopped_run`: a run whose server stops for longer than the outage limit, resumed by
  id once it is back;
- :func:`shared_limit`: runners of different candidates at ``--concurrency 32`` each against
  one container of a hidden capacity, their limit shared through the store.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from optimizer.testing.postgres import PrivateServer, fresh_schema
from optimizer.testing.processes import SOURCES, rollout_calls, toy_container
from optimizer.testing.reflection import reflection_app
from optimizer.testing.replicas import replicas
from optimizer.testing.servers import thread_server
from workspace import Workspace

__all__ = [
    "LimitRun",
    "Restarted",
    "Takeover",
    "Stopped",
    "TeamRun",
    "away_prefix",
    "killed_runner",
    "restarted_run",
    "same_program",
    "shared_limit",
    "stopped_run",
]

CLI = [sys.executable, "-m", "optimizer.cli"]
T = TypeVar("T")


def read(store: str, fn: Callable[[Workspace], Awaitable[T]]) -> T:
    """``fn`` of a read-only workspace of ``store``, from this process."""

    async def go() -> T:
        async with Workspace(store, readonly=True, run_files="/nonexistent") as ws:
            return await fn(ws)

    return asyncio.run(go())


def create_store(store: str, files: Path) -> None:
    """Migrate a new store, so that readers may follow it from the first instant."""

    async def go() -> None:
        async with Workspace(store, run_files=files) as ws:
            await ws.list_runs()

    asyncio.run(go())


def away_prefix(name: str) -> list[str] | None:
    """A command prefix that runs the command under hostname ``name``, if this user may."""
    unshare = shutil.which("unshare")
    if (
        unshare is None
        or subprocess.run([unshare, "--uts", "true"], capture_output=True).returncode
    ):
        return None
    return [unshare, "--uts", "sh", "-c", f'hostname {name} && exec "$@"', "sh"]


def run_flags(container: str, reflection: str, store: str, budget: int) -> list[str]:
    """``optimize run`` of the toy program, a text-mode search against the scripted model."""
    return [
        "optimize", "run", "--container", container, "--reflection-model", "fake-reflection",
        "--reflection-base-url", reflection, "--proposer-mode", "text",
        "--max-metric-calls", str(budget), "--seed", "3", "--use-merge", "false",
        "--max-idle-iterations", "6", "--retry-base-delay", "0.01", "--concurrency", "4",
        "--workspace", store, "--quiet",
    ]  # fmt: skip


def start(args: list[str], files: Path, env: dict[str, str] | None = None,
          prefix: list[str] | None = None) -> subprocess.Popen[str]:  # fmt: skip
    """A runner process with run files of its own."""
    return subprocess.Popen(
        [*(prefix or []), *CLI, *args],
        cwd=SOURCES,
        env={**os.environ, "GEPA_RUN_FILES": str(files), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def paid_twice(calls: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (candidate, seed) pairs the container served more than once."""
    return {pair for pair, n in collections.Counter(calls).items() if n > 1}


@contextmanager
def _servers(log: Path, delay: float) -> Iterator[tuple[str, str]]:
    with (
        thread_server(reflection_app()) as reflection,
        toy_container(log, env={"TOY_DELAY": str(delay)}) as toy,
    ):
        yield toy, f"{reflection}/v1"


@dataclass
class TeamRun:
    """What runners of one program started at once did."""

    codes: list[int]
    errors: list[str]  # each runner's stderr
    calls: list[tuple[str, str]]  # (candidate hash, seed) the container served, in order
    counts: dict[str, dict[str, int]]  # run id -> paid, cached, errors
    seconds: float

    @property
    def paid_twice(self) -> set[tuple[str, str]]:
        """Pairs the container served more than once."""
        return paid_twice(self.calls)


def _counts(store: str) -> dict[str, dict[str, int]]:
    async def go(ws: Workspace) -> dict[str, dict[str, int]]:
        return {r.run_id: await ws.count_trials(r.run_id) for r in await ws.list_runs()}

    return read(store, go)


def same_program(
    store: str, workdir: Path, *, runners: int = 4, budget: int = 200, delay: float = 0.1
) -> TeamRun:
    """``runners`` runs of one program and config, started at once on ``store``."""
    log = workdir / "toy.log"
    create_store(store, workdir / "files")
    with _servers(log, delay) as (toy, reflection):
        started = time.monotonic()
        procs = [
            start(run_flags(toy, reflection, store, budget), workdir / f"host-{i}")
            for i in range(runners)
        ]
        outs = [proc.communicate(timeout=600) for proc in procs]
        seconds = time.monotonic() - started
    return TeamRun(
        [p.returncode for p in procs], [err for _, err in outs], rollout_calls(log),
        _counts(store), seconds,
    )  # fmt: skip


@dataclass
class Takeover:
    """A runner killed with SIGKILL while it held claims, and what the others did."""

    held: set[str]  # the keys it held claims on at the kill
    held_pairs: set[tuple[str, str]]  # their (candidate hash prefix, seed), as the toy logs
    taken_over_s: float | None  # kill -> none of its claims left
    stored: int  # of ``held``, how many ended stored
    team: TeamRun = field(repr=False)
    lease_timeout_s: float = 0.0


def killed_runner(
    store: str,
    workdir: Path,
    *,
    runners: int = 4,
    away: list[str] | None = None,
    lease_timeout_s: float = 4.0,
    budget: int = 60,
    delay: float = 1.5,
) -> Takeover:
    """The first runner of a program holds claims; the others start the same program; the
    first is killed with SIGKILL, and the others carry on.

    ``delay`` (seconds a rollout takes) keeps the first runner busy while the others start:
    on a loaded machine a Python process takes seconds to start.

    ``away`` (see :func:`away_prefix`) runs the first under another hostname.
    """
    log = workdir / "toy.log"
    create_store(store, workdir / "files")
    env = {"GEPA_LEASE_TIMEOUT": str(lease_timeout_s)}
    with _servers(log, delay) as (toy, reflection):
        flags = run_flags(toy, reflection, store, budget)
        started = time.monotonic()
        victim = start(flags, workdir / "host-0", env, away)
        _wait_for_claims(store, victim, [victim])
        others = [start(flags, workdir / f"host-{i}", env) for i in range(1, runners)]
        while len(read(store, _run_ids)) < runners:
            for proc in [victim, *others]:
                if proc.poll() is not None:
                    raise RuntimeError(f"a runner ended early: {proc.communicate()}")
            time.sleep(0.05)
        held = _wait_for_claims(store, victim, [victim, *others])
        victim.kill()
        killed = time.monotonic()
        victim.communicate()
        gone_after = None
        while any(p.poll() is None for p in others):
            claims = read(store, lambda ws: ws.claims.held_by())
            if gone_after is None and not any(h.pid == victim.pid for h in claims.values()):
                gone_after = time.monotonic() - killed
            time.sleep(0.05)
        outs = [proc.communicate(timeout=600) for proc in others]
        seconds = time.monotonic() - started
    team = TeamRun(
        [p.returncode for p in others], [err for _, err in outs], rollout_calls(log),
        _counts(store), seconds,
    )  # fmt: skip
    records = read(store, lambda ws: ws.lookup_many(list(held)))
    pairs = {(r.candidate_hash[:16], r.seed) for r in records.values()}
    return Takeover(held, pairs, gone_after, len(records), team, lease_timeout_s)


def _wait_for_claims(
    store: str, victim: subprocess.Popen[str], procs: list[subprocess.Popen[str]]
) -> set[str]:
    """The keys ``victim`` holds claims on, once it holds 3 or more."""
    deadline = time.monotonic() + 120
    while True:
        held = read(store, lambda ws: ws.claims.held_by())
        mine = {key for key, h in held.items() if h.pid == victim.pid}
        if len(mine) >= 3:
            return mine
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"a runner ended early: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise TimeoutError("the first runner never held 3 claims")
        time.sleep(0.02)


@dataclass
class Restarted:
    """A run undisturbed and the same run through PostgreSQL restarts."""

    restarts: list[float]  # how long each `pg_ctl restart -m fast` took
    differences: list[str]  # evidence fields that differ (beyond ids, times, URLs)
    paid_twice: int
    errors: int  # errored rollouts counted against the restarted run
    status: str
    stderr: str
    calm_calls: int
    calls: int


_INCIDENTAL = {"run_id", "started_at", "finished_at", "config"}  # ids, times, the URLs


def _untimed(packet: dict[str, Any]) -> dict[str, Any]:
    """``packet`` without the times and event numbers of its decisions (a restart's own
    events shift the numbers; what was decided, and why, must not change) and without the
    rollouts' latencies."""
    decisions = [
        {**c, "created": _bare(c["created"]), "decisions": [_bare(d) for d in c["decisions"]]}
        for c in packet.get("decisions") or []
    ]
    return {**packet, "decisions": decisions, "objectives": _unclocked(packet.get("objectives"))}


def _unclocked(value: Any) -> Any:
    """``value`` without its latencies (measured, so never the same twice)."""
    if isinstance(value, dict):
        return {k: _unclocked(v) for k, v in value.items() if "latency" not in k}
    if isinstance(value, list):
        return [_unclocked(v) for v in value]
    return value


def _bare(decision: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in decision.items() if k not in ("ts", "seq")}


def restarted_run(
    server: PrivateServer, workdir: Path, *, at: tuple[int, ...] = (30, 90)
) -> Restarted:
    """The same run twice on ``server``: undisturbed, then restarted at ``at`` calls."""
    packets, logs, restarts, stderr = [], [], [], ""
    for name, restart_at in (("calm", ()), ("restarted", at)):
        log = workdir / f"{name}.log"
        with fresh_schema(server.url) as store, _servers(log, 0.05) as (toy, reflection):
            create_store(store, workdir / "files")
            proc = start(run_flags(toy, reflection, store, 200), workdir / name)
            for calls in restart_at:
                while len(rollout_calls(log)) < calls and proc.poll() is None:
                    time.sleep(0.01)
                if proc.poll() is None:
                    began = time.monotonic()
                    server.restart()
                    restarts.append(time.monotonic() - began)
            _, err = proc.communicate(timeout=600)
            stderr = err if name == "restarted" else stderr
            packets.append(read(store, _evidence))
        logs.append(rollout_calls(log))
    calm, hit = packets
    calm, hit = _untimed(calm), _untimed(hit)
    differences = [k for k in calm if k not in _INCIDENTAL and calm[k] != hit.get(k)]
    return Restarted(
        restarts, differences, len(paid_twice(logs[1])), int(hit["rollouts"]["errors"]),
        hit["status"], stderr, len(logs[0]), len(logs[1]),
    )  # fmt: skip


@dataclass
class Stopped:
    """A run whose server went away past the outage limit, and its resumption by id."""

    code: int
    stderr: str
    resumed_code: int
    resumed_stderr: str
    status: str  # of the run after the resumption
    paid_again: set[tuple[str, str]]  # pairs served before the stop and again after


def stopped_run(server: PrivateServer, workdir: Path, *, limit_s: float = 3.0,
                after_calls: int = 40) -> Stopped:  # fmt: skip
    """A run on ``server`` with ``GEPA_DB_OUTAGE_LIMIT=limit_s``; the server stopped after
    ``after_calls`` container calls until the run exits, then started; the run resumed."""
    log = workdir / "toy.log"
    limit = {"GEPA_DB_OUTAGE_LIMIT": f"{limit_s:g}"}
    with fresh_schema(server.url) as store, _servers(log, 0.05) as (toy, reflection):
        create_store(store, workdir / "files")
        runner = start(run_flags(toy, reflection, store, 200), workdir / "host", limit)
        while len(rollout_calls(log)) < after_calls and runner.poll() is None:
            time.sleep(0.01)
        server.stop()
        try:
            _, stopped = runner.communicate(timeout=120)
        finally:
            server.start()
        sent = rollout_calls(log)
        (run_id,) = read(store, _run_ids)
        resume = ["optimize", "run", run_id, "--workspace", store, "--quiet"]
        again = start(resume, workdir / "host", limit)
        _, resumed = again.communicate(timeout=600)
        after = rollout_calls(log)[len(sent) :]
        status = read(store, lambda ws: _status(ws, run_id))
    return Stopped(
        runner.returncode, stopped, again.returncode, resumed, status, set(sent) & set(after)
    )


async def _run_ids(ws: Workspace) -> list[str]:
    return [run.run_id for run in await ws.list_runs()]


async def _status(ws: Workspace, run_id: str) -> str:
    return str((await ws.get_run(run_id)).status)


async def _evidence(ws: Workspace) -> dict[str, Any]:
    (run,) = await ws.list_runs()
    return dict(json.loads(await ws.read_file(run.run_id, "evidence.json")))


@dataclass
class LimitRun:
    """Runners against one container of a hidden capacity, measured on its own timeline."""

    converged_s: float | None  # start -> the store's limit at capacity + 1 or less
    window_s: float  # converged -> the first runner ran dry (less a second)
    goodput: float  # 200s a second in the window
    refused: float  # share of 429s among the window's answers
    refused_all: float  # share of 429s over the whole run
    paid: int
    errors: int


def shared_limit(
    store: str,
    *,
    runners: int = 4,
    capacity: int = 4,
    latency: float = 0.2,
    concurrency: int = 32,
    candidates: int = 3,
    retry_after: float = 0.5,
) -> LimitRun:
    """``runners`` queue runners of different candidates at once against one container."""
    create_store(store, Path("/nonexistent"))
    with replicas(1, capacity=capacity, latency=latency, retry_after=retry_after) as (box,):
        begin = time.time() + 5  # after every runner imported and opened the store
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "optimizer.testing.queue_runner",
                    "--workspace",
                    store,
                    "--container",
                    box.url,
                    "--concurrency",
                    str(concurrency),
                    "--first",
                    str(i * candidates),
                    "--candidates",
                    str(candidates),
                    "--start-at",
                    str(begin),
                ],
                cwd=SOURCES,
                stdout=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for i in range(runners)
        ]
        samples = asyncio.run(_watch_limit(store, box.url, procs))
        outs = [json.loads(proc.communicate()[0].splitlines()[-1]) for proc in procs]
        timeline = box.stats(timeline=True)["timeline"]
    started = min(o["started"] for o in outs)
    converged = next(
        (t for t, limit, members in samples if members == runners and 0 < limit <= capacity + 1),
        None,
    )
    end = min(o["ended"] for o in outs) - 1.0
    window = [status for t, status in timeline if converged is not None and converged <= t < end]
    span = max(0.0, end - converged) if converged is not None else 0.0
    return LimitRun(
        None if converged is None else converged - started, span,
        window.count(200) / span if span else 0.0,
        window.count(429) / len(window) if window else 1.0,
        sum(1 for _, s in timeline if s == 429) / max(1, len(timeline)),
        sum(o["paid"] for o in outs), sum(o["errors"] for o in outs),
    )  # fmt: skip


async def _watch_limit(
    store: str, url: str, procs: list[subprocess.Popen[str]]
) -> list[tuple[float, int, int]]:
    """(time.monotonic(), the store's limit, its runners) every 50 ms while they run."""
    samples = []
    async with Workspace(store, readonly=True, run_files="/nonexistent") as ws:
        while any(proc.poll() is None for proc in procs):
            state, members = await ws.endpoint_limits.state(url)
            samples.append((time.monotonic(), int(state.get("limit", 0)), len(members)))
            await asyncio.sleep(0.05)
    return samples

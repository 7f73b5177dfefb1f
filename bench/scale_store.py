"""bench/scale_store.py: the store's figures, PostgreSQL beside SQLite.

S1 CPU per rollout: paid rollouts through the rollout queue against the no-op container
   (bench/noop_container.py, latency 0), the workspace on SQLite and then on PostgreSQL,
   alternated and repeated (median). The optimizer's CPU is this process's (all threads;
   aiosqlite's included); PostgreSQL's own server processes are measured apart, from /proc.
   Target: PostgreSQL's optimizer CPU per rollout at most 1.3x SQLite's.
S2 recovery after kill -9 of a runner: a real `optimize run` process on the toy container
   (tests/fakes), killed with SIGKILL; `optimize run RUN_ID` processes retry from another
   "host" (a hostname of its own via unshare --uts, where permitted: judged by the heartbeat
   only) until one takes the run over. Time from the kill to the takeover (its warning
   event), rollouts paid twice, rollouts in flight at the kill. Target: within the lease
   timeout + 10 s, nothing paid twice beyond what was in flight.
S3 the console's run page API on a workspace of 1,000,000 rollouts built through the store's
   own API (record_paid_trials and append_event, in batches), on each engine: a real
   `gepa-runtime serve` process, sequential requests of GET /api/runs/{id},
   /api/runs/{id}/rollouts (the page the console asks for: the newest 200) and
   /api/runs/{id}/candidates, for the largest run and a small one (and the index, /api/runs).
   Target: p95 < 200 ms.

bench/scale.py calls ``report()`` (all sections, as lines); each section is also a function
of its own (``cpu_per_rollout``, ``recovery``, ``console_p95``) returning its lines.
PostgreSQL: ``--postgres URL``, else $GEPA_TEST_POSTGRES_URL, else ``bash .ci/postgres`` starts
Debian's server (root); each section works in a schema of its own, dropped afterwards.

Run: .venv/bin/python bench/scale_store.py [--only cpu|recovery|console] [--rollouts N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from dispatch_bench import noop_container  # noqa: E402

from optimizer.runtime.accounts.budget import Budget  # noqa: E402
from optimizer.runtime.accounts.events import EventSink  # noqa: E402
from optimizer.runtime.rollouts.client import ContainerClient  # noqa: E402
from optimizer.runtime.rollouts.queue import RolloutQueue  # noqa: E402
from optimizer.testing import (  # noqa: E402  # noqa: E402
    free_port,
    fresh_schema,  # noqa: E402
    reflection_app,
    rollout_calls,
    thread_server,
    toy_container,
    wait_http,
)
from schemas import (  # noqa: E402
    CandidateRecord,
    Policy,
    RolloutRecord,
    RunConfig,
    Usage,
    cache_key,
    content_hash,
)
from workspace import Workspace  # noqa: E402

CLI = [sys.executable, "-m", "optimizer.cli"]


def postgres_url(given: str | None = None) -> str:
    """The server to measure: ``given``, $GEPA_TEST_POSTGRES_URL, or .ci/postgres's."""
    url = given or os.environ.get("GEPA_TEST_POSTGRES_URL")
    if url:
        return url
    started = subprocess.run(
        ["bash", str(ROOT / ".ci" / "postgres")], capture_output=True, text=True, check=True
    )
    return started.stdout.strip()


@contextlib.contextmanager
def store(engine: str, pg: str) -> Iterator[str]:
    """A fresh store on ``engine``: a temporary folder, or a new schema of ``pg``."""
    if engine == "postgres":
        with fresh_schema(pg) as url:
            yield url
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield str(Path(tmp) / "ws")


# S1 -------------------------------------------------------------------------------------


def server_cpu_s() -> float:
    """CPU seconds used so far by every ``postgres`` process (server, backends, walwriter)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            text = stat.read_text()
            if text[text.index("(") + 1 : text.rindex(")")] == "postgres":
                fields = text[text.rindex(")") + 2 :].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


async def queue_cpu(target: str, url: str, n: int, concurrency: int) -> tuple[float, float, float]:
    """(optimizer CPU µs a rollout, rollouts/s, server CPU µs a rollout) for ``n`` paid
    rollouts through the queue into a fresh store ``target``."""
    with tempfile.TemporaryDirectory() as files:
        async with Workspace(target, run_files=files) as ws:
            run = await ws.create_run(RunConfig(containers=[url]))
            client = ContainerClient([url], max_connections=concurrency * 2)
            await client.check_health()
            program = await client.program()
            budget = Budget()
            queue = RolloutQueue(
                client=client, workspace=ws, run_id=run.run_id, program=program,
                budget=budget, events=EventSink(ws, run.run_id), concurrency=concurrency,
            )  # fmt: skip
            cpu, server, wall = time.process_time(), server_cpu_s(), time.perf_counter()
            async with queue:
                jobs = [
                    queue.evaluate(f"c{c}", {"system_prompt": f"candidate {c}"},
                                   [f"s{i}" for i in range(c, min(n, c + 40))])
                    for c in range(0, n, 40)
                ]  # fmt: skip
                await asyncio.gather(*jobs)
            cpu, server = time.process_time() - cpu, server_cpu_s() - server
            wall = time.perf_counter() - wall
            await client.aclose()
    assert budget.paid == n, budget.snapshot()
    return cpu / n * 1e6, n / wall, server / n * 1e6


def cpu_per_rollout(pg: str, n: int = 3000, concurrency: int = 16, repeats: int = 5) -> list[str]:
    """S1: optimizer CPU per paid rollout on SQLite and on PostgreSQL (medians)."""
    results: dict[str, list[tuple[float, float, float]]] = {"sqlite": [], "postgres": []}
    with noop_container(0.0) as url:
        for engine in ("sqlite", "postgres"):  # warm-up: imports, the server's caches
            with store(engine, pg) as target:
                asyncio.run(queue_cpu(target, url, 400, concurrency))
        for _ in range(repeats):
            for engine in ("sqlite", "postgres"):
                with store(engine, pg) as target:
                    results[engine].append(asyncio.run(queue_cpu(target, url, n, concurrency)))
    med = {e: [statistics.median(r[i] for r in rs) for i in range(3)] for e, rs in results.items()}
    ratio = med["postgres"][0] / med["sqlite"][0]
    lines = [
        f"S1 CPU per paid rollout, no-op container, n={n}, concurrency={concurrency}, "
        f"median of {repeats}",
        "   store       optimizer CPU   rollouts/s   PostgreSQL server CPU",
    ]
    for engine, (us, rate, server) in med.items():
        extra = f"{server:8.1f} us" if engine == "postgres" else "       - (in-process)"
        lines.append(f"   {engine:9s} {us:10.1f} us  {rate:10.1f}   {extra}")
    lines.append(f"   PostgreSQL / SQLite optimizer CPU: {ratio:.2f}x   (target <= 1.30x)")
    return lines


# S2 -------------------------------------------------------------------------------------


def _host_prefix(name: str) -> list[str]:
    unshare = shutil.which("unshare")
    if (
        unshare is None
        or subprocess.run([unshare, "--uts", "true"], capture_output=True).returncode
    ):
        return []
    return [unshare, "--uts", "sh", "-c", f'hostname {name} && exec "$@"', "sh"]


def _run_flags(container: str, reflection: str, target: str) -> list[str]:
    return [
        "optimize", "run", "--container", container, "--reflection-model", "fake-reflection",
        "--reflection-base-url", reflection, "--proposer-mode", "text",
        "--max-metric-calls", "400", "--seed", "3", "--use-merge", "false",
        "--max-idle-iterations", "6", "--retry-base-delay", "0.01", "--concurrency", "4",
        "--workspace", target, "--quiet",
    ]  # fmt: skip


async def _store_facts(target: str) -> tuple[list[str], dict[str, int], set[tuple[str, str]], Any]:
    async with Workspace(target, readonly=True, run_files="/nonexistent") as ws:
        runs = [r.run_id for r in await ws.list_runs()]
        if not runs:
            return runs, {}, set(), []
        counts = await ws.count_trials(runs[0])
        committed = {
            (r.candidate_hash[:16], r.seed)
            for c in await ws.list_candidates(runs[0])
            for r in await ws.rollouts_for_candidate(runs[0], c.candidate_id)
            if r.status == "ok"
        }
        events = await ws.events_since(runs[0], 0, 100_000)
        return runs, counts, committed, events


async def _migrate(target: str) -> None:
    async with Workspace(target, run_files="/nonexistent"):
        pass  # a writer creates the schema, so that readers may follow from the first instant


def _kill_and_resume(
    target: str, toy: str, reflection: str, log: Path, away: list[str], env: dict[str, str]
) -> dict[str, Any]:
    asyncio.run(_migrate(target))
    runner = subprocess.Popen(
        [*away, *CLI, *_run_flags(toy, reflection, target)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while True:
            runs, counts, _, _ = asyncio.run(_store_facts(target))
            if runs and counts.get("paid", 0) >= 12:
                break
            assert runner.poll() is None, "the runner stopped before the kill"
            time.sleep(0.05)
        runner.kill()
        killed_at = time.time()
        runner.wait()
    finally:
        if runner.poll() is None:
            runner.kill()
    _, _, committed, _ = asyncio.run(_store_facts(target))
    sent = rollout_calls(log)
    attempts = 0
    while True:
        attempts += 1
        done = subprocess.run(
            [*CLI, "optimize", "run", runs[0], "--workspace", target, "--quiet"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if done.returncode != 2 or "is being run by" not in done.stderr:
            break
        time.sleep(0.5)
    assert done.returncode == 0, done.stderr
    _, _, _, events = asyncio.run(_store_facts(target))
    took = next(e.ts for e in events if e.type == "warning" and "took run" in str(e.data))
    after = rollout_calls(log)[len(sent) :]
    return {
        "seconds": took - killed_at,
        "in_flight": len(set(sent) - committed),
        "paid_twice": len(set(after) & set(sent)),
        "paid_twice_committed": len(set(after) & committed),
        "refused": attempts - 1,
    }


def recovery(pg: str, lease_timeout: float = 10.0) -> list[str]:
    """S2: kill -9 of a runner, takeover by a process of another host, on PostgreSQL."""
    lines = [
        f"S2 recovery after kill -9 of a runner (PostgreSQL, lease timeout {lease_timeout:g} s)"
    ]
    with thread_server(reflection_app()) as reflection, tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ, "GEPA_LEASE_TIMEOUT": str(lease_timeout),
            "GEPA_RUN_FILES": str(Path(tmp) / "files"),
        }  # fmt: skip
        cases = [("another host", _host_prefix("gepa-bench-b")), ("this host", [])]
        for name, prefix in cases:
            if name == "another host" and not prefix:
                lines.append("   another host: unshare --uts not permitted here; skipped")
                continue
            log = Path(tmp) / f"{name.replace(' ', '-')}.log"
            with (
                store("postgres", pg) as target,
                toy_container(log, env={"TOY_DELAY": "0.2"}) as toy,
            ):
                got = _kill_and_resume(target, toy, f"{reflection}/v1", log, prefix, env)
            verdict = "ok" if got["seconds"] <= lease_timeout + 10 else "MISSED"
            lines.append(
                f"   {name:12s}: taken over {got['seconds']:5.1f} s after the kill "
                f"({got['refused']} attempts refused first); target <= {lease_timeout + 10:g} s: "
                f"{verdict}; paid twice {got['paid_twice']} (in flight at the kill "
                f"{got['in_flight']}), stored rollouts paid again {got['paid_twice_committed']}"
            )
    return lines


# S3 -------------------------------------------------------------------------------------

_WORDS = [
    "the",
    "card",
    "arrived",
    "late",
    "refund",
    "pending",
    "transfer",
    "failed",
    "exchange",
    "rate",
    "pin",
    "blocked",
]


def _records(run_id: str, start: int, count: int) -> list[RolloutRecord]:
    out = []
    policy = Policy().model_dump_json()
    for i in range(start, start + count):
        components = {"system_prompt": f"candidate {i // 500} of {run_id}"}
        chash = content_hash(components)
        seed = f"seed-{i % 5000:05d}"
        label = _WORDS[i % len(_WORDS)]
        ok = i % 50 != 0
        out.append(
            RolloutRecord(
                cache_key=cache_key("bench-fp", chash, f"{seed}-{i}", Policy()),
                run_id=run_id, candidate_id=chash[:16], candidate_hash=chash,
                fingerprint="bench-fp", seed=seed, policy=policy,
                status="ok" if ok else "error", reward=(i % 7) / 6 if ok else None,
                objectives={"reward": (i % 7) / 6} if ok else {}, output=label,
                feedback=f"predicted {label}, expected {_WORDS[(i + 1) % len(_WORDS)]}",
                trace={"messages": [{"role": "user", "content": f"{seed}: {' '.join(_WORDS)}"},
                                    {"role": "assistant", "content": label}]},
                usage=Usage(input_tokens=120, output_tokens=3, cost_usd=0.0001, latency_ms=80),
                latency_ms=80.0, error=None if ok else "HTTP 503 after 5 attempts",
            )
        )  # fmt: skip
    return out


async def build(target: str, files: str, total: int, big_share: float = 0.5) -> dict[str, Any]:
    """Store ``total`` rollouts through the API: one big run with ``big_share`` of them, the
    rest in runs of 10,000; a trials event per batch, candidates, a frontier. Run sizes."""
    big = int(total * big_share)
    sizes = [big] + [10_000] * ((total - big) // 10_000)
    sizes[-1] += total - sum(sizes)
    batch = 2000
    runs: dict[str, int] = {}
    async with Workspace(target, run_files=files) as ws:
        for n, size in enumerate(sizes):
            run_id = (await ws.create_run(RunConfig(), run_id=f"bench-{n:03d}")).run_id
            await ws.update_run(run_id, status="completed", phase="completed")
            for start in range(0, size, batch):
                records = _records(run_id, start, min(batch, size - start))
                await ws.record_paid_trials(run_id, records)
                await ws.append_event(run_id, "trials", {"budget": {"paid": start + len(records)}})
            for c in range(0, size, 500 * 40):
                comps = {"system_prompt": f"candidate {c // 500} of {run_id}"}
                await ws.add_candidate(CandidateRecord(
                    run_id=run_id, candidate_id=content_hash(comps)[:16],
                    content_hash=content_hash(comps), components=comps, origin="mutation",
                ))  # fmt: skip
            await ws.save_frontier(run_id, {f"seed-{s:05d}": ["c"] for s in range(200)}, {})
            runs[run_id] = size
    return runs


@contextlib.contextmanager
def serve(target: str, files: str) -> Iterator[str]:
    """A real `gepa-runtime serve` process on ``target``; its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [*CLI, "serve", "--workspace", target, "--port", str(port), "--no-token",
         "--log-level", "warning"],
        cwd=ROOT, env={**os.environ, "GEPA_RUN_FILES": files},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/api/health", proc=proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _latencies(client: httpx.Client, path: str, times: int) -> tuple[float, list[float]]:
    """(the first request's ms, every later one's ms)."""
    out = []
    for _ in range(times + 1):
        started = time.perf_counter()
        response = client.get(path)
        out.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return out[0], out[1:]


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def console_p95(pg: str, total: int = 1_000_000, times: int = 100) -> list[str]:
    """S3: p95 of the run page API on ``total`` rollouts, per engine."""
    lines = [f"S3 console run page API on {total:,} rollouts (built through the store's API)"]
    for engine in ("sqlite", "postgres"):
        with store(engine, pg) as target, tempfile.TemporaryDirectory() as files:
            started = time.perf_counter()
            runs = asyncio.run(build(target, files, total))
            built = time.perf_counter() - started
            big, small = max(runs, key=runs.__getitem__), min(runs, key=runs.__getitem__)
            lines.append(
                f"   {engine}: built {total:,} rollouts in {len(runs)} runs in {built:.0f} s"
            )
            with serve(target, files) as url, httpx.Client(base_url=url, timeout=60) as client:
                first, rest = _latencies(client, "/api/runs", times)  # the index page, 51 runs
                lines.append(
                    f"     {'/api/runs (the index)':34s} p50 {_p(rest, 0.5):6.1f} ms"
                    f"  p95 {_p(rest, 0.95):6.1f} ms  (first {first:6.1f} ms)"
                )
                for run_id in (big, small):
                    newest = max(0, runs[run_id] - 300)
                    for path in (
                        f"/api/runs/{run_id}",
                        f"/api/runs/{run_id}/rollouts?offset={newest}&limit=200",
                        f"/api/runs/{run_id}/candidates",
                    ):
                        first, rest = _latencies(client, path, times)
                        worst = "ok" if _p(rest, 0.95) < 200 else "MISSED"
                        lines.append(
                            f"     {path.split('?')[0].replace(run_id, f'<{runs[run_id]:,}>'):34s}"
                            f" p50 {_p(rest, 0.5):6.1f} ms  p95 {_p(rest, 0.95):6.1f} ms"
                            f"  (first {first:6.1f} ms)  {worst}"
                        )
    lines.append("   target: p95 < 200 ms on both engines")
    return lines


# the section ------------------------------------------------------------------------------


def report(pg: str | None = None, rollouts: int = 1_000_000, only: str | None = None) -> list[str]:
    """Every section's lines (``only`` one of cpu, recovery, console): bench/scale.py's hook."""
    url = postgres_url(pg)
    lines: list[str] = ["the store: SQLite and PostgreSQL (bench/scale_store.py)"]
    if only in (None, "cpu"):
        lines += cpu_per_rollout(url)
    if only in (None, "recovery"):
        lines += recovery(url)
    if only in (None, "console"):
        lines += console_p95(url, rollouts)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", default=None, help="server URL (default: see above)")
    parser.add_argument("--only", choices=("cpu", "recovery", "console"), default=None)
    parser.add_argument("--rollouts", type=int, default=1_000_000, help="S3's workspace size")
    args = parser.parse_args()
    started = time.perf_counter()
    url = postgres_url(args.postgres)
    sections = {
        "cpu": lambda: cpu_per_rollout(url),
        "recovery": lambda: recovery(url),
        "console": lambda: console_p95(url, args.rollouts),
    }
    for name, section in sections.items():
        if args.only in (None, name):
            for line in section():  # printed section by section: S3 takes minutes
                print(line, flush=True)
    print(f"bench/scale_store.py took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

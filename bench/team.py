"""bench/team.py: a team's workspace, runners as real processes on one store.

T1 four runners of one program (same seed, same candidates) started at once, on SQLite and on
   PostgreSQL: container calls and (candidate, seed) pairs paid twice, counted by the
   container. Target: 0 paid twice.
T2 a runner killed with SIGKILL while it holds claims, on this host (a dead pid is seen at
   once) and on another "host" (``unshare --uts``: judged by its heartbeat, lease 4 s): time
   from the kill until none of its claims is left, its claimed rollouts stored in the end,
   pairs paid twice (only what it had in flight may be). Target: within the lease, 0 lost.
T3 ``pg_ctl restart -m fast`` twice under a run (a server of its own), beside the same run
   undisturbed: evidence fields that differ, pairs paid twice, errored rollouts; and the server
   stopped past ``GEPA_DB_OUTAGE_LIMIT=3``: the run's exit, its resumption by id. Target: the
   same result, 0 paid twice, 0 errors; a clear error, then a completed run.
T4 four runners at ``--concurrency 32`` each against one container of hidden capacity 4
   (200 ms a rollout, 429 above, Retry-After 0.5 s), on SQLite and on PostgreSQL: once the
   shared limit converged (the store's limit at capacity + 1 or less), goodput and 429 share.
   Target: goodput >= 0.9 x C / latency = 18/s, 429s < 5%.

bench/scale.py calls ``report()`` (``--only team``); each section is a function of its own.
PostgreSQL: ``--postgres URL``, else $GEPA_TEST_POSTGRES_URL, else ``bash .ci/postgres``; T3
starts a server of its own (Debian's binaries) and restarts only that one.

Run: .venv/bin/python bench/team.py [--only same|kill|restart|limit] [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.testing.postgres import fresh_schema, private_server  # noqa: E402
from optimizer.testing.team import (  # noqa: E402
    away_prefix,
    killed_runner,
    restarted_run,
    same_program,
    shared_limit,
    stopped_run,
)

ENGINES = ("sqlite", "postgres")


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
def store(engine: str, pg: str) -> Iterator[tuple[str, Path]]:
    """A fresh store on ``engine`` and a work folder beside it."""
    with tempfile.TemporaryDirectory() as tmp:
        if engine == "postgres":
            with fresh_schema(pg) as url:
                yield url, Path(tmp)
        else:
            yield str(Path(tmp) / "ws"), Path(tmp)


def same(pg: str) -> list[str]:
    """T1."""
    lines = ["T1 four runners of one program started at once"]
    for engine in ENGINES:
        with store(engine, pg) as (target, work):
            team = same_program(target, work, runners=4)
        paid = sorted(c["paid"] for c in team.counts.values())
        lines.append(
            f"  {engine:8s} exit {team.codes}: {len(team.calls)} container calls, "
            f"{len(team.paid_twice)} pairs paid twice; paid by run {paid}; {team.seconds:.1f} s"
        )
    return lines


def kill(pg: str) -> list[str]:
    """T2."""
    lines = ["T2 a runner holding claims killed with SIGKILL (lease 4 s)"]
    away = away_prefix("gepa-away")
    for engine in ENGINES:
        for where, prefix in (("this host", None), ("another host", away)):
            if where == "another host" and prefix is None:
                lines.append(f"  {engine:8s} {where}: skipped (unshare --uts is not permitted)")
                continue
            with store(engine, pg) as (target, work):
                killed = killed_runner(target, work, away=prefix, lease_timeout_s=4.0)
            after = "never" if killed.taken_over_s is None else f"{killed.taken_over_s:.1f} s"
            lines.append(
                f"  {engine:8s} {where:12s}: held {len(killed.held)} claims, taken over after "
                f"{after}; {killed.stored}/{len(killed.held)} stored (lost "
                f"{len(killed.held) - killed.stored}); {len(killed.team.paid_twice)} pairs paid "
                f"twice, all among its claims: {killed.team.paid_twice <= killed.held_pairs}; "
                f"others exit {killed.team.codes}"
            )
    return lines


def restart() -> list[str]:
    """T3."""
    lines = ["T3 PostgreSQL restarted under a run (a server of its own)"]
    with private_server() as server, tempfile.TemporaryDirectory() as tmp:
        run = restarted_run(server, Path(tmp), at=(30, 90))
        took = ", ".join(f"{s:.2f} s" for s in run.restarts)
        lines.append(
            f"  pg_ctl restart -m fast x{len(run.restarts)} ({took}): {run.status}; evidence "
            f"fields that differ from the undisturbed run: {run.differences or 'none'}; "
            f"{run.paid_twice} pairs paid twice; {run.errors} errored rollouts; "
            f"{run.calls} container calls ({run.calm_calls} undisturbed)"
        )
    with private_server() as server, tempfile.TemporaryDirectory() as tmp:
        stopped = stopped_run(server, Path(tmp), limit_s=3.0)
        said = next((ln for ln in stopped.stderr.splitlines() if "StoreUnreachable" in ln), "")
        lines.append(
            f"  server stopped past GEPA_DB_OUTAGE_LIMIT=3: exit {stopped.code} "
            f"({said[:110]}...); resumed by id: exit {stopped.resumed_code}, {stopped.status}; "
            f"{len(stopped.paid_again)} pairs paid again (in flight at the stop)"
        )
    return lines


def limit(pg: str, repeat: int) -> list[str]:
    """T4."""
    lines = ["T4 four runners x --concurrency 32, one container of hidden capacity 4 (18/s)"]
    for engine in ENGINES:
        runs = []
        for _ in range(repeat):
            with store(engine, pg) as (target, _work):
                runs.append(shared_limit(target, runners=4, capacity=4, latency=0.2))
        for run in runs:
            converged = "never" if run.converged_s is None else f"{run.converged_s:.1f} s"
            lines.append(
                f"  {engine:8s} converged after {converged}; then {run.window_s:.0f} s: goodput "
                f"{run.goodput:.1f}/s, 429s {100 * run.refused:.1f}% (whole run "
                f"{100 * run.refused_all:.0f}%); paid {run.paid}, errors {run.errors}"
            )
        if repeat > 1:
            lines.append(
                f"  {engine:8s} median goodput {statistics.median(r.goodput for r in runs):.1f}/s,"
                f" 429s {100 * statistics.median(r.refused for r in runs):.1f}%"
            )
    return lines


def report(pg: str | None = None, repeat: int = 1) -> list[str]:
    """Every section's lines (bench/scale.py's hook)."""
    url = postgres_url(pg)
    return [*same(url), *kill(url), *restart(), *limit(url, repeat)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("same", "kill", "restart", "limit"), default=None)
    parser.add_argument("--postgres", default=None)
    parser.add_argument("--repeat", type=int, default=1, help="T4 runs per engine")
    args = parser.parse_args()
    started = time.perf_counter()
    url = postgres_url(args.postgres)
    sections = {
        "same": lambda: same(url),
        "kill": lambda: kill(url),
        "restart": restart,
        "limit": lambda: limit(url, args.repeat),
    }
    for name, section in sections.items():
        if args.only in (None, name):
            for line in section():
                print(line, flush=True)
    print(f"bench/team.py took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

"""bench/scale.py: past one machine, measured on this one, in one run.

Sections, in order:
- R1-R3 (bench/scale_replicas.py): rollouts/s against 1, 2 and 4 capacity-limited replicas
  behind HAProxy and as URL lists; a replica killed mid-run changes no score; goodput and
  429 share against a container with a hidden capacity, adaptive limit beside a fixed one.
- The store (bench/scale_store.py, when present): Postgres vs SQLite CPU per rollout,
  recovery after kill -9 of a runner, p95 of the console's API on 1,000,000 rollouts. Its
  hook: a ``report()`` function returning the section's text (a string or a list of lines,
  or an awaitable of either); it is imported only if the file exists, so this driver runs
  with or without it.
- The team (bench/team.py, the same hook): four runners of one program at once, a runner
  killed holding claims, PostgreSQL restarted under a run, four runners sharing one limit
  against a container of hidden capacity.

Run: .venv/bin/python bench/scale.py [--only replicas|store|team]
Needs Debian's haproxy for the HAProxy lines (the URL-list lines run without it).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import scale_replicas  # noqa: E402


def _lines(result: Any) -> list[str]:
    if inspect.isawaitable(result):
        result = asyncio.run(result)  # type: ignore[arg-type]
    if isinstance(result, str):
        return result.splitlines()
    return [str(line) for line in result or []]


def bench_section(name: str, module_name: str) -> list[str]:
    """The figures of ``bench/<module_name>.py``'s ``report()``, or why there are none."""
    if not (BENCH / f"{module_name}.py").exists():
        return [f"{name}: bench/{module_name}.py is not there yet; no {name} figures in this run"]
    module = importlib.import_module(module_name)
    report = getattr(module, "report", None)
    if report is None:
        return [f"{name}: bench/{module_name}.py has no report() function; no {name} figures"]
    return _lines(report())


def store_section() -> list[str]:
    """The store's figures from bench/scale_store.py, or why there are none."""
    return bench_section("store", "scale_store")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=("replicas", "store", "team"), default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    if args.only in (None, "replicas"):
        for section in scale_replicas.SECTIONS:
            for line in section():
                print(line, flush=True)
    if args.only in (None, "store"):
        for line in store_section():
            print(line, flush=True)
    if args.only in (None, "team"):
        for line in bench_section("team", "team"):
            print(line, flush=True)
    print(f"bench/scale.py took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

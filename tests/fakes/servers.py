"""The toy container as a real process for end-to-end tests, and what it logged.

The servers tests and benches share (``free_port``, ``wait_http``, ``thread_server``) are in
:mod:`optimizer.testing`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from optimizer.testing import free_port, wait_http

ROOT = Path(__file__).resolve().parents[2]
FAKES = Path(__file__).resolve().parent


def fake_reflection_flags(reflection: str, budget: int) -> list[str]:
    """``optimize run``/``create`` flags for a text-mode search of ``budget`` container calls
    against the scripted reflection model at ``reflection`` (the ``reflection_url`` fixture)."""
    return [
        "--reflection-model", "fake-reflection", "--reflection-base-url", reflection,
        "--proposer-mode", "text", "--max-metric-calls", str(budget),
    ]  # fmt: skip


@contextlib.contextmanager
def toy_container(
    log: Path,
    *,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
    module: str = "toy_container.py",
) -> Iterator[str]:
    """``gepa-runtime container`` serving a toy target as a real process; yields its URL."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "optimizer.cli",
        "container",
        str(FAKES / module),
        "--dataset",
        str(FAKES / "toy_data.jsonl"),
        "--splits-file",
        str(FAKES / "toy_splits.json"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *(extra or []),
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TOY_LOG": str(log), **(env or {})},
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc=proc)
        # Read what it prints from now on: a full pipe would block the container at its next
        # log line (a traceback per crashing rollout fills 64 KiB in a few dozen rollouts).
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _drain(stream: IO[bytes] | None) -> None:
    """Read a process's output until it closes, keeping nothing."""
    with contextlib.suppress(OSError, ValueError):
        while stream is not None and stream.read(65536):
            pass


def rollout_calls(log: Path) -> list[tuple[str, str]]:
    """(candidate hash, seed) pairs the toy container served, in order."""
    if not log.exists():
        return []
    return [tuple(line.split()) for line in log.read_text().splitlines() if line.strip()]  # type: ignore[misc]

"""The toy container as a real process, and the rollouts it logged.

``toy_container(log)`` serves :data:`optimizer.testing.toy.TOY_CONTAINER` (or another module
of the toy dataset) with ``gepa-runtime container`` on 127.0.0.1; every rollout it serves is
appended to ``log`` (``$TOY_LOG``), which ``rollout_calls`` reads back.
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

from optimizer.testing.servers import free_port, wait_http
from optimizer.testing.toy import TOY_CONTAINER, TOY_DATA, TOY_SPLITS

__all__ = ["rollout_calls", "stop_process", "toy_container"]

# The tree this package is in: ``python -m optimizer.cli`` started there runs this same code.
SOURCES = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def toy_container(
    log: Path,
    *,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
    module: Path = TOY_CONTAINER,
) -> Iterator[str]:
    """``gepa-runtime container`` serving a toy target as a real process; yields its URL."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "optimizer.cli",
        "container",
        str(module),
        "--dataset",
        str(TOY_DATA),
        "--splits-file",
        str(TOY_SPLITS),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *(extra or []),
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=SOURCES,
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
        stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """End a process this module or a caller started (SIGTERM, then SIGKILL after 10 s) and
    close its output pipe."""
    if proc.poll() is None:
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

"""``gepa-runtime serve`` as a real process on 127.0.0.1, for end-to-end and browser tests."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from optimizer.testing import free_port, wait_http
from tests.fakes.servers import ROOT


@contextlib.contextmanager
def serve_process(
    root: Path,
    *,
    token: str | None = None,
    extra: list[str] | None = None,
    make_token: bool = False,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start ``gepa-runtime serve`` for the workspace ``root``; yields (URL, process).

    Without ``token`` it runs with ``--no-token``, or with neither flag if ``make_token``
    (it then makes one up: see :func:`announcement`)."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "optimizer.cli",
        "serve",
        "--workspace",
        str(root),
        "--port",
        str(port),
        "--log-level",
        "warning",
        *(extra or []),
    ]
    env = {**os.environ}
    env.pop("GEPA_SERVE_TOKEN", None)
    if token or not make_token:
        cmd += ["--token", token] if token else ["--no-token"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/api/health", proc=proc)
        yield url, proc
    finally:
        stop(proc)


def announcement(proc: subprocess.Popen[bytes], timeout: float = 20.0) -> tuple[str, str]:
    """(the ``serving the console on ...`` line, the output before it) of a serve process.

    Reads the raw pipe (no Python buffering, so ``select`` sees everything not yet read)."""
    assert proc.stdout is not None
    fd, text = proc.stdout.fileno(), ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in text.splitlines(keepends=True):
            if line.startswith("serving the console on") and line.endswith("\n"):
                return line.strip(), text[: text.index(line)]
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            text += chunk.decode()
    raise AssertionError(f"no announcement from serve; it printed: {text[-2000:]}")


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Stop a process we started and wait for it."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def follow(
    url: str,
    run_id: str,
    on_event: Callable[[dict[str, Any]], None],
    *,
    after: int = 0,
    headers: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> dict[str, Any]:
    """Read the run's SSE stream until ``end``; returns its data."""
    kind, data = None, []
    with httpx.stream(
        "GET",
        f"{url}/api/runs/{run_id}/events",
        headers={"Last-Event-ID": str(after), **(headers or {})},
        timeout=httpx.Timeout(timeout, read=30.0),
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif line == "" and data:
                payload = json.loads("".join(data))
                if kind == "end":
                    return payload  # type: ignore[no-any-return]
                if kind is None:
                    on_event(payload)
                kind, data = None, []
    raise AssertionError("the event stream closed without an end event")

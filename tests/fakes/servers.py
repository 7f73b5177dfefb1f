"""Real servers on 127.0.0.1 for end-to-end tests: processes and in-thread uvicorn apps."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[2]
FAKES = Path(__file__).resolve().parent


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 30.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``url`` until it answers 200 (or fail with the process's output)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise RuntimeError(f"process exited with {proc.returncode}: {out[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


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


@contextlib.contextmanager
def thread_server(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn in a background thread; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def rollout_calls(log: Path) -> list[tuple[str, str]]:
    """(candidate hash, seed) pairs the toy container served, in order."""
    if not log.exists():
        return []
    return [tuple(line.split()) for line in log.read_text().splitlines() if line.strip()]  # type: ignore[misc]

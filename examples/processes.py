"""Child processes the examples' jobs start: each serving HTTP, waited for, always stopped.

The Banking77 main job (``examples/banking77/main_job.py``) runs its container and the
optimizer service this way; ``bench/calculator_methods.py`` runs the calculator container.

    with serving_process(cmd, env, f"{url}/health", "the Banking77 container"):
        ...                                   # the process answers 200 on its URL here
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

__all__ = ["serving_process", "stop_process"]

ROOT = Path(__file__).resolve().parents[1]


def _wait(url: str, proc: subprocess.Popen[bytes], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with code {proc.returncode}; see the lines above")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        time.sleep(0.2)
    raise SystemExit(f"{what} did not answer {url} within {timeout:.0f}s")


@contextlib.contextmanager
def serving_process(cmd: Sequence[str], env: dict[str, str], url: str, what: str) -> Iterator[None]:
    """Start one process (in the repository root), wait until ``url`` answers 200, and always
    stop it (by its own pid: terminate, then kill after 15 s). ``SystemExit`` naming ``what``
    when it exits or does not answer within 120 s."""
    proc = subprocess.Popen(list(cmd), cwd=ROOT, env=env)
    try:
        _wait(url, proc, what)
        yield
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """End a process this side started, by its own pid: terminate, then kill after 15 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

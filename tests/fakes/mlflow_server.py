"""A real MLflow tracking server on 127.0.0.1 with a SQLite backend, for end-to-end tests.

The server is the full ``mlflow`` package (Flask, SQLAlchemy, pandas...), which the project
does not need: it lives in a venv of its own (``.venv-mlflow``, made by ``.ci/run``) or
wherever ``GEPA_MLFLOW_SERVER`` points (an ``mlflow`` executable). The tests talk to it with
the client of the ``[mlflow]`` extra (``mlflow-skinny``). Without either the tests skip, unless
``GEPA_REQUIRE_MLFLOW=1`` (CI), which makes the skip a failure.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import NoReturn

import pytest

from optimizer.testing import free_port, wait_http
from tests.fakes.servers import ROOT

START_TIMEOUT_S = 180.0  # its first start migrates the SQLite schema: ~15 s on a busy 2-core box


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("GEPA_REQUIRE_MLFLOW") == "1":
        pytest.fail(f"GEPA_REQUIRE_MLFLOW=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def require_client() -> None:
    """Skip (or fail under CI) without the ``[mlflow]`` extra's client."""
    if find_spec("mlflow") is None:
        _unavailable("the MLflow client is not installed: pip install -e '.[mlflow]'")


def server_executable() -> Path:
    """The ``mlflow`` command that has ``server``; skips (or fails under CI) without one."""
    require_client()
    given = os.environ.get("GEPA_MLFLOW_SERVER")
    exe = Path(given) if given else ROOT / ".venv-mlflow" / "bin" / "mlflow"
    if not exe.is_file():
        _unavailable(
            f"no MLflow server at {exe}: python3 -m venv .venv-mlflow && "
            ".venv-mlflow/bin/pip install mlflow (or set GEPA_MLFLOW_SERVER)"
        )
    return exe


@contextlib.contextmanager
def mlflow_server(folder: Path) -> Iterator[str]:
    """``mlflow server`` on a free port, its store and artifacts in ``folder``; yields its URL."""
    exe = server_executable()
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [
        str(exe),
        "server",
        "--backend-store-uri",
        f"sqlite:///{folder / 'mlflow.db'}",
        "--artifacts-destination",
        str(folder / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    # Its own session: the server starts uvicorn and a job runner as children, which end
    # with it when its process group is signalled.
    # Its log goes to a file: it logs every request, which would fill a pipe nobody reads.
    log = (folder / "server.log").open("wb")
    proc = subprocess.Popen(
        cmd, cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        try:
            wait_http(f"http://127.0.0.1:{port}/health", timeout=START_TIMEOUT_S, proc=proc)
        except (RuntimeError, TimeoutError) as exc:
            tail = (folder / "server.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"mlflow server did not start: {exc}\n{tail}") from exc
        yield f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()

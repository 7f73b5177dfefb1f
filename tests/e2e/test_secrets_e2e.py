"""Secrets echoed back by the peers never reach workspace.sqlite or stderr (the CLI, end to end).

A scripted OpenAI-compatible server on 127.0.0.1 answers 401 with the key it was sent, as
OpenAI does ("Incorrect API key provided: ..."); a container echoes its bearer token in a
422. The key has no ``sk-`` prefix and nothing key-shaped about it: only the scrubber's
knowledge of the run's own secrets can mask it. Then the SQLite files and stderr are grepped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from optimizer.testing import thread_server
from tests.fakes.hostile_container import HostileContainer
from tests.fakes.scripted import RuleContainer, program
from tests.fakes.servers import ROOT

pytestmark = pytest.mark.e2e

KEY = "correct horse battery staple 42"  # whatever a key looks like
TOKEN = "container-token-Q7"
URL_PASSWORD = "pa55word-in-url"


def echoing_reflection() -> tuple[Starlette, list[str]]:
    """An OpenAI-compatible endpoint that refuses every key and quotes it back."""
    seen: list[str] = []

    async def completions(request: Request) -> JSONResponse:
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        seen.append(key)
        message = (
            f"Incorrect API key provided: {key}. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        )
        error = {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}
        return JSONResponse({"error": error}, status_code=401)

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    return app, seen


def echoing_container() -> Starlette:
    """A rule container whose rollouts answer 422 quoting the bearer token they got."""
    inner = HostileContainer(RuleContainer(program(["ant", "bee"], train=2, holdout=2))).app()

    async def rollout(request: Request) -> JSONResponse:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        error = {"type": "Forbidden", "message": f"token {token} may not run this seed"}
        return JSONResponse({"error": error}, status_code=422)

    app = Starlette(routes=[Route("/rollout", rollout, methods=["POST"])])
    app.mount("/", inner)
    return app


@pytest.fixture
def container_url() -> Iterator[str]:
    rules = HostileContainer(RuleContainer(program(["ant", "bee", "cat"], train=2, holdout=2)))
    with thread_server(rules.app()) as url:
        yield url


def _optimize(
    workspace: Path, container: str, *extra: str, **env: str
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, "-m", "optimizer.cli", "optimize", "run", "--quiet",
        "--workspace", str(workspace), "--container", container,
        "--max-metric-calls", "40", "--retry-base-delay", "0", *extra,
    ]  # fmt: skip
    return subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )


def _stored(workspace: Path) -> bytes:
    files = [p for p in workspace.iterdir() if p.name.startswith("workspace.sqlite")]
    assert files
    return b"".join(p.read_bytes() for p in files)


def test_a_reflection_key_echoed_in_a_401_is_neither_stored_nor_printed(
    tmp_path: Path, container_url: str
) -> None:
    app, seen = echoing_reflection()
    port = container_url.rsplit(":", 1)[1]
    with_password = f"http://admin:{URL_PASSWORD}@127.0.0.1:{port}"
    with thread_server(app) as reflection:
        done = _optimize(
            tmp_path / "ws",
            with_password,
            "--reflection-model", "gpt-4.1-mini",
            "--reflection-base-url", f"{reflection}/v1",
            "--reflection-api-key-env", "GEPA_TEST_REFLECTION_KEY",
            GEPA_TEST_REFLECTION_KEY=KEY,
        )  # fmt: skip
    assert seen and set(seen) == {KEY}, "the key was really sent, and echoed"
    assert done.returncode == 2, done.stderr
    assert "rejected the key in GEPA_TEST_REFLECTION_KEY" in done.stderr
    assert "Incorrect API key provided: ***" in done.stderr
    stored = _stored(tmp_path / "ws")
    assert b"Incorrect API key provided: ***" in stored  # runs.error and the phase event
    for secret in (KEY, URL_PASSWORD):
        assert secret not in done.stderr + done.stdout
        assert secret.encode() not in stored, f"{secret!r} is in workspace.sqlite"
    assert f"http://***@127.0.0.1:{port}".encode() in stored  # the stored config URL


def test_a_container_token_echoed_in_an_error_is_neither_stored_nor_printed(
    tmp_path: Path,
) -> None:
    with thread_server(echoing_container()) as url:
        done = _optimize(
            tmp_path / "ws",
            url,
            "--reflection-model", "gpt-4.1-mini",
            GEPA_CONTAINER_TOKEN=TOKEN, OPENAI_API_KEY="unused-in-this-test",
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "answered 422: Forbidden: token *** may not run this seed" in done.stderr
    assert TOKEN not in done.stderr + done.stdout
    assert TOKEN.encode() not in _stored(tmp_path / "ws")


def chatty_reflection() -> Starlette:
    """A model that writes a good proposal and quotes the key it was sent in its rationale."""

    async def completions(request: Request) -> JSONResponse:
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        answer = (
            "<<<COMPONENT system_prompt\nLabel the item.\n- ant\n- bee\n- cat\n>>>\n"
            f"RATIONALE: listed every label (my key is {key})"
        )
        choice = {"index": 0, "message": {"role": "assistant", "content": answer}}
        body = {"choices": [{**choice, "finish_reason": "stop"}], "usage": {}}
        return JSONResponse({"id": "x", "object": "chat.completion", "model": "m", **body})

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def test_a_key_quoted_in_a_rationale_is_not_stored_nor_in_the_evidence(
    tmp_path: Path, container_url: str
) -> None:
    with thread_server(chatty_reflection()) as reflection:
        done = _optimize(
            tmp_path / "ws",
            container_url,
            "--reflection-model", "gpt-4.1-mini",
            "--reflection-base-url", f"{reflection}/v1",
            "--reflection-api-key-env", "GEPA_TEST_REFLECTION_KEY",
            GEPA_TEST_REFLECTION_KEY=KEY,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stored = _stored(tmp_path / "ws")
    assert b"listed every label (my key is ***)" in stored, "the rationale is stored, masked"
    assert KEY.encode() not in stored
    packets = [p for p in (tmp_path / "ws").rglob("*") if p.is_file() and "sqlite" not in p.name]
    assert any(b"my key is ***" in p.read_bytes() for p in packets), "evidence names it"
    for packet in packets:
        assert KEY.encode() not in packet.read_bytes(), f"{packet} holds the key"

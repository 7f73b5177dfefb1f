"""``--reflection-model anthropic/...`` from the CLI, end to end, against a scripted server.

The run reads ``ANTHROPIC_API_KEY`` (no ``--reflection-api-key-env``), sends the model name
without its prefix and the key as a bearer token, and keeps the key out of everything it
stores and prints, though the scripted model quotes it back in its rationale.
"""

from __future__ import annotations

import os
import subprocess
import sys
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

KEY = "anthropic key 31 not key-shaped"


def anthropic_like(seen: list[tuple[str, str, str]]) -> Starlette:
    """Answers one good proposal and quotes the key it got; records path, model and key."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        seen.append((request.url.path, body["model"], key))
        answer = (
            "<<<COMPONENT system_prompt\nLabel the item.\n- ant\n- bee\n- cat\n>>>\n"
            f"RATIONALE: listed every label (sent with {key})"
        )
        choice = {"index": 0, "message": {"role": "assistant", "content": answer}}
        body = {"choices": [{**choice, "finish_reason": "stop"}], "usage": {}}
        return JSONResponse({"id": "x", "object": "chat.completion", "model": "m", **body})

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def test_an_anthropic_reflection_model_by_name(tmp_path: Path) -> None:
    seen: list[tuple[str, str, str]] = []
    rules = HostileContainer(RuleContainer(program(["ant", "bee", "cat"], train=2, holdout=2)))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    with thread_server(rules.app()) as container, thread_server(anthropic_like(seen)) as model:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "optimizer.cli",
                "optimize",
                "run",
                "--quiet",
                "--workspace",
                str(tmp_path / "ws"),
                "--container",
                container,
                "--max-metric-calls",
                "40",
                "--retry-base-delay",
                "0",
                "--reflection-model",
                "anthropic/claude-sonnet-4-5",
                "--reflection-base-url",
                f"{model}/v1",
            ],  # fmt: skip
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, "ANTHROPIC_API_KEY": KEY},
        )
    assert done.returncode == 0, done.stderr
    assert seen and set(seen) == {("/v1/chat/completions", "claude-sonnet-4-5", KEY)}
    assert KEY not in done.stdout + done.stderr
    files = [p for p in (tmp_path / "ws").rglob("*") if p.is_file()]
    assert any(b"sent with ***" in p.read_bytes() for p in files), "the rationale is kept, masked"
    for path in files:
        assert KEY.encode() not in path.read_bytes(), f"{path} holds the key"

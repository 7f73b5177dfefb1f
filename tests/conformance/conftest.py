"""Fixtures of the conformance suite: the JSON Schemas and the containers of both SDKs.

Each container is a real process on 127.0.0.1, started on first use and kept for the session:
``python`` and ``node`` serve the twin conformance agents (agents/conformance_agent.py,
container/typescript/test/fixtures/conformance-agent.ts) on the same data, ``*-template`` their
prompt-template targets, and ``node-readme`` the agent of the TypeScript guide
(``docs/wrap-typescript.md``) against a scripted student model.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from optimizer.testing import free_port, thread_server
from optimizer.testing.toy import TOY_DATA, TOY_SPLITS
from tests.conformance import node
from tests.fakes.student_server import create_app as student_app

HERE = Path(__file__).resolve().parent
TOKEN = "conformance-token"


@dataclass(frozen=True)
class Server:
    """A running container: its URL, a seed it serves and its component names."""

    name: str
    url: str
    seed: str
    components: tuple[str, ...]


@pytest.fixture(scope="session")
def schemas() -> dict[str, Any]:
    """What ``gepa-runtime schema`` prints: the JSON Schema of every wire model."""
    done = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "schema"],
        capture_output=True,
        text=True,
        cwd=node.ROOT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _conformance_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {"name": f"echo-{i}", "input": word, "expected": word}
        for i, word in enumerate(["alpha", "beta", "gamma", "delta", "épsilon"])
    ]
    modes = [
        *("rate_limit", "unavailable", "provider_429", "provider_5xx", "crash", "bad_type"),
        *("candidate_misuse", "user_mistake"),
    ]
    rows += [{"name": m.replace("_", "-"), "input": "x", "expected": "x", "mode": m} for m in modes]
    rows.append({"name": "connection", "input": free_port(), "expected": "x", "mode": "connection"})
    rows.append({"name": "no-label", "input": "alpha"})
    return rows


@pytest.fixture(scope="session")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The conformance datasets: ``conformance.jsonl`` and ``template.jsonl``."""
    folder = tmp_path_factory.mktemp("conformance-data")
    template_rows = [
        {"name": "t-0", "input": {"question": "2+2"}, "expected": "4"},
        {"name": "t-1", "input": {"question": "3+4"}, "expected": "7"},
        {"name": "t-missing", "input": {"query": "5+5"}, "expected": "10"},
    ]
    for name, rows in (("conformance", _conformance_rows()), ("template", template_rows)):
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (folder / f"{name}.jsonl").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def start(
    data: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], Server]]:
    """``start(name)``: the named container, started on first use."""
    started: dict[str, Server] = {}
    with contextlib.ExitStack() as stack:

        def get(name: str) -> Server:
            if name not in started:
                started[name] = _launch(name, stack, data, tmp_path_factory)
            return started[name]

        yield get


def _launch(
    name: str, stack: contextlib.ExitStack, data: Path, tmp: pytest.TempPathFactory
) -> Server:
    agent_py = HERE / "agents" / "conformance_agent.py"
    agent_js = node.FIXTURES / "conformance-agent.js"
    common = ["--token", TOKEN]
    if name == "node-readme":
        student = stack.enter_context(thread_server(student_app()))
        agent = node.build_readme_agent(tmp.mktemp("readme-agent"))
        url = stack.enter_context(
            node.node_container(
                agent,
                "--dataset",
                str(TOY_DATA),
                "--splits-file",
                str(TOY_SPLITS),
                *common,
                env={"OPENAI_BASE_URL": f"{student}/v1", "OPENAI_API_KEY": "test-key"},
            )
        )
        return Server(name, url, "cow-0", ("system_prompt",))
    template = name.endswith("-template")
    dataset = ["--dataset", str(data / ("template.jsonl" if template else "conformance.jsonl"))]
    target = "template" if template else "conformance"
    if name.startswith("python"):
        url = stack.enter_context(node.python_container(f"{agent_py}:{target}", *dataset, *common))
    else:
        url = stack.enter_context(node.node_container(f"{agent_js}:{target}", *dataset, *common))
    if template:
        return Server(name, url, "t-0", ("system_prompt", "demos"))
    return Server(name, url, "echo-0", ("system_prompt",))

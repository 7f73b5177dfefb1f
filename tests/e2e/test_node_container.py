"""End-to-end: ``gepa-runtime optimize run`` drives a real Node container to a promoted result.

The container is the agent of the TypeScript guide (``docs/wrap-typescript.md``), compiled as written
and served by the TypeScript SDK's CLI on 127.0.0.1; its model is a scripted OpenAI-compatible
student (tests/fakes/student_server.py) and the reflection model the scripted one of the
Python end-to-end tests. Every paid rollout reaches the Node container's model exactly once,
and is one ``optimize:<target id>`` span at a real OTLP/HTTP receiver (tests/fakes/otlp_receiver.py,
the receiver the Python SDK's spans go to in tests/e2e/test_tracing_e2e.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.testing import reflection_app, thread_server
from optimizer.testing.toy import TOY_DATA, TOY_SPLITS
from tests.conformance import node
from tests.fakes.otlp_receiver import create_app as otlp_app
from tests.fakes.servers import ROOT, fake_reflection_flags
from tests.fakes.student_server import create_app as student_app

pytestmark = pytest.mark.e2e


def _optimize(container: str, reflection: str, workspace: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "optimizer.cli",
        "optimize",
        "run",
        "--container",
        container,
        *fake_reflection_flags(reflection, 400),
        "--seed",
        "3",
        "--use-merge",
        "false",
        "--max-idle-iterations",
        "6",
        "--retry-base-delay",
        "0.01",
        "--workspace",
        str(workspace),
        "--quiet",
    ]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def _spans(receiver: Any, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The spans received once ``count`` arrived (exported in batches), or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while len(receiver.state.spans) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return list(receiver.state.spans)


def test_optimize_run_promotes_a_better_prompt_for_the_readme_node_agent(tmp_path: Path) -> None:
    agent = node.build_readme_agent(tmp_path / "agent")
    # The guide's tickets have a text column (task.input is {"text": ...}).
    rows = [json.loads(line) for line in (TOY_DATA).read_text().splitlines()]
    tickets = tmp_path / "tickets.jsonl"
    for row in rows:
        row["text"] = row.pop("input")
    tickets.write_text("".join(json.dumps(row) + "\n" for row in rows))
    student, receiver = student_app(), otlp_app()
    with (
        thread_server(student) as student_url,
        thread_server(reflection_app()) as reflection_url,
        thread_server(receiver) as otlp,
        node.node_container(
            agent,
            "--dataset",
            str(tickets),
            "--splits-file",
            str(TOY_SPLITS),
            env={
                "OPENAI_BASE_URL": f"{student_url}/v1",
                "OPENAI_API_KEY": "test-key",
                "OTEL_EXPORTER_OTLP_ENDPOINT": otlp,
                "OTEL_BSP_SCHEDULE_DELAY": "100",
            },
        ) as container,
    ):
        first = _optimize(container, f"{reflection_url}/v1", tmp_path / "ws")
        assert first.returncode == 0, first.stdout + first.stderr
        calls_after_first = student.state.calls
        spans = _spans(receiver, calls_after_first)
        second = _optimize(container, f"{reflection_url}/v1", tmp_path / "ws")
        assert second.returncode == 0, second.stdout + second.stderr
    runs = sorted((tmp_path / "ws" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    packet = json.loads((runs[0] / "evidence.json").read_text())
    assert packet["status"] == "completed"
    assert packet["program"]["program_id"] == "support-triage"
    # The baseline names no label: 0.0; the scripted reflection teaches the labels.
    assert packet["baseline"]["train"] == 0.0 and packet["baseline"]["holdout"] == 0.0
    assert packet["best"]["train"] == 1.0
    assert packet["best"]["holdout"] > 0.3
    assert packet["promotion"]["promoted"] is True
    assert packet["rollouts"]["errors"] == 0
    assert packet["rollouts"]["paid"] == calls_after_first  # each paid rollout: one model call
    assert len(spans) == calls_after_first  # ... and one span
    assert {s["name"] for s in spans} == {"optimize:support-triage"}
    assert {s["attributes"]["gepa.target_id"] for s in spans} == {"support-triage"}
    assert {s["attributes"]["gepa.run_id"] for s in spans} == {packet["run_id"]}
    # The identical second run is served from the rollout cache: no call reaches Node.
    again = json.loads((runs[1] / "evidence.json").read_text())
    assert again["rollouts"]["paid"] == 0 and student.state.calls == calls_after_first
    assert again["best"]["holdout"] == packet["best"]["holdout"]


def test_the_typescript_banking77_example_classifies_with_the_fixed_label_list(
    tmp_path: Path,
) -> None:
    node.node_binary()  # builds the package, examples included
    example = node.TS_ROOT / "dist" / "examples" / "banking77" / "agent.js"
    student = student_app()
    env = {"B77_DATA_DIR": str(tmp_path), "B77_TRAIN_SIZE": "8", "B77_HOLDOUT_SIZE": "10"}
    with thread_server(student) as student_url:
        env["OPENAI_BASE_URL"] = f"{student_url}/v1"
        with node.node_container(example, env=env) as container:
            program = httpx.get(f"{container}/program").json()
            split_file = tmp_path / "train8-holdout10-seed0" / "train.jsonl"
            rows = [json.loads(line) for line in split_file.read_text().splitlines()]

            def rollout(seed: str, prompt: str) -> httpx.Response:
                body = {"candidate": {"system_prompt": prompt}, "seed": seed}
                return httpx.post(f"{container}/rollout", json=body, timeout=30)

            right = rollout(rows[0]["name"], f"Always answer {rows[0]['category']}")
            wrong = rollout(rows[1]["name"], f"Always answer {rows[0]['category']}")
            limited = rollout(rows[0]["name"], "RATE-LIMIT-ME")
    assert program["program_id"] == "banking77-intent"
    assert len(program["seeds"]["train"]) == 8 and len(program["seeds"]["holdout"]) == 10
    assert program["seeds"]["train"] == [r["name"] for r in rows]
    assert all(s.startswith("b77-test-") for s in program["seeds"]["holdout"])
    labels = json.loads((ROOT / "examples" / "banking77" / "categories.json").read_text())
    assert rows[0]["category"] != rows[1]["category"] and {r["category"] for r in rows} <= set(
        labels
    )
    assert (right.status_code, right.json()["reward"]) == (200, 1.0)
    assert right.json()["feedback"] == f"correct: predicted {rows[0]['category']}"
    assert wrong.json()["reward"] == 0.0
    assert wrong.json()["feedback"].startswith(
        f"predicted {rows[0]['category']}, expected {rows[1]['category']} for the query"
    )
    sent = student.state.requests[0]
    assert sent["model"] == "student"  # no key, local endpoint: the local server's alias
    assert sent["messages"][0]["content"] == (
        "Labels: " + ", ".join(labels) + f"\n\nAlways answer {rows[0]['category']}"
    )
    assert sent["messages"][1] == {"role": "user", "content": rows[0]["text"]}
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "4")

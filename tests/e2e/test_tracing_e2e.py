"""Traces: a real container process of either SDK (Python: protobuf through the OpenTelemetry
SDK; TypeScript: OTLP/HTTP JSON by fetch) exports one ``optimize:<target id>`` span per rollout
to a real OTLP/HTTP receiver on 127.0.0.1, and the trials feed names each rollout's trace."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optimizer.searches import run_optimization
from optimizer.service.views import trial_views
from optimizer.testing import reflection_app, rollout_calls, thread_server, toy_container
from optimizer.testing.toy import TOY_DATA, TOY_SPLITS
from schemas import RunConfig
from tests.conformance import node
from tests.fakes.otlp_receiver import create_app as otlp_app
from tests.fakes.servers import ROOT
from workspace import Workspace

pytestmark = pytest.mark.e2e


async def _spans(app: Any, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The spans received once ``count`` have arrived (the exporter sends in batches)."""
    for _ in range(int(timeout / 0.1)):
        if len(app.state.spans) >= count:
            break
        await asyncio.sleep(0.1)
    return list(app.state.spans)


@contextlib.contextmanager
def _toy(sdk: str, log: Path, env: dict[str, str]) -> Iterator[str]:
    """The toy agent served by the Python SDK or by the TypeScript one (same data, same rules)."""
    if sdk == "python":
        with toy_container(log, env=env) as url:
            yield url
        return
    agent = node.FIXTURES / "toy-agent.js"
    data = ["--dataset", str(TOY_DATA)]
    splits = ["--splits-file", str(TOY_SPLITS)]
    with node.node_container(agent, *data, *splits, env={**env, "TOY_LOG": str(log)}) as url:
        yield url


@pytest.mark.parametrize("sdk", ["python", "node"])
async def test_each_rollout_is_one_span_named_for_the_target(tmp_path: Path, sdk: str) -> None:
    receiver = otlp_app()
    log = tmp_path / "calls.log"
    with thread_server(receiver) as otlp, thread_server(reflection_app()) as reflection:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with _toy(sdk, log, env) as url:
            config = RunConfig(
                containers=[url],
                reflection_model="fake-reflection",
                reflection_base_url=f"{reflection}/v1",
                proposer_mode="text",
                max_metric_calls=60,
                seed=3,
                use_merge=False,
            )
            async with Workspace(tmp_path / "ws") as ws:
                result = await run_optimization(config, workspace=ws)
                trials = await ws.list_trials(result.run_id, offset=0, limit=1000)
                feed = await trial_views(ws, trials)
                paid = [t for t in trials if not t.cached and t.status == "ok"]
                spans = await _spans(receiver, len(rollout_calls(log)))

    assert len(paid) == len(rollout_calls(log)) > 20
    assert len(spans) == len(paid)  # one span per rollout the container served, no more
    assert {s["name"] for s in spans} == {"optimize:toy-labels"}
    assert {s["service"] for s in spans} == {"gepa-container"}
    by_trace = {s["trace_id"]: s["attributes"] for s in spans}
    assert len(by_trace) == len(spans)  # each rollout is its own trace
    for trial in paid:
        attributes = by_trace[trial.trace_id or ""]  # the stored trace names the span's trace
        assert attributes["gepa.run_id"] == result.run_id
        assert attributes["gepa.candidate_id"] == trial.candidate_id
        assert attributes["gepa.seed"] == trial.seed
        assert attributes["gepa.reward"] == trial.reward
        assert attributes["gepa.target_id"] == "toy-labels"
    # the console's feed carries the id, cached trials included (from the rollout they reuse)
    assert all(view["trace_id"] in by_trace for view in feed if view["status"] == "ok")


def test_without_opentelemetry_rollouts_are_served_as_before(tmp_path: Path) -> None:
    """The package hidden from the import system: the SDK imports, serves and adds nothing."""
    script = """
import sys
sys.modules["opentelemetry"] = None  # as if the [otel] extra were not installed
import httpx, asyncio
from container import create_app, load_target
from container.tracing import configure_tracing
target = load_target("optimizer/testing/toy/toy_container.py")
app = create_app(target, splits="optimizer/testing/toy/toy_splits.json")
assert configure_tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}) is False
async def main():
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://c") as client:
        body = {"candidate": {"system_prompt": "Answer cow."}, "seed": "cow-0", "run_id": "r"}
        answer = (await client.post("/rollout", json=body)).json()
    assert answer["reward"] == 1.0, answer
    assert [e["type"] for e in answer["trace"]["events"]] == ["task"], answer["trace"]
    print("served without opentelemetry")
asyncio.run(main())
"""
    env_free = {"PATH": "/usr/bin:/bin", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
        timeout=60, env=env_free,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "served without opentelemetry" in done.stdout

"""End-to-end: runs logged to a real MLflow tracking server, read back through MLflow's client.

A real ``gepa-runtime container`` process, the scripted reflection model in a thread, a real
``mlflow server`` with a SQLite backend (tests/fakes/mlflow_server.py), all on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import optimizer.runtime.tracking.tracker as tracking
from optimizer.runtime.tracking.ops import EventRecorder
from optimizer.runtime.tracking.tracker import STATE_FILE
from optimizer.searches import run_optimization
from optimizer.testing import free_port, reflection_app, thread_server, toy_container
from schemas import Event, RunConfig
from tests.fakes.mlflow_server import mlflow_server, require_client
from workspace import Workspace

pytestmark = pytest.mark.e2e

SECRET = "sk-mlflowtestsecret0123456789"


@pytest.fixture(scope="module")
def reflection_url() -> Iterator[str]:
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


@pytest.fixture(scope="module")
def tracking_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as url:
        yield url


def _config(container: str, reflection: str, mlflow: str) -> RunConfig:
    return RunConfig(
        containers=[container],
        reflection_model="fake-reflection",
        reflection_base_url=reflection,
        reflection_api_key_env="GEPA_TEST_MLFLOW_KEY",
        proposer_mode="text",
        max_metric_calls=400,
        max_idle_iterations=6,
        minibatch_size=4,
        seed=3,
        retry_base_delay_s=0.01,
        use_merge=False,
        mlflow_tracking_uri=mlflow,
    )


def _client(url: str) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=url)


def _only_run(client: Any, experiment: str) -> Any:
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment}"
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1, [r.info.run_id for r in runs]
    return runs[0]


def _history(client: Any, run_id: str, name: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(run_id, name)]


async def _cancelled_mid_search(config: RunConfig, root: Path) -> str:
    """Start the run, cancel it after its second gated iteration; its id."""
    gates = 0
    task: asyncio.Task[Any] | None = None

    def listen(event: Event) -> None:
        nonlocal gates
        if event.type == "gate":
            gates += 1
            if gates == 2 and task is not None:
                task.cancel()

    task = asyncio.create_task(run_optimization(config, workspace=root, on_event=listen))
    with pytest.raises(asyncio.CancelledError):
        await task
    async with Workspace(root) as ws:
        (record,) = await ws.list_runs()
    assert record.status == "cancelled"
    return record.run_id


async def test_a_run_is_tracked_in_mlflow_and_its_resume_continues_the_same_mlflow_run(
    tmp_path: Path,
    reflection_url: str,
    tracking_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GEPA_TEST_MLFLOW_KEY", SECRET)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "gepa-e2e-resume")
    # On a loaded machine the iterations queued before the cancel take more than the 5 s a
    # cancelled run waits for them; this test checks what gets logged, not that bound.
    monkeypatch.setattr(tracking, "CANCELLED_TIMEOUT_S", 60.0)
    client, root = _client(tracking_url), tmp_path / "ws"
    with toy_container(tmp_path / "calls.log") as url:
        config = _config(url, reflection_url, tracking_url)
        run_id = await _cancelled_mid_search(config, root)
        first = _only_run(client, "gepa-e2e-resume")
        paid_before = _history(client, first.info.run_id, "paid_calls")
        stored = json.loads((root / "runs" / run_id / STATE_FILE).read_text())
        result = await run_optimization(config, workspace=root, run_id=run_id)

    # MLflow's "View run ... at URL" lines stay out of the CLI's stdout (its result lines).
    assert "View run" not in capfd.readouterr().out
    # The cancelled run was its own MLflow run, marked killed, with its id kept in the workspace.
    assert first.info.status == "KILLED"
    assert first.info.run_name == run_id and first.data.tags["gepa.run_id"] == run_id
    assert stored["run_id"] == first.info.run_id and stored["warnings"] == []
    assert len(paid_before) >= 2  # two iterations were logged before the cancel
    # The resume continued it: still one MLflow run, now finished, with more steps.
    run = _only_run(client, "gepa-e2e-resume")
    assert run.info.run_id == first.info.run_id
    assert run.info.status == "FINISHED"
    packet = result.evidence
    # Params: the config, without the key variable's name (nor, anywhere, its value).
    params = run.data.params
    assert params["method"] == "gepa"
    assert params["max_metric_calls"] == "400"
    assert params["minibatch_size"] == "4"
    assert json.loads(params["containers"]) == [url]
    assert params["resolved_max_metric_calls"] == "400"
    assert not [k for k in params if k.endswith("_env")]
    assert SECRET not in json.dumps(params)
    # Tags: program, method, the verdict.
    tags = run.data.tags
    assert tags["gepa.program_id"] == packet["program"]["program_id"]
    assert tags["gepa.method"] == "gepa"
    assert tags["gepa.promoted"] == str(packet["promotion"]["promoted"]).lower() == "true"
    assert tags["gepa.status"] == "completed"
    # Metrics per iteration: several steps, in the order of the run, counters that only grow.
    paid = _history(client, run.info.run_id, "paid_calls")
    assert len(paid) > len(paid_before)
    steps = {step for step, _ in paid}
    assert len(steps) >= 3, paid
    best = _history(client, run.info.run_id, "best_train_score")
    assert max(v for _, v in best) == packet["best"]["train"] == 1.0
    assert min(v for _, v in best) == packet["baseline"]["train"] == 0.0
    coverage = _history(client, run.info.run_id, "frontier_best_coverage")
    assert coverage and all(0.0 < v <= 1.0 for _, v in coverage)
    assert coverage[-1][1] == 1.0  # the winner, at full marks, wins every train seed
    assert all(v >= 1 for _, v in _history(client, run.info.run_id, "frontier_size"))
    assert run.data.metrics["holdout_lift"] == pytest.approx(packet["promotion"]["lift"])
    assert run.data.metrics["cached_calls"] >= 1  # the resume re-used what was paid before
    # Artifacts: the evidence packet, the report and one file per candidate with its text.
    folder = tmp_path / "artifacts"
    evidence = Path(client.download_artifacts(run.info.run_id, "evidence", str(folder)))
    logged = json.loads((evidence / "evidence.json").read_text())
    assert logged["run_id"] == run_id
    assert logged["promotion"] == packet["promotion"]
    assert logged["best"]["components"] == packet["best"]["components"]
    assert (evidence / "report.md").read_text() == (result.evidence_dir / "report.md").read_text()
    candidates = Path(client.download_artifacts(run.info.run_id, "candidates", str(folder)))
    files = {p.stem: json.loads(p.read_text()) for p in candidates.glob("*.json")}
    assert set(files) == {c["candidate_id"] for c in packet["candidates"]}
    best = files[packet["best"]["candidate_id"]]
    assert best["components"] == packet["best"]["components"]
    assert best["scores"]["holdout"] == packet["best"]["holdout"]
    assert SECRET not in "".join(p.read_text() for p in folder.rglob("*") if p.is_file())


def _refusing_tracker() -> Starlette:
    """Answers /health, refuses every MLflow API call (a server broken behind a healthy door)."""

    async def health(request: Request) -> JSONResponse:
        return JSONResponse("OK")

    async def refuse(request: Request) -> JSONResponse:
        body = {"error_code": "INVALID_PARAMETER_VALUE", "message": "this server refuses all"}
        return JSONResponse(body, status_code=400)

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/{path:path}", refuse, methods=["GET", "POST", "PATCH", "DELETE"]),
        ]
    )


@pytest.mark.parametrize("server", ["down", "refusing"])
async def test_a_tracking_server_that_is_down_or_failing_does_not_fail_the_run(
    tmp_path: Path, reflection_url: str, server: str
) -> None:
    require_client()
    with toy_container(tmp_path / "calls.log") as url, thread_server(_refusing_tracker()) as bad:
        tracking = f"http://127.0.0.1:{free_port()}" if server == "down" else bad
        seen: list[str] = []

        def listen(event: Event) -> None:
            if event.type == "warning":
                seen.append(str(event.data["message"]))

        began = time.monotonic()
        result = await run_optimization(
            _config(url, reflection_url, tracking),
            workspace=tmp_path / "ws",
            on_event=listen,
        )
        took = time.monotonic() - began
    assert result.status == "completed" and result.promoted
    assert len(seen) == 1, seen  # warned once
    assert f"MLflow tracking at {tracking}" in seen[0] and "the run goes on" in seen[0]
    assert ("does not answer" if server == "down" else "this server refuses all") in seen[0]
    # Kept with the run, and said in the report: a server that is down is found before the
    # run starts; a failing one in the thread, in the report when it failed before the end.
    if server == "down":
        assert result.evidence["warnings"] == seen
        assert seen[0] in (result.evidence_dir / "report.md").read_text()
    else:
        assert set(result.evidence["warnings"]) <= set(seen)
    stored = json.loads((result.evidence_dir / STATE_FILE).read_text())
    assert stored["warnings"] == seen and stored["run_id"] is None
    assert took < 60, took  # no MLflow retries with backoff held the run up


async def test_an_event_the_tracking_cannot_read_stops_the_tracking_not_the_run(
    tmp_path: Path, reflection_url: str, tracking_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "gepa-e2e-broken-mapping")
    real = EventRecorder.ops

    def ops(self: EventRecorder, event: Event) -> list[Any]:
        if event.type == "gate":
            raise KeyError("child_score")  # a mapping bug, met in the middle of the search
        return real(self, event)

    monkeypatch.setattr(EventRecorder, "ops", ops)
    seen: list[str] = []

    def listen(event: Event) -> None:
        if event.type == "warning":
            seen.append(str(event.data["message"]))

    with toy_container(tmp_path / "calls.log") as url:
        result = await run_optimization(
            _config(url, reflection_url, tracking_url), workspace=tmp_path / "ws", on_event=listen
        )
    assert result.status == "completed" and result.promoted
    assert len(seen) == 1 and "cannot log a 'gate' event: KeyError" in seen[0], seen
    # What was logged before stays; nothing after the failure was sent (no evidence, no end).
    run = _only_run(_client(tracking_url), "gepa-e2e-broken-mapping")
    assert run.data.params["method"] == "gepa"
    assert run.info.status == "RUNNING"
    assert "evidence" not in {a.path for a in _client(tracking_url).list_artifacts(run.info.run_id)}

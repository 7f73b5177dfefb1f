"""A container that breaks the SDK's promises: overlapping splits, a fingerprint that changes
mid-run, slow answers, a huge dataset. Real uvicorn servers on 127.0.0.1, a real workspace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from optimizer.cli import main
from optimizer.runtime.lifecycle import run as run_module
from optimizer.searches import run_optimization
from optimizer.testing import reflection_app, thread_server
from schemas import ContainerError, RunConfig
from tests.e2e.protocol_app import ProtocolContainer, seeds
from tests.fakes.servers import ROOT
from workspace import Workspace

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def reflection_url() -> Any:
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


def _config(url: str, reflection: str, **extra: Any) -> RunConfig:
    fields: dict[str, Any] = {
        "containers": [url],
        "reflection_model": "fake-reflection",
        "reflection_base_url": reflection,
        "proposer_mode": "text",
        "max_metric_calls": 300,
        "max_idle_iterations": 6,
        "seed": 3,
        "concurrency": 4,
        "retry_base_delay_s": 0.01,
        "use_merge": False,
        **extra,
    }
    return RunConfig(**fields)


def _flags(url: str, reflection: str, root: Path) -> list[str]:
    return [
        "--container", url, "--reflection-model", "fake-reflection",
        "--reflection-base-url", reflection, "--proposer-mode", "text",
        "--workspace", str(root), "--quiet",
    ]  # fmt: skip


def test_run_refuses_holdout_seeds_that_are_train_seeds(
    tmp_path: Path, reflection_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    leaky = ProtocolContainer(train=seeds(3), holdout=["cow-1", "dog-2", *seeds(1, start=3)])
    with thread_server(leaky.app()) as url:
        code = main(
            ["optimize", "run", *_flags(url, reflection_url, tmp_path), "--max-metric-calls", "50"]
        )
    err = capsys.readouterr().err
    assert code == 2, err
    assert "2 holdout seed(s) that are also train or val seeds: cow-1, dog-2" in err
    assert "--splits-file" in err
    assert leaky.rollouts == 0  # refused before anything was paid


async def test_a_fingerprint_change_between_phases_stops_the_run(
    tmp_path: Path, reflection_url: str
) -> None:
    # The fingerprint changes once the baseline's 24 train rollouts are answered: the run
    # notices when it enters its search, before a candidate is scored by the new version.
    changing = ProtocolContainer(train=seeds(3), holdout=seeds(2, start=3), change_after=24)
    with thread_server(changing.app()) as url:
        async with Workspace(tmp_path / "ws") as ws:
            with pytest.raises(ContainerError) as caught:
                await run_optimization(_config(url, reflection_url), workspace=ws)
            (record,) = await ws.list_runs()
            events = await ws.events_since(record.run_id, 0, 10000)
    message = str(caught.value)
    assert "changed during run" in message and "fp-1" in message and "fp-1-changed" in message
    assert f"gepa-runtime optimize run {record.run_id}" in message
    assert record.status == "failed" and "fp-1-changed" in (record.error or "")
    warnings = [e.data["message"] for e in events if e.type == "warning"]
    assert any("fp-1-changed" in w for w in warnings)
    assert not any(e.type == "phase" and e.data.get("phase") == "searching" for e in events)


async def test_a_fingerprint_change_during_the_search_is_noticed_by_the_watch(
    tmp_path: Path, reflection_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_module, "PROGRAM_CHECK_S", 0.1, raising=False)
    changing = ProtocolContainer(
        train=seeds(3), holdout=seeds(2, start=3), change_after=60, delay_s=0.01
    )
    with thread_server(changing.app()) as url:
        async with Workspace(tmp_path / "ws") as ws:
            with pytest.raises(ContainerError, match="changed during run"):
                await run_optimization(_config(url, reflection_url), workspace=ws)
            (record,) = await ws.list_runs()
            events = await ws.events_since(record.run_id, 0, 10000)
    phases = [e.data.get("phase") for e in events if e.type == "phase"]
    assert "searching" in phases and "evaluating_best" not in phases  # stopped mid-search
    assert record.status == "failed"
    # Stopped within a few rollouts of the change, not at the end of the search.
    assert changing.rollouts < 60 + 40


async def test_a_rollout_timeout_is_reported_as_a_timeout(
    tmp_path: Path, reflection_url: str
) -> None:
    slow = ProtocolContainer(train=seeds(2), holdout=seeds(2, start=2), delay_s=1.0)
    with thread_server(slow.app()) as url:
        config = _config(url, reflection_url, rollout_timeout_s=0.2, max_retries=0)
        async with Workspace(tmp_path / "ws") as ws:
            with pytest.raises(ContainerError) as caught:
                await run_optimization(config, workspace=ws)
            (record,) = await ws.list_runs()
    message = str(caught.value)
    assert "timed out" in message and "within 0.2 s (--rollout-timeout)" in message
    assert "--rollout-timeout 0.4" in message
    assert "rate limits" not in message
    assert record.error == message


def test_auto_budget_of_a_huge_dataset_is_printed_with_a_warning(
    tmp_path: Path, reflection_url: str
) -> None:
    huge = ProtocolContainer(train=seeds(20_000), holdout=seeds(5_000, start=20_000))
    with thread_server(huge.app()) as url:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "optimizer.cli", "optimize", "run",
                *_flags(url, reflection_url, tmp_path / "ws"), "--auto", "light",
            ],
            cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        lines, found, reader = _follow_stderr(proc, "warning: --auto light")
        found.wait(90)
        os.kill(proc.pid, signal.SIGTERM)  # it would pay for a million rollouts otherwise
        proc.wait(timeout=60)
        reader.join(timeout=10)
    err = "".join(lines)
    # N = T + H + 12 * (4 + T/2) + H with T = 160,000 train and H = 40,000 holdout seeds.
    assert "budget: 1,200,048 metric calls from --auto light" in err, err
    assert "warning: --auto light sets a budget of 1,200,048 metric calls" in err
    assert "160,000 train" in err and "40,000 holdout" in err
    assert "--max-metric-calls N" in err
    assert proc.returncode == 143 and "Traceback" not in err


def _follow_stderr(
    proc: subprocess.Popen[str], marker: str
) -> tuple[list[str], threading.Event, threading.Thread]:
    """Read the process's stderr to its end in a thread; the event is set at ``marker``."""
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        with proc.stderr:
            for line in iter(proc.stderr.readline, ""):
                lines.append(line)
                if line.startswith(marker):
                    found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, found, reader

"""End-to-end: the optimizer against real ``gepa-runtime container`` processes on 127.0.0.1.

The reflection model is a scripted OpenAI-compatible server (optimizer/testing/reflection.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from optimizer.searches import run_optimization
from optimizer.testing import reflection_app, rollout_calls, thread_server, toy_container
from schemas import RunConfig
from tests.fakes.flaky_proxy import FlakyProxy
from tests.fakes.servers import ROOT, fake_reflection_flags
from workspace import Workspace

pytestmark = pytest.mark.e2e

EVIDENCE_KEYS = {
    "run_id",
    "status",
    "program",
    "baseline",
    "best",
    "promotion",
    "rollouts",
    "usage",
    "frontier",
    "candidates",
}


@pytest.fixture(scope="module")
def reflection_url() -> Any:
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


def _config(container: str, reflection: str, **extra: Any) -> RunConfig:
    return RunConfig(
        containers=[container],
        reflection_model="fake-reflection",
        reflection_base_url=reflection,
        proposer_mode="text",
        max_metric_calls=400,
        max_idle_iterations=6,
        minibatch_size=4,
        seed=3,
        concurrency=4,
        retry_base_delay_s=0.01,
        use_merge=False,
        **extra,
    )


def _assert_valid_packet(folder: Path) -> dict[str, Any]:
    packet = json.loads((folder / "evidence.json").read_text())
    assert set(packet) >= EVIDENCE_KEYS
    assert {"program_id", "fingerprint"} <= set(packet["program"])
    assert {"candidate_id", "train", "holdout"} <= set(packet["baseline"])
    assert {"candidate_id", "components", "train", "holdout"} <= set(packet["best"])
    assert {"lift", "ci_low", "ci_high", "min_improvement", "promoted"} <= set(packet["promotion"])
    assert {"paid", "cached", "errors", "retries"} <= set(packet["rollouts"])
    assert {"student", "proposer"} <= set(packet["usage"])
    assert {"coverage", "train_seeds"} <= set(packet["frontier"])
    for c in packet["candidates"]:
        assert {"candidate_id", "parents", "origin", "train", "holdout"} <= set(c)
    report = (folder / "report.md").read_text()
    assert "## Prompt diff" in report and packet["best"]["candidate_id"] in report
    return packet


async def test_full_run_then_identical_rerun_costs_no_rollouts(
    tmp_path: Path, reflection_url: str
) -> None:
    log = tmp_path / "calls.log"
    with toy_container(log) as url:
        async with Workspace(tmp_path / "ws") as ws:
            first = await run_optimization(_config(url, reflection_url), workspace=ws)
            packet = _assert_valid_packet(first.evidence_dir)
            calls_after_first = len(rollout_calls(log))
            second = await run_optimization(_config(url, reflection_url), workspace=ws)
    # The baseline knows no label: 0.0; the scripted proposer teaches labels: the best is better.
    assert packet["baseline"]["train"] == 0.0 and packet["baseline"]["holdout"] == 0.0
    assert packet["best"]["train"] > 0.3
    assert packet["best"]["holdout"] > 0.3
    assert packet["promotion"]["promoted"] is True
    assert packet["promotion"]["lift"] == pytest.approx(
        packet["best"]["holdout"] - packet["baseline"]["holdout"]
    )
    assert (
        packet["rollouts"]["paid"] == calls_after_first
    )  # every paid rollout reached the container once
    assert packet["rollouts"]["paid"] <= 400
    # It stopped because nothing was left to improve, not on its budget.
    assert packet["best"]["train"] == 1.0
    assert "full marks on every train seed" in packet["stop_reason"]
    assert len(set(rollout_calls(log))) == calls_after_first  # and none twice
    # The identical second run is served from the cache.
    assert len(rollout_calls(log)) == calls_after_first
    assert second.evidence["rollouts"]["paid"] == 0
    assert second.evidence["rollouts"]["cached"] > 0
    assert second.best_candidate_id == first.best_candidate_id
    assert second.evidence["best"]["holdout"] == packet["best"]["holdout"]


async def test_flaky_container_gives_the_same_scores_and_reports_retries(
    tmp_path: Path, reflection_url: str
) -> None:
    with toy_container(tmp_path / "clean.log") as url:
        clean = await run_optimization(_config(url, reflection_url), workspace=tmp_path / "clean")
        port = int(url.rsplit(":", 1)[1])
        proxy = FlakyProxy(port, seed=11)
        with proxy as flaky_url:
            # 40% of attempts fail: 12 retries make a rollout that fails them all a
            # 1-in-150,000 event, so every rollout ends scored, as a clean one would.
            flaky = await run_optimization(
                _config(flaky_url, reflection_url, max_retries=12), workspace=tmp_path / "flaky"
            )
    a, b = clean.evidence, flaky.evidence
    assert sum(proxy.faults.values()) > 10, proxy.faults
    assert {"429", "503", "drop"} <= set(proxy.faults)
    assert b["rollouts"]["retries"] > 0
    assert b["rollouts"]["errors"] == 0
    for split in ("train", "holdout"):
        assert a["baseline"][split] == b["baseline"][split]
        assert a["best"][split] == b["best"][split]
    assert a["best"]["candidate_id"] == b["best"]["candidate_id"]
    assert [c["candidate_id"] for c in a["candidates"]] == [
        c["candidate_id"] for c in b["candidates"]
    ]


async def test_rows_that_crash_the_agent_are_set_aside_and_the_run_completes(
    tmp_path: Path, reflection_url: str
) -> None:
    # Two train rows raise in the agent on every call (the SDK answers 500): each is asked
    # for two different candidates, then set aside; the run goes on and names them.
    log, crashing = tmp_path / "calls.log", {"cow-0", "owl-1"}
    with toy_container(log, env={"TOY_CRASH": ",".join(sorted(crashing))}) as url:
        result = await run_optimization(
            _config(url, reflection_url, max_retries=1), workspace=tmp_path / "ws"
        )
    packet = _assert_valid_packet(result.evidence_dir)
    assert result.status == "completed"
    assert {note["seed"] for note in packet["set_aside"]} == crashing
    calls = rollout_calls(log)
    for seed in crashing:
        asked = [candidate for candidate, s in calls if s == seed]
        assert len(set(asked)) == 2 and len(asked) == 4  # 2 candidates x (1 try + 1 retry)
        assert packet["per_seed"]["train"][seed] == {"baseline": None, "best": None}
        assert seed not in packet["frontier"]["train_seeds"]
    assert packet["best"]["train"] == 1.0  # on the 22 train seeds that remain
    report = (result.evidence_dir / "report.md").read_text()
    assert "## Seeds set aside" in report and "HTTP 500" in report


def test_create_then_run_pays_no_rollout_twice(tmp_path: Path, reflection_url: str) -> None:
    # create's check sends the baseline on 2 train seeds; the run reads them from the cache.
    log, root = tmp_path / "calls.log", tmp_path / "ws"
    with toy_container(log) as url:
        flags = [
            "--container", url, *fake_reflection_flags(reflection_url, 400), "--seed", "3", "--use-merge", "false",
            "--max-idle-iterations", "6", "--workspace", str(root),
        ]  # fmt: skip
        gepa = [sys.executable, "-m", "optimizer.cli", "optimize"]
        created = subprocess.run(
            [*gepa, "create", *flags], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert created.returncode == 0, created.stderr
        run_id = created.stdout.splitlines()[0]
        checked = rollout_calls(log)
        assert len(checked) == 2  # the check's sample rollouts (--sample-rollouts 2)
        ran = subprocess.run(
            [*gepa, "run", run_id, "--workspace", str(root), "--quiet"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        calls = rollout_calls(log)
    assert len(calls) == len(set(calls)), "a (candidate, seed) reached the container twice"
    packet = json.loads((root / "runs" / run_id / "evidence.json").read_text())
    assert packet["rollouts"]["paid"] == len(calls) - 2  # the run paid all but the check's two
    assert packet["rollouts"]["cached"] >= 2


def _ok_rollouts(root: Path) -> set[tuple[str, str]]:
    async def read() -> set[tuple[str, str]]:
        async with Workspace(root, readonly=True) as ws:
            runs = await ws.list_runs()
            out: set[tuple[str, str]] = set()
            for run in runs:
                for cand in await ws.list_candidates(run.run_id):
                    for r in await ws.rollouts_for_candidate(run.run_id, cand.candidate_id):
                        if r.status == "ok":
                            out.add((r.candidate_hash[:16], r.seed))
            return out

    return asyncio.run(read())


def _events(root: Path, kind: str) -> int:
    async def read() -> int:
        async with Workspace(root, readonly=True) as ws:
            runs = await ws.list_runs()
            if not runs:
                return 0
            return sum(
                1 for e in await ws.events_since(runs[0].run_id, 0, 100000) if e.type == kind
            )

    return asyncio.run(read()) if (root / "workspace.sqlite").exists() else 0


def test_sigkill_mid_search_then_resume_repeats_no_committed_rollout(
    tmp_path: Path, reflection_url: str
) -> None:
    log, root = tmp_path / "calls.log", tmp_path / "ws"
    with toy_container(log, env={"TOY_DELAY": "0.03"}) as url:
        cmd = [
            sys.executable,
            "-m",
            "optimizer.cli",
            "optimize",
            "run",
            "--container",
            url,
            *fake_reflection_flags(reflection_url, 400),
            "--seed",
            "3",
            "--use-merge",
            "false",
            "--max-idle-iterations",
            "6",
            "--retry-base-delay",
            "0.01",
            "--workspace",
            str(root),
            "--quiet",
        ]
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
        # Killed mid-search for certain: after its second gate, or the test fails saying so
        # (it used to go on after 60 s whatever the run had reached).
        deadline = time.monotonic() + 300
        while _events(root, "gate") < 2:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "the run did not reach its second gate in 300 s"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        committed = _ok_rollouts(root)
        before = rollout_calls(log)
        assert committed and len(before) >= len(committed)

        async def run_id() -> str:
            async with Workspace(root, readonly=True) as ws:
                return (await ws.list_runs())[0].run_id

        rid = asyncio.run(run_id())
        resumed = subprocess.run(
            [
                sys.executable,
                "-m",
                "optimizer.cli",
                "optimize",
                "run",
                rid,
                "--workspace",
                str(root),
                "--quiet",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        after = rollout_calls(log)[len(before) :]
    assert rid in resumed.stdout and "evidence" in resumed.stdout
    repeated = committed & set(after)
    assert not repeated, f"resumed run paid again for committed rollouts: {sorted(repeated)[:5]}"
    assert len(after) == len(set(after))
    packet = json.loads((root / "runs" / rid / "evidence.json").read_text())
    assert packet["status"] == "completed"
    assert packet["best"]["holdout"] > packet["baseline"]["holdout"]

"""End-to-end: ``optimize run --proposer-command`` with a scripted coding agent
(tests/fakes/scripted_agent.py) against a real ``gepa-runtime container`` process on
127.0.0.1. The agent's first proposal also writes a file beside the components: it is
refused, the run goes on, and a candidate the agent wrote is promoted."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from optimizer.testing import toy_container
from tests.fakes.servers import FAKES, ROOT
from workspace import Workspace

pytestmark = pytest.mark.e2e

AGENT_TOKEN = "agent-token-6f1d2c9a8b7e"  # the one secret the agent may see
HIDDEN_KEY = "sk-hidden-reflection-key-0123456789"  # in the environment, not named


def _read(root: Path) -> tuple[Any, list[Any], list[Any]]:
    async def go() -> tuple[Any, list[Any], list[Any]]:
        async with Workspace(root, readonly=True) as ws:
            (run,) = await ws.list_runs()
            candidates = await ws.list_candidates(run.run_id)
            events = await ws.events_since(run.run_id, 0, limit=100000)
            return run, candidates, events

    return asyncio.run(go())


def test_a_scripted_agent_is_refused_once_then_its_candidate_is_promoted(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    agent = shlex.join(
        [
            sys.executable,
            str(FAKES / "scripted_agent.py"),
            "--outside-first", "1",
            "--state", str(tmp_path / "agent-runs"),
            "--echo-env", "AGENT_TOKEN",
        ]
    )  # fmt: skip
    env = {**os.environ, "AGENT_TOKEN": AGENT_TOKEN, "OPENAI_API_KEY": HIDDEN_KEY}
    with toy_container(tmp_path / "calls.log") as url:
        done = subprocess.run(
            [
                sys.executable, "-m", "optimizer.cli", "optimize", "run",
                "--container", url,
                "--proposer-command", agent,
                "--proposer-env", "AGENT_TOKEN",
                "--proposer-timeout", "60",
                "--proposals-in-flight", "1",
                "--max-metric-calls", "400", "--max-idle-iterations", "6", "--seed", "3",
                "--use-merge", "false", "--retry-base-delay", "0.01",
                "--workspace", str(root), "--quiet",
            ],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run, candidates, events = _read(root)
    packet = json.loads((root / "runs" / run.run_id / "evidence.json").read_text())

    # The first proposal wrote notes.txt beside the components: refused, and the run went on.
    rejected = [e.data for e in events if e.type == "proposal_rejected"]
    assert rejected and rejected[0]["reason"] == "outside_components"
    assert "created notes.txt" in rejected[0]["message"]
    accepted = [e.data for e in events if e.type == "candidate" and e.data["origin"] == "mutation"]
    assert accepted and all(c["mode"] == "command" for c in accepted)
    assert min(c["iteration"] for c in accepted) > rejected[0]["iteration"]

    # The promoted candidate is the agent's text.
    assert packet["promotion"]["promoted"] is True
    assert packet["best"]["holdout"] > packet["baseline"]["holdout"] == 0.0
    best = next(c for c in candidates if c.candidate_id == packet["best"]["candidate_id"])
    assert best.origin == "mutation"
    assert best.components["system_prompt"].startswith("Answer with the label. Known labels: ")
    assert best.rationale.startswith("name the labels the student missed")

    # What the agent spent is what it printed, per proposal (the refused one included).
    proposals = sorted((root / "runs" / run.run_id / "proposals").iterdir())
    usage = packet["usage"]["proposer"]
    assert usage["calls"] == len(proposals) == len(accepted) + len(rejected)
    assert usage["input_tokens"] == 1200 * len(proposals)
    assert usage["cost_unknown"] == 0 and usage["usage_unknown"] == 0

    # Each run of the agent saw the variable it was given, and not the others.
    for slot in proposals:
        seen = json.loads((slot / "logs" / "env.json").read_text())
        assert "AGENT_TOKEN" in seen and "OPENAI_API_KEY" not in seen
    # It echoed its token into its rationale: masked in everything the run stored.
    assert "***" in best.rationale
    stored = [
        (root / "workspace.sqlite").read_bytes(),
        (root / "runs" / run.run_id / "evidence.json").read_bytes(),
        (root / "runs" / run.run_id / "report.md").read_bytes(),
    ]
    assert not any(AGENT_TOKEN.encode() in blob or HIDDEN_KEY.encode() in blob for blob in stored)

    # `runs show` names the command that wrote the proposals, not a reflection model of None.
    shown = subprocess.run(
        [sys.executable, "-m", "optimizer.cli", "runs", "show", run.run_id,
         "--workspace", str(root)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "proposer command" in shown.stdout and "scripted_agent.py" in shown.stdout
    assert "reflection None" not in shown.stdout

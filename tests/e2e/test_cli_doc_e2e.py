"""The CLI doc's ``optimize create / dry-run / run`` (01-cli-create-dry-run-run.txt), as written.

Only the command and package names are ours (``gepa-runtime``, ``container``). The models are
named as the doc names them (``openai/gpt-4.1-mini``, the ``ROLLOUT_GEPA_*`` variables); one
fake OpenAI-compatible server on 127.0.0.1 (``OPENAI_BASE_URL``) serves the scripted student
and reflection models and answers 404 to a name that still carries its prefix. The dataset
folder and verifier file are deleted after ``create``: ``run`` needs only the module.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from optimizer.testing import reflection_app, thread_server
from optimizer.testing.toy import TOY_DATA
from tests.fakes.openai_router import ModelRouter
from tests.fakes.student_server import create_app as student_app
from workspace import Workspace

pytestmark = pytest.mark.e2e

GEPA = str(Path(sys.executable).parent / "gepa-runtime")
TARGETS = '''
"""The doc's support agent; only the import lines are ours."""
from container import AgentResult, Candidate, Task, optimize
from container.chat import student_from_env
from container.student import StudentClients

BASELINE_PROMPT = "You are a careful support agent."
STUDENT = student_from_env()
CLIENTS = StudentClients(base_url=STUDENT.base_url, api_key=STUDENT.api_key)


@optimize(
    id="support-agent",
    kind="prompt",
    description="System prompt for the support agent",
    baseline=BASELINE_PROMPT,
)
async def run_candidate(task: Task, candidate: Candidate) -> AgentResult:
    client, model = CLIENTS.resolve(candidate.model or STUDENT.model)
    messages = [
        {"role": "system", "content": candidate.text},
        {"role": "user", "content": str(task.input)},
    ]
    response = await client.chat.completions.create(model=model, messages=messages)
    return AgentResult(output=response.choices[0].message.content)
'''


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """``app/targets.py``, ``datasets/refunds/`` and ``verifiers/quality.json``, as in the doc."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "targets.py").write_text(TARGETS)
    rows = (TOY_DATA).read_text().splitlines()
    (tmp_path / "datasets" / "refunds").mkdir(parents=True)
    (tmp_path / "datasets" / "refunds" / "part-1.jsonl").write_text("\n".join(rows[:18]) + "\n")
    (tmp_path / "datasets" / "refunds" / "part-2.jsonl").write_text("\n".join(rows[18:]) + "\n")
    (tmp_path / "verifiers").mkdir()
    (tmp_path / "verifiers" / "quality.json").write_text(json.dumps({"type": "normalized"}))
    return tmp_path


@pytest.fixture()
def models() -> Iterator[tuple[str, ModelRouter]]:
    router = ModelRouter({"gpt-4.1-mini": reflection_app(), "gpt-4.1-nano": student_app()})
    with thread_server(router) as url:
        yield f"{url}/v1", router


def _env(project: Path, base_url: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GEPA_", "ROLLOUT_", "OTEL_"))}
    return {
        **keep,
        "PYTHONPATH": str(project),  # "your target module and agent code on PYTHONPATH"
        "OPENAI_API_KEY": "sk-test-doc-0123456789",
        "OPENAI_BASE_URL": base_url,
        "ROLLOUT_GEPA_STUDENT_MODEL": "openai/gpt-4.1-nano",
        "ROLLOUT_GEPA_CONCURRENCY": "8",
        "GEPA_PROPOSER_MODE": "text",  # the scripted reflection model writes text-mode answers
    }


def _gepa(project: Path, env: dict[str, str], command: str) -> subprocess.CompletedProcess[str]:
    args = [GEPA, *command.split()]
    return subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=300)


def _stored(project: Path, run_id: str) -> dict[str, object]:
    async def read() -> dict[str, object]:
        async with Workspace(project / ".gepa") as ws:
            return (await ws.get_run(run_id)).config

    return asyncio.run(read())


def _baseline_trials(project: Path, run_id: str, baseline: str) -> tuple[set[str], set[str]]:
    """(seeds the run paid for the baseline, seeds it read from the cache)."""

    async def read() -> tuple[set[str], set[str]]:
        async with Workspace(project / ".gepa") as ws:
            trials = await ws.list_trials(run_id, limit=100_000)
        mine = [t for t in trials if t.candidate_id == baseline]
        return {t.seed for t in mine if not t.cached}, {t.seed for t in mine if t.cached}

    return asyncio.run(read())


def test_the_docs_create_dry_run_run_sequence(
    project: Path, models: tuple[str, ModelRouter]
) -> None:
    base_url, router = models
    env = _env(project, base_url)
    created = _gepa(
        project,
        env,
        "optimize create --module app.targets --target support-agent "
        "--dataset ./datasets/refunds --verifier ./verifiers/quality.json "
        "--reflection-model openai/gpt-4.1-mini --auto light",
    )
    assert created.returncode == 0, created.stderr
    run_id = created.stdout.splitlines()[0]
    assert "all checks passed" in created.stderr  # dry-run's checks, at create
    config = _stored(project, run_id)
    assert config["reflection_model"] == "openai/gpt-4.1-mini"
    assert config["task_model"] == "openai/gpt-4.1-nano" and config["concurrency"] == 8
    assert str(config["dataset"]).startswith(f"workspace:runs/{run_id}/inputs/")
    # the runner needs only the module and its secrets
    shutil.rmtree(project / "datasets")
    shutil.rmtree(project / "verifiers")

    checked = _gepa(project, env, f"optimize dry-run {run_id} --module app.targets")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "36 examples from" in checked.stdout and "all checks passed" in checked.stdout
    assert "gpt-4.1-mini at " + base_url in checked.stdout

    ran = _gepa(project, env, f"optimize run {run_id} --module app.targets --quiet")
    assert ran.returncode == 0, ran.stderr
    assert "PROMOTED" in ran.stdout and run_id in ran.stdout
    packet = json.loads((project / ".gepa" / "runs" / run_id / "evidence.json").read_text())
    assert packet["best"]["holdout"] > packet["baseline"]["holdout"]
    # every call reached the fake by the name OpenAI knows, never with its routing prefix
    assert set(router.seen) == {"gpt-4.1-mini", "gpt-4.1-nano"}
    # create's two sample rollouts were the run's own baseline rollouts: read, not paid again
    line = next(x for x in created.stderr.splitlines() if "train seeds scored" in x)
    assert "kept in the rollout cache" in line
    sampled = set(re.findall(r"\((\S+?)\)", line))
    paid, cached = _baseline_trials(project, run_id, packet["baseline"]["candidate_id"])
    assert len(sampled) == 2 and sampled <= cached and not sampled & paid


def test_create_treats_a_two_call_budget_as_dry_run_and_run_do(
    project: Path, models: tuple[str, ModelRouter]
) -> None:
    base_url, _ = models
    env = _env(project, base_url)
    flags = (
        "--module app.targets --dataset ./datasets/refunds --verifier ./verifiers/quality.json "
        "--reflection-model openai/gpt-4.1-mini --max-metric-calls 2"
    )
    checked = _gepa(project, env, f"optimize dry-run {flags}")
    created = _gepa(project, env, f"optimize create {flags}")
    assert checked.returncode == 0 and created.returncode == 0, created.stderr
    skipped = "2 metric calls (--max-metric-calls) is less than a full run needs"
    assert skipped in checked.stdout and skipped in created.stderr
    run_id = created.stdout.splitlines()[0]
    ran = _gepa(project, env, f"optimize run {run_id} --quiet")
    assert ran.returncode == 0, ran.stderr
    packet = json.loads((project / ".gepa" / "runs" / run_id / "evidence.json").read_text())
    assert packet["rollouts"]["paid"] <= 2

    # what dry-run refuses, create refuses too, and stores nothing
    routed = flags.replace("openai/gpt-4.1-mini", "openrouter/openai/gpt-4.1-mini")
    no_key = {k: v for k, v in env.items() if k != "OPENROUTER_API_KEY"}
    refused_check = _gepa(project, no_key, f"optimize dry-run {routed}")
    refused = _gepa(project, no_key, f"optimize create {routed}")
    assert refused_check.returncode == refused.returncode == 1
    missing = "$OPENROUTER_API_KEY is not set"
    assert missing in refused_check.stdout and missing in refused.stderr
    assert "nothing stored" in refused.stderr and refused.stdout == ""
    listed = _gepa(project, env, "runs list")
    assert listed.stdout.count("run-") == 1  # only the run created above

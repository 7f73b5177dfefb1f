"""The CI examples of docs/guides/ci-check.md, run as the commands they are (no CI service).

The GitHub Actions workflow's ``run:`` steps are run one by one as a runner runs them (each a
``bash -e`` script with the job's and the step's ``env``, ``${{ ... }}`` filled in, a step
after a failure only when it says ``if: always()``), and the GitLab job's ``script:`` lines in
one shell. The ``uses:`` steps (checkout, Python, cache) are the project folder itself: a git
repository whose ``origin`` has the base branch. ``pip install gepa-runtime`` and ``gh`` are
shims on ``PATH`` (the package is already installed; ``gh`` records the comment). The agent in
``app/agent.py`` is a toy: it answers an item's label only when the prompt names it, so a pull
request that removes the prompt's label list makes it worse.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from optimizer.testing import TOY_DATA, free_port
from tests.fakes.servers import ROOT

pytestmark = pytest.mark.e2e

GUIDE = ROOT / "docs" / "guides" / "ci-check.md"
LABELS = "ant, bee, cat, cow, dog, eel, elk, fox, hen, owl, pig, yak"
BASE_PROMPT = f"Triage the ticket. Known labels: {LABELS}."
AGENT = """
from container import AgentResult, optimize


@optimize(id="support-triage", baseline="prompts/system.txt", dataset="data/tickets.jsonl")
def triage(task, candidate):
    words = set(candidate.text.lower().replace(",", " ").replace(".", " ").split())
    label = str(task.expected)
    return AgentResult(output=label if label in words else "unknown")
"""
EXPRESSIONS = {
    "secrets.OPENAI_API_KEY": "sk-test-not-used-by-the-toy",
    "github.base_ref": "main",
    "github.token": "ghs_test",
    "github.event.pull_request.number": "7",
    "github.sha": "0" * 40,
}
KNOWN_ACTIONS = ("actions/checkout@", "actions/setup-python@", "actions/cache@")
SHIMS = {
    "pip": '[ "$*" = "install gepa-runtime" ] || { echo "unexpected: pip $*" >&2; exit 3; }\n',
    "gh": 'echo "$*" >> "$SHIM_LOG"; cat "${@: -1}" >> "$SHIM_LOG"\n',
}


def _blocks() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the GitHub Actions workflow, the GitLab CI file) of the guide."""
    found = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), re.S)]
    github = next(b for b in found if "jobs" in b)
    gitlab = next(b for b in found if "prompt-check" in b)
    return github, gitlab


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=project, check=True, capture_output=True)


@pytest.fixture()
def project(tmp_path: Path) -> Iterator[Path]:
    """The assumed project on a pull-request branch; ``origin/main`` has the base prompt."""
    project = tmp_path / "project"
    (project / "app").mkdir(parents=True)
    (project / "app" / "agent.py").write_text(AGENT)
    (project / "data").mkdir()
    (project / "data" / "tickets.jsonl").write_text((TOY_DATA).read_text())
    (project / "prompts").mkdir()
    (project / "prompts" / "system.txt").write_text(BASE_PROMPT + "\n")
    (project / ".gitignore").write_text(".gepa/\n*.log\n*.pid\ncheck.*\nbase-prompt.txt\n")
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    _git(project, "init", "-q", "-b", "main")
    _git(
        project,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    )
    _git(project, "add", "-A")
    _git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    _git(project, "remote", "add", "origin", str(origin))
    _git(project, "push", "-q", "origin", "main")
    _git(project, "checkout", "-q", "-b", "pull-request")
    yield project


@pytest.fixture()
def shell_env(tmp_path: Path) -> dict[str, str]:
    """The runner's environment: our gepa-runtime first on PATH, the shims, a free port."""
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, body in SHIMS.items():
        path = shims / name
        path.write_text("#!/usr/bin/env bash\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GEPA_", "ROLLOUT_"))}
    path = os.pathsep.join([str(shims), str(Path(sys.executable).parent), keep.get("PATH", "")])
    return {**keep, "PATH": path, "SHIM_LOG": str(tmp_path / "gh.log"), "PYTHONPATH": str(ROOT)}


def _propose(project: Path, text: str) -> None:
    (project / "prompts" / "system.txt").write_text(text + "\n")


def _port_env(env: dict[str, str], job_env: dict[str, str]) -> dict[str, str]:
    """The job's variables, with the container's port swapped for a free one."""
    port = free_port()
    return {
        **env,
        **{k: str(v) for k, v in job_env.items()},
        "GEPA_CONTAINER_PORT": str(port),
        "GEPA_CONTAINERS": f"http://127.0.0.1:{port}",
    }


def _fill(text: str) -> str:
    return re.sub(r"\$\{\{\s*(.+?)\s*\}\}", lambda m: EXPRESSIONS[m.group(1)], text)


class Shells:
    """The bash processes a job ran, each in its own session: ended at the end by group."""

    def __init__(self) -> None:
        self.groups: list[int] = []

    def run(self, script: str, cwd: Path, env: dict[str, str]) -> int:
        proc = subprocess.Popen(
            ["bash", "-eo", "pipefail", "-c", script], cwd=cwd, env=env, start_new_session=True
        )
        self.groups.append(proc.pid)
        return proc.wait(timeout=300)

    def end(self) -> None:
        for group in self.groups:  # what a job left running in the background (the container)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGTERM)


def _github(project: Path, env: dict[str, str]) -> dict[str, int]:
    """Run the workflow's job; each named step's exit code (absent: skipped)."""
    workflow, _ = _blocks()
    (job,) = workflow["jobs"].values()
    job_env = _port_env(env, {k: _fill(str(v)) for k, v in job["env"].items()})
    shells, codes, failed = Shells(), {}, False
    try:
        for step in job["steps"]:
            if "uses" in step:
                assert step["uses"].startswith(KNOWN_ACTIONS), step["uses"]
                continue
            if failed and step.get("if") != "always()":
                continue
            step_env = {k: _fill(str(v)) for k, v in (step.get("env") or {}).items()}
            code = shells.run(_fill(step["run"]), project, {**job_env, **step_env})
            codes[step["name"]] = code
            failed = failed or code != 0
    finally:
        shells.end()
    return codes


def _gitlab(project: Path, env: dict[str, str]) -> int:
    """Run the job's script in one shell, as a GitLab runner does; its exit code."""
    _, gitlab = _blocks()
    job = gitlab["prompt-check"]
    job_env = _port_env(env, job["variables"])
    job_env.update(
        CI_PIPELINE_SOURCE="merge_request_event", CI_MERGE_REQUEST_TARGET_BRANCH_NAME="main"
    )
    shells = Shells()
    try:
        return shells.run("\n".join(job["script"]), project, job_env)
    finally:
        shells.end()


def _report(project: Path) -> dict[str, Any]:
    return json.loads((project / "check.json").read_text())  # type: ignore[no-any-return]


def test_github_actions_passes_a_harmless_edit_and_fails_a_damaging_one(
    project: Path, shell_env: dict[str, str], tmp_path: Path
) -> None:
    _propose(project, BASE_PROMPT + " Answer with one word.")
    codes = _github(project, shell_env)
    assert set(codes.values()) == {0}, codes
    assert len(codes) == 6  # every run: step ran
    report = _report(project)
    assert report["passed"] and report["verdict"]["n"] == 7
    assert report["rollouts"]["paid"] == 14  # both texts, the first time
    comment = (tmp_path / "gh.log").read_text()
    assert comment.startswith("pr comment 7 --body-file check.md\n### gepa-runtime check: PASSED")

    _propose(project, "Triage the ticket.")  # the label list removed
    (tmp_path / "gh.log").unlink()
    codes = _github(project, shell_env)
    assert codes["Check the pull request's prompt"] == 1, codes
    # The comment and the stop step still ran (if: always()); the job fails on the check.
    assert codes["Comment the report on the pull request"] == 0
    assert codes["Stop the task container"] == 0
    assert "### gepa-runtime check: FAILED" in (tmp_path / "gh.log").read_text()
    report = _report(project)
    assert not report["passed"] and report["verdict"]["losses"] == 7
    assert report["rollouts"]["paid"] == 7  # the base prompt's rollouts came from the cache


def test_gitlab_ci_runs_the_same_check_and_keeps_the_cache(
    project: Path, shell_env: dict[str, str]
) -> None:
    _propose(project, BASE_PROMPT + " Answer with one word.")
    assert _gitlab(project, shell_env) == 0
    assert _report(project)["passed"] and _report(project)["rollouts"]["paid"] == 14
    assert (project / "check.md").read_text().startswith("### gepa-runtime check: PASSED")
    assert _gitlab(project, shell_env) == 0  # the same pair again: all from the cache
    assert _report(project)["rollouts"] == {"paid": 0, "cached": 14, "errors": 0}
    _propose(project, "Triage the ticket.")
    assert _gitlab(project, shell_env) == 1
    assert not _report(project)["passed"]

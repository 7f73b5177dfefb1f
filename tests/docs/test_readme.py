"""The README is a front door, its Python agent runs as written, and the docs tell no history."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from optimizer.testing import thread_server
from tests.docs.pages import DOCS, blocks, page, pages
from tests.fakes import docs_models
from tests.fakes.servers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
AGENT_SECTION = README.split("## Wrap your agent", 1)[1].split("\n## ", 1)[0]


def test_the_readme_is_short_and_its_first_100_lines_get_a_newcomer_going() -> None:
    lines = README.splitlines()
    assert len(lines) <= 250
    first = "\n".join(lines[:100])
    for needed in ("bash examples/banking77/run.sh", "bash .ci/test", "## The main job",
                   "## Wrap your agent", "@optimize(", "gepa-runtime optimize run"):  # fmt: skip
        assert needed in first, f"not in the README's first 100 lines: {needed}"
    assert "CC-BY 4.0" in README and "Banking77" in README


def test_the_readmes_main_job_figures_are_those_of_its_page() -> None:
    rows = re.findall(r"^\| (\d) \| ([\d.]+ -> [\d.]+) \| ([+-][\d.]+ \[[^\]]+\]) \|", README, re.M)
    assert [seed for seed, *_ in rows] == ["0", "1", "2"]
    main_job = page("main-job.md")
    for seed, holdout, lift in rows:
        assert re.search(
            rf"^\| {seed} \| PROMOTED \| {holdout} \| {re.escape(lift)} \|", main_job, re.M
        )
    assert "release 0.1.0" in README.split("## The main job", 1)[1].split("\n## ", 1)[0]


def test_the_readmes_agent_is_the_python_guides() -> None:
    (agent,) = blocks(AGENT_SECTION, "python")
    assert agent in blocks(page("wrap-python.md"), "python")


def _tickets() -> str:
    """The README's tickets, and more like them so the run has train and holdout seeds."""
    (shown,) = blocks(AGENT_SECTION, "json")
    more = [
        row
        for i in range(10)
        for row in (
            {"text": f"Order {i}: please refund me", "label": "billing"},
            {"text": f"My invoice {i} is wrong", "label": "billing"},
            {"text": f"Reset the password of account {i}", "label": "accounts"},
            {"text": f"The login page fails for user {i}", "label": "accounts"},
        )
    ]
    return shown + "".join(json.dumps(row) + "\n" for row in more)


@pytest.mark.e2e
def test_the_readmes_agent_is_optimized_to_a_promoted_prompt(tmp_path: Path) -> None:
    (agent,) = blocks(AGENT_SECTION, "python")
    assert agent.startswith("# my_agent.py\n")
    (tmp_path / "my_agent.py").write_text(agent, encoding="utf-8")
    (tmp_path / "tickets.jsonl").write_text(_tickets(), encoding="utf-8")
    with thread_server(docs_models.create_app()) as models:
        env = {**os.environ, "OPENAI_BASE_URL": f"{models}/v1", "OPENAI_API_KEY": "sk-docs-test",
               "PYTHONPATH": str(ROOT)}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "optimizer.cli", "optimize", "run", "--module", "my_agent.py",
             "--dataset", "tickets.jsonl", "--reflection-model", "gpt-4.1",
             "--max-metric-calls", "80", "--workspace", "ws"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "PROMOTED" in done.stdout
    (packet,) = (tmp_path / "ws" / "runs").glob("*/evidence.json")
    best = json.loads(packet.read_text())["best"]["components"]["system_prompt"]
    assert "billing" in best and "accounts" in best


HISTORY = (
    re.compile(r"\bsession \d+", re.I),
    re.compile(r"\b(?:step|issue) \d+\b", re.I),
    re.compile(r"(?<!default )\b20\d\d-\d\d-\d\d\b"),  # dated notes (not an API version)
    re.compile(r"\bat [0-9a-f]{7}\b"),  # "measured at <commit>"
    re.compile(r"\((?:since )?[0-9a-f]{7}\)"),
)


def test_the_docs_tell_no_history() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in [*pages(), ROOT / "CHANGELOG.md"]
        for pattern in HISTORY
        for match in pattern.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not found, found


def test_docs_hold_no_result_json() -> None:
    assert not [p.name for p in DOCS.rglob("*.json")]

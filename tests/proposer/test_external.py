"""The external proposer: the folder it writes, the guards on what the agent did, the time
limit, the environment and the usage it reports. Agents are small Python scripts run as the
real command (``/bin/sh -c``) in the real folder."""

from __future__ import annotations

import json
import os
import random
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import proposer.agent_command as agent_command
from proposer.agent_command import agent_environment, read_usage
from proposer.agent_folder import AgentFolder, component_files
from proposer.brief import brief_for_proposal
from proposer.external import ExternalConfig, ExternalProposer
from proposer.types import CandidateView, ComponentSpec, MergeRequest
from schemas import ProposalRejected
from schemas.usage import ModelUsage
from tests.proposer.fakes import PARENT_PROMPT, banking_request, parent_view

EDIT = """
import os, pathlib
f = pathlib.Path(os.environ["GEPA_COMPONENT_FILES"].split()[0])
f.write_text(f.read_text() + "\\nA card that has not come yet: card_delivery_estimate.\\n")
pathlib.Path("rationale.md").write_text("tell delivery estimates from arrivals")
"""


def agent(tmp_path: Path, body: str, name: str = "agent.py") -> str:
    """A shell command that runs ``body`` as a Python script (the agent)."""
    script = tmp_path / name
    script.write_text(body)
    return shlex.join([sys.executable, str(script)])


def external(tmp_path: Path, command: str, **overrides: Any) -> ExternalProposer:
    values: dict[str, Any] = {"command": command, "work_dir": tmp_path / "proposals"}
    values.update(overrides)
    return ExternalProposer(ExternalConfig(**values), rng=random.Random(1))


def only_folder(tmp_path: Path) -> Path:
    (slot,) = sorted((tmp_path / "proposals").iterdir())
    return slot


# The folder --------------------------------------------------------------------------------


def test_the_folder_holds_components_failures_traces_frontier_and_the_task(
    tmp_path: Path,
) -> None:
    other = CandidateView("other0001", {"system_prompt": "x"}, wins=("s1",), diff_from_parent="+x")
    brief = brief_for_proposal(banking_request(frontier=(parent_view(), other)))
    folder = AgentFolder.write(tmp_path / "f", brief, cap=6000, rng=random.Random(0))
    root = folder.path
    assert (root / "components" / "system_prompt.txt").read_text() == PARENT_PROMPT
    failures = (root / "failures.md").read_text()
    assert "expected card_delivery_estimate" in failures and "Failures (3 of 4" in failures
    traces = sorted(p.name for p in (root / "traces").iterdir())
    assert traces == ["b77-train-0000.txt", "b77-train-0001.txt", "b77-train-0002.txt"]
    assert "new card to get here" in (root / "traces" / "b77-train-0000.txt").read_text()
    rows = json.loads((root / "rollouts.json").read_text())
    assert [r["reward"] for r in rows] == [0.0, 0.0, 0.0, 1.0]
    assert rows[0]["feedback"].startswith("predicted card_arrival") and rows[0]["trace"]
    assert "other0001" in (root / "frontier.md").read_text()
    task = (root / "TASK.md").read_text()
    assert "`components/system_prompt.txt`: component `system_prompt` (prompt)" in task
    assert "at most 6,000 characters" in task and "do not create, change" in task
    assert folder.editable_paths() == ["components/system_prompt.txt"]


def test_read_only_components_are_named_as_such_in_the_task(tmp_path: Path) -> None:
    specs = (
        ComponentSpec("system_prompt", "prompt"),
        ComponentSpec("tool/desc", "tool_description"),
    )
    parent = CandidateView("p1", {"system_prompt": "a", "tool/desc": "b"})
    request = banking_request(components=specs, parent=parent, target_components=("system_prompt",))
    folder = AgentFolder.write(
        tmp_path / "f", brief_for_proposal(request), cap=100, rng=random.Random(0)
    )
    task = (folder.path / "TASK.md").read_text()
    editable, _, forbidden = task.partition("## What you must not touch")
    assert "components/system_prompt.txt" in editable and "tool_desc.txt" not in editable
    assert "`components/tool_desc.txt`: component `tool/desc`" in forbidden


def test_component_file_names_are_safe_and_unique() -> None:
    files = component_files(["a/b", "a_b", "../x", "..", "ok.name"])
    assert files == {
        "a/b": "a_b.txt",
        "a_b": "a_b-2.txt",
        "../x": "_x.txt",
        "..": "component.txt",
        "ok.name": "ok.name.txt",
    }


# Proposals and guards ----------------------------------------------------------------------


async def test_an_edit_of_the_component_file_becomes_the_proposal(tmp_path: Path) -> None:
    body = (
        EDIT
        + 'print(\'{"type": "result", "total_cost_usd": 0.02, "usage": {"input_tokens": 900, "output_tokens": 60}}\')\n'
    )
    proposer = external(tmp_path, agent(tmp_path, body))
    proposal = await proposer.propose(banking_request())
    text = proposal.components["system_prompt"]
    # The newline the agent left at the end of the file is not part of the prompt.
    assert text == PARENT_PROMPT + "\nA card that has not come yet: card_delivery_estimate."
    assert proposal.mode == "command" and proposal.parents == ("parent0001",)
    assert proposal.rationale == "tell delivery estimates from arrivals"
    assert "+A card that has not come yet" in proposal.diff
    assert proposal.usage == ModelUsage(calls=1, input_tokens=900, output_tokens=60, cost_usd=0.02)
    assert proposal.cost_known and proposer.total_usage == proposal.usage


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ('pathlib.Path("notes.txt").write_text("scratch")', "created notes.txt"),
        ('pathlib.Path("TASK.md").unlink()', "deleted TASK.md"),
        ('pathlib.Path("failures.md").write_text("all fine")', "changed failures.md"),
        (
            'pathlib.Path("traces/extra").mkdir(); pathlib.Path("traces/extra/a").write_text("")',
            "created traces/extra/a",
        ),
    ],
)
async def test_a_file_touched_outside_the_components_refuses_the_proposal(
    tmp_path: Path, extra: str, said: str
) -> None:
    proposer = external(tmp_path, agent(tmp_path, EDIT + extra + "\n"))
    with pytest.raises(ProposalRejected) as caught:
        await proposer.propose(banking_request())
    assert caught.value.reason == "outside_components"
    assert said in str(caught.value) and "only components/system_prompt.txt may change" in str(
        caught.value
    )
    assert proposer.total_usage.calls == 1  # a refused proposal still counts what it spent


async def test_editing_a_read_only_component_or_linking_one_out_is_refused(tmp_path: Path) -> None:
    specs = (ComponentSpec("system_prompt", "prompt"), ComponentSpec("rules", "prompt"))
    parent = CandidateView("p1", {"system_prompt": "Answer.", "rules": "Be brief."})
    request = banking_request(components=specs, parent=parent, target_components=("system_prompt",))
    readonly = EDIT + 'pathlib.Path("components/rules.txt").write_text("Be long.")\n'
    with pytest.raises(ProposalRejected, match="changed components/rules.txt"):
        await external(tmp_path / "a", agent(tmp_path, readonly)).propose(request)
    link = (
        "import os\nos.remove('components/system_prompt.txt')\n"
        "os.symlink('/etc/hostname', 'components/system_prompt.txt')\n"
    )
    with pytest.raises(ProposalRejected, match="changed components/system_prompt.txt") as caught:
        await external(tmp_path / "b", agent(tmp_path, link, "link.py")).propose(request)
    assert caught.value.reason == "outside_components"


async def test_an_agent_that_changes_nothing_is_refused_and_its_usage_is_unknown(
    tmp_path: Path,
) -> None:
    proposer = external(tmp_path, agent(tmp_path, "print('I looked around')\n"))
    with pytest.raises(ProposalRejected) as caught:
        await proposer.propose(banking_request())
    assert caught.value.reason == "unchanged"
    unknown = ModelUsage(calls=1, usage_unknown=1, cost_unknown=1)
    assert caught.value.usage == unknown
    assert proposer.total_usage == unknown  # not a measured zero


async def test_a_text_over_the_cap_is_refused(tmp_path: Path) -> None:
    body = "import pathlib\npathlib.Path('components/system_prompt.txt').write_text('x' * 9000)\n"
    with pytest.raises(ProposalRejected) as caught:
        await external(tmp_path, agent(tmp_path, body), max_prompt_chars=1000).propose(
            banking_request()
        )
    assert caught.value.reason == "too_long" and "over the cap of 1,000" in str(caught.value)


async def test_a_failing_command_is_refused_with_what_it_said(tmp_path: Path) -> None:
    body = EDIT + "import sys\nprint('model quota exceeded', file=sys.stderr)\nsys.exit(3)\n"
    with pytest.raises(ProposalRejected) as caught:
        await external(tmp_path, agent(tmp_path, body)).propose(banking_request())
    assert caught.value.reason == "command_failed"
    assert "status 3" in str(caught.value) and "model quota exceeded" in str(caught.value)


async def test_a_merge_folder_holds_both_versions(tmp_path: Path) -> None:
    a = CandidateView("aaaa", {"system_prompt": "Rule A."}, wins=("s1",), scores={"s1": 1.0})
    b = CandidateView("bbbb", {"system_prompt": "Rule B."}, wins=("s2",), scores={"s2": 1.0})
    body = (
        "import pathlib\nb = pathlib.Path('merge/B/system_prompt.txt').read_text()\n"
        "f = pathlib.Path('components/system_prompt.txt')\nf.write_text(f.read_text() + ' ' + b)\n"
    )
    proposer = external(tmp_path, agent(tmp_path, body))
    request = MergeRequest("toy", (ComponentSpec("system_prompt", "prompt"),), a, b)
    proposal = await proposer.merge(request)
    assert proposal.components == {"system_prompt": "Rule A. Rule B."}
    assert proposal.parents == ("aaaa", "bbbb") and set(proposal.diffs) == {"aaaa", "bbbb"}
    task = (only_folder(tmp_path) / "workspace" / "TASK.md").read_text()
    assert "`merge/B/` version B" in task


# Time limit and processes ------------------------------------------------------------------

SPAWNS_A_HELPER = """
import os, pathlib, subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
pathlib.Path(os.environ["GEPA_PROPOSAL_LOGS"], "helper.pid").write_text(str(helper.pid))
"""


def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether ``pid`` ended (or is a zombie waiting to be reaped) within ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


async def test_a_command_over_its_time_is_killed_with_its_process_group(tmp_path: Path) -> None:
    body = SPAWNS_A_HELPER + "time.sleep(60)\n"
    proposer = external(tmp_path, agent(tmp_path, body), timeout_s=1.5)
    started = time.monotonic()
    with pytest.raises(ProposalRejected) as caught:
        await proposer.propose(banking_request())
    assert time.monotonic() - started < 10
    assert caught.value.reason == "timeout" and "--proposer-timeout" in str(caught.value)
    assert caught.value.usage.usage_unknown == 1
    pid = int((only_folder(tmp_path) / "logs" / "helper.pid").read_text())
    assert _gone(pid), f"helper {pid} outlived the proposal"


async def test_a_command_that_ignores_sigterm_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_command, "KILL_GRACE_S", 0.5)
    body = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    started = time.monotonic()
    with pytest.raises(ProposalRejected, match="timeout"):
        await external(tmp_path, agent(tmp_path, body), timeout_s=0.5).propose(banking_request())
    assert time.monotonic() - started < 5


async def test_helpers_left_running_after_the_command_exits_are_ended(tmp_path: Path) -> None:
    proposer = external(tmp_path, agent(tmp_path, SPAWNS_A_HELPER + EDIT))
    await proposer.propose(banking_request())
    pid = int((only_folder(tmp_path) / "logs" / "helper.pid").read_text())
    assert _gone(pid)


# Environment -------------------------------------------------------------------------------


def test_the_environment_keeps_no_secret_but_the_named_ones() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "OPENAI_API_KEY": "sk-live-secret",
        "GEPA_CONTAINER_TOKEN": "tok",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "ANTHROPIC_API_KEY": "ant",
    }
    env = agent_environment(["ANTHROPIC_API_KEY", "NOT_SET"], {"GEPA_X": "1"}, environ)
    assert env == {"PATH": "/usr/bin", "HOME": "/home/u", "ANTHROPIC_API_KEY": "ant", "GEPA_X": "1"}


async def test_the_command_runs_in_the_folder_with_only_the_named_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-reach-the-agent")
    monkeypatch.setenv("AGENT_KEY", "agent-key-value")
    body = (
        "import json, os, pathlib\n"
        "pathlib.Path(os.environ['GEPA_PROPOSAL_LOGS'], 'seen.json').write_text("
        "json.dumps({'env': dict(os.environ), 'cwd': os.getcwd()}))\n" + EDIT
    )
    proposer = external(tmp_path, agent(tmp_path, body), env_names=("AGENT_KEY",))
    await proposer.propose(banking_request())
    slot = only_folder(tmp_path)
    seen = json.loads((slot / "logs" / "seen.json").read_text())
    env = seen["env"]
    assert "OPENAI_API_KEY" not in env and env["AGENT_KEY"] == "agent-key-value"
    assert seen["cwd"] == str(slot / "workspace") == env["GEPA_PROPOSAL_DIR"]
    assert env["GEPA_COMPONENT_FILES"] == "components/system_prompt.txt"
    assert env["GEPA_TASK_FILE"] == "TASK.md" and env["TMPDIR"] == str(slot / "logs")
    assert set(env) <= {*agent_command.BASE_ENV, "AGENT_KEY", "PWD", "SHLVL", "_", "LC_CTYPE"} | {
        k for k in env if k.startswith("GEPA_")
    } | {"TMPDIR"}
    assert not any(v == os.environ["OPENAI_API_KEY"] for v in env.values())


# Usage -------------------------------------------------------------------------------------


def _usage(tmp_path: Path, stdout: str, usage_json: str | None = None) -> ModelUsage:
    (tmp_path / "out.txt").write_text(stdout)
    if usage_json is not None:
        (tmp_path / "usage.json").write_text(usage_json)
    return read_usage(tmp_path, tmp_path / "out.txt")


def test_usage_is_read_from_usage_json_first(tmp_path: Path) -> None:
    got = _usage(
        tmp_path,
        '{"cost_usd": 9}\n',
        '{"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.5, "calls": 3}',
    )
    assert got == ModelUsage(calls=3, input_tokens=10, output_tokens=2, cost_usd=0.5)


def test_usage_is_read_from_the_last_json_line_of_the_output(tmp_path: Path) -> None:
    claude = '{"type": "result", "result": "done", "total_cost_usd": 0.031, "usage": {"input_tokens": 1500, "output_tokens": 210}}'
    assert _usage(tmp_path, f"working...\n{claude}\n") == ModelUsage(
        calls=1, input_tokens=1500, output_tokens=210, cost_usd=0.031
    )
    codex = '{"type": "turn.completed", "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}}'
    got = _usage(tmp_path, f'{{"type": "thread.started"}}\n{codex}\n{{"type": "note"}}\n')
    assert got == ModelUsage(calls=1, input_tokens=24763, output_tokens=122, cost_unknown=1)


@pytest.mark.parametrize(
    "stdout",
    [
        "all done\n",
        '{"cost_usd": -1, "input_tokens": NaN}\n',
        '{"cost_usd": true, "input_tokens": "12"}\n',
        "{not json\n",
    ],
)
def test_usage_not_reported_or_not_valid_is_unknown_not_zero(tmp_path: Path, stdout: str) -> None:
    assert _usage(tmp_path, stdout) == ModelUsage(calls=1, usage_unknown=1, cost_unknown=1)

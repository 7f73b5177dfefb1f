"""``--proposer-command`` as a run setting: the flags, the checks before a run starts (each
naming the flag and the fix), the dry-run finding, and usage the command did not report
shown as unknown in the report."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import pytest

from optimizer.checks.preflight import preflight
from optimizer.cli import main
from optimizer.cli.flags import add_config_flags, config_from_args
from optimizer.cli.optimize import check_runnable
from optimizer.searches import run_optimization
from optimizer.testing import toy_container
from schemas import RunConfig, UserError
from tests.fakes.servers import FAKES

CLOSED = "http://127.0.0.1:9"


def _parse(*argv: str) -> RunConfig:
    parser = argparse.ArgumentParser()
    add_config_flags(parser)
    return config_from_args(parser.parse_args(list(argv)))


def test_the_flags_set_the_command_its_variables_and_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = _parse(
        "--proposer-command", "codex exec --full-auto 'read TASK.md'",
        "--proposer-env", "OPENAI_API_KEY", "--proposer-env", "CODEX_HOME",
        "--proposer-timeout", "120",
    )  # fmt: skip
    assert cfg.proposer_command == "codex exec --full-auto 'read TASK.md'"
    assert cfg.proposer_env == ["OPENAI_API_KEY", "CODEX_HOME"]
    assert cfg.proposer_timeout_s == 120.0
    monkeypatch.setenv("GEPA_PROPOSER_ENV", "A_KEY, B_KEY")
    monkeypatch.setenv("GEPA_PROPOSER_COMMAND", "aider --yes-always")
    from_env = _parse()
    assert from_env.proposer_env == ["A_KEY", "B_KEY"]
    assert from_env.proposer_command == "aider --yes-always"


def test_a_value_given_as_a_variable_name_is_refused_naming_the_flag() -> None:
    with pytest.raises(UserError, match=r"--proposer-env: .*'OPENAI_API_KEY=sk-1' is not an"):
        _parse("--proposer-command", "x", "--proposer-env", "OPENAI_API_KEY=sk-1")
    with pytest.raises(UserError, match="--proposer-timeout"):
        _parse("--proposer-command", "x", "--proposer-timeout", "0")


def test_a_command_needs_no_reflection_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_KEY", "k")
    ok = RunConfig(containers=[CLOSED], proposer_command="sh -c true", proposer_env=["AGENT_KEY"])
    check_runnable(ok)
    with pytest.raises(UserError, match="no reflection model"):
        check_runnable(RunConfig(containers=[CLOSED]))


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"method": "mipro"}, "--proposer-command works with --method gepa only"),
        ({"proposer_env": ["NOT_SET_ANYWHERE_42"]}, "--proposer-env NOT_SET_ANYWHERE_42: $NOT_SET"),
        (
            {"proposer_command": "no-such-agent-cli --go"},
            "'no-such-agent-cli' is not found on PATH",
        ),
        ({"proposer_command": "codex 'unclosed"}, "is not a valid shell command line"),
    ],
)
def test_a_command_that_cannot_run_is_refused_before_the_run(
    extra: dict[str, object], said: str
) -> None:
    config = RunConfig(containers=[CLOSED], **{"proposer_command": "sh -c true", **extra})
    with pytest.raises(UserError, match=said.replace("$", r"\$")):
        check_runnable(config)


def test_the_cli_refuses_it_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["optimize", "run", "--container", CLOSED, "--proposer-command", "no-such-agent-cli"]
    )
    assert code != 0
    assert "--proposer-command: 'no-such-agent-cli' is not found on PATH" in capsys.readouterr().err


async def test_dry_run_checks_the_command_instead_of_a_reflection_model() -> None:
    good = RunConfig(containers=[CLOSED], proposer_command="sh -c true", max_metric_calls=10)
    bad = good.model_copy(update={"proposer_command": "no-such-agent-cli"})
    found = {f.check: f for f in await preflight(good, sample_rollouts=0)}
    assert found["proposer command"].ok and "reflection model" not in found
    found = {f.check: f for f in await preflight(bad, sample_rollouts=0)}
    assert (
        not found["proposer command"].ok
        and "not found on PATH" in found["proposer command"].message
    )


@pytest.mark.e2e
async def test_usage_the_command_does_not_report_is_unknown_in_the_evidence(tmp_path: Path) -> None:
    agent = shlex.join([sys.executable, str(FAKES / "scripted_agent.py"), "--no-usage"])
    config = RunConfig(
        proposer_command=agent,
        proposals_in_flight=1,
        max_metric_calls=80,
        max_idle_iterations=3,
        use_merge=False,
        seed=3,
        retry_base_delay_s=0.01,
    )
    with toy_container(tmp_path / "calls.log") as url:
        result = await run_optimization(
            config.model_copy(update={"containers": [url]}), workspace=tmp_path / "ws"
        )
    usage = result.evidence["usage"]["proposer"]
    assert usage["calls"] >= 1
    assert usage["usage_unknown"] == usage["cost_unknown"] == usage["calls"]
    assert usage["cost_usd"] == 0.0 and usage["input_tokens"] == 0
    report = (result.evidence_dir / "report.md").read_text()
    calls = usage["calls"]
    assert (
        f"(at least: tokens not reported by {calls} calls; cost not reported by {calls} calls, "
        "unknown)" in report
    )
    assert (
        json.loads((result.evidence_dir / "evidence.json").read_text())["usage"]
        == result.evidence["usage"]
    )

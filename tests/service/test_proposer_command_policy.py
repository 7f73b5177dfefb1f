"""A run config from the API may name a proposer command only when the operator allowed it
(``serve --allow-proposer-command``): a command runs on the service's host as its user."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

import httpx

from optimizer.cli.serve import _settings, add_parser
from optimizer.service import RunPolicy, ServiceSettings
from tests.fakes.servers import FAKES
from tests.service.conftest import run_config, service, wait_status


def _agent(tmp_path: Path) -> str:
    """The scripted agent; every run of it is counted in ``tmp_path/agent-runs``."""
    state = tmp_path / "agent-runs"
    return shlex.join([sys.executable, str(FAKES / "scripted_agent.py"), "--state", str(state)])


def _command_config(reflection_url: str, command: str, **extra: Any) -> dict[str, Any]:
    config = run_config(reflection_url, proposer_command=command, proposals_in_flight=1, **extra)
    config.pop("reflection_model")  # the command is the proposer: no reflection model needed
    return config


async def _post(api: httpx.AsyncClient, config: dict[str, Any]) -> httpx.Response:
    return await api.post("/api/runs", json={"config": config, "start": True})


async def test_a_proposer_command_is_refused_unless_the_operator_allowed_it(
    tmp_path: Path, toy_app: Any, reflection_url: str
) -> None:
    command = _agent(tmp_path)
    async with service(tmp_path / "ws", toy_app) as (api, _):
        refused = await _post(api, _command_config(reflection_url, command))
        assert refused.status_code == 403, refused.text
        message = refused.json()["error"]["message"]
        assert message.startswith("config.proposer_command:")
        assert "serve --allow-proposer-command" in message
        assert (await api.get("/api/runs")).json()["runs"] == []

    allowed = ServiceSettings(policy=RunPolicy(allow_commands=True))
    async with service(tmp_path / "ws2", toy_app, allowed) as (api, _):
        leak = await _post(
            api, _command_config(reflection_url, command, proposer_env=["DB_PASSWORD"])
        )
        assert leak.status_code == 403, leak.text
        assert "--allow-key-env DB_PASSWORD" in leak.json()["error"]["message"]
        assert not (tmp_path / "agent-runs").exists()  # nothing ran so far

        created = await _post(api, _command_config(reflection_url, command))
        assert created.status_code == 201, created.text
        view = await wait_status(api, created.json()["run_id"], {"completed", "failed"})
        assert view["status"] == "completed", view["error"]
    assert int((tmp_path / "agent-runs").read_text()) >= 1  # the agent wrote the proposals


def test_serve_passes_allow_proposer_command_to_the_policy() -> None:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    on = parser.parse_args(["serve", "--allow-proposer-command"])
    off = parser.parse_args(["serve"])
    assert _settings(on, None, 8700).policy.allow_commands is True
    assert _settings(off, None, 8700).policy.allow_commands is False

"""The winner as a prompt-registry version (pure), and the calls that register it (a fake client)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from optimizer.cli.main import main
from optimizer.cli.optimize import check_runnable
from optimizer.runtime.tracking import gepa_version, prompt_export, register_prompt
from optimizer.runtime.tracking.prompts import RegisterPrompt
from optimizer.runtime.tracking.worker import _apply
from schemas import RunConfig, UserError
from workspace import Workspace


def _packet(promoted: bool, components: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "run_id": "run-1",
        "program": {"program_id": "support-triage"},
        "best": {
            "candidate_id": "abc123",
            "components": components or {"system_prompt": "Be brief."},
        },
        "promotion": {
            "lift": 0.1375,
            "ci_low": 0.0909,
            "ci_high": 0.1852,
            "n": 297,
            "confidence": 0.95,
            "measured_on": "holdout",
            "promoted": promoted,
        },
    }


@dataclass
class FakeClient:
    """Records what an ``MlflowClient`` was asked; versions count from 1."""

    calls: list[tuple[str, Any]] = field(default_factory=list)

    def register_prompt(self, **kwargs: Any) -> Any:
        self.calls.append(("register_prompt", kwargs))
        return type("Version", (), {"version": sum(c[0] == "register_prompt" for c in self.calls)})

    def set_prompt_alias(self, name: str, alias: str, version: int) -> None:
        self.calls.append(("set_prompt_alias", (name, alias, version)))


def test_the_version_holds_the_best_text_and_the_evidence_as_tags() -> None:
    export = prompt_export(_packet(promoted=True), "support-triage")
    assert (export.name, export.text, export.alias) == ("support-triage", "Be brief.", "candidate")
    assert export.tags == {
        "gepa.run_id": "run-1",
        "gepa.candidate_id": "abc123",
        "gepa.program_id": "support-triage",
        "gepa.lift": "0.1375",
        "gepa.ci_low": "0.0909",
        "gepa.ci_high": "0.1852",
        "gepa.confidence": "0.95",
        "gepa.measured_on": "holdout",
        "gepa.holdout_size": "297",
        "gepa.promoted": "true",
        "gepa.version": gepa_version(),
    }
    assert export.commit_message == (
        "gepa-runtime run run-1: candidate abc123, lift +0.138 (95% CI [+0.091, +0.185]) on 297 "
        "holdout seeds, promoted"
    )


def test_the_alias_moves_only_for_a_promoted_run() -> None:
    client = FakeClient()
    assert register_prompt(client, prompt_export(_packet(promoted=True), "p", "prod")) == 1
    assert register_prompt(client, prompt_export(_packet(promoted=False), "p", "prod")) == 2
    assert [name for name, _ in client.calls] == [
        "register_prompt",
        "set_prompt_alias",
        "register_prompt",
    ]
    assert client.calls[1][1] == ("p", "prod", 1)
    assert client.calls[2][1]["tags"]["gepa.promoted"] == "false"


def test_several_components_are_one_json_text_the_sdks_read_back() -> None:
    export = prompt_export(_packet(True, {"system_prompt": "s", "router": "r"}), "p")
    assert json.loads(export.text) == {"system_prompt": "s", "router": "r"}
    assert export.tags["gepa.format"] == "components-json"


def test_the_tracking_thread_links_the_version_to_its_mlflow_run() -> None:
    client = FakeClient()
    _apply(client, "mlflow-run-9", RegisterPrompt(prompt_export(_packet(promoted=True), "p")))
    (_, registered), (_, alias) = client.calls
    assert registered["tags"]["gepa.mlflow_run_id"] == "mlflow-run-9"
    assert registered["template"] == "Be brief." and alias == ("p", "candidate", 1)


def test_a_run_that_registers_its_winner_needs_a_tracking_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("GEPA_MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    config = RunConfig(containers=["http://127.0.0.1:1"], reflection_model="m", mlflow_prompt="p")
    with pytest.raises(
        UserError, match="--mlflow-prompt registers the winner on an MLflow tracking server"
    ):
        check_runnable(config)
    check_runnable(config.model_copy(update={"mlflow_tracking_uri": "http://127.0.0.1:1"}))


def test_export_writes_the_best_as_a_prompt_file_or_says_why_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def runs() -> tuple[str, str]:
        async with Workspace(tmp_path / "ws") as ws:
            config = RunConfig(containers=["http://127.0.0.1:1"])
            running, done = await ws.create_run(config), await ws.create_run(config)
            packet = _packet(True, {"system_prompt": "s", "router": "r"})
            await ws.write_json(done.run_id, "evidence.json", packet)
            return running.run_id, done.run_id

    running, done = asyncio.run(runs())
    args = ["runs", "export", "--workspace", str(tmp_path / "ws")]
    assert main([*args, running, "--prompt-file", str(tmp_path / "p.txt")]) == 2
    assert "has no evidence yet, so no best: finish it first" in capsys.readouterr().err
    assert main([*args, done, "--prompt-file", str(tmp_path / "p.txt")]) == 2
    assert "2 components (system_prompt, router): name a .json or .yaml" in capsys.readouterr().err
    assert main([*args, done, "--prompt-file", str(tmp_path / "p.yaml")]) == 0
    assert (tmp_path / "p.yaml").read_text() == "system_prompt: |-\n  s\nrouter: |-\n  r\n"

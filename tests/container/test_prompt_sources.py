"""``@optimize(baseline=...)`` from a prompt file or the prompt registry, and ``load_prompt``."""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from container import Registry, build_served_program, load_components, load_prompt, optimize
from optimizer.testing import free_port, thread_server
from schemas import UserError
from tests.fakes.prompt_registry import registry_app

ROWS = [{"name": f"r{i}", "input": f"q{i}", "expected": "a"} for i in range(6)]


@pytest.fixture()
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    versions = {
        "support": {1: ("Old text.", {}), 2: ("New text.", {})},
        "multi": {
            1: (
                json.dumps({"system_prompt": "s", "router": "r"}),
                {"gepa.format": "components-json"},
            )
        },
    }
    app = registry_app(versions, {("support", "production"): 2, ("multi", "candidate"): 1})
    with thread_server(app) as url:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
        monkeypatch.delenv("GEPA_MLFLOW_TRACKING_URI", raising=False)
        yield app


def _module(folder: Path, baseline: str) -> object:
    """A module file in ``folder`` with one target whose ``baseline=`` is ``baseline``."""
    (folder / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    source = (
        "from container import Registry, optimize\n"
        "REGISTRY = Registry()\n"
        f"@optimize(id='agent', baseline={baseline}, dataset='rows.jsonl', registry=REGISTRY)\n"
        "def agent(task, candidate):\n    return 'a'\n"
    )
    path = folder / "agent_mod.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"agent_mod_{abs(hash(folder))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.agent.__gepa_target__  # type: ignore[attr-defined]


def test_a_relative_prompt_file_is_read_beside_the_agent_not_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "system.txt").write_text("Answer with the label.\n")
    monkeypatch.chdir(tmp_path.parent)  # elsewhere
    target = _module(tmp_path, "'prompts/system.txt'")
    assert target.baseline == {"system_prompt": "Answer with the label."}
    assert target.baseline_source == "prompts/system.txt"


def test_a_path_object_and_a_yaml_of_several_components(tmp_path: Path) -> None:
    path = tmp_path / "prompts.yaml"
    path.write_text("system_prompt: |\n  Be brief.\nrouter: route by topic\n")
    registry = Registry()

    @optimize(id="multi", baseline=path, registry=registry)
    def agent(task: object, candidate: object) -> str:
        return "a"

    assert registry.get("multi").baseline == {
        "system_prompt": "Be brief.\n",
        "router": "route by topic",
    }


def test_a_path_with_a_typo_is_an_error_naming_it_and_text_stays_text(tmp_path: Path) -> None:
    with pytest.raises(
        UserError, match=r"prompt file 'prompts/sytem.txt' does not exist .*fix the path"
    ):
        _module(tmp_path, "'prompts/sytem.txt'")
    target = _module(tmp_path, "'Answer in the style of notes.txt'")  # text with spaces
    assert target.baseline == {"system_prompt": "Answer in the style of notes.txt"}


def test_editing_the_prompt_file_keeps_the_fingerprint_and_serves_the_new_text(
    tmp_path: Path,
) -> None:
    prompt = tmp_path / "system.txt"
    prompt.write_text("Version one.\n")
    before = build_served_program(_module(tmp_path, f"{str(prompt)!r}"))
    prompt.write_text("Version two, edited in a pull request.\n")
    after = build_served_program(_module(tmp_path, f"{str(prompt)!r}"))
    assert after.program.components[0].text == "Version two, edited in a pull request."
    # No rollout's result depends on the baseline's text: the cache keeps every rollout.
    assert after.program.fingerprint == before.program.fingerprint
    # A literal baseline is part of the module's code, which the fingerprint holds.
    assert build_served_program(_module(tmp_path, "'Version one.'")).program.fingerprint != (
        before.program.fingerprint
    )


def test_a_registry_uri_baseline_serves_the_aliased_version(
    tmp_path: Path, registry: object
) -> None:
    target = _module(tmp_path, "'prompts:/support@production'")
    assert target.baseline == {"system_prompt": "New text."}
    assert target.baseline_source == "prompts:/support@production"
    assert load_prompt("prompts:/support/1") == "Old text."
    assert load_components("prompts:/multi@candidate") == {"system_prompt": "s", "router": "r"}
    with pytest.raises(UserError, match="holds 2 components"):
        load_prompt("prompts:/multi@candidate")


def test_the_registry_is_read_with_mlflows_credentials(
    registry: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-123")
    load_prompt("prompts:/support@production")
    monkeypatch.delenv("MLFLOW_TRACKING_TOKEN")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ann")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "pw")
    load_prompt("prompts:/support@production")
    basic = "Basic " + base64.b64encode(b"ann:pw").decode()
    assert registry.state.auth == ["Bearer tok-123", basic]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("uri", "env", "message"),
    [
        ("prompts:/support@staging", None, "not in the prompt registry .*--mlflow-prompt support"),
        ("prompts:/nobody/1", None, "not in the prompt registry"),
        ("prompts:/support@production", "unset", "set MLFLOW_TRACKING_URI"),
        ("prompts:/support@production", "file:///tmp/mlruns", "over HTTP"),
        ("prompts:/support@production", "down", "cannot read prompts:/support@production"),
    ],
)
def test_a_registry_that_cannot_answer_says_what_to_fix(
    registry: object, monkeypatch: pytest.MonkeyPatch, uri: str, env: str | None, message: str
) -> None:
    if env == "unset":
        monkeypatch.delenv("MLFLOW_TRACKING_URI")
    elif env == "down":
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    elif env is not None:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", env)
    with pytest.raises(UserError, match=message):
        load_prompt(uri)

"""A run config from the API reads only the key variables and module folders the operator
allowed (``serve --allow-key-env``, ``--allow-modules``); the CLI keeps its freedom."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.cli import main
from optimizer.service import DEFAULT_KEY_ENVS, PolicyRefusal, RunPolicy, ServiceSettings
from optimizer.testing.toy import TOY, TOY_CONTAINER, TOY_DATA, TOY_SPLITS
from schemas import RunConfig
from tests.service.conftest import run_config, service, wait_status

MODULE_FILES = {
    "module": str(TOY_CONTAINER),
    "dataset": str(TOY_DATA),
    "splits_file": str(TOY_SPLITS),
}


def _evil_module(folder: Path) -> tuple[Path, Path]:
    """A module that leaves a marker file when it is imported: (module, marker)."""
    marker = folder / "imported.marker"
    module = folder / "evil.py"
    module.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n")
    return module, marker


async def _post(api: httpx.AsyncClient, config: dict[str, Any]) -> httpx.Response:
    return await api.post("/api/runs", json={"config": config, "start": True})


def _refusal(response: httpx.Response, field: str) -> str:
    assert response.status_code == 403, response.text
    body = response.json()["error"]
    assert body["type"] == "Forbidden" and body["message"].startswith(f"config.{field}:")
    return str(body["message"])


async def test_key_variables_outside_the_allowlist_are_refused(
    tmp_path: Path, toy_app: Any, reflection_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DB_PASSWORD", "hunter2-db-secret")
    async with service(tmp_path / "ws", toy_app) as (api, _):
        leak = await _post(api, run_config(reflection_url, reflection_api_key_env="DB_PASSWORD"))
        message = _refusal(leak, "reflection_api_key_env")
        assert "$DB_PASSWORD" in message and "--allow-key-env DB_PASSWORD" in message
        assert all(name in message for name in DEFAULT_KEY_ENVS)
        assert (await api.get("/api/runs")).json()["runs"] == []
        for allowed in DEFAULT_KEY_ENVS:
            ok = await api.post(
                "/api/runs",
                json={"config": run_config(reflection_url, reflection_api_key_env=allowed)},
            )
            assert ok.status_code == 201, ok.text
    assert "hunter2" not in (tmp_path / "ws" / "workspace.sqlite").read_bytes().decode("latin-1")

    # The operator's list replaces the default, and an openrouter/ model reads its own variable.
    only_mine = ServiceSettings(policy=RunPolicy(key_envs=frozenset({"MY_PROPOSER_KEY"})))
    async with service(tmp_path / "ws2", toy_app, only_mine) as (api, _):
        mine = run_config(reflection_url, reflection_api_key_env="MY_PROPOSER_KEY")
        assert (await api.post("/api/runs", json={"config": mine})).status_code == 201
        default = await api.post("/api/runs", json={"config": run_config(reflection_url)})
        assert "$OPENAI_API_KEY" in _refusal(default, "reflection_api_key_env")
        routed = run_config(reflection_url, reflection_model="openrouter/some/model")
        routed_refusal = await api.post("/api/runs", json={"config": routed})
        assert "$OPENROUTER_API_KEY" in _refusal(routed_refusal, "reflection_api_key_env")


async def test_modules_are_refused_unless_the_operator_allowed_their_folder(
    tmp_path: Path, toy_app: Any, reflection_url: str
) -> None:
    evil, marker = _evil_module(tmp_path)
    async with service(tmp_path / "ws", toy_app) as (api, _):
        refused = await _post(api, run_config(reflection_url, containers=[], module=str(evil)))
        assert "serve --allow-modules DIR" in _refusal(refused, "module")
        toy = await _post(api, run_config(reflection_url, containers=[], **MODULE_FILES))
        _refusal(toy, "module")  # even the operator's own files: modules are off by default
        assert (await api.get("/api/runs")).json()["runs"] == []

    allowed = ServiceSettings(policy=RunPolicy(module_roots=(TOY,)))
    async with service(tmp_path / "ws2", toy_app, allowed) as (api, _):
        outside = await _post(api, run_config(reflection_url, containers=[], module=str(evil)))
        message = _refusal(outside, "module")
        assert str(evil) in message and str(TOY) in message
        dotted = await _post(api, run_config(reflection_url, containers=[], module="os"))
        assert "not a .py file path" in _refusal(dotted, "module")
        files = {"dataset": "/etc/passwd", "splits_file": str(tmp_path / "s.json")}
        for field, value in files.items():
            config = run_config(reflection_url, containers=[], **{**MODULE_FILES, field: value})
            _refusal(await _post(api, config), field)
        for verifier in ("os:system", f"{evil}:run", str(tmp_path / "judge.json")):
            config = run_config(reflection_url, containers=[], **MODULE_FILES, verifier=verifier)
            _refusal(await _post(api, config), "verifier")
        assert (await api.get("/api/runs")).json()["runs"] == []
        exact = run_config(reflection_url, containers=[], **MODULE_FILES, verifier="exact")
        created = await _post(api, exact)
        assert created.status_code == 201, created.text
        view = await wait_status(api, created.json()["run_id"], {"completed", "failed"})
        assert view["status"] == "completed", view["error"]
    assert not marker.exists()


def test_a_symlink_inside_an_allowed_folder_does_not_lead_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    evil, _ = _evil_module(outside)
    root = tmp_path / "agents"
    root.mkdir()
    (root / "agent.py").symlink_to(evil)
    policy = RunPolicy(module_roots=(root,))
    config = RunConfig(reflection_model="m", module=str(root / "agent.py"))
    with pytest.raises(PolicyRefusal, match=r"config\.module: .* is outside the folders"):
        policy.check(config)
    (root / "real.py").write_text("")
    policy.check(RunConfig(reflection_model="m", module=str(root / "real.py")))


def test_the_cli_keeps_its_freedom_but_the_service_will_not_start_such_a_run(
    tmp_path: Path, toy_app: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    evil, marker = _evil_module(tmp_path)
    root = tmp_path / "ws"
    flags = ["--reflection-model", "m", "--workspace", str(root)]
    assert main(["optimize", "create", "--no-check", "--module", str(evil), *flags]) == 0
    module_run = capsys.readouterr().out.splitlines()[0]
    key = ["--container", "http://127.0.0.1:9", "--reflection-api-key-env", "DB_PASSWORD"]
    assert main(["optimize", "create", "--no-check", *key, *flags]) == 0
    key_run = capsys.readouterr().out.splitlines()[0]

    async def start_both() -> dict[str, str]:
        async with service(root, toy_app) as (api, _):
            started = await api.post(f"/api/runs/{module_run}/start")
            assert "serve --allow-modules" in _refusal(started, "module")
            started = await api.post(f"/api/runs/{key_run}/start")
            assert "--allow-key-env DB_PASSWORD" in _refusal(started, "reflection_api_key_env")
            runs = (await api.get("/api/runs")).json()["runs"]
            return {r["run_id"]: r["status"] for r in runs}

    assert asyncio.run(start_both()) == {module_run: "created", key_run: "created"}
    assert not marker.exists()

"""``load_target`` and the ``gepa-runtime container`` / ``schema`` commands."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from container import clear_optimization_targets, load_target
from optimizer.cli import build_parser, main
from schemas import WIRE_MODELS, Program, RolloutResponse, UserError

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"


def test_load_target_by_module_id_function_and_path() -> None:
    toy = load_target("tests.container.fixtures.toy")
    assert toy.id == "toy-shout" and toy.fn.__name__ == "shout"
    assert toy.dataset == str(FIXTURES / "toy.jsonl")  # resolved next to the module
    assert toy.verifier == str(FIXTURES / "toy_verifier.json")
    assert load_target("tests.container.fixtures.two_targets:second-target").kind == "agent"
    assert load_target("tests.container.fixtures.two_targets:first").id == "first-target"
    assert load_target(str(FIXTURES / "toy.py")).id == "toy-shout"
    assert load_target(f"{FIXTURES / 'two_targets.py'}:second").id == "second-target"


def test_load_target_survives_a_cleared_registry() -> None:
    load_target("tests.container.fixtures.toy")
    clear_optimization_targets()
    assert load_target("tests.container.fixtures.toy").id == "toy-shout"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "tests.container.fixtures.two_targets",
            "registers 2 targets (first-target, second-target)",
        ),
        ("tests.container.fixtures.two_targets:third", "no optimization target 'third'"),
        ("tests.container.fixtures.scorers", "registers no optimization target"),
        ("tests.container.fixtures.missing_module", "cannot import module"),
        ("/nowhere/agent.py", "no such Python file"),
    ],
)
def test_load_target_errors(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_target(spec)


def test_broken_module_file_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "broken_agent.py"
    path.write_text("raise RuntimeError('no api key')\n")
    with pytest.raises(UserError, match="RuntimeError: no api key"):
        load_target(str(path))


def test_container_command_reports_user_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["container", "tests.container.fixtures.two_targets"]) == 2
    assert "first-target, second-target" in capsys.readouterr().err
    assert main(["container", "tests.container.fixtures.toy", "--port", "http"]) == 2
    assert "--port" in capsys.readouterr().err


def test_container_flags_default_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "GEPA_DATASET": "d.jsonl",
        "GEPA_VERIFIER": "v.json",
        "GEPA_SPLITS_FILE": "s.json",
        "GEPA_CONTAINER_HOST": "0.0.0.0",
        "GEPA_CONTAINER_PORT": "9000",
        "GEPA_CONTAINER_TOKEN": "tok",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    args = build_parser().parse_args(["container", "m"])
    assert (args.dataset, args.verifier, args.splits_file) == ("d.jsonl", "v.json", "s.json")
    assert (args.host, args.port, args.token) == ("0.0.0.0", "9000", "tok")
    flags = build_parser().parse_args(["container", "m", "--port", "1", "--token", "t2"])
    assert (flags.port, flags.token) == ("1", "t2")


def test_schema_command_prints_every_wire_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schemas = json.loads(capsys.readouterr().out)
    assert set(schemas) == set(WIRE_MODELS)
    assert "reward" in schemas["RolloutResponse"]["required"]


@pytest.mark.e2e
async def test_container_subprocess_serves_over_real_http() -> None:
    env = {
        **os.environ,
        "GEPA_CONTAINER_PORT": "0",
        "GEPA_CONTAINER_TOKEN": "e2e-token",
        "PYTHONPATH": str(REPO),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "optimizer.cli",
        "container",
        "tests/container/fixtures/toy.py",
        "--host",
        "127.0.0.1",
        "--log-level",
        "warning",
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).decode()  # type: ignore[union-attr]
        assert line.startswith("serving toy-shout on http://127.0.0.1:"), line
        base = line.split(" on ")[1].strip()
        headers = {"Authorization": "Bearer e2e-token"}
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            for _ in range(50):
                if (await client.get("/health")).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            assert (await client.get("/program")).status_code == 401
            program = Program.model_validate((await client.get("/program", headers=headers)).json())
            assert program.program_id == "toy-shout" and program.baseline() == {
                "system_prompt": "Repeat the input."
            }
            seeds = {*program.seeds.train, *program.seeds.val, *program.seeds.holdout}
            assert seeds == {"t1", "t2", "t3", "t4", "t5"}
            rewards = {}
            for prompt in ("Repeat the input.", "Shout the input back."):
                response = await client.post(
                    "/rollout",
                    headers=headers,
                    json={"candidate": {"system_prompt": prompt}, "seed": "t1"},
                )
                assert response.status_code == 200, response.text
                body = RolloutResponse.model_validate(response.json())
                rewards[prompt] = body.reward
            assert rewards == {"Repeat the input.": 0.0, "Shout the input back.": 1.0}
            assert body.feedback == "correct: predicted HELLO THERE"
            assert body.usage.input_tokens == 6 and len(body.trace.messages) == 3
    finally:
        if proc.returncode is None:
            proc.terminate()
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=15)
    # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught
    assert proc.returncode in (0, -signal.SIGTERM), stderr.decode()
    assert b"Traceback" not in stderr, stderr.decode()

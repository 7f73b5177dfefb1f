"""``optimize create | dry-run | run`` and ``runs list | show | export`` from the command line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from optimizer.cli import main
from optimizer.testing.toy import TOY_CONTAINER, TOY_DATA, TOY_SPLITS
from tests.service.conftest import run_flags
from workspace import Workspace

MODULE = [
    "--module",
    str(TOY_CONTAINER),
    "--dataset",
    str(TOY_DATA),
    "--splits-file",
    str(TOY_SPLITS),
]


def _flags(reflection_url: str, root: Path) -> list[str]:
    return [*run_flags(reflection_url), "--workspace", str(root)]


def _runs(root: Path) -> list[dict[str, object]]:
    async def read() -> list[dict[str, object]]:
        async with Workspace(root) as ws:
            return [r.model_dump() for r in await ws.list_runs()]

    return asyncio.run(read())


def test_create_dry_run_run_then_inspect_a_module_run(
    tmp_path: Path,
    reflection_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "ws"
    monkeypatch.chdir(tmp_path)  # paths are pinned at create time, so the cwd no longer matters
    assert (
        main(
            ["optimize", "create", *MODULE, *_flags(reflection_url, root), "--token", "tok-123456"]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    run_id = out[0]
    assert f"gepa-runtime optimize dry-run {run_id} --workspace {root}" in "\n".join(out)
    assert f"gepa-runtime optimize run {run_id} --workspace {root}" in "\n".join(out)
    assert "never stored" in "\n".join(out)
    [stored] = _runs(root)
    assert stored["run_id"] == run_id and stored["status"] == "created"
    assert (
        stored["config"]["module"] == str(TOY_CONTAINER)
        and stored["config"]["container_token"] == "***"
    )

    assert main(["optimize", "dry-run", run_id, "--workspace", str(root)]) == 0
    checked = capsys.readouterr().out
    assert "all checks passed" in checked and "FAIL" not in checked
    assert "toy-labels" in checked and "24 train / 0 val / 12 holdout" in checked
    assert "answers GET /models" in checked
    assert "baseline on 24 train + 12 holdout seeds, the winner chosen on train" in checked

    assert main(["optimize", "run", run_id, "--workspace", str(root), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "PROMOTED" in captured.out and run_id in captured.out
    assert "serving the --module target in-process on http://127.0.0.1:" in captured.err
    [done] = _runs(root)
    assert done["status"] == "completed"

    assert main(["runs", "list", "--workspace", str(root)]) == 0
    listing = capsys.readouterr().out
    assert run_id in listing and "completed" in listing and "toy-labels" in listing
    assert main(["runs", "show", run_id, "--workspace", str(root)]) == 0
    shown = capsys.readouterr().out
    assert "PROMOTED" in shown and "evidence:" in shown and "candidates" in shown
    export = tmp_path / "export.json"
    assert main(["runs", "export", run_id, "--workspace", str(root), "--output", str(export)]) == 0
    document = json.loads(export.read_text())
    assert document["format"] == "gepa-runtime/run-export/1"
    assert document["evidence"]["run_id"] == run_id
    assert (
        len(document["trials"])
        == document["run"]["budget"]["paid"] + document["run"]["budget"]["cached"]
    )
    assert {c["candidate_id"] for c in document["candidates"]} == {
        c["candidate_id"] for c in document["evidence"]["candidates"]
    }
    assert "tok-123456" not in export.read_text()


def test_one_shot_module_run(
    tmp_path: Path, reflection_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    assert main(["optimize", "run", *MODULE, *_flags(reflection_url, root), "--quiet"]) == 0
    assert "PROMOTED" in capsys.readouterr().out
    [run] = _runs(root)
    assert run["status"] == "completed" and run["config"]["module"]


def test_dry_run_names_each_problem_and_its_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "optimize",
            "dry-run",
            "--container",
            "http://127.0.0.1:9",
            "--reflection-model",
            "m",
            "--reflection-base-url",
            "http://127.0.0.1:9/v1",
            "--max-metric-calls",
            "5",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL  container http://127.0.0.1:9: unreachable" in out
    assert (
        "fix: start it with `gepa-runtime container MODULE --dataset PATH` or fix --container URL"
        in out
    )
    assert "FAIL  reflection model: GET http://127.0.0.1:9/v1/models failed" in out
    assert "2 problems" in out


def test_dry_run_of_a_module_with_a_bad_splits_file_and_a_low_budget(
    tmp_path: Path, reflection_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = [
        "--module",
        str(TOY_CONTAINER),
        "--dataset",
        str(TOY_DATA),
        "--splits-file",
        str(tmp_path / "none.json"),
    ]
    assert (
        main(
            [
                "optimize",
                "dry-run",
                *bad,
                "--reflection-model",
                "fake-reflection",
                "--reflection-base-url",
                reflection_url,
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "FAIL  splits" in out and "fix: fix --splits-file" in out
    low = [
        *MODULE,
        "--reflection-model",
        "fake-reflection",
        "--reflection-base-url",
        reflection_url,
        "--max-metric-calls",
        "10",
    ]
    # A small budget is not refused: the dry-run says what the run will skip to fit it.
    assert main(["optimize", "dry-run", *low]) == 0
    out = capsys.readouterr().out
    assert "warn  budget" in out and "no search" in out and "baseline scored on" in out


def test_remote_reflection_model_without_a_key_is_a_problem(
    reflection_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert (
        main(
            [
                "optimize",
                "dry-run",
                *MODULE,
                "--reflection-model",
                "gpt-4.1-mini",
                "--auto",
                "light",
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "$OPENAI_API_KEY is not set" in out and "export OPENAI_API_KEY=" in out
    assert "ok    budget" in out


def test_user_errors_name_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "ws"
    assert main(["runs", "list", "--workspace", str(root)]) == 2
    assert "no workspace at" in capsys.readouterr().err
    assert main(["optimize", "create", "--reflection-model", "m", "--workspace", str(root)]) == 2
    assert "no task container: pass --container URL" in capsys.readouterr().err
    assert (
        main(
            [
                "optimize",
                "create",
                "--no-check",
                "--container",
                "http://x",
                "--reflection-model",
                "m",
                "--workspace",
                str(root),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["optimize", "dry-run", "run-nope", "--workspace", str(root)]) == 2
    assert "unknown run 'run-nope'" in capsys.readouterr().err
    assert main(["runs", "show", "run-nope", "--workspace", str(root)]) == 2
    assert "gepa-runtime runs list" in capsys.readouterr().err
    assert (
        main(
            [
                "optimize",
                "run",
                "--server",
                "http://127.0.0.1:9",
                "--container",
                "http://x",
                "--reflection-model",
                "m",
            ]
        )
        == 2
    )
    assert "start it with `gepa-runtime serve` or fix --server URL" in capsys.readouterr().err

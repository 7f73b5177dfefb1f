"""The CLI ends every mistake with a message that names the cause and the fix, never a traceback:
non-finite numbers, an output file that cannot be written, a closed pipe, a read-only workspace."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from optimizer.cli import main
from schemas import RunConfig
from tests.fakes.servers import ROOT
from workspace import Workspace

FLOAT_FLAGS = (
    "--min-holdout-improvement",
    "--max-cost-usd",
    "--rollout-timeout",
    "--max-error-rate",
    "--retry-base-delay",
)
# A closed port: a run that got past the flags would fail fast, never hang.
RUN = ["optimize", "run", "--container", "http://127.0.0.1:9", "--reflection-model", "m"]


@pytest.fixture
def workspace_with_a_run(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    async def create() -> str:
        async with Workspace(tmp_path / "ws") as ws:
            return (await ws.create_run(RunConfig(containers=["http://127.0.0.1:9"]))).run_id

    yield tmp_path / "ws", asyncio.run(create())


@pytest.mark.parametrize("flag", FLOAT_FLAGS)
@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_float_flags_refuse_non_finite_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, text: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*RUN, "--workspace", str(tmp_path), f"{flag}={text}"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert f"argument {flag}: expected a finite number, got '{text}'" in err
    assert not (tmp_path / "workspace.sqlite").exists()  # refused before any run was stored


def test_a_non_finite_number_in_the_environment_names_the_variable_and_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEPA_MIN_HOLDOUT_IMPROVEMENT", "nan")
    assert main([*RUN, "--workspace", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "GEPA_MIN_HOLDOUT_IMPROVEMENT='nan' is not valid for --min-holdout-improvement" in err
    assert "expected a finite number" in err


def test_export_to_a_folder_that_does_not_exist_is_a_clear_error(
    workspace_with_a_run: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, run_id = workspace_with_a_run
    code = main(["runs", "export", run_id, "--workspace", str(root), "-o", "/nonexistent/x.json"])
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot write --output /nonexistent/x.json: No such file or directory" in err
    assert "existing, writable folder" in err


@pytest.mark.parametrize("command", [["show"], ["show", "--json"], ["export"]])
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(
    workspace_with_a_run: tuple[Path, str], command: list[str]
) -> None:
    root, run_id = workspace_with_a_run
    # `gepa-runtime runs show RID | head -0`: the reader is gone before anything is written.
    proc = subprocess.Popen(
        [sys.executable, "-m", "optimizer.cli", "runs", *command[:1], run_id, *command[1:]]
        + ["--workspace", str(root)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    with proc.stderr:
        err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert err == ""
    assert proc.returncode == 141


def _read_only_command(root: Path, *args: str) -> list[str] | None:
    """A command that runs the CLI with ``root`` read-only for it, or None if this host can't.

    As root, permission bits do not stop writes: the folder is bind-mounted read-only in a
    private mount namespace instead (``unshare -m``), which nothing outside the child sees.
    """
    cli = [sys.executable, "-m", "optimizer.cli", *args]
    if os.geteuid() != 0:
        root.chmod(0o555)
        (root / "workspace.sqlite").chmod(0o444)
        return cli
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return None
    probe = subprocess.run(
        ["unshare", "-m", "mount", "--bind", "-o", "ro", str(root), str(root)],
        capture_output=True,
    )
    if probe.returncode != 0:
        return None
    script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, str(root), *cli]


def test_runs_list_and_show_work_on_a_read_only_workspace(
    workspace_with_a_run: tuple[Path, str],
) -> None:
    root, run_id = workspace_with_a_run
    outputs = []
    for args in (["runs", "list"], ["runs", "show", run_id]):
        command = _read_only_command(root, *args, "--workspace", str(root))
        if command is None:
            pytest.skip("cannot make a folder read-only here (root without unshare/mount)")
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert run_id in outputs[0] and "created" in outputs[0]
    assert f"run {run_id}: created" in outputs[1]


def test_writing_to_a_read_only_workspace_names_the_cause_and_the_fix(
    workspace_with_a_run: tuple[Path, str],
) -> None:
    root, _ = workspace_with_a_run
    args = [
        "optimize",
        "create",
        "--no-check",
        "--container",
        "http://127.0.0.1:9",
        "--reflection-model",
        "m",
    ]
    command = _read_only_command(root, *args, "--workspace", str(root))
    if command is None:
        pytest.skip("cannot make a folder read-only here (root without unshare/mount)")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"The workspace folder {root} is read-only" in done.stderr
    assert "pass a writable --workspace DIR" in done.stderr
    assert "Traceback" not in done.stderr

"""The run lifecycle across real processes: one executor per run (the lease), signals, resume.

``gepa-runtime container`` processes serve the toy program on 127.0.0.1, the scripted
reflection model answers from a thread, and every optimizer is a real
``python -m optimizer.cli optimize run`` process on one workspace.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from optimizer.service.manager import RunConflict, RunManager
from optimizer.testing import reflection_app, rollout_calls, thread_server, toy_container
from tests.fakes.servers import FAKES, ROOT, fake_reflection_flags
from workspace import Workspace

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "optimizer.cli"]
# Ctrl-C reaches Python only if SIGINT is not ignored; a test runner started in the
# background ignores it, and children inherit that.
CLI_WITH_CTRL_C = [
    sys.executable,
    "-c",
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from optimizer.cli import main; sys.exit(main(sys.argv[1:]))",
]


@pytest.fixture(scope="module")
def reflection_url() -> Any:
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


def _run_flags(url: str, reflection: str, root: Path) -> list[str]:
    return [
        "optimize", "run", "--container", url, *fake_reflection_flags(reflection, 400),
        "--seed", "3", "--use-merge", "false",
        "--max-idle-iterations", "6", "--retry-base-delay", "0.01",
        "--workspace", str(root), "--quiet",
    ]  # fmt: skip


def _start(root: Path, url: str, reflection: str, cli: list[str] = CLI) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*cli, *_run_flags(url, reflection, root)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read(root: Path, fn: Any) -> Any:
    async def go() -> Any:
        async with Workspace(root, readonly=True) as ws:
            return await fn(ws)

    return asyncio.run(go())


def _paid(root: Path) -> int:
    if not (root / "workspace.sqlite").exists():
        return 0

    async def count(ws: Workspace) -> int:
        runs = await ws.list_runs()
        return (await ws.count_trials(runs[0].run_id)).get("paid", 0) if runs else 0

    return int(_read(root, count))


def _wait_paid(root: Path, proc: subprocess.Popen[str], n: int, timeout: float = 90) -> str:
    """Wait until the run paid ``n`` rollouts; its id."""
    deadline = time.monotonic() + timeout
    while _paid(root) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run paid too little in time"
        time.sleep(0.1)

    async def run_id(ws: Workspace) -> str:
        return (await ws.list_runs())[0].run_id

    return str(_read(root, run_id))


def _committed(root: Path) -> set[tuple[str, str]]:
    """(candidate hash prefix, seed) of every rollout the workspace holds a score for."""

    async def read(ws: Workspace) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        for run in await ws.list_runs():
            for cand in await ws.list_candidates(run.run_id):
                for r in await ws.rollouts_for_candidate(run.run_id, cand.candidate_id):
                    if r.status == "ok":
                        out.add((r.candidate_hash[:16], r.seed))
        return out

    return set(_read(root, read))


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def test_a_second_process_is_refused_and_a_dead_holder_is_taken_over(
    tmp_path: Path, reflection_url: str
) -> None:
    log, root = tmp_path / "calls.log", tmp_path / "ws"
    with toy_container(log, env={"TOY_DELAY": "0.2"}) as url:
        first = _start(root, url, reflection_url)
        try:
            rid = _wait_paid(root, first, 8)
            second = _cli("optimize", "run", rid, "--workspace", str(root), "--quiet")
            shown = _cli("runs", "show", rid, "--workspace", str(root))
            assert first.poll() is None  # the first one was not disturbed
            status = _read(root, lambda ws: ws.get_run(rid)).status
        finally:
            first.kill()
            first.communicate()
        assert second.returncode == 2, second.stderr
        assert f"run {rid} is being run by pid {first.pid} on host {socket.gethostname()}" in (
            second.stderr
        )
        assert " since 20" in second.stderr and "last heartbeat" in second.stderr
        assert status == "running"  # the refused process left the run to its holder
        assert f"being run by pid {first.pid} on host {socket.gethostname()}" in shown.stdout

        committed, before = _committed(root), rollout_calls(log)
        third = _cli("optimize", "run", rid, "--workspace", str(root), "--quiet")
        after = rollout_calls(log)[len(before) :]
    assert third.returncode == 0, third.stderr
    assert f"warning: took run {rid} over from pid {first.pid}" in third.stderr
    assert f"pid {first.pid} is no longer running" in third.stderr
    assert not committed & set(after), "the takeover paid again for committed rollouts"
    assert len(after) == len(set(after))
    packet = json.loads((root / "runs" / rid / "evidence.json").read_text())
    assert packet["status"] == "completed"


@pytest.mark.parametrize(
    ("signum", "name", "code"),
    [(signal.SIGTERM, "SIGTERM", 143), (signal.SIGINT, "Ctrl-C", 130)],
)
def test_a_signal_cancels_the_run_resumably_and_prints_how_to_resume(
    tmp_path: Path, reflection_url: str, signum: int, name: str, code: int
) -> None:
    log, root = tmp_path / "calls.log", tmp_path / "ws"
    with toy_container(log, env={"TOY_DELAY": "0.1"}) as url:
        proc = _start(root, url, reflection_url, cli=CLI_WITH_CTRL_C)
        try:
            rid = _wait_paid(root, proc, 30)
            os.kill(proc.pid, signum)
            _, err = proc.communicate(timeout=60)
        finally:
            _stop(proc)
        assert proc.returncode == code, err
        resume = f"gepa-runtime optimize run {rid} --workspace {root}"
        assert f"run {rid} cancelled ({name}); resume it with:\n  {resume}" in err
        assert "Traceback" not in err and "never retrieved" not in err, err
        record = _read(root, lambda ws: ws.get_run(rid))
        assert record.status == "cancelled"
        assert _read(root, lambda ws: ws.lease_holder(rid)) is None
        if signum != signal.SIGTERM:
            return
        committed, before = _committed(root), rollout_calls(log)
        resumed = _cli(*resume.split()[1:], "--quiet")
        after = rollout_calls(log)[len(before) :]
    assert resumed.returncode == 0, resumed.stderr
    assert rid in resumed.stdout and "evidence" in resumed.stdout
    assert not committed & set(after), "the resumed run paid again for committed rollouts"


def _cancelled_run(
    root: Path, url: str, reflection: str, paid: int = 8
) -> tuple[str, set[tuple[str, str]]]:
    """A run of the toy program stopped by SIGTERM after ``paid`` rollouts; its id, its scores."""
    proc = _start(root, url, reflection)
    try:
        rid = _wait_paid(root, proc, paid)
        os.kill(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        _stop(proc)
    return rid, _committed(root)


def test_resume_against_another_program_is_refused(tmp_path: Path, reflection_url: str) -> None:
    root = tmp_path / "ws"
    with toy_container(tmp_path / "toy.log", env={"TOY_DELAY": "0.1"}) as url:
        rid, _ = _cancelled_run(root, url, reflection_url)
    other_log = tmp_path / "other.log"
    with toy_container(other_log, module=FAKES / "toy_template_container.py") as other:
        refused = _cli(
            "optimize", "run", rid, "--container", other, "--workspace", str(root), "--quiet"
        )
    assert refused.returncode == 2, refused.stderr
    assert f"run {rid} was started on program 'toy-labels' (components system_prompt)" in (
        refused.stderr
    )
    assert f"{other} serves 'toy-template' (components demos, system_prompt)" in refused.stderr
    assert rollout_calls(other_log) == []  # not one rollout of the other program was paid

    async def candidates(ws: Workspace) -> list[Any]:
        return await ws.list_candidates(rid)

    assert all(set(c.components) == {"system_prompt"} for c in _read(root, candidates))


def test_resume_on_a_new_fingerprint_warns_and_pays_again(
    tmp_path: Path, reflection_url: str
) -> None:
    root = tmp_path / "ws"
    with toy_container(tmp_path / "old.log", env={"TOY_DELAY": "0.1"}) as url:
        rid, committed = _cancelled_run(root, url, reflection_url)
    old_fingerprint = _read(root, lambda ws: ws.get_run(rid)).fingerprint
    verifier = tmp_path / "exact.json"  # the same answers, another verifier: a new fingerprint
    verifier.write_text(json.dumps({"type": "exact"}))
    new_log = tmp_path / "new.log"
    with toy_container(new_log, extra=["--verifier", str(verifier)]) as url:
        resumed = _cli("optimize", "run", rid, "--container", url, "--workspace", str(root))
    assert resumed.returncode == 0, resumed.stderr
    assert f"warning: program 'toy-labels' changed since run {rid} last ran" in resumed.stderr
    assert f"fingerprint {old_fingerprint[:12]} -> " in resumed.stderr
    assert committed & set(rollout_calls(new_log)), "nothing scored by the old version was re-paid"

    async def warnings(ws: Workspace) -> list[str]:
        events = await ws.events_since(rid, 0, 100000)
        return [e.data["message"] for e in events if e.type == "warning"]

    assert any("changed since run" in w for w in _read(root, warnings))
    assert _read(root, lambda ws: ws.get_run(rid)).fingerprint != old_fingerprint


async def test_the_service_and_the_cli_hold_the_same_lease(
    tmp_path: Path, reflection_url: str
) -> None:
    root = tmp_path / "ws"
    with toy_container(tmp_path / "calls.log", env={"TOY_DELAY": "0.1"}) as url:
        # A CLI process executes the run: the service refuses to start it, naming the CLI.
        cli = await asyncio.to_thread(_start, root, url, reflection_url)
        try:
            rid = await asyncio.to_thread(_wait_paid, root, cli, 4)
            async with Workspace(root) as ws:
                manager = RunManager(ws)
                with pytest.raises(RunConflict, match=f"is being run by pid {cli.pid}"):
                    await manager.start(rid)
                assert await manager.startup() == []  # not resumed behind the CLI's back
        finally:
            cli.send_signal(signal.SIGTERM)
            await asyncio.to_thread(cli.communicate)
        # The service executes it: a CLI process is refused, naming the service's pid.
        async with Workspace(root) as ws:
            manager = RunManager(ws)
            await manager.start(rid)
            try:
                refused = await asyncio.to_thread(
                    _cli, "optimize", "run", rid, "--workspace", str(root), "--quiet"
                )
                holder = await ws.lease_holder(rid)
            finally:
                await manager.shutdown()
    assert refused.returncode == 2, refused.stderr
    assert f"is being run by pid {os.getpid()}" in refused.stderr
    assert holder is not None and holder.pid == os.getpid()

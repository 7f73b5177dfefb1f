"""Several processes, as on several hosts, on one real PostgreSQL store.

Every optimizer is a real ``python -m optimizer.cli`` process; ``gepa-runtime container``
processes serve the toy programs (each call logged) and the scripted reflection model answers
from a thread. A "host" is a process with run files of its own (``GEPA_RUN_FILES``) and, where
the kernel lets this user (root) make one, a hostname of its own (``unshare --uts``): a lease
held from another host is judged by its heartbeat only, as across machines.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.testing import reflection_app, rollout_calls, thread_server, toy_container
from optimizer.testing.toy import TOY, TOY_CONTAINER, TOY_DATA
from tests.fakes.servers import FAKES, ROOT, fake_reflection_flags
from tests.service.processes import serve_process
from workspace import Workspace

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CLI = [sys.executable, "-m", "optimizer.cli"]
LEASE_TIMEOUT = 4.0


@pytest.fixture(scope="module")
def reflection_url() -> Iterator[str]:
    with thread_server(reflection_app()) as url:
        yield f"{url}/v1"


def _host_prefix(name: str) -> list[str] | None:
    """A command prefix that runs the command under hostname ``name``, if this user may."""
    unshare = shutil.which("unshare")
    if (
        unshare is None
        or subprocess.run([unshare, "--uts", "true"], capture_output=True).returncode
    ):
        return None
    return [unshare, "--uts", "sh", "-c", f'hostname {name} && exec "$@"', "sh"]


def _other_host(name: str) -> list[str]:
    """:func:`_host_prefix`, or a skip where this user may not make a hostname (not root)."""
    prefix = _host_prefix(name)
    if prefix is None:
        pytest.skip("unshare --uts is not permitted here (needs root): cannot fake another host")
    return prefix


def _flags(container: str, reflection: str, store: str, budget: int = 400) -> list[str]:
    return [
        "optimize", "run", "--container", container, *fake_reflection_flags(reflection, budget),
        "--seed", "3", "--use-merge", "false",
        "--max-idle-iterations", "6", "--retry-base-delay", "0.01", "--concurrency", "4",
        "--workspace", store, "--quiet",
    ]  # fmt: skip


def _start(args: list[str], files: Path, prefix: list[str] | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "GEPA_RUN_FILES": str(files), "GEPA_LEASE_TIMEOUT": str(LEASE_TIMEOUT)}
    return subprocess.Popen(
        [*(prefix or []), *CLI, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cli(args: list[str], files: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    proc = _start(args, files)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _read(store: str, fn: Callable[[Workspace], Any], *, readonly: bool = True) -> Any:
    async def go() -> Any:
        async with Workspace(store, readonly=readonly, run_files="/nonexistent") as ws:
            return await fn(ws)

    return asyncio.run(go())


def _create_store(store: str) -> None:
    """Migrate a fresh store, so that readers may follow it from the first instant."""
    _read(store, lambda ws: ws.list_runs(), readonly=False)


def _runs(store: str) -> dict[str, str]:
    """Run id -> program id of every run in the store."""

    async def read(ws: Workspace) -> dict[str, str]:
        return {r.run_id: str(r.program_id) for r in await ws.list_runs()}

    return dict(_read(store, read))


def _counts(store: str, run_id: str) -> dict[str, int]:
    return dict(_read(store, lambda ws: ws.count_trials(run_id)))


def _committed(store: str, run_id: str) -> set[tuple[str, str]]:
    """(candidate hash prefix, seed) of every ok rollout the run used."""

    async def read(ws: Workspace) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        for cand in await ws.list_candidates(run_id):
            for r in await ws.rollouts_for_candidate(run_id, cand.candidate_id):
                if r.status == "ok":
                    out.add((r.candidate_hash[:16], r.seed))
        return out

    return set(_read(store, read))


def _wait(condition: Callable[[], bool], procs: list[subprocess.Popen[str]], what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        for proc in procs:
            assert proc.poll() is None, (what, proc.communicate())
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.1)


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


def test_two_hosts_share_runs_the_cache_and_the_console(
    postgres_store_url: str, reflection_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = postgres_store_url
    monkeypatch.setenv("GEPA_RUN_FILES", str(tmp_path / "console-host"))
    toy_log, other_log = tmp_path / "toy.log", tmp_path / "other.log"
    slow = {"TOY_DELAY": "0.1"}
    _create_store(store)
    with (
        toy_container(toy_log, env=slow) as toy,
        toy_container(other_log, env=slow, module=FAKES / "toy_template_container.py") as other,
        serve_process(store) as (console, _),  # type: ignore[arg-type]
    ):
        host_a = _start(_flags(toy, reflection_url, store), tmp_path / "host-a")
        host_b = _start(
            _flags(other, reflection_url, store), tmp_path / "host-b", _host_prefix("gepa-b")
        )
        procs = [host_a, host_b]
        try:
            _wait(lambda: len(_runs(store)) == 2, procs, "both runs exist")
            live = _console_sees_both_live(console, procs)
            results = [_finish(p) for p in procs]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()  # close its pipes: a failure here must not leak them
        assert [code for code, _ in results] == [0, 0], results
        runs = {program: run_id for run_id, program in _runs(store).items()}
        assert set(runs) == {"toy-labels", "toy-template"}
        assert set(live) == set(runs.values())  # the console followed both while they ran
        # 0 paid twice, 0 lost: each call the containers served is one stored ok rollout.
        for log, program in ((toy_log, "toy-labels"), (other_log, "toy-template")):
            calls = rollout_calls(log)
            assert len(calls) == len(set(calls)), f"{program}: a rollout was paid twice"
            assert _counts(store, runs[program])["paid"] == len(calls), f"{program}: lost"
        # (toy-labels logs the store's own content hash: the very rollouts are the stored ones)
        assert set(rollout_calls(toy_log)) == _committed(store, runs["toy-labels"])
        # A second run of the same program, executed by the service on the console's host,
        # pays for none of the rollouts the first run (on host A) already has.
        before = rollout_calls(toy_log)
        second = _service_run(console, toy, reflection_url)
        after = rollout_calls(toy_log)[len(before) :]
    assert second["status"] == "completed", second
    assert not set(after) & set(before), "the second run paid again for stored rollouts"
    counts = _counts(store, second["run_id"])
    assert counts["cached"] >= len(set(before)) > 0 and counts["paid"] == len(after)
    # Host C ran nothing: it reads host B's evidence from the store, as real files.
    run_b = runs["toy-template"]
    shown = _cli(["runs", "show", run_b, "--workspace", store], tmp_path / "host-c")
    assert shown.returncode == 0, shown.stderr
    folder = tmp_path / "host-c" / "runs" / run_b
    assert f"evidence: {folder}/evidence.json and {folder}/report.md" in shown.stdout
    assert (folder / "evidence.json").is_file() and (folder / "report.md").is_file()


def _console_sees_both_live(
    console: str, procs: list[subprocess.Popen[str]]
) -> dict[str, list[int]]:
    """Poll the console's API while both runs execute elsewhere: run id -> paid counts seen.

    Each run must be seen running with two different paid counts, the later one higher: the
    console followed it live. (A short run on a loaded machine may be polled only twice.)
    """
    seen: dict[str, list[int]] = {}
    deadline = time.monotonic() + 120
    with httpx.Client(base_url=console, timeout=10) as client:
        while time.monotonic() < deadline and all(p.poll() is None for p in procs):
            for run in client.get("/api/runs").json()["runs"]:
                if run["status"] == "running":
                    view = client.get(f"/api/runs/{run['run_id']}").json()
                    seen.setdefault(run["run_id"], []).append(view["budget"]["paid"])
            growing = [r for r, paid in seen.items() if paid[-1] > paid[0]]
            if len(growing) == 2:
                return seen
            time.sleep(0.2)
    raise AssertionError(f"the console did not see both runs progress: {seen}")


def _service_run(console: str, container: str, reflection: str) -> dict[str, Any]:
    config = {
        "containers": [container], "reflection_model": "fake-reflection",
        "reflection_base_url": reflection, "proposer_mode": "text", "max_metric_calls": 400,
        "seed": 3, "use_merge": False, "max_idle_iterations": 6, "retry_base_delay_s": 0.01,
        "concurrency": 4,
    }  # fmt: skip
    with httpx.Client(base_url=console, timeout=30) as client:
        created = client.post("/api/runs", json={"config": config, "start": True})
        assert created.status_code == 201, created.text
        run_id = created.json()["run_id"]
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            view = client.get(f"/api/runs/{run_id}").json()
            if view["status"] in ("completed", "failed", "cancelled"):
                return dict(view)
            time.sleep(0.2)
    raise AssertionError(f"the service's run {run_id} did not finish")


def test_a_killed_runner_on_another_host_is_resumed_once_its_lease_expires(
    postgres_store_url: str, reflection_url: str, tmp_path: Path
) -> None:
    store, log = postgres_store_url, tmp_path / "toy.log"
    away = _other_host("gepa-host-b")
    _create_store(store)
    with toy_container(log, env={"TOY_DELAY": "0.2"}) as toy:
        runner = _start(_flags(toy, reflection_url, store), tmp_path / "host-b", prefix=away)
        try:
            _wait(lambda: len(_runs(store)) == 1, [runner], "the run exists")
            (run_id,) = _runs(store)
            _wait(lambda: _counts(store, run_id)["paid"] >= 12, [runner], "12 rollouts paid")
            runner.kill()  # SIGKILL: no release, no last heartbeat
            killed_at = time.time()
            runner.communicate()
        finally:
            runner.kill() if runner.poll() is None else None
        committed, sent = _committed(store, run_id), rollout_calls(log)
        in_flight = set(sent) - committed  # sent to the container, never stored
        # Until the lease expires a process here is refused, naming the holder's host; then
        # the next attempt takes the run over and finishes it.
        resume = ["optimize", "run", run_id, "--workspace", store, "--quiet"]
        attempts = [_cli(resume, tmp_path / "host-a")]
        while attempts[-1].returncode == 2 and "is being run by" in attempts[-1].stderr:
            time.sleep(0.5)
            attempts.append(_cli(resume, tmp_path / "host-a"))
        after = rollout_calls(log)[len(sent) :]
    refused, done = attempts[0], attempts[-1]
    assert len(attempts) >= 2 and refused.returncode == 2, refused.stderr
    assert f"run {run_id} is being run by pid {runner.pid} on host gepa-host-b" in refused.stderr
    assert done.returncode == 0, done.stderr
    assert f"warning: took run {run_id} over from pid {runner.pid}" in done.stderr
    assert "no heartbeat for" in done.stderr
    assert _takeover_at(store, run_id) - killed_at <= LEASE_TIMEOUT + 10
    assert not committed & set(after), "the resumed run paid again for stored rollouts"
    # In flight: calls under way at the kill, and any answered but not yet committed.
    assert set(after) & set(sent) <= in_flight
    assert len(after) == len(set(after))
    assert _read(store, lambda ws: ws.get_run(run_id)).status == "completed"


def _takeover_at(store: str, run_id: str) -> float:
    """When the run logged that another process took it over (its warning event's time)."""

    async def read(ws: Workspace) -> float:
        events = await ws.events_since(run_id, 0, 100_000)
        return next(e.ts for e in events if e.type == "warning" and "took run" in str(e.data))

    return float(_read(store, read))


def test_a_module_run_created_on_one_host_runs_on_another(
    postgres_store_url: str, reflection_url: str, tmp_path: Path
) -> None:
    """`optimize create` copies the run's input files into the store; a host that has none of
    them (only the module's code) checks them out and runs it."""
    store = postgres_store_url
    data = tmp_path / "data"
    data.mkdir()
    for name in ("toy_data.jsonl", "toy_splits.json"):
        shutil.copy(TOY / name, data / name)
    created = _cli(
        [
            "optimize",
            "create",
            "--module",
            str(TOY_CONTAINER),
            "--dataset",
            str(data / "toy_data.jsonl"),
            "--splits-file",
            str(data / "toy_splits.json"),
            *fake_reflection_flags(reflection_url, 60),
            "--seed",
            "3",
            "--workspace",
            store,
            "--no-check",
        ],  # fmt: skip
        tmp_path / "host-a",
    )
    assert created.returncode == 0, created.stderr
    run_id = created.stdout.splitlines()[0]
    shutil.rmtree(data)  # host B has the module's code and nothing else
    ran = _cli(["optimize", "run", run_id, "--workspace", store, "--quiet"], tmp_path / "host-b")
    assert ran.returncode == 0, ran.stderr
    inputs = tmp_path / "host-b" / "runs" / run_id / "inputs"
    assert sorted(p.name for p in inputs.iterdir()) == ["dataset.jsonl", "splits_file.json"]
    assert (inputs / "dataset.jsonl").read_bytes() == (TOY_DATA).read_bytes()
    assert _read(store, lambda ws: ws.get_run(run_id)).status == "completed"

"""A person steering runs across real processes on 127.0.0.1.

``gepa-runtime container`` serves the toy program (it logs every rollout it serves), the
scripted reflection model answers from a thread (it records what it was asked, and holds
an answer when told: with one proposal in flight the run then waits at a known point), the
run is a ``python -m optimizer.cli optimize run`` process (or a run of ``serve``), and every
action goes through the CLI (``gepa-runtime runs pause ...``) or the REST API.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from optimizer.testing import Hold, reflection_app, rollout_calls, thread_server, toy_container
from schemas import Event
from tests.fakes.servers import FAKES, ROOT
from tests.service.processes import serve_process, stop
from workspace import Workspace

pytestmark = pytest.mark.e2e

CLI = [sys.executable, "-m", "optimizer.cli"]
NOTE = "Name every animal label you have seen in the feedback."


def _flags(toy: str, reflection: str, root: Path, mode: str = "text") -> list[str]:
    return [
        "--container", toy, "--reflection-model", "fake-reflection",
        "--reflection-base-url", reflection, "--proposer-mode", mode,
        "--max-metric-calls", "400", "--proposals-in-flight", "1", "--seed", "3",
        "--use-merge", "false", "--max-idle-iterations", "6", "--retry-base-delay", "0.01",
        "--workspace", str(root), "--quiet",
    ]  # fmt: skip


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def _act(root: Path, *args: str) -> str:
    """A steering command through the CLI; what it printed."""
    done = _cli("runs", *args, "--workspace", str(root))
    assert done.returncode == 0, done.stderr
    return done.stdout


def _read(root: Path, fn: Callable[[Workspace], Any]) -> Any:
    async def go() -> Any:
        async with Workspace(root, readonly=True) as ws:
            return await fn(ws)

    return asyncio.run(go())


def _events(root: Path, run_id: str) -> list[Event]:
    return list(_read(root, lambda ws: ws.events_since(run_id, 0, 100000)))


def _run_id(root: Path) -> str | None:
    if not (root / "workspace.sqlite").exists():
        return None
    runs = _read(root, lambda ws: ws.list_runs())
    return runs[0].run_id if runs else None


def _until(what: str, check: Callable[[], Any], timeout: float = 90.0, proc: Any = None) -> Any:
    """Poll ``check`` until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {proc.communicate()}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


def _applied(root: Path, run_id: str, n: int) -> list[Event]:
    """Wait until the run took ``n`` actions in; its ``action_applied`` events."""
    return list(
        _until(
            f"{n} actions taken in",
            lambda: (
                [e for e in _events(root, run_id) if e.type == "action_applied"][n - 1 :]
                and [e for e in _events(root, run_id) if e.type == "action_applied"]
            ),
        )
    )


def _paid(root: Path, run_id: str) -> int:
    return int(_read(root, lambda ws: ws.count_trials(run_id)).get("paid", 0))


def _finish(proc: subprocess.Popen[str], timeout: float = 240) -> str:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return out


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def _packet(root: Path, run_id: str) -> dict[str, Any]:
    return dict(json.loads((root / "runs" / run_id / "evidence.json").read_text()))


def _best(events: list[Event]) -> str:
    return str([e for e in events if e.type == "frontier"][-1].data["best"]["candidate_id"])


def _baseline(events: list[Event]) -> str:
    return str(next(e for e in events if e.type == "scored").data["candidate_id"])


def _shown(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in request["messages"])


class Model:
    """The scripted reflection model served from a thread: its URL, app and hold."""

    def __init__(self, url: str, app: Any, hold: Hold | None) -> None:
        self.url, self.app, self.hold = url, app, hold

    @property
    def requests(self) -> list[dict[str, Any]]:
        return list(self.app.state.requests)

    def reached(self) -> None:
        assert self.hold is not None and self.hold.reached.wait(120), "no held reflection call"


def _model(hold_at: int | None = None) -> Iterator[Model]:
    hold = Hold(hold_at) if hold_at is not None else None
    app = reflection_app(record=True, hold=hold)
    try:
        with thread_server(app) as url:
            yield Model(f"{url}/v1", app, hold)
    finally:
        if hold is not None:
            hold.released.set()


@pytest.fixture
def model() -> Iterator[Model]:
    yield from _model()


@pytest.fixture
def held() -> Iterator[Model]:
    """The model holding its third answer: the run waits there, nothing else in flight."""
    yield from _model(hold_at=3)


def test_a_pause_sends_nothing_and_resumes_to_the_result_of_an_unpaused_run(
    tmp_path: Path, model: Model
) -> None:
    log = tmp_path / "calls.log"
    with toy_container(log, env={"TOY_DELAY": "0.05"}) as toy:
        plain_root, root = tmp_path / "plain", tmp_path / "ws"
        plain = subprocess.run(
            [*CLI, "optimize", "run", *_flags(toy, model.url, plain_root)],
            cwd=ROOT, capture_output=True, text=True, timeout=240,
        )  # fmt: skip
        assert plain.returncode == 0, plain.stderr
        proc = _start("optimize", "run", *_flags(toy, model.url, root))
        try:
            run_id = _until("the run", lambda: _run_id(root), proc=proc)
            _until("rollouts paid", lambda: _paid(root, run_id) >= 10, proc=proc)
            said = _act(root, "pause", run_id)
            assert f"paused run {run_id}" in said and "runs resume" in said
            _applied(root, run_id, 1)
            time.sleep(0.5)  # the rollouts in flight when it paused finish
            sent, asked = len(rollout_calls(log)), model.app.state.calls
            began = time.monotonic()
            time.sleep(2.0)
            assert len(rollout_calls(log)) == sent and model.app.state.calls == asked
            assert time.monotonic() - began >= 2.0 and proc.poll() is None
            steering = json.loads(_act(root, "resume", run_id, "--json"))["steering"]
            assert steering["paused"] is False
            _finish(proc)
        finally:
            _kill(proc)
    plain_id = str(_run_id(plain_root))
    mine, theirs = _packet(root, run_id), _packet(plain_root, plain_id)
    assert mine["best"]["candidate_id"] == theirs["best"]["candidate_id"]
    assert mine["promotion"]["lift"] == theirs["promotion"]["lift"]
    assert [c["candidate_id"] for c in mine["candidates"]] == [
        c["candidate_id"] for c in theirs["candidates"]
    ]
    assert mine["rollouts"] == theirs["rollouts"]  # the same rollouts paid, none twice


def test_a_rejected_candidate_is_never_a_parent_again_nor_promoted(
    tmp_path: Path, held: Model
) -> None:
    root = tmp_path / "ws"
    with toy_container(tmp_path / "calls.log") as toy:
        proc = _start("optimize", "run", *_flags(toy, held.url, root))
        try:
            held.reached()
            run_id = str(_run_id(root))
            events = _events(root, run_id)
            rejected = _best(events)
            assert rejected != _baseline(events)
            said = _act(root, "reject", run_id, rejected[:8], "--reason", "games the verifier")
            assert f"rejected candidate {rejected} of run {run_id}" in said
            (applied,) = _applied(root, run_id, 1)
            assert held.hold is not None
            held.hold.released.set()
            _finish(proc)
        finally:
            _kill(proc)
    events = _events(root, run_id)
    later = [e.data for e in events if e.type == "iteration" and e.seq > applied.seq]
    assert len(later) >= 2 and all(e.get("parent") != rejected for e in later)
    assert all(rejected not in (e.data.get("merge") or []) for e in events if e.type == "iteration")
    packet = _packet(root, run_id)
    assert packet["best"]["candidate_id"] != rejected
    reason = next(e.data for e in events if e.type == "action")
    assert reason == {
        "action": "reject", "source": "cli", "candidate_id": rejected,
        "reason": "games the verifier",
    }  # fmt: skip


def test_stop_promotes_the_best_so_far_and_never_a_rejected_best(
    tmp_path: Path, held: Model
) -> None:
    root = tmp_path / "ws"
    with toy_container(tmp_path / "calls.log") as toy:
        proc = _start("optimize", "run", *_flags(toy, held.url, root))
        try:
            held.reached()
            run_id = str(_run_id(root))
            rejected = _best(_events(root, run_id))
            _act(root, "reject", run_id, rejected, "--reason", "against policy")
            assert "stops searching" in _act(root, "stop", run_id, "--reason", "good enough")
            _finish(proc)
        finally:
            _kill(proc)
    packet = _packet(root, run_id)
    means = {c["candidate_id"]: c["train"] for c in packet["candidates"] if c["train"] is not None}
    assert means[rejected] == max(means.values())  # the best on train...
    best = packet["best"]["candidate_id"]
    assert best != rejected  # ...is not promoted: the best of the others is
    assert means[best] == max(m for cid, m in means.items() if cid != rejected)
    assert packet["stop_reason"] == "stopped by a person (cli): good enough"
    assert (root / "runs" / run_id / "report.md").exists()
    assert held.app.state.calls == 3  # no reflection was asked after the stop


def test_a_pin_makes_the_next_proposals_start_from_the_pinned_candidate(
    tmp_path: Path, held: Model
) -> None:
    root = tmp_path / "ws"
    with toy_container(tmp_path / "calls.log") as toy:
        proc = _start("optimize", "run", *_flags(toy, held.url, root))
        try:
            held.reached()
            run_id = str(_run_id(root))
            events = _events(root, run_id)
            pinned = _baseline(events)
            assert _best(events) != pinned  # the candidate selector would not choose it
            assert "next proposals start from it" in _act(root, "pin", run_id, pinned)
            (applied,) = _applied(root, run_id, 1)
            asked = held.app.state.calls
            assert held.hold is not None
            held.hold.released.set()
            _finish(proc)
        finally:
            _kill(proc)
    later = [e.data for e in _events(root, run_id) if e.type == "iteration" and e.seq > applied.seq]
    assert len(later) >= 3 and all(e["parent"] == pinned for e in later)
    # The reflection model was shown the pinned candidate as the version to improve.
    after = held.requests[asked:]
    assert after and all(f"(candidate {pinned})" in _shown(r) for r in after)


@pytest.mark.parametrize("mode", ["text", "agent", "rule"])
def test_a_note_reaches_the_reflection_model_in_each_mode(
    tmp_path: Path, held: Model, mode: str
) -> None:
    root = tmp_path / "ws"
    with toy_container(tmp_path / "calls.log") as toy:
        proc = _start("optimize", "run", *_flags(toy, held.url, root, mode))
        try:
            held.reached()
            run_id = str(_run_id(root))
            assert "show it to the reflection model" in _act(root, "note", run_id, NOTE)
            _applied(root, run_id, 1)
            asked = held.app.state.calls
            assert held.hold is not None
            held.hold.released.set()
            _finish(proc)
        finally:
            _kill(proc)
    before = held.requests[:asked]
    assert before and not any(NOTE in _shown(r) for r in before)
    first = next(r for r in held.requests[asked:] if NOTE in _shown(r))
    assert "Notes from the person running this optimization" in _shown(first)
    assert bool(first.get("tools")) == (mode == "agent")
    written = [e.data for e in _events(root, run_id) if e.type == "candidate"]
    assert written and {c["mode"] for c in written} == {mode}  # the model answers each mode


def test_a_note_reaches_the_proposer_command(tmp_path: Path) -> None:
    root, record = tmp_path / "ws", tmp_path / "asked.jsonl"
    agent = shlex.join([sys.executable, str(FAKES / "scripted_agent.py"), "--record", str(record)])
    with toy_container(tmp_path / "calls.log") as toy:
        created = _cli(
            "optimize", "create", "--container", toy, "--proposer-command", agent,
            "--max-metric-calls", "120", "--proposals-in-flight", "1", "--seed", "3",
            "--use-merge", "false", "--workspace", str(root),
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        run_id = str(_run_id(root))
        said = _act(root, "note", run_id, NOTE, "--keep")
        assert "every later one" in said and "is not running now" in said
        done = _cli("optimize", "run", run_id, "--workspace", str(root), "--quiet")
        assert done.returncode == 0, done.stderr
    asked = [json.loads(line) for line in record.read_text().splitlines()]
    assert asked and all(NOTE in (a["notes"] or "") for a in asked)
    assert all(NOTE in a["task"] and "`NOTES.md`" in a["task"] for a in asked)


def test_a_paused_run_survives_a_restart_of_the_runner(tmp_path: Path, model: Model) -> None:
    root, log = tmp_path / "ws", tmp_path / "calls.log"
    with toy_container(log, env={"TOY_DELAY": "0.05"}) as toy:
        first = _start("optimize", "run", *_flags(toy, model.url, root))
        try:
            run_id = _until("the run", lambda: _run_id(root), proc=first)
            _until("rollouts paid", lambda: _paid(root, run_id) >= 8, proc=first)
            _act(root, "pause", run_id)
            _applied(root, run_id, 1)
            first.send_signal(signal.SIGTERM)
            first.communicate(timeout=60)
        finally:
            _kill(first)
        assert first.returncode == 143
        committed, sent = _committed(root, run_id), len(rollout_calls(log))
        second = _start("optimize", "run", run_id, "--workspace", str(root), "--quiet")
        try:
            _until(
                "the second runner",
                lambda: _read(root, lambda ws: ws.lease_holder(run_id)),
                proc=second,
            )
            _until("its phase", lambda: _phases(root, run_id) >= 2, proc=second)
            time.sleep(2.0)
            assert len(rollout_calls(log)) == sent  # it started paused: nothing sent
            assert second.poll() is None
            _act(root, "resume", run_id)
            _finish(second)
        finally:
            _kill(second)
    after = rollout_calls(log)[sent:]
    assert after and not committed & set(after), "the resumed run paid again for a rollout"
    assert _packet(root, run_id)["status"] == "completed"


def _committed(root: Path, run_id: str) -> set[tuple[str, str]]:
    """(candidate hash prefix, seed) of every rollout the run stored a score for."""

    async def read(ws: Workspace) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        for candidate in await ws.list_candidates(run_id):
            for r in await ws.rollouts_for_candidate(run_id, candidate.candidate_id):
                if r.status == "ok":
                    out.add((r.candidate_hash[:16], r.seed))
        return out

    return set(_read(root, read))


def _phases(root: Path, run_id: str) -> int:
    """How many ``evaluating_baseline`` phases the run entered (one per execution)."""
    return sum(
        1
        for e in _events(root, run_id)
        if e.type == "phase" and e.data.get("phase") == "evaluating_baseline"
    )


def test_a_paused_run_survives_a_restart_of_serve_and_is_steered_over_rest(
    tmp_path: Path, model: Model
) -> None:
    root, log = tmp_path / "ws", tmp_path / "calls.log"
    with toy_container(log, env={"TOY_DELAY": "0.05"}) as toy:
        config = {
            "containers": [toy], "reflection_model": "fake-reflection",
            "reflection_base_url": model.url, "proposer_mode": "text",
            "max_metric_calls": 400, "proposals_in_flight": 1, "seed": 3, "use_merge": False,
            "max_idle_iterations": 6, "retry_base_delay_s": 0.01,
        }  # fmt: skip
        with serve_process(root) as (url, _):
            created = httpx.post(f"{url}/api/runs", json={"config": config, "start": True})
            assert created.status_code == 201, created.text
            run_id = created.json()["run_id"]
            _until("rollouts paid", lambda: _paid(root, run_id) >= 8)
            paused = httpx.post(
                f"{url}/api/runs/{run_id}/actions", json={"action": "pause", "source": "console"}
            )
            assert paused.status_code == 200 and paused.json()["steering"]["paused"] is True
            _applied(root, run_id, 1)
        sent = len(rollout_calls(log))
        with serve_process(root) as (url, proc):
            _until(
                "the resumed run", lambda: httpx.get(f"{url}/api/runs/{run_id}").json()["active"]
            )
            time.sleep(2.0)
            assert len(rollout_calls(log)) == sent  # resumed paused: nothing sent
            steering = httpx.get(f"{url}/api/runs/{run_id}/steering").json()
            assert steering["paused"] is True
            again = httpx.post(f"{url}/api/runs/{run_id}/actions", json={"action": "pause"})
            assert again.status_code == 409 and "paused already" in again.text
            resumed = httpx.post(
                f"{url}/api/runs/{run_id}/actions", json={"action": "resume", "source": "console"}
            )
            assert resumed.status_code == 200
            _until(
                "the run to complete",
                lambda: httpx.get(f"{url}/api/runs/{run_id}").json()["status"] == "completed",
                timeout=240,
            )
            stop(proc)
    after = rollout_calls(log)[sent:]
    assert after and len(after) == len(set(after))
    events = _events(root, run_id)
    sources = [(e.data["action"], e.data["source"]) for e in events if e.type == "action"]
    assert sources == [("pause", "console"), ("resume", "console")]
    assert os.path.exists(root / "runs" / run_id / "evidence.json")

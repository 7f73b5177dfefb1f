"""The chaos bench's processes: containers, CLI runs and ``serve`` on 127.0.0.1, all captured.

Every process is started by the bench and ended by its pid. What our own processes print
(CLI stdout and stderr, the service's log) and what the service answers is written under the
scenario's ``out`` folder, which the audit greps for the planted secrets along with the
workspace; the containers' logs go to ``peers`` (a container knows its own token).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chaos_audit as audit
import httpx

from optimizer.testing import free_port, wait_http
from schemas import RunRecord
from workspace import Workspace

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CLI = [sys.executable, "-m", "optimizer.cli"]
# Planted secrets: none looks like a key, so only the scrubber's knowledge can mask them.
REFLECTION_KEY = "quartz meadow 8841 kettle"
CONTAINER_TOKEN = "oliveHarbor2931lantern"
URL_PASSWORD = "url-pass-5521-birch"
URL_API_KEY = "apikey-in-query-7730-fjord"
SERVICE_ENV_SECRET = "db-password-0417-granite"
SERVICE_TOKEN = "serve-token-6607-cobalt"


@dataclass
class Scene:
    """One scenario's folders, planted secrets, processes to audit and expectations."""

    name: str
    root: Path
    reflection: str  # the scripted reflection model's base URL
    secrets: dict[str, str] = field(default_factory=dict)
    logs: list[Path] = field(default_factory=list)
    lost: set[audit.Pair] = field(default_factory=set)
    hostile: bool = False
    failed: list[str] = field(default_factory=list)
    outputs: int = 0

    @property
    def ws(self) -> Path:
        return self.root / "ws"

    @property
    def out(self) -> Path:
        """Everything the bench's own processes printed or were served (grepped)."""
        return self.root / "out"

    @property
    def peers(self) -> Path:
        """The containers' logs (not grepped: a container knows its own token)."""
        return self.root / "peers"

    def check(self, what: str, ok: bool) -> None:
        """Record an expectation of the scenario; a false one fails the verdict."""
        if not ok:
            self.failed.append(what)

    def output_file(self, label: str) -> Path:
        self.outputs += 1
        return self.out / f"{self.outputs:02d}-{label}"


@dataclass(frozen=True)
class Container:
    url: str
    log: Path


@contextlib.contextmanager
def container(
    scene: Scene, *options: str, token: str | None = CONTAINER_TOKEN
) -> Iterator[Container]:
    """A chaos container process on 127.0.0.1; stopped by its pid on exit."""
    port = free_port()
    log = scene.peers / f"calls-{port}.jsonl"
    cmd = [
        sys.executable,
        str(BENCH / "chaos_container.py"),
        "--port",
        str(port),
        "--log",
        str(log),
    ]
    if token:
        cmd += ["--token", token]
        scene.secrets["container token"] = token
    with (scene.peers / f"container-{port}.txt").open("wb") as sink:
        proc = subprocess.Popen([*cmd, *options], cwd=ROOT, stdout=sink, stderr=sink)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_health(url, token, proc)
        scene.logs.append(log)
        yield Container(url, log)
    finally:
        _stop(proc)


def _wait_health(url: str, token: str | None, proc: subprocess.Popen[bytes]) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit(f"the chaos container exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", headers=headers, timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise SystemExit(f"the chaos container at {url} did not start")


def _stop(proc: subprocess.Popen[Any]) -> None:
    """End a process this bench started (SIGTERM, then SIGKILL) and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _env(scene: Scene, **extra: str) -> dict[str, str]:
    """The environment of our processes: no inherited GEPA_* settings; the planted reflection
    key and container token (every run knows both, so both must stay out of what it writes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEPA_")}
    env.pop("OPENAI_API_KEY", None)
    scene.secrets |= {"reflection key": REFLECTION_KEY, "container token": CONTAINER_TOKEN}
    planted = {"CHAOS_REFLECTION_KEY": REFLECTION_KEY, "GEPA_CONTAINER_TOKEN": CONTAINER_TOKEN}
    return {**env, **planted, **extra}


def run_flags(scene: Scene, url: str, *extra: str, reflection: str | None = None) -> list[str]:
    """``optimize run`` of a fresh run on ``url`` with the scripted reflection model."""
    return [
        "optimize", "run", "--container", url, "--reflection-model", "fake-reflection",
        "--reflection-base-url", reflection or scene.reflection,
        "--reflection-api-key-env", "CHAOS_REFLECTION_KEY", "--proposer-mode", "text",
        "--max-metric-calls", "400", "--seed", "3", "--use-merge", "false",
        "--max-idle-iterations", "6", "--retry-base-delay", "0.01", "--concurrency", "4",
        "--max-response-mib", "2", "--workspace", str(scene.ws), "--quiet", *extra,
    ]  # fmt: skip


@dataclass(frozen=True)
class Running:
    """A CLI process of the bench and the file its stdout and stderr go to."""

    proc: subprocess.Popen[bytes]
    output: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def printed(self) -> str:
        return self.output.read_text(errors="replace")


def start(scene: Scene, args: list[str], **env: str) -> Running:
    """A CLI process whose stdout and stderr are captured under ``scene.out``."""
    sink = scene.output_file(args[0] + ("-" + args[1] if len(args) > 1 else ""))
    with sink.open("wb") as fh:
        proc = subprocess.Popen(
            [*CLI, *args], cwd=ROOT, stdout=fh, stderr=fh, env=_env(scene, **env)
        )
    return Running(proc, sink)


def finish(run: Running, timeout: float = 600) -> tuple[int, str]:
    """Wait for a CLI process: (exit code, what it printed)."""
    try:
        code = run.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(run.proc)
        code = -1
    return code, run.printed()


def cli(scene: Scene, *args: str, **env: str) -> tuple[int, str]:
    """Run a CLI command to its end: (exit code, what it printed)."""
    return finish(start(scene, list(args), **env))


async def _progress(ws: Workspace) -> tuple[str, int]:
    runs = await ws.list_runs()
    if not runs:
        return "", 0
    return runs[0].run_id, (await ws.count_trials(runs[0].run_id))["paid"]


def wait_paid(scene: Scene, run: Running, n: int) -> str:
    """Wait until the (only) run paid ``n`` rollouts; its id."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and run.proc.poll() is None:
        if (scene.ws / "workspace.sqlite").exists():
            rid, paid = audit.read_workspace(scene.ws, _progress)
            if paid >= n:
                return rid
        time.sleep(0.2)
    raise SystemExit(f"{scene.name}: the run did not pay {n} rollouts ({finish(run, 5)[1][-800:]})")


def killed(scene: Scene, run: Running, sig: int) -> int:
    """Send ``sig`` to a CLI process, reap it, and note the rollouts its death lost.

    Lost: answered by a container but not committed, which only the rollouts in flight can
    be (``--concurrency`` 4, and at most as many waiting for the committer's transaction).
    """
    os.kill(run.pid, sig)
    code, _ = finish(run, 120)
    time.sleep(0.3)  # requests of the dead process still in transit reach the log
    lost = set().union(*(audit.lost_at_kill(scene.ws, log) for log in scene.logs))
    scene.check(f"at most 8 rollouts lost with the killed process ({len(lost)})", len(lost) <= 8)
    scene.lost |= lost
    return code


def run_record(scene: Scene, rid: str) -> RunRecord:
    return audit.read_workspace(scene.ws, lambda ws: ws.get_run(rid))


def only_run(scene: Scene) -> RunRecord:
    return audit.read_workspace(scene.ws, lambda ws: ws.list_runs())[0]


def evidence(scene: Scene, rid: str) -> dict[str, Any]:
    path = scene.ws / "runs" / rid / "evidence.json"
    return json.loads(path.read_text()) if path.exists() else {}


def completed(scene: Scene, rid: str) -> bool:
    return bool(evidence(scene, rid).get("status") == "completed")


@contextlib.contextmanager
def serve(scene: Scene, *options: str, **env: str) -> Iterator[tuple[str, Running]]:
    """``gepa-runtime serve`` on the scene's workspace: (its URL, the process). Its output
    is captured and grepped."""
    port = free_port()
    if "--token" in options:
        scene.secrets["service token"] = options[options.index("--token") + 1]
    sink = scene.output_file("serve")
    cmd = [*CLI, "serve", "--workspace", str(scene.ws), "--port", str(port), *options]
    with sink.open("wb") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=fh, env=_env(scene, **env))
    try:
        wait_http(f"http://127.0.0.1:{port}/api/health", timeout=60, proc=proc)
        yield f"http://127.0.0.1:{port}", Running(proc, sink)
    finally:
        _stop(proc)


def api(scene: Scene, method: str, url: str, token: str | None = None, **kw: Any) -> httpx.Response:
    """One request to the service; its answer is kept under ``scene.out`` (grepped)."""
    headers = kw.pop("headers", {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    answer = httpx.request(method, url, headers=headers, timeout=30, **kw)
    scene.output_file("api").write_bytes(
        f"{method} {url} -> {answer.status_code}\n".encode() + answer.content
    )
    return answer

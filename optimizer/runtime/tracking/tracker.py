"""Experiment tracking in MLflow: one MLflow run per optimization, fed by the run's events.

``--mlflow URI`` (``config.mlflow_tracking_uri``), else ``GEPA_MLFLOW_TRACKING_URI`` or the
standard ``MLFLOW_TRACKING_URI`` of the running process, turns it on; the experiment is
``MLFLOW_EXPERIMENT_NAME`` (default ``gepa-runtime``) and the MLflow run is named after the
run id. The runtime knows nothing of MLflow: ``mlflow_tracking`` subscribes a listener to the
run's ``EventSink`` for the length of a run. What gets logged (see
:mod:`optimizer.runtime.tracking.ops`): the config without secrets as params, per-iteration
metrics, tags (program, method, phase, promoted), and at the end every candidate's texts and
scores, ``evidence.json`` and ``report.md`` as artifacts; with ``--mlflow-prompt NAME``, the
best's text as a new version of that prompt in the registry
(:mod:`optimizer.runtime.tracking.prompts`).

MLflow calls block, so they run in a thread (:mod:`optimizer.runtime.tracking.worker`); a run
waits for them only at its end, at most ``FINISH_TIMEOUT_S``. A tracking server that is down
or fails costs one warning (an event, stderr, the report) and nothing else. The MLflow run's
id is kept in the run folder (``mlflow.json``, with the warnings), so a resumed run continues
the same MLflow run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future
from importlib.util import find_spec
from typing import Any

import httpx

from optimizer.runtime.accounts.events import EventSink
from optimizer.runtime.tracking.ops import (
    Artifact,
    End,
    EventRecorder,
    Op,
    Tags,
    candidate_artifacts,
    config_params,
    mlflow_status,
)
from optimizer.runtime.tracking.prompts import RegisterPrompt, prompt_export
from optimizer.runtime.tracking.worker import MlflowWorker, Start
from schemas import Event, RunConfig, UserError
from workspace import Workspace

__all__ = [
    "FINISH_TIMEOUT_S",
    "STATE_FILE",
    "mlflow_tracking",
    "require_mlflow",
    "require_prompt_registry",
    "tracking_uri",
]

URI_ENVS = ("GEPA_MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_URI")
DEFAULT_EXPERIMENT = "gepa-runtime"
STATE_FILE = "mlflow.json"
PROBE_TIMEOUT_S = 5.0
FINISH_TIMEOUT_S = 60.0  # what a finished run waits for its last MLflow uploads
CANCELLED_TIMEOUT_S = 5.0  # ... and a cancelled one (someone pressed Ctrl-C)
INSTALL = "pip install 'gepa-runtime[mlflow]'"

Warn = Callable[[str], Awaitable[None]]


def tracking_uri(config: RunConfig) -> str | None:
    """The MLflow tracking URI of a run: its config, else the process's environment."""
    if config.mlflow_tracking_uri:
        return config.mlflow_tracking_uri
    return next((os.environ[e] for e in URI_ENVS if os.environ.get(e)), None)


def require_mlflow() -> None:
    """``UserError`` when the MLflow client is not installed (checked before a run starts)."""
    if find_spec("mlflow") is None:
        raise UserError(f"--mlflow needs the MLflow client: {INSTALL}")


def require_prompt_registry(config: RunConfig) -> None:
    """``UserError`` when ``--mlflow-prompt`` has no tracking server or client to register with."""
    if tracking_uri(config) is None:
        raise UserError(
            "--mlflow-prompt registers the winner on an MLflow tracking server: pass --mlflow "
            "URI (or set MLFLOW_TRACKING_URI)"
        )
    if find_spec("mlflow") is None:
        raise UserError(f"--mlflow-prompt needs the MLflow client: {INSTALL}")


@contextlib.asynccontextmanager
async def mlflow_tracking(
    config: RunConfig, workspace: Workspace, run_id: str, events: EventSink, warn: Warn
) -> AsyncIterator[None]:
    """Track the run executed inside this block in MLflow, if a tracking URI is set."""
    uri = tracking_uri(config)
    if uri is None:
        yield
        return
    tracking = _Tracking(uri, config, workspace, run_id, warn)
    await tracking.open()
    events.subscribe(tracking)
    try:
        yield
    finally:
        await tracking.close((await workspace.get_run(run_id)).status)


class _Tracking:
    """The listener of one run: turns its events into MLflow operations for the worker."""

    def __init__(
        self, uri: str, config: RunConfig, workspace: Workspace, run_id: str, warn: Warn
    ) -> None:
        self._uri, self._config, self._ws, self._run_id = uri, config, workspace, run_id
        self._shown_uri = workspace.scrubber.text(uri)
        self._warn_run = warn
        self._loop = asyncio.get_running_loop()
        self._recorder = EventRecorder()
        self._worker: MlflowWorker | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._warnings: list[str] = []

    async def open(self) -> None:
        """Check the client and the server, then start (or reopen) the MLflow run in the thread."""
        stored = await self._stored()
        if find_spec("mlflow") is None:
            await self._warn(f"is off: the MLflow client is not installed ({INSTALL})")
            return
        problem = await _unreachable(self._uri)
        if problem:
            await self._warn(f"is off: the server does not answer ({problem})")
            return
        same_server = stored.get("tracking_uri") == self._shown_uri
        self._worker = MlflowWorker(self._uri, self._failed)
        method = self._config.method
        started = self._worker.start(
            Start(
                experiment=os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT,
                run_name=self._run_id,
                resume_run_id=stored.get("run_id") if same_server else None,
                tags={"gepa.run_id": self._run_id, "gepa.method": method},
                params=config_params(self._ws.scrubber.value(self._config.redacted())),
            )
        )
        started.add_done_callback(self._started)

    def __call__(self, event: Event) -> None:
        """The ``EventSink`` listener: never blocks, never raises."""
        worker = self._worker
        if worker is None or worker.failure is not None:
            return
        try:
            ops = self._recorder.ops(event)
        # An event the mapping cannot read is a bug of the tracking, which must not end the
        # run it watches (this runs inside the run's emit): tracking stops with a warning.
        except Exception as exc:  # noqa: BLE001
            worker.failure = f"cannot log a {event.type!r} event: {type(exc).__name__}: {exc}"
            self._spawn(self._warn(f"stopped: {worker.failure}"))
            return
        for op in ops:
            worker.put(op)

    async def close(self, status: str) -> None:
        """Queue the end of the run (artifacts, status), wait for it within a bound, save state."""
        worker = self._worker
        if worker is not None:
            for op in await self._final_ops(status):
                worker.put(op)
            timeout = CANCELLED_TIMEOUT_S if status == "cancelled" else FINISH_TIMEOUT_S
            # asyncio.wait, not wait_for: a timeout must not cancel the worker's own future.
            done, _ = await asyncio.wait([asyncio.wrap_future(worker.close())], timeout=timeout)
            if not done:
                await self._warn(
                    f"did not finish within {timeout:.0f} s; what it had not logged is in "
                    f"{self._ws.run_dir(self._run_id)}"
                )
        while self._tasks:
            await asyncio.gather(*list(self._tasks))
        await self._save()

    async def _final_ops(self, status: str) -> list[Op]:
        ended = mlflow_status(status)
        if ended is None:  # taken over by another process, which logs the rest
            return []
        if status == "cancelled":  # someone waits for the prompt; the resume logs the rest
            return [Tags({"gepa.status": status}), End(ended)]
        ops: list[Op] = []
        packet: dict[str, Any] | None = None
        files = await self._ws.list_files(self._run_id)
        if status == "completed" and "evidence.json" in files:
            evidence = (await self._ws.read_file(self._run_id, "evidence.json")).decode()
            packet = json.loads(evidence)
            ops.append(Artifact("evidence/evidence.json", evidence))
        if status == "completed" and "report.md" in files:
            report = (await self._ws.read_file(self._run_id, "report.md")).decode()
            ops.append(Artifact("evidence/report.md", report))
        records = await self._ws.list_candidates(self._run_id)
        ops[:0] = candidate_artifacts(records, packet, self._recorder.scores)
        if packet is not None and self._config.mlflow_prompt:
            name, alias = self._config.mlflow_prompt, self._config.mlflow_prompt_alias
            ops.append(RegisterPrompt(prompt_export(packet, name, alias)))
        ops += [Tags({"gepa.status": status}), End(ended)]
        return [self._scrub(op) for op in ops]

    def _scrub(self, op: Op) -> Op:
        """Candidate texts and files already went through the workspace; this is belt and braces."""
        if isinstance(op, Artifact):
            return Artifact(op.path, self._ws.scrubber.text(op.text))
        return op

    # the MLflow run's id and the warnings, kept in the run folder

    async def _stored(self) -> dict[str, Any]:
        if STATE_FILE not in await self._ws.list_files(self._run_id):
            return {}
        try:
            data = json.loads(await self._ws.read_file(self._run_id, STATE_FILE))
        except ValueError:  # a damaged file: start a new MLflow run rather than fail the run
            return {}
        return data if isinstance(data, dict) else {}

    async def _save(self) -> None:
        worker = self._worker
        await self._ws.write_json(
            self._run_id,
            STATE_FILE,
            {
                "tracking_uri": self._shown_uri,
                "experiment_id": worker.experiment_id if worker else None,
                "run_id": worker.run_id if worker else None,
                "warnings": self._warnings,
            },
        )

    def _started(self, started: Future[Any]) -> None:
        """In the worker thread: save the MLflow run's id as soon as it exists (a later kill
        then still resumes into it)."""
        if not started.cancelled() and started.exception() is None:
            self._on_loop(self._save)

    # warnings

    def _failed(self, reason: str) -> None:
        """In the worker thread: the first MLflow failure, reported on the event loop."""
        self._on_loop(lambda: self._warn(f"stopped: {reason}"))

    def _on_loop(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` on the run's event loop, from the worker thread."""
        # A worker that outlived its bounded wait may answer after the loop closed: too late
        # for the run, which ended with its own warning.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(lambda: self._spawn(work()))

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _warn(self, what: str) -> None:
        message = f"MLflow tracking at {self._shown_uri} {what}; the run goes on without it"
        self._warnings.append(message)
        await self._warn_run(message)


async def _unreachable(uri: str) -> str | None:
    """Why an http(s) tracking server cannot be reached, or ``None``.

    MLflow's client retries a refused connection with backoff for minutes; a quick look
    first keeps a server that is down from holding anything up. Any HTTP answer counts as up.
    """
    if not uri.startswith(("http://", "https://")):
        return None
    try:
        async with httpx.AsyncClient(timeout=PROBE_TIMEOUT_S) as http:
            await http.get(uri.rstrip("/") + "/health")
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"[:300]
    return None

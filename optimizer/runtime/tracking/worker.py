"""The thread that talks to MLflow: every MLflow call of a run, in order, off the event loop.

MLflow's client blocks (HTTP with retries and backoff that can last minutes), so a run only
queues operations here and never waits for them, except once at its end, for a bounded time.
The first failure stops the tracking for good and is reported once through ``on_failure``
(called in this thread): a tracking server that goes down costs the run nothing but its
MLflow record, which the run's own evidence packet does not need.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from optimizer.runtime.tracking.ops import Artifact, End, Metrics, Op, Params, Tags
from optimizer.runtime.tracking.prompts import RegisterPrompt, register_prompt

__all__ = ["MlflowWorker", "Start"]

_Job = Callable[[Any], Any]


@dataclass(frozen=True)
class Start:
    """Where to log: the experiment, the GEPA run, and the MLflow run to continue (resume)."""

    experiment: str
    run_name: str
    resume_run_id: str | None
    tags: Mapping[str, str]
    params: Mapping[str, str]


class MlflowWorker:
    """One daemon thread and one ``MlflowClient`` for one run."""

    def __init__(self, uri: str, on_failure: Callable[[str], None]) -> None:
        self.uri = uri
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        self.failure: str | None = None
        self._on_failure = on_failure
        self._jobs: queue.SimpleQueue[tuple[_Job, Future[Any]] | None] = queue.SimpleQueue()
        self._closed: Future[None] = Future()
        self._thread = threading.Thread(target=self._loop, name="gepa-mlflow", daemon=True)
        self._thread.start()

    def start(self, start: Start) -> Future[Any]:
        """Create the MLflow run (or reopen ``start.resume_run_id``); resolves to its id."""
        return self._submit(lambda client: self._start(client, start))

    def put(self, op: Op) -> None:
        """Queue one operation on the run (dropped once tracking has failed)."""
        if self.failure is None:
            self._submit(lambda client: _apply(client, self._require_run(), op))

    def close(self) -> Future[None]:
        """Finish what is queued, then stop; resolves when the thread is done."""
        self._jobs.put(None)
        return self._closed

    def _submit(self, job: _Job) -> Future[Any]:
        done: Future[Any] = Future()
        self._jobs.put((job, done))
        return done

    def _require_run(self) -> str:
        if self.run_id is None:
            raise RuntimeError("no MLflow run: starting it failed")
        return self.run_id

    def _loop(self) -> None:
        client: Any = None
        while (item := self._jobs.get()) is not None:
            job, done = item
            if self.failure is not None:
                done.cancel()
                continue
            try:
                client = client or _client(self.uri)
                done.set_result(job(client))
            # Any failure of the tracking library (connection, HTTP error, a value it refuses,
            # a missing package) ends the tracking, never the run: it is reported, not retried.
            except Exception as exc:  # noqa: BLE001
                self.failure = f"{type(exc).__name__}: {exc}"[:500]
                done.set_exception(exc)
                self._on_failure(self.failure)
        self._closed.set_result(None)

    def _start(self, client: Any, start: Start) -> str:
        from mlflow.entities import Param, RunTag

        run = _reopen(client, start.resume_run_id)
        if run is None:
            experiment = client.get_experiment_by_name(start.experiment)
            experiment_id = (
                experiment.experiment_id
                if experiment is not None
                else client.create_experiment(start.experiment)
            )
            run = client.create_run(experiment_id, run_name=start.run_name, tags=dict(start.tags))
        self.run_id, self.experiment_id = run.info.run_id, run.info.experiment_id
        known = run.data.params
        client.log_batch(
            self.run_id,
            params=[Param(k, v) for k, v in start.params.items() if k not in known],
            tags=[RunTag(k, v) for k, v in start.tags.items()],
        )
        return str(self.run_id)


def _client(uri: str) -> Any:
    # MLflow prints "View run ... at URL" on stdout when a run ends, among the CLI's result
    # lines; the run's MLflow id is in runs/<id>/mlflow.json.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    from mlflow import MlflowClient  # imported here: it takes a second, off the event loop

    return MlflowClient(tracking_uri=uri)


def _reopen(client: Any, run_id: str | None) -> Any:
    """The stored MLflow run, set running again; ``None`` when there is none to continue."""
    if run_id is None:
        return None
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(run_id)
    except MlflowException:  # deleted for good, or another server: start a new MLflow run
        return None
    if run.info.lifecycle_stage != "active":
        return None
    client.update_run(run_id, status="RUNNING")
    return run


def _apply(client: Any, run_id: str, op: Op) -> None:
    from mlflow.entities import Metric, Param, RunTag

    if isinstance(op, Metrics):
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, op.step) for k, v in op.values.items()]
        client.log_batch(run_id, metrics=metrics)
    elif isinstance(op, Params):
        known = client.get_run(run_id).data.params
        params = [Param(k, v) for k, v in op.values.items() if k not in known]
        if params:
            client.log_batch(run_id, params=params)
    elif isinstance(op, Tags):
        client.log_batch(run_id, tags=[RunTag(k, v) for k, v in op.values.items()])
    elif isinstance(op, Artifact):
        client.log_text(run_id, op.text, op.path)
    elif isinstance(op, End):
        client.set_terminated(run_id, op.status)
    elif isinstance(op, RegisterPrompt):
        register_prompt(client, op.export, {**op.extra_tags, "gepa.mlflow_run_id": run_id})

"""The service's runs: each one an asyncio task, started, cancelled, and resumed after a restart.

Runs share the service's one ``Workspace`` (its single SQLite writer) and event loop, so
concurrent runs never block each other. A run the service starts gets an owner file
(``runs/<id>/service.json``); on startup the service resumes its own runs whose status is
still ``running`` (it was stopped or killed mid-run). Runs a CLI process is executing in the
same workspace are never touched. A service shutdown leaves its runs ``running`` (so they
resume), while a user's cancel marks the run ``cancelled``.

Secrets (the container token) are kept in memory only, as everywhere: after a restart a run
gets the service's own ``--container-token`` / ``GEPA_CONTAINER_TOKEN``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr

from optimizer.runtime.lifecycle.branch import create_branch, find_candidate
from optimizer.runtime.lifecycle.run_config import absolute_paths, stored_config
from optimizer.runtime.steering import Steering, record_action
from optimizer.searches import run_stored
from optimizer.service.digest import Digests
from optimizer.service.policy import PolicyRefusal, RunPolicy
from schemas import (
    Action,
    Event,
    GepaError,
    RunConfig,
    RunLeased,
    RunRecord,
    RunStatus,
    UserError,
)
from workspace import Workspace, leased_message

__all__ = ["OWNER_FILE", "RunConflict", "RunManager"]

logger = logging.getLogger("gepa.service")

OWNER_FILE = "service.json"
TERMINAL = frozenset({"completed", "failed", "cancelled"})


class RunConflict(UserError):
    """The run is not in a state that allows the request (already running, completed, ...)."""


@dataclass
class _Active:
    task: asyncio.Task[None]
    cancel_requested: bool = False


class RunManager:
    """Creates, starts, cancels and resumes runs of one workspace as asyncio tasks."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        container_token: str | None = None,
        policy: RunPolicy | None = None,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.workspace = workspace
        self.policy = policy or RunPolicy()
        self.digests = Digests(workspace)
        self.closing = asyncio.Event()
        self._http = http
        self._default = (
            RunConfig(container_token=SecretStr(container_token)) if container_token else None
        )
        self._secrets: dict[str, RunConfig] = {}
        self._active: dict[str, _Active] = {}
        self._wakeups: dict[str, asyncio.Event] = {}
        self._starting = asyncio.Lock()

    # lifecycle

    async def startup(self) -> list[str]:
        """Resume this service's runs left ``running``; returns their ids."""
        resumed = []
        for record in await self.workspace.list_runs():
            if record.status != "running":
                continue
            if OWNER_FILE not in await self.workspace.list_files(record.run_id):
                logger.info(
                    "run %s is running outside this service; not resuming it", record.run_id
                )
                continue
            if await self.workspace.lease_holder(record.run_id) is not None:
                logger.info(
                    "run %s is held by another live process; not resuming it", record.run_id
                )
                continue
            try:
                await self.start(record.run_id, resumed=True)
            except PolicyRefusal as exc:  # the operator narrowed the policy since it started
                await self._fail(record.run_id, f"not resumed: {exc}")
                continue
            resumed.append(record.run_id)
        return resumed

    async def shutdown(self) -> None:
        """Stop every run task; they stay ``running`` so the next start resumes them."""
        self.closing.set()
        for run_id in list(self._wakeups):
            self._wake(run_id)
        tasks = [a.task for a in self._active.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    # queries

    @property
    def http(self) -> httpx.AsyncClient | None:
        """The client container requests go through (``None``: each run makes its own)."""
        return self._http

    def is_active(self, run_id: str) -> bool:
        """Whether this service is executing ``run_id`` now."""
        return run_id in self._active

    async def wait_for_news(self, run_id: str, timeout: float) -> None:
        """Return when ``run_id`` logs an event here, the service closes, or after ``timeout``."""
        if self.closing.is_set():
            return
        event = self._wakeups.setdefault(run_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    # commands

    async def create(self, config: RunConfig, run_id: str | None = None) -> RunRecord:
        """Store a new run the policy allows (paths made absolute; the token kept in memory only);
        a branch (``branch_of``) of a candidate this workspace holds."""
        self.policy.check(config)
        if config.branch_of is not None:
            await find_candidate(
                self.workspace, config.branch_of.run_id, config.branch_of.candidate_id
            )
        record = await self.workspace.create_run(absolute_paths(config), run_id)
        if config.container_token is not None:
            self._secrets[record.run_id] = RunConfig(container_token=config.container_token)
        return record

    async def branch(
        self,
        run_id: str,
        candidate_id: str,
        overrides: Mapping[str, Any],
        new_run_id: str | None = None,
    ) -> RunRecord:
        """Store a branch of ``run_id`` at ``candidate_id`` that the policy allows
        (:func:`optimizer.runtime.lifecycle.branch.create_branch`); it gets the container
        token given, or else the one its origin was given here (kept in memory only)."""
        record = await create_branch(
            self.workspace, run_id, candidate_id, overrides, new_run_id, check=self.policy.check
        )
        token = overrides.get("container_token")
        secrets = RunConfig(container_token=token) if token else self._secrets.get(run_id)
        if secrets is not None:
            self._secrets[record.run_id] = secrets
        return record

    async def start(self, run_id: str, *, resumed: bool = False) -> RunRecord:
        """Start (or resume) ``run_id`` in the background."""
        async with self._starting:  # two concurrent starts of one run must not both pass the checks
            return await self._start(run_id, resumed=resumed)

    async def _start(self, run_id: str, *, resumed: bool) -> RunRecord:
        record = await self.workspace.get_run(run_id)
        if run_id in self._active:
            raise RunConflict(f"run {run_id} is already running; follow it at /runs/{run_id}")
        if record.status == "completed":
            raise RunConflict(
                f"run {run_id} already completed; read its evidence at /api/runs/{run_id}/evidence "
                "or create a new run"
            )
        if self.closing.is_set():
            raise RunConflict("the service is shutting down; start the run after it restarts")
        self.policy.check(stored_config(record))  # e.g. a run created by the CLI
        holder = await self.workspace.lease_holder(run_id)
        if holder is not None:  # a CLI (or another service) executes it right now
            raise RunConflict(leased_message(holder))
        owner = {"owner": "gepa-runtime serve", "pid": os.getpid(), "started_at": time.time()}
        await self.workspace.write_file(run_id, OWNER_FILE, json.dumps(owner))
        record = await self.workspace.update_run(run_id, status="running", error="")
        await self._emit(run_id, "status", {"status": "resumed" if resumed else "started"})
        task = asyncio.create_task(self._execute(run_id), name=f"run:{run_id}")
        self._active[run_id] = _Active(task)
        return record

    async def cancel(self, run_id: str) -> RunRecord:
        """Cancel a running run; it is marked ``cancelled`` and can be started again later."""
        record = await self.workspace.get_run(run_id)
        active = self._active.get(run_id)
        if active is None:
            raise RunConflict(
                f"run {run_id} is not running here (status {record.status}); nothing to cancel"
            )
        active.cancel_requested = True
        active.task.cancel()
        await asyncio.wait([active.task])
        return await self.workspace.get_run(run_id)

    async def act(self, run_id: str, action: Action) -> tuple[Event, Steering]:
        """Record a person's action on ``run_id`` (``ActionRefused`` when it does not fit);
        the stored event and the steering with it. The process executing the run, this
        service or another, reads it from the log; followers of the run's events get it now."""
        event, steering = await record_action(self.workspace, run_id, action)
        self._on_event(event)
        return event, steering

    async def delete(self, run_id: str) -> dict[str, int]:
        """Delete a run that is not running (rows and folder); counts of the rows deleted."""
        async with self._starting:  # no start may slip in between the check and the delete
            record = await self.workspace.get_run(run_id)
            if run_id in self._active:
                raise RunConflict(
                    f"run {run_id} is running here: cancel it first "
                    f"(POST /api/runs/{run_id}/cancel), then delete it"
                )
            if record.status == "running":
                raise RunConflict(
                    f"run {run_id} has status running but this service is not running it: stop "
                    "the process that runs it first; if that process is gone, resume the run "
                    f"here (POST /api/runs/{run_id}/start), cancel it, then delete it"
                )
            counts = await self.workspace.delete_run(run_id)
        self.digests.forget(run_id)
        self._secrets.pop(run_id, None)
        self._wake(run_id)
        return counts

    # execution

    async def _execute(self, run_id: str) -> None:
        active = self._active[run_id]
        try:
            await run_stored(
                self.workspace,
                run_id,
                secrets=self._secrets.get(run_id, self._default),
                on_event=self._on_event,
                http=self._http,
            )
        except asyncio.CancelledError:
            if active.cancel_requested:
                await asyncio.shield(self._finish(run_id, "cancelled", "cancelled by user"))
            else:  # service shutdown: leave it running so the next start resumes it
                await asyncio.shield(self._finish(run_id, "running", ""))
            raise
        except RunLeased as exc:  # another process executes it: its status is not ours to set
            logger.warning("run %s not run here: %s", run_id, exc)
            await self._emit(run_id, "status", {"status": "refused", "error": str(exc)})
        except (GepaError, OSError, httpx.HTTPError) as exc:
            logger.warning("run %s failed: %s", run_id, exc)
            await self._fail(run_id, str(exc))
        except Exception as exc:  # noqa: BLE001 - task boundary: recorded on the run, not swallowed
            logger.exception("run %s crashed", run_id)
            await self._fail(
                run_id, f"internal error ({type(exc).__name__}: {exc}); see the service log"
            )
        finally:
            self._active.pop(run_id, None)
            self._wake(run_id)

    async def _finish(self, run_id: str, status: RunStatus, error: str) -> None:
        await self.workspace.update_run(run_id, status=status, error=error)
        await self._emit(
            run_id, "status", {"status": "interrupted" if status == "running" else status}
        )

    async def _fail(self, run_id: str, message: str) -> None:
        """Mark a failure run_optimization did not record (e.g. the module did not load)."""
        record = await self.workspace.get_run(run_id)
        if record.status != "failed":
            await self.workspace.update_run(run_id, status="failed", phase="failed", error=message)
            await self._emit(run_id, "phase", {"phase": "failed", "error": message})

    async def _emit(self, run_id: str, kind: str, data: dict[str, object]) -> None:
        self._on_event(await self.workspace.append_event(run_id, kind, data))

    def _on_event(self, event: Event) -> None:
        self._wake(event.run_id)

    def _wake(self, run_id: str) -> None:
        waiter = self._wakeups.pop(run_id, None)
        if waiter is not None:
            waiter.set()

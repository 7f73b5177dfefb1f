"""The runtime's two entry points, bound to a registry of search methods: ``Runner``.

    runner = Runner(SEARCHES)                      # optimizer.searches binds the built-in one
    result = await runner.run_optimization(config, workspace=".gepa")   # new (or run_id=...)
    result = await runner.run_stored(ws, run_id, secrets=config)        # its --module served

``run_optimization`` creates a run from a config, or resumes one by id, and executes it
under its lease (:class:`optimizer.runtime.lifecycle.run.Run`); ``run_stored`` executes a stored run
and serves its ``--module`` in this process first (:mod:`optimizer.runtime.lifecycle.embedded`). The
config each executes is resolved by :mod:`optimizer.runtime.lifecycle.run_config`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from optimizer.runtime.lifecycle.embedded import container_for
from optimizer.runtime.lifecycle.lease import hold_lease
from optimizer.runtime.lifecycle.run import Run, RunResult
from optimizer.runtime.lifecycle.run_config import know_secrets, resumed_config, stored_config
from optimizer.runtime.lifecycle.run_inputs import resolve_inputs
from optimizer.runtime.search.deps import ProposerLike
from optimizer.runtime.search.strategy import Searches, SearchMethod, method_of
from optimizer.runtime.tracking import mlflow_tracking
from schemas import RunConfig, RunLeased, UserError
from workspace import Workspace, leased_message

__all__ = ["Runner"]


@dataclass(frozen=True)
class Runner:
    """The runtime's entry points with ``searches`` plugged in: ``config.method`` -> its search.

    The runtime knows no method; :mod:`optimizer.searches` binds the built-in ones
    (``optimizer.run_optimization`` is its ``run_optimization``).
    """

    searches: Searches

    async def run_optimization(
        self,
        config: RunConfig | None = None,
        *,
        workspace: Workspace | str | Path = ".gepa",
        run_id: str | None = None,
        proposer: ProposerLike | None = None,
        http: httpx.AsyncClient | None = None,
        on_event: Callable[..., None] | None = None,
        method: SearchMethod | None = None,
    ) -> RunResult:
        """Run (or resume, with ``run_id``) an optimization and write its evidence packet.

        ``method`` runs the search instead of the registry's entry for ``config.method``
        (e.g. ``GepaMethod(candidate_selector=MySelector())``: your own parts).

        ``config`` is required for a new run; for a resumed run the stored config is used and
        ``config`` only supplies secrets (the container token), which are never stored, and
        container URLs. ``RunLeased`` while another live process executes the run. A method
        the registry lacks is refused before the run is created.
        """
        if config is not None and method is None:
            method_of(self.searches, config)
        owns = not isinstance(workspace, Workspace)
        ws = Workspace(workspace) if not isinstance(workspace, Workspace) else workspace
        if owns:
            await ws.open()
        try:
            new = run_id is None
            if run_id is None:
                if config is None:
                    raise UserError(
                        "a new run needs a config (containers, reflection model, budget)"
                    )
                know_secrets(ws, config)
                run_id = (await ws.create_run(config)).run_id
            async with hold_lease(ws, run_id) as held:
                record = await ws.get_run(run_id)  # read under the lease: nobody else changes it
                cfg = config if new and config is not None else resumed_config(ws, record, config)
                know_secrets(ws, cfg)
                listeners = [on_event] if on_event else []
                chosen = method or method_of(self.searches, cfg)
                run = Run(cfg, record, ws, proposer, http, listeners, held, method=chosen)
                async with mlflow_tracking(cfg, ws, run_id, run.events, run.warn):
                    return await run.guarded()
        finally:
            if owns:
                await ws.close()

    async def run_stored(
        self,
        workspace: Workspace,
        run_id: str,
        *,
        secrets: RunConfig | None = None,
        on_event: Callable[..., None] | None = None,
        on_serving: Callable[[str], None] | None = None,
        http: httpx.AsyncClient | None = None,
        proposer: ProposerLike | None = None,
    ) -> RunResult:
        """Run (or resume) a stored run, serving its ``--module`` in-process when it has one.

        ``secrets`` supplies what is never stored (the container token) and may point a
        container-URL run at new URLs; ``on_serving(url)`` hears where a module is served.
        """
        record = await workspace.get_run(run_id)
        holder = await workspace.lease_holder(run_id)
        if holder is not None:  # refused before the module and its dataset are loaded
            raise RunLeased(leased_message(holder))
        await workspace.checkout_files(run_id)  # a Postgres store's run files, on this host
        stored = resolve_inputs(stored_config(record), workspace.root)  # the copies `create` made
        async with container_for(stored, secrets, on_serving) as runnable:
            return await self.run_optimization(
                runnable,
                workspace=workspace,
                run_id=run_id,
                on_event=on_event,
                http=http,
                proposer=proposer,
            )

"""The built-in search methods by name, and the runtime's entry points with them plugged in.

The runtime (:mod:`optimizer.runtime`) knows no method: it is handed this registry. A new
method is a package with a ``SearchMethod`` (see :mod:`optimizer.runtime.strategy`) and one
line in :data:`SEARCHES`; ``RunConfig.method`` names it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType

import httpx

from optimizer.gepa.method import GepaMethod
from optimizer.mipro.method import MiproMethod
from optimizer.runtime import embedded
from optimizer.runtime import run as runtime_run
from optimizer.runtime.deps import ProposerLike
from optimizer.runtime.run import RunResult
from optimizer.runtime.strategy import Searches
from schemas import RunConfig
from workspace import Workspace

__all__ = ["SEARCHES", "run_optimization", "run_stored"]

SEARCHES: Searches = MappingProxyType({"gepa": GepaMethod(), "mipro": MiproMethod()})


async def run_optimization(
    config: RunConfig | None = None,
    *,
    workspace: Workspace | str | Path = ".gepa",
    run_id: str | None = None,
    proposer: ProposerLike | None = None,
    http: httpx.AsyncClient | None = None,
    on_event: Callable[..., None] | None = None,
) -> RunResult:
    """Run (or resume, with ``run_id``) an optimization with the built-in methods.

    See :func:`optimizer.runtime.run.run_optimization`: ``config`` is required for a new run;
    a resumed run uses its stored config and takes only secrets and container URLs from it.
    """
    return await runtime_run.run_optimization(
        config,
        searches=SEARCHES,
        workspace=workspace,
        run_id=run_id,
        proposer=proposer,
        http=http,
        on_event=on_event,
    )


async def run_stored(
    workspace: Workspace,
    run_id: str,
    *,
    secrets: RunConfig | None = None,
    on_event: Callable[..., None] | None = None,
    on_serving: Callable[[str], None] | None = None,
    http: httpx.AsyncClient | None = None,
    proposer: ProposerLike | None = None,
) -> RunResult:
    """Run (or resume) a stored run with the built-in methods (see ``embedded.run_stored``)."""
    return await embedded.run_stored(
        workspace,
        run_id,
        searches=SEARCHES,
        secrets=secrets,
        on_event=on_event,
        on_serving=on_serving,
        http=http,
        proposer=proposer,
    )

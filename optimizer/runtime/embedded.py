"""``--module/--target``: serve the user's target as a task container inside this process.

The optimizer only speaks HTTP to containers, so a module given on the command line is
loaded with the container SDK (``load_target`` + ``create_app``) and served by uvicorn on
``127.0.0.1:<free port>`` as an asyncio task of the running event loop. The run then
executes against that URL: :func:`serving_config` is the stored config with
``containers=[url]`` and the module fields cleared (``RunConfig`` forbids both at once).
The stored run keeps ``module``/``dataset``/... so a resumed run serves the module again.

    async with container_for(config) as runnable:   # runnable.containers == [url]
        await run_optimization(runnable, searches=SEARCHES, run_id=record.run_id, workspace=ws)
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Generator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from container import create_app, load_target
from optimizer.runtime.deps import ProposerLike
from optimizer.runtime.run import RunResult, run_optimization
from optimizer.runtime.run_inputs import resolve_inputs
from optimizer.runtime.strategy import Searches
from schemas import RunConfig, RunLeased, RunRecord, UserError
from workspace import Workspace, leased_message

__all__ = [
    "EmbeddedContainer",
    "absolute_paths",
    "container_for",
    "module_spec",
    "run_stored",
    "serving_config",
    "stored_config",
]

_MODULE_FIELDS = ("module", "target", "dataset", "verifier", "splits_file")


def module_spec(config: RunConfig) -> str:
    """``MODULE[:TARGET]`` for ``load_target``."""
    if not config.module:
        raise UserError("no --module given; pass --module MODULE or --container URL")
    return f"{config.module}:{config.target}" if config.target else config.module


def _absolute(value: str | None) -> str | None:
    if value is None:
        return None
    path = Path(value).expanduser()
    return str(path.resolve()) if path.exists() else value


def absolute_paths(config: RunConfig) -> RunConfig:
    """The config with existing module/dataset/splits/verifier paths made absolute.

    A stored run may be executed from another folder (``gepa-runtime serve``, a resume),
    so relative paths are pinned when the run is created. Dotted module names and
    ``module:function`` verifiers are left as they are.
    """
    if not config.module:
        return config
    update = {
        name: _absolute(getattr(config, name)) for name in ("module", "dataset", "splits_file")
    }
    update["verifier"] = _absolute(config.verifier)
    return config.model_copy(update=update)


def serving_config(config: RunConfig, url: str) -> RunConfig:
    """``config`` pointed at ``url`` with the module fields cleared."""
    return config.model_copy(update={"containers": [url], **dict.fromkeys(_MODULE_FIELDS)})


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to the host process.

    ``uvicorn.Server.serve`` installs SIGINT/SIGTERM handlers; inside the CLI or the
    service that would turn Ctrl-C into "stop the embedded container" instead of stopping
    the run, so the capture is disabled here.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class EmbeddedContainer:
    """A ``--module`` target served on 127.0.0.1 by uvicorn inside the current event loop."""

    def __init__(
        self,
        config: RunConfig,
        *,
        token: str | None = None,
        host: str = "127.0.0.1",
        app: Any = None,
    ) -> None:
        self._config = config
        self._token = token
        self._app = app  # an ASGI app built by the caller (the Python API), else the module
        self._host = host
        self._server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None
        self.url: str | None = None
        self.program_id: str | None = None

    def build_app(self) -> Any:
        """Load the target, dataset, splits and verifier; errors are ``UserError``s."""
        if self._app is not None:
            return self._app
        cfg = self._config
        target = load_target(module_spec(cfg))
        self.program_id = target.id
        return create_app(
            target,
            dataset=cfg.dataset,
            splits=cfg.splits_file,
            verifier=cfg.verifier,
            token=self._token,
        )

    async def start(self) -> str:
        """Load the app (in a thread: user code and dataset I/O block) and serve it; the URL."""
        app = await asyncio.to_thread(self.build_app)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, 0))
        port = sock.getsockname()[1]
        server = _QuietServer(
            uvicorn.Config(
                app,
                host=self._host,
                port=port,
                log_level="warning",
                lifespan="off",
                access_log=False,
            )
        )
        self._server = server
        self._task = asyncio.create_task(
            server.serve(sockets=[sock]), name=f"embedded-container:{port}"
        )
        while not server.started:
            if self._task.done():
                sock.close()
                error = self._task.exception() if not self._task.cancelled() else None
                what = "the in-process app" if self._app is not None else module_spec(self._config)
                raise UserError(f"the embedded container for {what} did not start: {error}")
            await asyncio.sleep(0.01)
        self.url = f"http://{self._host}:{port}"
        return self.url

    async def stop(self) -> None:
        """Stop serving and wait for the server task."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._server = self._task = None

    async def __aenter__(self) -> str:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


@contextlib.asynccontextmanager
async def container_for(config: RunConfig) -> AsyncIterator[RunConfig]:
    """The config to execute: as given with container URLs, else with the module served here."""
    if not config.module:
        yield config
        return
    token = config.container_token.get_secret_value() if config.container_token else None
    async with EmbeddedContainer(config, token=token) as url:
        yield serving_config(config, url)


def stored_config(record: RunRecord) -> RunConfig:
    """The run's stored config as a ``RunConfig``; secrets (stored as ``***``) are left out."""
    return RunConfig.model_validate({k: v for k, v in record.config.items() if v != "***"})


async def run_stored(
    workspace: Workspace,
    run_id: str,
    *,
    searches: Searches,
    secrets: RunConfig | None = None,
    on_event: Callable[..., None] | None = None,
    on_serving: Callable[[str], None] | None = None,
    http: httpx.AsyncClient | None = None,
    proposer: ProposerLike | None = None,
) -> RunResult:
    """Run (or resume) a stored run, serving its ``--module`` in-process when it has one.

    ``secrets`` supplies what is never stored (the container token) and may point a
    container-URL run at new URLs; ``on_serving(url)`` hears where a module is served;
    ``searches`` is the method registry (:mod:`optimizer.searches`).
    """
    record = await workspace.get_run(run_id)
    holder = await workspace.lease_holder(run_id)
    if holder is not None:  # refused before the module and its dataset are loaded
        raise RunLeased(leased_message(holder))
    await workspace.checkout_files(run_id)  # a Postgres store's run files, here on this host
    stored = resolve_inputs(stored_config(record), workspace.root)  # the copies `create` made
    given = secrets if secrets is not None else RunConfig()
    if stored.module and not given.containers:
        token = given.container_token.get_secret_value() if given.container_token else None
        async with EmbeddedContainer(stored, token=token) as url:
            if on_serving is not None:
                on_serving(url)
            runnable = serving_config(stored, url).model_copy(
                update={"container_token": given.container_token}
            )
            return await run_optimization(
                runnable,
                searches=searches,
                workspace=workspace,
                run_id=run_id,
                on_event=on_event,
                http=http,
                proposer=proposer,
            )
    return await run_optimization(
        secrets,
        searches=searches,
        workspace=workspace,
        run_id=run_id,
        on_event=on_event,
        http=http,
        proposer=proposer,
    )

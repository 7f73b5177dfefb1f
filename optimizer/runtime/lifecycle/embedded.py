"""``--module/--target``: serve the user's target as a task container inside this process.

The optimizer only speaks HTTP to containers, so a module given on the command line is
loaded with the container SDK (``load_target`` + ``create_app``) and served by uvicorn on
``127.0.0.1:<free port>`` as an asyncio task of the running event loop. The run then
executes against that URL (``run_config.serving_config``: ``containers=[url]``, the module
fields cleared, as ``RunConfig`` forbids both at once). The stored run keeps
``module``/``dataset``/... so a resumed run serves the module again.

    async with container_for(stored, secrets) as runnable:   # runnable.containers == [url]
        await runner.run_optimization(runnable, run_id=record.run_id, workspace=ws)

uvicorn and the container SDK's app are imported when a module is served, not with this
module: every run imports it (``container_for``), most serve nothing in process.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Generator
from typing import TYPE_CHECKING, Any

from optimizer.runtime.lifecycle.run_config import serving_config
from schemas import RunConfig, UserError

if TYPE_CHECKING:
    import uvicorn

__all__ = ["EmbeddedContainer", "container_for", "module_spec"]


def module_spec(config: RunConfig) -> str:
    """``MODULE[:TARGET]`` for ``load_target``."""
    if not config.module:
        raise UserError("no --module given; pass --module MODULE or --container URL")
    return f"{config.module}:{config.target}" if config.target else config.module


def _quiet_server(config: uvicorn.Config) -> uvicorn.Server:
    """A uvicorn server that leaves signal handling to the host process.

    ``uvicorn.Server.serve`` installs SIGINT/SIGTERM handlers; inside the CLI or the
    service that would turn Ctrl-C into "stop the embedded container" instead of stopping
    the run, so the capture is disabled here.
    """
    import uvicorn

    class QuietServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield

    return QuietServer(config)


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
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.url: str | None = None
        self.program_id: str | None = None

    def build_app(self) -> Any:
        """Load the target, dataset, splits and verifier; errors are ``UserError``s."""
        if self._app is not None:
            return self._app
        from container import create_app, load_target

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
        import uvicorn

        app = await asyncio.to_thread(self.build_app)
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY only then (else Nagle delays reused answers).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, 0))
        port = sock.getsockname()[1]
        server = _quiet_server(
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
async def container_for(
    stored: RunConfig,
    secrets: RunConfig | None,
    on_serving: Callable[[str], None] | None = None,
) -> AsyncIterator[RunConfig | None]:
    """What a stored run executes with: ``secrets`` as given, or, for a ``--module`` run given
    no container URLs, ``stored`` pointed at its module served here for the block's length
    (with the token of ``secrets``, which the served app requires too)."""
    given = secrets if secrets is not None else RunConfig()
    if not stored.module or given.containers:
        yield secrets
        return
    token = given.container_token.get_secret_value() if given.container_token else None
    async with EmbeddedContainer(stored, token=token) as url:
        if on_serving is not None:
            on_serving(url)
        yield serving_config(stored, url).model_copy(
            update={"container_token": given.container_token}
        )

"""``gepa-runtime serve``: the optimizer service (REST API, SSE and the live console) on uvicorn.

Flags have environment variables: ``GEPA_WORKSPACE``, ``GEPA_SERVE_HOST``, ``GEPA_SERVE_PORT``,
``GEPA_SERVE_TOKEN`` and ``GEPA_CONTAINER_TOKEN``. Once the socket listens, one line
``serving the console on http://host:port/`` goes to stdout (with the real port for
``--port 0``). Ctrl-C or SIGTERM stops it; its running runs resume on the next start.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from pathlib import Path
from types import FrameType

import uvicorn

from optimizer.cli_flags import add_workspace_flag
from optimizer.service import RunManager, ServiceSettings, create_app
from schemas import UserError
from workspace import Workspace, resolve_workspace

__all__ = ["add_parser"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``serve``."""
    env = os.environ.get
    parser = sub.add_parser(
        "serve",
        help="run the optimizer service: REST API and live console",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_workspace_flag(parser)
    parser.add_argument(
        "--host",
        default=env("GEPA_SERVE_HOST", "127.0.0.1"),
        help="address to listen on (default 127.0.0.1)",
    )
    parser.add_argument(
        "--port",
        default=env("GEPA_SERVE_PORT", "8700"),
        help="port (default 8700; 0 picks a free one)",
    )
    parser.add_argument(
        "--token",
        default=env("GEPA_SERVE_TOKEN"),
        help="require this bearer token (env GEPA_SERVE_TOKEN)",
    )
    parser.add_argument(
        "--container-token",
        default=env("GEPA_CONTAINER_TOKEN"),
        help="bearer token for task containers of runs resumed after a restart (env GEPA_CONTAINER_TOKEN)",
    )
    parser.add_argument(
        "--heartbeat", type=float, default=5.0, help="seconds between SSE heartbeats (default 5)"
    )
    parser.add_argument(
        "--quiet-after",
        type=float,
        default=30.0,
        help="the console warns when a running run logged nothing for this many seconds (default 30)",
    )
    parser.add_argument(
        "--log-level",
        default=env("GEPA_LOG_LEVEL", "info"),
        choices=["critical", "error", "warning", "info", "debug"],
    )
    parser.set_defaults(func=_run)


class _ServiceServer(uvicorn.Server):
    """Uvicorn that tells the run manager to close its event streams as soon as a stop is asked.

    Without it, uvicorn would wait for every open SSE connection to end before shutting down.
    """

    def __init__(self, config: uvicorn.Config, manager: RunManager, announce: str) -> None:
        super().__init__(config)
        self._manager = manager
        self._announce = announce
        self._loop: asyncio.AbstractEventLoop | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None:  # a signal handler runs between bytecodes of the loop's thread
            self._loop.call_soon_threadsafe(self._manager.closing.set)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)
        if not self.should_exit:
            print(self._announce, flush=True)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port} ({exc.strerror}): pass another --port (0 picks a free one)"
        ) from None
    return sock


async def _check_workspace(root: Path) -> None:
    async with Workspace(root):
        pass


def _run(args: argparse.Namespace) -> int:
    try:
        port = int(args.port)
    except ValueError:
        raise UserError(f"--port / GEPA_SERVE_PORT must be a number, got {args.port!r}") from None
    if args.host not in LOOPBACK and not args.token:
        print(
            f"warning: serving on {args.host} without --token: anyone who reaches it can start runs",
            file=sys.stderr,
        )
    root = resolve_workspace(args.workspace)
    asyncio.run(_check_workspace(root))  # a bad workspace is an error here, not a uvicorn traceback
    settings = ServiceSettings(
        token=args.token or None,
        container_token=args.container_token or None,
        heartbeat_s=args.heartbeat,
        quiet_after_s=args.quiet_after,
    )
    app = create_app(root, settings)
    sock = _bind(args.host, port)
    real_port = sock.getsockname()[1]
    shown = f"[{args.host}]" if ":" in args.host else args.host
    token_hint = " (token required: open it with ?token=...)" if settings.token else ""
    announce = (
        f"serving the console on http://{shown}:{real_port}/ for workspace {root}{token_hint}"
    )
    config = uvicorn.Config(
        app,
        host=args.host,
        port=real_port,
        log_level=args.log_level,
        timeout_graceful_shutdown=10,
    )
    server = _ServiceServer(config, app.state.manager, announce)
    asyncio.run(server.serve(sockets=[sock]))
    return 0

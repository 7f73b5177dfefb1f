"""``gepa-runtime serve``: the optimizer service (REST API, SSE and the live console) on uvicorn.

Flags have environment variables: ``GEPA_WORKSPACE``, ``GEPA_SERVE_HOST``, ``GEPA_SERVE_PORT``,
``GEPA_SERVE_TOKEN``, ``GEPA_SERVE_ALLOWED_HOSTS`` (comma-separated),
``GEPA_SERVE_MAX_BODY_BYTES`` and ``GEPA_CONTAINER_TOKEN``. Once the socket listens, one line
``serving the console on http://host:port/...`` goes to stdout (with the real port for
``--port 0``). Ctrl-C or SIGTERM stops it; its running runs resume on the next start.

Without ``--token`` the service makes one up and prints the console URL with ``?token=``
in it, as notebook servers do: any local process or web page could otherwise start runs.
``--no-token`` serves without one, on purpose.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import sys
from pathlib import Path
from types import FrameType

import uvicorn

from container.server_flags import add_server_flags, listen_port
from optimizer.cli.workspace_flag import add_workspace_flag
from optimizer.service import RunManager, RunPolicy, ServiceSettings, create_app
from optimizer.service.bodies import DEFAULT_MAX_BODY_BYTES
from optimizer.service.logs import scrub_access_log
from optimizer.service.origin import LOOPBACK_HOSTS, host_entries
from optimizer.service.policy import DEFAULT_KEY_ENVS
from schemas import UserError
from workspace import DatabaseURL, Workspace, resolve_workspace

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
    add_server_flags(
        parser,
        server="SERVE",
        port=8700,
        token_help="require this bearer token (env GEPA_SERVE_TOKEN; default: a new one, printed)",
    )
    parser.add_argument(
        "--no-token",
        action="store_true",
        help="serve without a token: any process or web page that reaches it can start runs",
    )
    _add_acceptance_flags(parser)
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
    parser.set_defaults(func=_run)


def _add_acceptance_flags(parser: argparse.ArgumentParser) -> None:
    """What requests and run configs the service accepts (see optimizer.service.policy)."""
    env = os.environ.get
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[h for h in env("GEPA_SERVE_ALLOWED_HOSTS", "").split(",") if h.strip()],
        metavar="NAME[:PORT]",
        help="also answer requests addressed to this host (repeatable; the loopback names at "
        "the service's port always work; env GEPA_SERVE_ALLOWED_HOSTS, comma-separated)",
    )
    parser.add_argument(
        "--allow-key-env",
        action="append",
        metavar="NAME",
        help="an environment variable a run config may name as its API key (repeatable; "
        f"default {', '.join(DEFAULT_KEY_ENVS)}; giving any replaces that list)",
    )
    parser.add_argument(
        "--allow-modules",
        action="append",
        nargs="?",
        const=".",
        metavar="DIR",
        help="let run configs import a --module .py file (and read dataset, splits and verifier "
        "files) inside DIR (repeatable; without DIR: the current folder); default: no modules",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=int(env("GEPA_SERVE_MAX_BODY_BYTES", str(DEFAULT_MAX_BODY_BYTES))),
        help=f"largest request body accepted (default {DEFAULT_MAX_BODY_BYTES}; env GEPA_SERVE_MAX_BODY_BYTES)",
    )
    parser.add_argument(
        "--allow-proposer-command",
        action="store_true",
        help="let run configs name a proposer_command: a shell command run on this host as "
        "this user, with only the variables --allow-key-env allows; default: refused",
    )


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
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and
    # without it a reused connection waits on every answer (Nagle against delayed ACKs).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port} ({exc.strerror}): pass another --port (0 picks a free one)"
        ) from None
    return sock


async def _check_workspace(root: Path | DatabaseURL) -> None:
    async with Workspace(root):
        pass


def _token(args: argparse.Namespace) -> tuple[str | None, bool]:
    """(the token, whether it was generated here)."""
    if args.no_token:
        if args.token:
            raise UserError("--no-token and --token (or GEPA_SERVE_TOKEN) both given: drop one")
        who = (
            "any process on this machine"
            if args.host in LOOPBACK
            else f"anyone who reaches {args.host}"
        )
        print(
            f"warning: --no-token: {who} can start runs here (web pages are still refused by "
            "the Host and Origin checks)",
            file=sys.stderr,
        )
        return None, False
    if args.token:
        return str(args.token), False
    return secrets.token_urlsafe(32), True


def _allowed_hosts(args: argparse.Namespace, port: int) -> tuple[str, ...]:
    """The Host headers to answer: the loopback names (and a specific bound address) at
    ``port``, plus ``--allowed-host``."""
    everywhere = args.host in ("0.0.0.0", "::")
    if everywhere and not args.allowed_host:
        print(
            f"note: serving on {args.host}, but answering only requests addressed to the loopback "
            f"names at port {port}; add the names other machines use with --allowed-host NAME:{port}",
            file=sys.stderr,
        )
    bound = [] if everywhere or args.host in LOOPBACK else [args.host]
    shown = [f"[{h}]" if ":" in h and not h.startswith("[") else h for h in bound]
    extra = [h.strip() for h in args.allowed_host if h.strip()]
    return (*host_entries([*LOOPBACK_HOSTS, *shown], port), *extra)


def _settings(args: argparse.Namespace, token: str | None, port: int) -> ServiceSettings:
    if args.max_body_bytes < 1024:
        raise UserError(f"--max-body-bytes must be at least 1024, got {args.max_body_bytes}")
    roots = tuple(Path(d).expanduser().resolve() for d in args.allow_modules or [])
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        raise UserError(f"--allow-modules {missing[0]}: no such folder")
    return ServiceSettings(
        token=token,
        container_token=args.container_token or None,
        heartbeat_s=args.heartbeat,
        quiet_after_s=args.quiet_after,
        allowed_hosts=_allowed_hosts(args, port),
        max_body_bytes=args.max_body_bytes,
        policy=RunPolicy(
            key_envs=frozenset(args.allow_key_env or DEFAULT_KEY_ENVS),
            module_roots=roots,
            allow_commands=args.allow_proposer_command,
        ),
    )


def _announce(
    args: argparse.Namespace, port: int, root: Path | DatabaseURL, token: str | None, made: bool
) -> str:
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(args.host, args.host)  # what a browser opens
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    if made:  # the user has no other way to learn it
        return f"serving the console on {url}?token={token} for workspace {root}"
    hint = " (token required: open it with ?token=...)" if token else ""
    return f"serving the console on {url} for workspace {root}{hint}"


def _run(args: argparse.Namespace) -> int:
    port = listen_port(args, server="SERVE")
    token, made = _token(args)
    root = resolve_workspace(args.workspace)
    asyncio.run(_check_workspace(root))  # a bad workspace is an error here, not a uvicorn traceback
    sock = _bind(args.host, port)
    real_port = sock.getsockname()[1]
    try:
        settings = _settings(args, token, real_port)
    except UserError:
        sock.close()
        raise
    app = create_app(root, settings)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=real_port,
        log_level=args.log_level,
        timeout_graceful_shutdown=10,
    )
    scrub_access_log()  # after uvicorn.Config, which (re)configures its loggers
    announce = _announce(args, real_port, root, token, made)
    server = _ServiceServer(config, app.state.manager, announce)
    asyncio.run(server.serve(sockets=[sock]))
    return 0

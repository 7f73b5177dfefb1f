"""``gepa-runtime container MODULE[:TARGET]``: serve a decorated target over HTTP with uvicorn.

Every flag has an environment variable: ``GEPA_DATASET``, ``GEPA_VERIFIER``,
``GEPA_SPLITS_FILE``, ``GEPA_CONTAINER_HOST``, ``GEPA_CONTAINER_PORT`` and
``GEPA_CONTAINER_TOKEN``. Once the socket listens, one line ``serving <id> on
http://host:port`` goes to stdout (with the real port when ``--port 0``). What the program
warns about (an empty holdout split, rows every rollout would refuse) goes to stderr first,
one ``warning:`` line each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

import uvicorn

from container.app import create_app
from container.loader import load_target
from container.program import ServedProgram
from container.server_flags import add_server_flags, listen_port
from schemas import UserError

__all__ = ["add_parser", "serve", "serve_until_stopped"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``container``."""
    env = os.environ.get
    parser = sub.add_parser(
        "container",
        help="serve an @optimize target as a gepa-container/1 task container",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "spec",
        nargs="?",
        metavar="MODULE[:TARGET]",
        help="dotted module or .py file; TARGET is needed if it has several targets",
    )
    parser.add_argument(
        "--dspy",
        metavar="MODULE:PROGRAM",
        default=env("GEPA_DSPY_PROGRAM"),
        help="serve a DSPy program instead (the [dspy] extra; see container.dspy), with "
        "--metric and --dataset (env GEPA_DSPY_PROGRAM)",
    )
    parser.add_argument(
        "--metric",
        metavar="MODULE:FUNCTION",
        default=env("GEPA_DSPY_METRIC"),
        help="with --dspy: the DSPy metric, metric(gold, pred) -> score or "
        "dspy.Prediction(score=, feedback=) (env GEPA_DSPY_METRIC)",
    )
    parser.add_argument(
        "--search-demos",
        action="store_true",
        help="with --dspy: each predictor's demos are a component too",
    )
    parser.add_argument(
        "--dataset",
        default=env("GEPA_DATASET"),
        help="JSONL/JSON/CSV file or folder (default: the decorator's dataset=)",
    )
    parser.add_argument(
        "--verifier",
        default=env("GEPA_VERIFIER"),
        help="verifier JSON file, built-in name or module:function (default: normalized)",
    )
    parser.add_argument(
        "--splits-file",
        default=env("GEPA_SPLITS_FILE"),
        help='JSON {"train": [...], "val": [...], "holdout": [...]}',
    )
    add_server_flags(
        parser,
        server="CONTAINER",
        port=8100,
        token_help="require Authorization: Bearer TOKEN on /program and /rollout "
        "(env GEPA_CONTAINER_TOKEN)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    port = listen_port(args, server="CONTAINER")
    if args.dspy:
        from container.dspy import dspy_app_from_specs

        app = dspy_app_from_specs(
            args.dspy,
            metric_spec=args.metric,
            dataset=args.dataset,
            splits=args.splits_file,
            search_demos=args.search_demos,
            token=args.token or None,
        )
        program_id = app.state.served.program.program_id
        asyncio.run(serve(app, program_id, host=args.host, port=port, log_level=args.log_level))
        return 0
    if not args.spec:
        raise UserError("give MODULE[:TARGET] to serve, or --dspy MODULE:PROGRAM")
    target = load_target(args.spec)
    app = create_app(
        target,
        dataset=args.dataset,
        splits=args.splits_file,
        verifier=args.verifier,
        token=args.token or None,
    )
    asyncio.run(serve(app, target.id, host=args.host, port=port, log_level=args.log_level))
    return 0


async def serve(
    app: Any, program_id: str, *, host: str, port: int, log_level: str = "info"
) -> None:
    """Run ``app`` with uvicorn until stopped, announcing the address once listening."""
    _print_warnings(app, program_id)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="off")
    server = _AnnouncingServer(config, program_id)
    await server.serve()
    if not server.announced:
        raise UserError(f"could not listen on {host}:{port} (see the log above)")


def serve_until_stopped(
    build: Callable[[], Any], program_id: str, *, host: str, port: int, log_level: str
) -> int:
    """Build the app and serve it: the exit code of a ``python -m`` container entry point.

    2 with the message for a ``UserError`` (bad flags, data, settings), 130 on Ctrl-C.
    """
    try:
        asyncio.run(serve(build(), program_id, host=host, port=port, log_level=log_level))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def _print_warnings(app: Any, program_id: str) -> None:
    """The program's warnings on stderr, before serving (apps of ``create_app`` carry them)."""
    served = getattr(getattr(app, "state", None), "served", None)
    if isinstance(served, ServedProgram):
        for warning in served.warnings:
            print(f"warning: {program_id}: {warning}", file=sys.stderr, flush=True)


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints ``serving <id> on http://host:port`` after binding."""

    def __init__(self, config: uvicorn.Config, program_id: str) -> None:
        super().__init__(config)
        self.program_id = program_id
        self.announced = False

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit or not self.servers:
            return
        sock = self.servers[0].sockets[0]
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        print(f"serving {self.program_id} on http://{shown}:{port}", flush=True)
        self.announced = True

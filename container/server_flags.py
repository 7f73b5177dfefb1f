"""The flags every gepa-runtime server takes: ``--host``, ``--port``, ``--token``, ``--log-level``.

``gepa-runtime container`` and ``gepa-runtime serve`` take the same four, each with an
environment variable: ``GEPA_CONTAINER_HOST`` / ``_PORT`` / ``_TOKEN`` and
``GEPA_SERVE_HOST`` / ``_PORT`` / ``_TOKEN`` (named after the server), ``GEPA_LOG_LEVEL``
for both. Both listen on 127.0.0.1 unless told otherwise, and ``--port 0`` picks a free port.

    add_server_flags(parser, server="CONTAINER", port=8100, token_help="...")
    port = listen_port(args, server="CONTAINER")      # UserError naming the flag and its env
"""

from __future__ import annotations

import argparse
import os

from schemas import UserError

__all__ = ["LOG_LEVELS", "add_server_flags", "listen_port"]

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def add_server_flags(
    parser: argparse.ArgumentParser, *, server: str, port: int, token_help: str
) -> None:
    """``--host``, ``--port`` and ``--token`` with their ``GEPA_<server>_*`` variables, and
    ``--log-level`` (``GEPA_LOG_LEVEL``)."""
    env, prefix = os.environ.get, f"GEPA_{server}"
    parser.add_argument(
        "--host",
        default=env(f"{prefix}_HOST", "127.0.0.1"),
        help=f"address to listen on (default 127.0.0.1; env {prefix}_HOST)",
    )
    parser.add_argument(
        "--port",
        default=env(f"{prefix}_PORT", str(port)),  # a string: listen_port says what is wrong
        help=f"port to listen on; 0 picks a free one (default {port}; env {prefix}_PORT)",
    )
    parser.add_argument("--token", default=env(f"{prefix}_TOKEN"), help=token_help)
    parser.add_argument(
        "--log-level",
        default=env("GEPA_LOG_LEVEL", "info"),
        choices=LOG_LEVELS,
        help="uvicorn's log level (default info; env GEPA_LOG_LEVEL)",
    )


def listen_port(args: argparse.Namespace, *, server: str) -> int:
    """The ``--port`` given: ``UserError`` naming the flag and its variable when it is not a
    port number."""
    try:
        port = int(args.port)
    except ValueError:
        raise UserError(
            f"--port / GEPA_{server}_PORT must be a number, got {args.port!r}"
        ) from None
    if not 0 <= port <= 65535:
        raise UserError(f"--port must be in 0..65535, got {port}")
    return port

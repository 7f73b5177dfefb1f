"""The ``gepa-runtime`` command line.

Each command group lives in its own module and registers itself with ``add_parser``; this
module only builds the top-level parser, dispatches, and turns the error tree into exit
codes: ``UserError`` -> 2 with the fix, other ``GepaError`` -> 1 (``check`` also answers 1
for a candidate worse than its reference), Ctrl-C -> 130, and a reader
that closed our stdout (``runs show RID | head``) -> 141, quietly, as other CLIs end on SIGPIPE.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from importlib.metadata import version

from schemas import GepaError, UserError
from workspace.redact import scrub_text

__all__ = ["build_parser", "main"]

# Each command and the module whose ``add_parser`` registers it (with its subcommands).
COMMANDS: dict[str, str] = {
    "schema": "optimizer.cli.schema",
    "container": "container.cli",
    "optimize": "optimizer.cli.optimize",
    "runs": "optimizer.cli.runs",
    "check": "optimizer.cli.check",
    "serve": "optimizer.cli.serve",
    "models": "optimizer.cli.models",
}
COMMAND_MODULES: tuple[str, ...] = tuple(COMMANDS.values())


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command group registered, or only ``command``'s.

    A command line names its command first; importing only that group's module spares
    ``optimize run`` the servers' imports (uvicorn, starlette, the service's app), a share of its
    start-up CPU. ``--help`` and an unknown command get every group.
    """
    parser = argparse.ArgumentParser(
        prog="gepa-runtime",
        description="Reflective Pareto prompt optimization (GEPA) for any app over HTTP.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {version('gepa-runtime')}"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    modules = (COMMANDS[command],) if command in COMMANDS else COMMAND_MODULES
    for module_name in modules:
        importlib.import_module(module_name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(words[0] if words else None).parse_args(words)
        # What the imports made lives until exit: frozen, the collector never walks it again,
        # nor does the interpreter's last collection at exit.
        gc.freeze()
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return code
    except UserError as exc:
        print(f"error: {scrub_text(str(exc))}", file=sys.stderr)
        return 2
    except GepaError as exc:
        print(f"error: {type(exc).__name__}: {scrub_text(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return 141


def _silence_stdout() -> None:
    """Point stdout at /dev/null: the interpreter flushes it at exit, which would raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

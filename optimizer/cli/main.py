"""The ``gepa-runtime`` command line.

Each command group lives in its own module and registers itself with ``add_parser``; this
module only builds the top-level parser, dispatches, and turns the error tree into exit
codes: ``UserError`` -> 2 with the fix, other ``GepaError`` -> 1, Ctrl-C -> 130, and a reader
that closed our stdout (``runs show RID | head``) -> 141, quietly, as other CLIs end on SIGPIPE.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from schemas import GepaError, UserError
from workspace.redact import scrub_text

__all__ = ["build_parser", "main"]

# (module, function) pairs; each function adds its subcommands to the subparsers.
COMMAND_MODULES: tuple[str, ...] = (
    "optimizer.cli.schema",
    "container.cli",
    "optimizer.cli.optimize",
    "optimizer.cli.runs",
    "optimizer.cli.serve",
    "optimizer.cli.models",
)


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every command group registered."""
    parser = argparse.ArgumentParser(
        prog="gepa-runtime",
        description="Reflective Pareto prompt optimization (GEPA) for any app over HTTP.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    try:
        args = build_parser().parse_args(argv)
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

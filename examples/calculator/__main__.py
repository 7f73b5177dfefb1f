"""``python -m examples.calculator``: serve the calculator container in one command.

    python -m examples.calculator --host 127.0.0.1 --port 8101 [--token T] [--native-tools]

Flags override ``GEPA_STUDENT_MODEL``, ``CALC_MAX_STEPS`` and ``CALC_NATIVE_TOOLS``; the
endpoint comes from ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` (``gepa-runtime models serve``
prints them). The shipped splits (24 train, 16 holdout) are served unless ``--splits-file``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace

from container.cli import serve_until_stopped
from examples.calculator.program import PROGRAM_ID, SPLITS_FILE, create_calculator_app
from examples.calculator.settings import AgentSettings
from schemas import UserError


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, build the app, serve it with uvicorn until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m examples.calculator",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8101, help="0 picks a free port")
    parser.add_argument("--model", help="student model (default: $GEPA_STUDENT_MODEL)")
    parser.add_argument("--max-steps", type=int, help="model calls per task (default 6)")
    parser.add_argument(
        "--native-tools",
        action="store_true",
        help="also offer the calculator as an OpenAI tool (the text protocol always works)",
    )
    parser.add_argument("--splits-file", default=str(SPLITS_FILE))
    parser.add_argument(
        "--token",
        default=os.environ.get("GEPA_CONTAINER_TOKEN"),
        help="require Authorization: Bearer TOKEN",
    )
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)

    def build() -> object:
        settings = AgentSettings.from_env()
        if args.model:
            settings = replace(settings, model=args.model)
        if args.max_steps is not None:
            if args.max_steps < 1:
                raise UserError(f"--max-steps must be at least 1, got {args.max_steps}")
            settings = replace(settings, max_steps=args.max_steps)
        if args.native_tools:
            settings = replace(settings, native_tools=True)
        return create_calculator_app(
            settings=settings, token=args.token or None, splits=args.splits_file
        )

    return serve_until_stopped(
        build, PROGRAM_ID, host=args.host, port=args.port, log_level=args.log_level
    )


if __name__ == "__main__":
    sys.exit(main())

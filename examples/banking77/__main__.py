"""``python -m examples.banking77``: serve the Banking77 container in one command.

    python -m examples.banking77 --port 8100 --train-size 24 --holdout-size 40 \
        [--intents cards|a,b,c] [--token T]

Flags override the ``B77_*`` and ``GEPA_STUDENT_MODEL`` environment variables; the endpoint
comes from ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` (``gepa-runtime models serve`` prints them).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace

from container.cli import serve_until_stopped
from examples.banking77.agent import StudentSettings
from examples.banking77.data import GROUPS, SampleConfig, parse_intents
from examples.banking77.program import PROGRAM_ID, create_banking77_app


def main(argv: Sequence[str] | None = None) -> int:
    """Parse flags, build the app, serve it with uvicorn until Ctrl-C."""
    sample = SampleConfig.from_env()
    parser = argparse.ArgumentParser(
        prog="python -m examples.banking77",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100, help="0 picks a free port")
    parser.add_argument("--train-size", type=int, default=sample.train_size)
    parser.add_argument("--holdout-size", type=int, default=sample.holdout_size)
    parser.add_argument("--seed", type=int, default=sample.seed, help="sampling seed")
    parser.add_argument(
        "--intents",
        default=",".join(sample.intents),
        help=f"keep only these intents: comma-separated names, or a group ({', '.join(GROUPS)});"
        " default all 77",
    )
    parser.add_argument("--model", help="student model (default: $GEPA_STUDENT_MODEL)")
    parser.add_argument(
        "--token",
        default=os.environ.get("GEPA_CONTAINER_TOKEN"),
        help="require Authorization: Bearer TOKEN",
    )
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    settings = StudentSettings.from_env()
    if args.model:
        settings = replace(settings, model=args.model)
    return serve_until_stopped(
        lambda: create_banking77_app(
            settings=settings,
            sample=SampleConfig(
                args.train_size, args.holdout_size, args.seed, parse_intents(args.intents)
            ),
            token=args.token or None,
        ),
        PROGRAM_ID,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
    )


if __name__ == "__main__":
    sys.exit(main())

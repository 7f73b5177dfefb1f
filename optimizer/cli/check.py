"""``gepa-runtime check``: is a prompt worse than a reference? A regression gate for CI.

    gepa-runtime check --container URL --candidate prompts/system.txt [--reference baseline]
    gepa-runtime check --run RUN_ID            # the run's best, on the container as it is now

Exit codes: 0 when the candidate is not worse than the reference by more than ``--margin``
(the upper end of the lift's 95% interval is at or above ``-margin``), 1 when it is, 2 for a
usage error (the message names the fix). ``--report-md`` and ``--report-json`` write the
reports a pull-request comment and a script read (:mod:`optimizer.regression.report`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from pathlib import Path

from optimizer.cli.flags import (
    CONTAINER_FIELDS,
    add_container_flags,
    config_from_args,
    config_overrides,
)
from optimizer.cli.workspace_flag import add_workspace_flag
from optimizer.regression import (
    CheckResult,
    CheckSpec,
    check_json,
    check_markdown,
    check_summary,
    run_check,
)
from optimizer.regression.sources import FORMS
from schemas import UserError
from workspace import Workspace, resolve_workspace

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``check``."""
    parser = sub.add_parser(
        "check",
        help="score a prompt against a reference on a split, paired; exit 1 if it is worse",
        description="Score a candidate against a reference on the same seeds of one split of "
        "a task container (cache first) and judge the paired lift by its 95% interval. "
        "Exit 0: not worse than the reference by more than --margin; 1: worse; 2: usage error.",
    )
    parser.add_argument(
        "--candidate",
        metavar="SOURCE",
        help=f"what to check: {FORMS} (default with --run: best)",
    )
    parser.add_argument(
        "--reference",
        metavar="SOURCE",
        default="baseline",
        help="what to compare with, named the same ways (default: baseline, the run's with "
        "--run, else the container's)",
    )
    parser.add_argument(
        "--run",
        dest="run_id",
        metavar="RUN_ID",
        help="a run of the workspace: its best and baseline, its container, seed and task "
        "model by default, and the seeds its lift was measured on",
    )
    parser.add_argument(
        "--split",
        choices=("train", "val", "holdout"),
        help="the seeds to score on (default holdout, or the split the run's lift was measured on)",
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=0.0,
        help="how much worse than the reference the candidate may be (default 0)",
    )
    parser.add_argument("--report-md", metavar="PATH", help="write the Markdown report here")
    parser.add_argument("--report-json", metavar="PATH", help="write the JSON report here")
    add_container_flags(parser, (*CONTAINER_FIELDS, "seed", "max_metric_calls"))
    add_workspace_flag(parser)
    parser.set_defaults(func=_check)


def _spec(args: argparse.Namespace) -> CheckSpec:
    if not math.isfinite(args.margin) or args.margin < 0:
        raise UserError(f"--margin {args.margin}: give a number of 0 or more, e.g. --margin 0.02")
    for path in (args.report_md, args.report_json):
        if path and not Path(path).parent.is_dir():  # refused before any rollout is paid
            raise UserError(
                f"cannot write the report {path}: its folder does not exist; name a file in "
                "an existing, writable folder"
            )
    given = config_overrides(args)
    source = config_from_args(args)
    return CheckSpec(
        source=source,
        candidate=args.candidate,
        reference=args.reference,
        run_id=args.run_id,
        split=args.split,
        margin=args.margin,
        max_metric_calls=given.get("max_metric_calls"),
        seed=given.get("seed"),
        task_model=given.get("task_model"),
        concurrency=source.concurrency,
    )


def _check(args: argparse.Namespace) -> int:
    spec = _spec(args)

    async def check() -> CheckResult:
        async with Workspace(resolve_workspace(args.workspace)) as ws:
            return await run_check(spec, ws)

    result = asyncio.run(check())
    _write(args.report_md, check_markdown(result))
    _write(args.report_json, json.dumps(check_json(result), indent=2) + "\n")
    print(check_summary(result))
    for path in (args.report_md, args.report_json):
        if path:
            print(f"report: {path}", file=sys.stderr)
    return 0 if result.passed else 1


def _write(path: str | None, text: str) -> None:
    if not path:
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(
            f"cannot write the report {path}: {exc.strerror or exc}; name a file in an "
            "existing, writable folder"
        ) from exc

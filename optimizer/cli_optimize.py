"""``gepa-runtime optimize run [RUN_ID]``: run (or resume) an optimization from the shell."""

from __future__ import annotations

import argparse
import asyncio
import sys

from optimizer.cli_flags import add_config_flags, add_workspace_flag, config_from_args, config_overrides
from optimizer.progress import ProgressBar
from optimizer.report import promotion_summary
from optimizer.run import RunResult, run_optimization
from schemas import RunConfig, UserError
from workspace import resolve_workspace

__all__ = ["add_parser", "check_runnable"]

OFFLINE_HINT = (
    "offline, start the local models with `gepa-runtime models serve` and pass "
    "--reflection-base-url http://127.0.0.1:8013/v1 --reflection-model reflection"
)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``optimize`` and its ``run`` subcommand."""
    parser = sub.add_parser("optimize", help="create, check and run optimizations")
    commands = parser.add_subparsers(dest="optimize_command", metavar="SUBCOMMAND", required=True)
    run = commands.add_parser("run", help="run an optimization (one shot), or resume RUN_ID")
    run.add_argument("run_id", nargs="?", default=None, help="resume this run")
    add_workspace_flag(run)
    add_config_flags(run)
    run.add_argument("--quiet", action="store_true", help="no progress line")
    run.set_defaults(func=_run)


def check_runnable(config: RunConfig) -> None:
    """Errors a run would hit at once, reported before anything starts."""
    if not config.containers and not config.module:
        raise UserError("no task container: pass --container URL (repeatable) or --module MODULE --dataset PATH")
    if not config.reflection_model:
        raise UserError(f"no reflection model: pass --reflection-model MODEL (env GEPA_REFLECTION_MODEL); {OFFLINE_HINT}")


def _print_result(result: RunResult) -> None:
    print(promotion_summary(result.evidence))
    print(f"run id:   {result.run_id}")
    print(f"evidence: {result.evidence_dir}/evidence.json and {result.evidence_dir}/report.md")


def _run(args: argparse.Namespace) -> int:
    root = resolve_workspace(args.workspace)
    if args.run_id is None:
        config = config_from_args(args)
        if not config.budget_given():
            config = config.model_copy(update={"auto": "light"})
            print("no budget given: using --auto light (see README for the formula)", file=sys.stderr)
        check_runnable(config)
        overrides = None
    else:
        overrides = config_from_args(args) if config_overrides(args) else None
    bar = None if args.quiet else ProgressBar()
    try:
        result = asyncio.run(run_optimization(
            overrides if args.run_id else config, workspace=root, run_id=args.run_id, on_event=bar,
        ))
    finally:
        if bar is not None:
            bar.close()
    _print_result(result)
    return 0

"""``gepa-runtime optimize plan``: what a run will spend, before the money is spent.

Takes the flags of ``optimize run`` (or a stored RUN_ID), sends a few sample rollouts and
asks for one sample proposal (:mod:`optimizer.checks.plan`), and prints each predicted figure
with its assumption. A stored run's plan is kept in its folder, where its evidence packet
compares it with what the run spent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path

from optimizer.cli.flags import add_config_flags, config_overrides
from optimizer.cli.workspace_flag import add_workspace_flag
from schemas import RunConfig
from workspace import Workspace, resolve_workspace

__all__ = ["add_plan_parser"]


def add_plan_parser(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]
    new_config: Callable[[argparse.Namespace], RunConfig],
) -> None:
    """Register ``optimize plan``; ``new_config`` makes a new run's config from the flags, as
    ``optimize run`` does."""
    plan = commands.add_parser(
        "plan",
        help="predict what a run will spend (container calls, reflection calls and tokens, "
        "student tokens, dollars for both models, wall time) from a few sample rollouts and "
        "one sample proposal",
    )
    plan.add_argument(
        "run_id", nargs="?", default=None, help="plan this stored run and keep the plan with it"
    )
    plan.add_argument(
        "--together",
        type=int,
        default=int(os.environ.get("GEPA_PLAN_TOGETHER", "4")),
        metavar="N",
        help="sample rollouts sent at once (at most --concurrency), after one sent alone "
        "(default 4; env GEPA_PLAN_TOGETHER)",
    )
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    add_workspace_flag(plan)
    add_config_flags(plan)
    plan.set_defaults(func=_plan, new_config=new_config)


def _plan(args: argparse.Namespace) -> int:
    from optimizer.checks.plan import FORECAST_FILE, make_plan, render_plan

    startup = process_age_s()  # before the plan's own work: what a run's start costs too
    together = max(args.together, 1)

    async def plan() -> int:
        if args.run_id is None:
            config = args.new_config(args)
            report = await make_plan(config, together=together, startup_s=startup)
        else:
            async with Workspace(resolve_workspace(args.workspace)) as ws:
                config = await _stored(ws, args)
                report = await make_plan(config, together=together, startup_s=startup)
                await ws.write_json(args.run_id, FORECAST_FILE, report.as_dict())
        print(json.dumps(report.as_dict(), indent=2) if args.json else render_plan(report))
        if args.run_id is not None and not args.json:
            print(
                f"\nkept with run {args.run_id}: its evidence packet will compare it with the run"
            )
        return 0

    return asyncio.run(plan())


def process_age_s() -> float:
    """Seconds since this process started (Linux: ``/proc``; elsewhere 1, a typical start)."""
    try:
        started = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - started / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 1.0


async def _stored(ws: Workspace, args: argparse.Namespace) -> RunConfig:
    """A stored run's config, with the container and its token given now."""
    from optimizer.runtime.lifecycle.run_config import stored_config
    from optimizer.runtime.lifecycle.run_inputs import resolve_inputs

    record = await ws.get_run(args.run_id)
    await ws.checkout_files(args.run_id)
    stored = resolve_inputs(stored_config(record), ws.root)
    given = config_overrides(args)
    update = {k: v for k, v in given.items() if k in ("containers", "container_token")}
    if update.get("containers"):
        update.update(dict.fromkeys(("module", "target", "dataset", "verifier", "splits_file")))
    return RunConfig.model_validate({**stored.model_dump(), **update})

"""``gepa-runtime runs branch | compare | why``: build on a run's candidate, look at two side by
side, and ask why each was kept or dropped.

``branch RUN_ID CANDIDATE [run flags]`` stores a new run whose baseline is that candidate,
its config the origin's with the flags given on top
(:mod:`optimizer.runtime.lifecycle.branch`); ``compare`` and ``why`` read what the run stored
(:mod:`optimizer.service.explain`), so they pay for nothing and answer for a finished run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
from typing import Any

from optimizer.cli.flags import (
    add_config_flags,
    config_overrides,
)
from optimizer.cli.workspace_flag import add_workspace_flag, open_workspace
from optimizer.runtime.lifecycle.branch import create_branch
from optimizer.runtime.results.compare import compare_lines
from optimizer.runtime.results.why import why_lines
from optimizer.service.explain import compare_document, why_document
from workspace import Workspace, resolve_workspace

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``branch``, ``compare`` and ``why`` under ``runs``."""
    branch = commands.add_parser(
        "branch",
        help="a new run whose baseline is a candidate of this run; the run flags given "
        "override the origin's config (secrets are given again, as for a resume)",
    )
    branch.add_argument("run_id")
    branch.add_argument("candidate", help="the candidate's id, or a unique prefix of it")
    branch.add_argument("--run-id", dest="new_run_id", default=None, help="id of the new run")
    add_config_flags(branch)
    compare = commands.add_parser(
        "compare",
        help="two candidates side by side: the prompt diff, per-seed scores, and the traces "
        "and feedback where they differ (from stored rollouts: nothing is paid)",
    )
    compare.add_argument("run_id")
    compare.add_argument("a", help="a candidate id (or a unique prefix)")
    compare.add_argument("b", help="another candidate id (or a unique prefix)")
    why = commands.add_parser(
        "why",
        help="why each candidate (or CANDIDATE) was created and kept or dropped, with the "
        "numbers of each decision (from the run's events)",
    )
    why.add_argument("run_id")
    why.add_argument("candidate", nargs="?", default=None, help="only this candidate")
    for command in (compare, why):
        command.add_argument("--json", action="store_true", help="print JSON instead of text")
    for command, func in ((branch, _branch), (compare, _compare), (why, _why)):
        add_workspace_flag(command)
        command.set_defaults(func=func)


def _branch(args: argparse.Namespace) -> int:
    from optimizer.cli.optimize import check_runnable

    root = resolve_workspace(args.workspace)

    async def create() -> tuple[str, str]:
        async with Workspace(root) as ws:
            overrides = config_overrides(args)
            record = await create_branch(
                ws, args.run_id, args.candidate, overrides, args.new_run_id, check=check_runnable
            )
            return record.run_id, str(record.config["branch_of"]["candidate_id"])

    run_id, candidate = asyncio.run(create())
    token = ' --token "$GEPA_CONTAINER_TOKEN"' if args.token else ""
    print(run_id)
    print(f"created run {run_id}, a branch of run {args.run_id} at candidate {candidate}")
    print(
        f"  run it: gepa-runtime optimize run {run_id} --workspace {shlex.quote(str(root))}{token}"
    )
    return 0


def _print(document: dict[str, Any], lines: list[str], as_json: bool) -> int:
    print(json.dumps(document, indent=2, default=str) if as_json else "\n".join(lines).rstrip())
    return 0


def _compare(args: argparse.Namespace) -> int:
    async def read() -> dict[str, Any]:
        async with open_workspace(args) as ws:
            return await compare_document(ws, args.run_id, args.a, args.b)

    view = asyncio.run(read())
    return _print(view, compare_lines(view), args.json)


def _why(args: argparse.Namespace) -> int:
    async def read() -> dict[str, Any]:
        async with open_workspace(args) as ws:
            return await why_document(ws, args.run_id, args.candidate)

    document = asyncio.run(read())
    head = [f"run {document['run_id']} ({document['method']}, {document['status']})", ""]
    return _print(document, head + why_lines(document["candidates"]), args.json)

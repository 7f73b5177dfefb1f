"""``gepa-runtime runs pause | resume | reject | pin | unpin | note | stop``: steer a run.

Each command records a person's action in the run's event log, in the workspace, through
:func:`optimizer.runtime.steering.record_action`: the process executing the run (an
``optimize run`` in another terminal, or ``serve``) reads it within half a second. A run that
is not executing now takes it in when it is resumed. A refusal (an unknown run or candidate,
an action the run's state does not allow) is a usage error: exit code 2, with the fix.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable
from typing import Any

from optimizer.cli.workspace_flag import add_workspace_flag
from optimizer.runtime.steering import Steering, record_action
from schemas import Action, Event, UserError
from workspace import DatabaseURL, Workspace, resolve_workspace

__all__ = ["add_commands"]


def _pause(args: argparse.Namespace) -> Action:
    return Action(action="pause", source="cli")


def _resume(args: argparse.Namespace) -> Action:
    return Action(action="resume", source="cli")


def _reject(args: argparse.Namespace) -> Action:
    return Action(action="reject", source="cli", candidate_id=args.candidate, reason=args.reason)


def _pin(args: argparse.Namespace) -> Action:
    return Action(action="pin", source="cli", candidate_id=args.candidate)


def _unpin(args: argparse.Namespace) -> Action:
    return Action(action="unpin", source="cli")


def _note(args: argparse.Namespace) -> Action:
    return Action(
        action="note", source="cli", text=args.text, candidate_id=args.candidate, keep=args.keep
    )


def _stop(args: argparse.Namespace) -> Action:
    return Action(action="stop", source="cli", reason=args.reason)


def _done(action: Action, run_id: str) -> str:
    """What the run does now, in a sentence."""
    cid = action.candidate_id
    if action.action == "pause":
        return (
            f"paused run {run_id}: no new rollout or reflection starts, those in flight "
            f"finish; resume it with `gepa-runtime runs resume {run_id}`"
        )
    if action.action == "resume":
        return f"resumed run {run_id}"
    if action.action == "reject":
        return (
            f"rejected candidate {cid} of run {run_id}: it is never again a parent, merged or "
            "promoted"
        )
    if action.action == "pin":
        return (
            f"pinned candidate {cid} of run {run_id}: the next proposals start from it until "
            f"`gepa-runtime runs unpin {run_id}`"
        )
    if action.action == "unpin":
        return f"unpinned run {run_id}: the candidate selector chooses the parents again"
    if action.action == "note":
        whose = f" whose parent is {cid} or built on it" if cid else ""
        until = (
            "every later one"
            if action.keep
            else "until a candidate written with it is accepted on train"
        )
        return (
            f"noted: the proposals of run {run_id}{whose} show it to the reflection model, {until}"
        )
    return f"run {run_id} stops searching and promotes its best so far"


COMMANDS: dict[str, tuple[str, Callable[[argparse.Namespace], Action]]] = {
    "pause": ("hold a run: no new rollout or reflection starts until it is resumed", _pause),
    "resume": ("go on with a paused run where it was", _resume),
    "reject": ("never use a candidate again: not a parent, not merged, not promoted", _reject),
    "pin": ("make the next proposals start from a candidate, until unpinned", _pin),
    "unpin": ("let the candidate selector choose the parents again", _unpin),
    "note": ("show a note to the reflection model in the next proposals", _note),
    "stop": ("stop searching now and promote the best so far (not a cancel)", _stop),
}


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the steering subcommands of ``runs``."""
    for name, (help_text, build) in COMMANDS.items():
        parser = commands.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("run_id")
        if name in ("reject", "pin"):
            parser.add_argument("candidate", help="candidate id (a unique prefix is enough)")
        if name == "reject":
            parser.add_argument("--reason", required=True, help="why (kept with the run)")
        if name == "note":
            parser.add_argument("text", help="what the reflection model should know")
            parser.add_argument(
                "--candidate",
                default=None,
                help="only for proposals whose parent is this candidate or built on it",
            )
            parser.add_argument(
                "--keep",
                action="store_true",
                help="show it to every later proposal, not only until one written with it is "
                "accepted",
            )
        if name == "stop":
            parser.add_argument("--reason", default=None, help="why (shown as the stop reason)")
        parser.add_argument(
            "--json", action="store_true", help="print the stored event and the steering as JSON"
        )
        add_workspace_flag(parser)
        parser.set_defaults(func=_command(build))


def _command(build: Callable[[argparse.Namespace], Action]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        action = build(args)
        event, steering, idle = asyncio.run(_record(args, action))
        if args.json:
            print(json.dumps(_document(event, steering), indent=2))
            return 0
        recorded = Action.model_validate(event.data)
        print(_done(recorded, args.run_id))
        if idle:
            print(
                f"run {args.run_id} is not running now: it takes this in when it is resumed "
                f"(`gepa-runtime optimize run {args.run_id}`)"
            )
        return 0

    return run


def _document(event: Event, steering: Steering) -> dict[str, Any]:
    return {"event": event.model_dump(mode="json"), "steering": steering.as_dict()}


def _open(args: argparse.Namespace) -> Workspace:
    """The workspace, opened as a writer (an action is written to it)."""
    root = resolve_workspace(args.workspace)
    if not isinstance(root, DatabaseURL) and not (root / "workspace.sqlite").is_file():
        raise UserError(
            f"no workspace at {root} (no workspace.sqlite): pass --workspace DIR (or "
            "GEPA_WORKSPACE) where the run is"
        )
    return Workspace(root)


async def _record(args: argparse.Namespace, action: Action) -> tuple[Event, Steering, bool]:
    """Record ``action``; the event, the steering, and whether no process runs the run now."""
    async with _open(args) as ws:
        event, steering = await record_action(ws, args.run_id, action)
        idle = await ws.lease_holder(args.run_id) is None
    return event, steering, idle

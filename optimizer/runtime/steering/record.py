"""Recording an action in a run's event log, and reading the steering back.

REST (``POST /api/runs/{run_id}/actions``), the CLI (``gepa-runtime runs pause ...``) and the
console all record through :func:`record_action`: the run and its candidates are read, the
log's actions folded, the action checked (:mod:`optimizer.runtime.steering.validate`) and
appended as an ``action`` event. The process executing the run reads it from the log
(:mod:`optimizer.runtime.steering.live`), whichever process that is.

    event, steering = await record_action(ws, run_id, Action(action="pause", source="cli"))
"""

from __future__ import annotations

from optimizer.runtime.steering.state import Steering, fold_actions
from optimizer.runtime.steering.validate import check_action
from schemas import Action, ActionRefused, Event, RunRecord, UserError
from workspace import Workspace

__all__ = ["ACTION", "PAGE", "action_events", "read_steering", "record_action"]

ACTION = "action"  # the event type of a person's action
PAGE = 1000


async def action_events(workspace: Workspace, run_id: str, after_seq: int = 0) -> list[Event]:
    """The run's ``action`` events after ``after_seq``, in order."""
    found: list[Event] = []
    while True:
        page = await workspace.events_since(run_id, after_seq, PAGE, types=(ACTION,))
        found += page
        if len(page) < PAGE:
            return found
        after_seq = page[-1].seq


async def _run(workspace: Workspace, run_id: str) -> RunRecord:
    try:
        return await workspace.get_run(run_id)
    except UserError:
        raise ActionRefused(
            "unknown",
            f"unknown run {run_id!r}: list the runs with `gepa-runtime runs list` "
            "(or GET /api/runs)",
        ) from None


async def read_steering(workspace: Workspace, run_id: str) -> Steering:
    """The steering of ``run_id`` folded from its log; an unknown run is ``unknown``."""
    await _run(workspace, run_id)
    return fold_actions(await action_events(workspace, run_id))


async def record_action(
    workspace: Workspace, run_id: str, action: Action
) -> tuple[Event, Steering]:
    """Check ``action`` against the run and its steering, and append it; the stored event
    and the steering with it. ``ActionRefused`` when it does not fit (nothing is written)."""
    run = await _run(workspace, run_id)
    steering = fold_actions(await action_events(workspace, run_id))
    candidates = await workspace.list_candidates(run_id)
    checked = check_action(action, steering, run, candidates)
    event = await workspace.append_event(run_id, ACTION, checked.event_data())
    return event, fold_actions(await action_events(workspace, run_id, steering.seq), steering)
